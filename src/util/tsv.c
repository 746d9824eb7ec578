/* tsv.c - the cells of a tab-separated table: the escaping rule, its
 * decoding, columns by name (see tsv.h). */
#include "util/tsv.h"

#include <string.h>

/* the length of the valid UTF-8 sequence at s (1-4), or 0 when s[0] does
 * not begin one (a stray continuation byte, an overlong form, a surrogate,
 * past U+10FFFF, or cut short) */
static int tsv_utf8_len(const unsigned char *s)
{
	int n;
	unsigned min;
	unsigned cp;

	if (s[0] < 0x80) return 1;
	if ((s[0] & 0xe0) == 0xc0) { n = 2; cp = s[0] & 0x1f; min = 0x80; }
	else if ((s[0] & 0xf0) == 0xe0) { n = 3; cp = s[0] & 0x0f; min = 0x800; }
	else if ((s[0] & 0xf8) == 0xf0) { n = 4; cp = s[0] & 0x07; min = 0x10000; }
	else return 0;
	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80) return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
	return n;
}

/* "-" or a decimal number (-?digits[.digits]): written as it is */
static int tsv_numeric(const char *s)
{
	if (!strcmp(s, "-")) return 1;
	if (*s == '-') s++;
	if (*s < '0' || *s > '9') return 0;
	s += strspn(s, "0123456789");
	if (*s == '.') {
		s++;
		if (*s < '0' || *s > '9') return 0;
		s += strspn(s, "0123456789");
	}
	return !*s;
}

int tsv_put(FILE *f, const char *cell)
{
	const unsigned char *s = (const unsigned char *)cell;
	int bad = 0;

	if (*s && strchr("\"=+@-", *s) && !tsv_numeric(cell)) bad |= fprintf(f, "\\x%02x", *s++) < 0;
	while (*s) {
		int n = tsv_utf8_len(s);
		const char *esc = *s == '\\' ? "\\\\" : *s == '\t' ? "\\t" : *s == '\n' ? "\\n" :
		                  *s == '\r' ? "\\r" : NULL;
		if (esc) {
			bad |= fputs(esc, f) < 0;
			s++;
		} else if (!n || *s < 0x20 || *s == 0x7f) {
			bad |= fprintf(f, "\\x%02x", *s++) < 0;
		} else {
			bad |= fwrite(s, 1, n, f) != (size_t)n;
			s += n;
		}
	}
	return bad ? -1 : 0;
}

/* the value of hex digit c, or -1 */
static int tsv_hex(char c)
{
	if (c >= '0' && c <= '9') return c - '0';
	if (c >= 'a' && c <= 'f') return c - 'a' + 10;
	if (c >= 'A' && c <= 'F') return c - 'A' + 10;
	return -1;
}

char *tsv_decode(char *cell, int text)
{
	char *r = cell, *w = cell;

	while (*r) {
		int hi, lo;
		if (*r != '\\') {
			*w++ = *r++;
			continue;
		}
		switch (r[1]) {
		case '\\': *w++ = '\\'; r += 2; continue;
		case 't': *w++ = '\t'; r += 2; continue;
		case 'n': *w++ = '\n'; r += 2; continue;
		case 'r': *w++ = '\r'; r += 2; continue;
		case 'x':
			hi = tsv_hex(r[2]);
			lo = hi < 0 ? -1 : tsv_hex(r[3]);
			if (lo >= 0 && (hi || lo)) {
				unsigned char b = (unsigned char)(hi << 4 | lo);
				if (text && (b >= 0x80 || b == 0x7f || (b < 0x20 && b != '\t' && b != '\n'))) {
					memcpy(w, "\xef\xbf\xbd", 3);   /* U+FFFD */
					w += 3;
				} else {
					*w++ = (char)b;
				}
				r += 4;
				continue;
			}
			break;
		default:
			break;
		}
		*w++ = *r++;   /* a backslash kept */
	}
	*w = 0;
	return cell;
}

/* the start of column c of line, or NULL; *len its length */
static const char *tsv_find(const char *line, int c, size_t *len)
{
	const char *p = line;

	if (c < 0) return NULL;
	for (int i = 0; i < c; i++) {
		p += strcspn(p, "\t\n");
		if (*p != '\t') return NULL;
		p++;
	}
	*len = strcspn(p, "\t\n");
	return p;
}

int tsv_column(const char *header, const char *name)
{
	size_t n = strlen(name), len;
	const char *p;

	for (int c = 0; (p = tsv_find(header, c, &len)); c++)
		if (len == n && !strncmp(p, name, n)) return c;
	return -1;
}

const char *tsv_field(const char *line, int c, char *buf, size_t cap)
{
	size_t len;
	const char *p = tsv_find(line, c, &len);

	if (!p || !cap) return "-";
	if (len >= cap) len = cap - 1;
	memcpy(buf, p, len);
	buf[len] = 0;
	return buf;
}
