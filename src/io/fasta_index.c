/* fasta_index.c - reading and checking a .fai index (see fasta_index.h). */
#include "io/fasta_index.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <htslib/khash_str2int.h>

#include "util/grow.h"
#include "util/lines.h"
#include "util/log.h"

#define GAP_CHUNK 4096

typedef struct {
	char   *name;
	int64_t len, off, end;   /* end: one past the last residue's byte */
	int64_t recno;           /* 1-based, in file order */
} fidx_ent_t;

struct fidx {
	fidx_ent_t *e;
	int         n;
	size_t      cap;
	void       *idx;          /* name -> index into e */
};

int fidx_count(const fidx_t *x) { return x->n; }

void fidx_close(fidx_t *x)
{
	if (!x) return;
	for (int i = 0; i < x->n; i++) free(x->e[i].name);
	free(x->e);
	khash_str2int_destroy(x->idx);
	free(x);
}

int fidx_find(const fidx_t *x, const char *name, int64_t *recno, int64_t *len)
{
	int i;

	if (khash_str2int_get(x->idx, name, &i) < 0) return 0;
	*recno = x->e[i].recno;
	*len = x->e[i].len;
	return 1;
}

/* a non-negative decimal integer filling s; 0 or -1 */
static int fidx_num(const char *s, int64_t *v)
{
	char *end;
	long long x;

	if (!isdigit((unsigned char)*s)) return -1;
	errno = 0;
	x = strtoll(s, &end, 10);
	if (errno || *end) return -1;
	*v = x;
	return 0;
}

/* one line of the index into an entry; NULL, or why it is wrong */
static const char *fidx_parse(char *s, fidx_ent_t *e)
{
	char *f[6];
	int nf = 0;
	int64_t lb, lw;

	for (char *p = s;; p++) {
		if (nf == 6) return "more than 5 columns";
		f[nf++] = p;
		if (!(p = strchr(p, '\t'))) break;
		*p = '\0';
	}
	if (nf == 6) return "6 columns (an index of a FASTQ file)";
	if (nf != 5) return "fewer than 5 columns";
	if (!*f[0] || strpbrk(f[0], " \r\n\v\f")) return "a bad name";
	if (fidx_num(f[1], &e->len) < 0 || fidx_num(f[2], &e->off) < 0 ||
	    fidx_num(f[3], &lb) < 0 || fidx_num(f[4], &lw) < 0)
		return "a column that is not a non-negative integer";
	if (e->len > 0 && (lb < 1 || lw <= lb))
		return "a line width that does not fit its line bases";
	/* the bytes of the sequence: full lines with their ends, then the rest */
	if (e->len > 0 && (e->len / lb > (INT64_MAX - e->off - lb) / lw))
		return "an offset or length out of range";
	e->end = e->len > 0 ? e->off + e->len / lb * lw + e->len % lb : e->off;
	if (!(e->name = strdup(f[0]))) return "";
	return NULL;
}

static int fidx_by_off(const void *a, const void *b)
{
	const fidx_ent_t *x = *(fidx_ent_t *const *)a, *y = *(fidx_ent_t *const *)b;
	return x->off < y->off ? -1 : x->off > y->off;
}

/* The bytes [from, to) of fd: blank lines, then (name non-NULL) one header
 * line naming name that ends at to.  1 when they are, 0 when not, -1 on a
 * read error or stop (logged). */
static int fidx_gap(int fd, const char *fa, int64_t from, int64_t to, const char *name,
                    volatile sig_atomic_t *stop)
{
	char buf[GAP_CHUNK];
	size_t nl = name ? strlen(name) : 0, got = 0;
	int bol = 1, hdr = 0, in_name = 0, name_ok = 0, done = 0;

	for (int64_t at = from; at < to;) {
		size_t want = to - at < GAP_CHUNK ? (size_t)(to - at) : GAP_CHUNK;
		ssize_t n = pread(fd, buf, want, at);
		if (stop && *stop) {
			log_error("%s: interrupted while checking its index", fa);
			return -1;
		}
		if (n < 0 && errno == EINTR) continue;
		if (n < 0) {
			log_error("%s: read error: %s", fa, strerror(errno));
			return -1;
		}
		if (n == 0) return 0;
		for (ssize_t i = 0; i < n; i++) {
			unsigned char c = (unsigned char)buf[i];
			if (done) return 0;          /* bytes after the header line */
			if (in_name) {
				if (c == ' ' || c == '\t') {
					if (got == 0) continue;   /* blanks before the name */
					in_name = 0;
				} else if (isspace(c) || c < 0x20 || c == 0x7f) {
					in_name = 0;
				} else {
					if (got >= nl || c != (unsigned char)name[got]) return 0;
					got++;
					continue;
				}
				name_ok = got == nl;
			}
			if (c == '\n') {
				done = hdr;
				bol = 1;
				continue;
			}
			if (bol && c == '>') {
				if (!name || hdr) return 0;
				hdr = in_name = 1;
			} else if (!hdr && c != ' ' && c != '\t' && c != '\r') {
				return 0;                /* sequence: a record the index misses */
			}
			bol = 0;
		}
		at += n;
	}
	return name ? done && name_ok : 1;
}

/* the checks against the file's bytes; 0 fine, 1 stale (why set), -1 */
static int fidx_against_file(fidx_t *x, fidx_ent_t **ord, const char *fa, char *const *want,
                             int nwant, volatile sig_atomic_t *stop, const char **why)
{
	struct stat st;
	int fd = open(fa, O_RDONLY), rc = 0, all = 0;
	unsigned char *check = calloc((size_t)x->n + 1, 1);

	if (fd < 0 || !check || fstat(fd, &st) < 0) {
		log_error("%s: cannot read: %s", fa, check ? strerror(errno) : "out of memory");
		rc = -1;
		goto out;
	}
	if (x->n && ord[x->n - 1]->end > st.st_size) {
		*why = "a record ends past the end of the file";
		rc = 1;
		goto out;
	}
	for (int i = 0; i < nwant && !all; i++) {
		int k;
		if (khash_str2int_get(x->idx, want[i], &k) < 0) all = 1;
		else check[x->e[k].recno - 1] = 1;
	}
	for (int i = 0; i <= x->n && rc == 0; i++) {
		int64_t from = i ? ord[i - 1]->end : 0;
		if (i < x->n && !all && !check[i]) continue;
		rc = fidx_gap(fd, fa, from, i < x->n ? ord[i]->off : st.st_size,
		              i < x->n ? ord[i]->name : NULL, stop);
		rc = rc < 0 ? -1 : rc == 0;
		if (rc == 1)
			*why = i == x->n ? "the file has more than the index describes"
			       : all ? "it misses records or its offsets are wrong"
			             : "its offsets do not point at the records it names";
	}
out:
	if (fd >= 0) close(fd);
	free(check);
	return rc;
}

int fidx_open(fidx_t **out, const char *fa, const char *fai, int compressed,
              char *const *want, int nwant, volatile sig_atomic_t *stop)
{
	fidx_t *x = calloc(1, sizeof *x);
	fidx_ent_t **ord = NULL;
	const char *why = NULL;
	FILE *f = NULL;
	lines_t ln;
	long bad = 0;   /* the index's line that is wrong */
	int rc = -1, r;

	*out = NULL;
	lines_init(&ln, NULL, fai, stop);
	if (!x || !(x->idx = khash_str2int_init())) goto oom;
	if (!(f = fopen(fai, "r"))) {
		log_warn("%s: cannot read the index %s (%s); reading the whole file", fa, fai,
		         strerror(errno));
		rc = 1;
		goto out;
	}
	ln.f = f;
	while ((r = lines_next(&ln)) > 0) {
		fidx_ent_t e = { 0 };
		if (x->n == INT_MAX - 1) {
			why = "too many records";
			break;
		}
		if (grow_array(&x->e, &x->cap, (size_t)x->n + 1, sizeof *x->e) < 0) goto oom;
		bad = ln.lineno;
		if ((why = fidx_parse(ln.s, &e))) {
			if (!*why) goto oom;
			break;
		}
		x->e[x->n] = e;
		if (khash_str2int_has_key(x->idx, e.name)) {
			x->n++;
			why = "a name listed twice";
			break;
		}
		bad = 0;
		khash_str2int_set(x->idx, e.name, x->n);
		x->n++;
	}
	if (r < 0) goto out;
	if (!why && x->n == 0) why = "no records";
	if (!why) {
		if (!(ord = malloc((size_t)x->n * sizeof *ord))) goto oom;
		for (int i = 0; i < x->n; i++) ord[i] = &x->e[i];
		qsort(ord, (size_t)x->n, sizeof *ord, fidx_by_off);
		for (int i = 0; i < x->n; i++) {
			ord[i]->recno = i + 1;
			if (i && ord[i]->off <= ord[i - 1]->end) why = "records that overlap";
		}
	}
	if (why && bad)
		log_warn("%s: the index %s is stale (line %ld: %s); reading the whole file", fa, fai,
		         bad, why);
	else if (why)
		log_warn("%s: the index %s is stale (%s); reading the whole file", fa, fai, why);
	if (why) {
		rc = 1;
		goto out;
	}
	if (!compressed && (rc = fidx_against_file(x, ord, fa, want, nwant, stop, &why)) != 0) {
		if (rc > 0)
			log_warn("%s: the index %s is stale (%s); reading the whole file", fa, fai, why);
		goto out;
	}
	*out = x;
	x = NULL;
	rc = 0;
	goto out;
oom:
	log_error("%s: out of memory reading the index %s", fa, fai);
	rc = -1;
out:
	if (f) fclose(f);
	lines_free(&ln);
	free(ord);
	fidx_close(x);
	return rc;
}
