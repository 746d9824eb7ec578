/* tsv.c - columns of a tab-separated line by name (see tsv.h). */
#include <string.h>

#include "util/tsv.h"

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
