/* quota.c - read, write and query bucket quota tables (see quota.h). */
#include "sched/quota.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/lines.h"
#include "util/log.h"
#include "io/atomic_file.h"

quota_table_t *quota_init(void)
{
	quota_table_t *t = calloc(1, sizeof *t);
	if (t)
		t->safety = 1.15;
	return t;
}

void quota_free(quota_table_t *t)
{
	if (!t)
		return;
	free(t->device);
	free(t->precision);
	free(t->weights);
	for (int i = 0; i < t->nextra; i++) {
		free(t->extra_key[i]);
		free(t->extra_val[i]);
	}
	free(t->extra_key);
	free(t->extra_val);
	free(t->rows);
	free(t);
}

static int key_ok(const char *k)
{
	if (!*k)
		return 0;
	for (; *k; k++)
		if (!isalnum((unsigned char)*k) && *k != '_' && *k != '.' && *k != '-')
			return 0;
	return 1;
}

static int value_ok(const char *v)
{
	for (; *v; v++)
		if ((unsigned char)*v < 0x20 || *v == 0x7f)
			return 0;
	return 1;
}

static int replace(char **dst, const char *v)
{
	char *c = strdup(v);
	if (!c)
		return -1;
	free(*dst);
	*dst = c;
	return 0;
}

/* the numeric header keys (calibrate writes them; setup and plan read
 * worker_overhead and seconds_per_cost): each a decimal in [lo, hi],
 * whole when integer */
static const struct {
	const char *key;
	int         integer;
	double      lo, hi;
	const char *range;
} quota_nums[] = {
	{ "safety",           0, 1, 100,             "a number in [1, 100]" },
	{ "worker_overhead",  1, 0, QUOTA_BYTES_MAX, "a byte count in [0, 2^50]" },
	{ "memory",           1, 0, QUOTA_BYTES_MAX, "a byte count in [0, 2^50]" },
	{ "context",          1, 0, QUOTA_BYTES_MAX, "a byte count in [0, 2^50]" },
	{ "weights_bytes",    1, 0, QUOTA_BYTES_MAX, "a byte count in [0, 2^50]" },
	{ "chunk_size",       1, 0, 1 << 20,         "an integer in [0, 1048576]" },
	{ "recycles",         1, -1, 64,             "an integer in [-1, 64]" },
	{ "seconds_per_cost", 0, 0, 1e9,             "a number in [0, 1e9]" },
};

/* the entry of quota_nums for key, or -1 */
static int quota_num(const char *key)
{
	for (int i = 0; i < (int)(sizeof quota_nums / sizeof *quota_nums); i++)
		if (!strcmp(quota_nums[i].key, key)) return i;
	return -1;
}

/* 0 when v is a value numeric key k (quota_nums[k]) takes, else -1 */
static int quota_num_ok(int k, const char *v)
{
	const char *digits = v + (v[0] == '-');
	char *end;
	double x;

	if (!isdigit((unsigned char)digits[0]) ||
	    strspn(digits, quota_nums[k].integer ? "0123456789" : "0123456789.eE+-") != strlen(digits))
		return -1;
	errno = 0;
	x = strtod(v, &end);
	return *end || errno || !isfinite(x) || x < quota_nums[k].lo || x > quota_nums[k].hi ? -1 : 0;
}

int quota_set(quota_table_t *t, const char *key, const char *value)
{
	int num;

	if (!key_ok(key) || !value || !value_ok(value))
		return -1;
	if ((num = quota_num(key)) >= 0 && quota_num_ok(num, value) < 0)
		return -1;
	if (strcmp(key, "device") == 0)
		return replace(&t->device, value);
	if (strcmp(key, "precision") == 0)
		return replace(&t->precision, value);
	if (strcmp(key, "weights") == 0)
		return replace(&t->weights, value);
	if (strcmp(key, "safety") == 0) {
		t->safety = strtod(value, NULL);
		return 0;
	}
	for (int i = 0; i < t->nextra; i++)
		if (strcmp(t->extra_key[i], key) == 0)
			return replace(&t->extra_val[i], value);
	char **k = realloc(t->extra_key, (size_t)(t->nextra + 1) * sizeof *k);
	if (!k)
		return -1;
	t->extra_key = k;
	char **v = realloc(t->extra_val, (size_t)(t->nextra + 1) * sizeof *v);
	if (!v)
		return -1;
	t->extra_val = v;
	t->extra_key[t->nextra] = strdup(key);
	t->extra_val[t->nextra] = strdup(value);
	if (!t->extra_key[t->nextra] || !t->extra_val[t->nextra]) {
		free(t->extra_key[t->nextra]);
		free(t->extra_val[t->nextra]);
		return -1;
	}
	t->nextra++;
	return 0;
}

const char *quota_get(const quota_table_t *t, const char *key)
{
	static char buf[32];   /* safety only; not thread-safe */
	if (strcmp(key, "device") == 0) return t->device;
	if (strcmp(key, "precision") == 0) return t->precision;
	if (strcmp(key, "weights") == 0) return t->weights;
	if (strcmp(key, "safety") == 0) {
		snprintf(buf, sizeof buf, "%g", t->safety);
		return buf;
	}
	for (int i = 0; i < t->nextra; i++)
		if (strcmp(t->extra_key[i], key) == 0)
			return t->extra_val[i];
	return NULL;
}

int quota_add_row(quota_table_t *t, const quota_row_t *row)
{
	if (row->max_len <= 0 || row->max_len > QUOTA_LEN_MAX ||
	    row->quota <= 0 || row->quota > QUOTA_BYTES_MAX ||
	    row->peak_allocated < -1 || row->peak_allocated > QUOTA_BYTES_MAX ||
	    row->peak_reserved < -1 || row->peak_reserved > QUOTA_BYTES_MAX ||
	    row->device_used < -1 || row->device_used > QUOTA_BYTES_MAX)
		return -1;
	if (t->nrows > 0 && row->max_len <= t->rows[t->nrows - 1].max_len)
		return -1;
	quota_row_t *r = realloc(t->rows, (size_t)(t->nrows + 1) * sizeof *r);
	if (!r)
		return -1;
	t->rows = r;
	t->rows[t->nrows++] = *row;
	return 0;
}

const quota_row_t *quota_find(const quota_table_t *t, int64_t len)
{
	for (int i = 0; i < t->nrows; i++)
		if (len <= t->rows[i].max_len)
			return &t->rows[i];
	return NULL;
}

int64_t quota_for_bucket(const quota_table_t *t, const bucket_set_t *s, int b)
{
	int64_t bound = bucket_bound(s, b);
	const quota_row_t *r;
	if (bound < 0)
		return -1;
	r = quota_find(t, bound);
	return r ? r->quota : -1;
}

/* --- reading ------------------------------------------------------------ */

/* a row's field: decimal digits only, in [lo, hi], or "-" (-1) when dash_ok */
static int parse_field(const char *s, int dash_ok, int64_t lo, int64_t hi, int64_t *out)
{
	char *end;
	long long v;

	if (dash_ok && strcmp(s, "-") == 0) {
		*out = -1;
		return 0;
	}
	if (!isdigit((unsigned char)s[0]))
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (*end || errno || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

/* split line at tabs in place; returns the field count (at most max) or
 * max + 1 when there are more */
static int split_tabs(char *line, char **f, int max)
{
	int n = 0;
	char *p = line;
	for (;;) {
		if (n == max)
			return max + 1;
		f[n++] = p;
		p = strchr(p, '\t');
		if (!p)
			return n;
		*p++ = '\0';
	}
}

#define MAX_FIELDS 64

/* the first line, "esmbatch-quota VERSION key=value...", into t; NULL, or
 * what is wrong with it (in msg when it is formatted) */
static const char *quota_parse_header(quota_table_t *t, char *line, char *msg, size_t n)
{
	char *f[MAX_FIELDS];
	int nf = split_tabs(line, f, MAX_FIELDS), have_safety = 0;

	if (nf < 2 || strcmp(f[0], QUOTA_MAGIC) != 0)
		return "not a quota table (first line must start with '" QUOTA_MAGIC "')";
	if (nf > MAX_FIELDS || strcmp(f[1], QUOTA_VERSION) != 0)
		return "unsupported quota table version (expected " QUOTA_VERSION ")";
	for (int i = 2; i < nf; i++) {
		char *eq = strchr(f[i], '=');
		if (!eq)
			return "header field is not key=value";
		*eq = '\0';
		int is_safety = strcmp(f[i], "safety") == 0;
		if (is_safety ? have_safety : quota_get(t, f[i]) != NULL)
			return "header key given twice";
		if (quota_set(t, f[i], eq + 1) < 0) {
			int k = quota_num(f[i]);
			if (k < 0)
				return "bad header key or value";
			snprintf(msg, n, "%s must be %s", f[i], quota_nums[k].range);
			return msg;
		}
		have_safety |= is_safety;
	}
	if (!t->device || !t->precision || !t->weights || !have_safety)
		return "header needs device=, precision=, weights= and safety=";
	return NULL;
}

/* a row, "max_len peak_allocated peak_reserved device_used quota", added
 * to t; NULL, or what is wrong with it (in msg when it is formatted) */
static const char *quota_parse_row(quota_table_t *t, char *line, char *msg, size_t n)
{
	static const char *const quota_cols[5] = { "max_len", "peak_allocated", "peak_reserved",
	                                           "device_used", "quota" };
	char *f[MAX_FIELDS];
	quota_row_t r;
	int64_t *col[5] = { &r.max_len, &r.peak_allocated, &r.peak_reserved, &r.device_used, &r.quota };

	if (split_tabs(line, f, MAX_FIELDS) != 5)
		return "expected 5 tab-separated fields";
	for (int c = 0; c < 5; c++) {
		int figure = c >= 1 && c <= 3;
		if (parse_field(f[c], figure, !figure,
		                c ? QUOTA_BYTES_MAX : QUOTA_LEN_MAX, col[c]) < 0) {
			snprintf(msg, n, "%s must be %s", quota_cols[c],
			         c == 0 ? "an integer in [1, 2^31 - 1]" :
			         figure ? "a byte count in [0, 2^50] (digits) or '-'" :
			                  "a byte count in [1, 2^50] (digits)");
			return msg;
		}
	}
	if (quota_add_row(t, &r) < 0)
		return "max_len must increase from row to row";
	return NULL;
}

quota_table_t *quota_read_fp(FILE *fp, const char *name)
{
	quota_table_t *t = quota_init();
	char *line, msg[160];
	lines_t ln;
	size_t len;
	int lno = 0, have_cols = 0, rc;
	const char *err = NULL;

	if (!t) {
		log_error("out of memory");
		return NULL;
	}
	lines_init(&ln, fp, name, NULL);
	while ((rc = lines_next(&ln)) > 0) {
		line = ln.s;
		len = ln.n;
		lno++;
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if ((size_t)len != strlen(line)) {
			err = "NUL byte in line";
			goto bad;
		}
		if (lno == 1) {
			if ((err = quota_parse_header(t, line, msg, sizeof msg)))
				goto bad;
			continue;
		}
		if (len == 0 || line[0] == '#')
			continue;
		if (!have_cols) {
			if (strcmp(line, QUOTA_COLUMNS) != 0) {
				err = "expected the column line '" "max_len\\tpeak_allocated\\t"
				      "peak_reserved\\tdevice_used\\tquota'";
				goto bad;
			}
			have_cols = 1;
			continue;
		}
		if ((err = quota_parse_row(t, line, msg, sizeof msg)))
			goto bad;
	}
	if (rc < 0)
		goto fail;
	if (lno == 0) {
		log_error("%s: empty quota table", name);
		goto fail;
	}
	if (t->nrows == 0) {
		log_error("%s: quota table has no rows", name);
		goto fail;
	}
	lines_free(&ln);
	return t;
bad:
	log_error("%s:%d: %s", name, lno, err);
fail:
	lines_free(&ln);
	quota_free(t);
	return NULL;
}

quota_table_t *quota_read(const char *path)
{
	FILE *fp = fopen(path, "r");
	quota_table_t *t;

	if (!fp) {
		log_error("%s: cannot open quota table: %s", path, strerror(errno));
		return NULL;
	}
	t = quota_read_fp(fp, path);
	fclose(fp);
	return t;
}

/* --- writing ------------------------------------------------------------ */

static void put_bytes(FILE *fp, int64_t v)
{
	if (v < 0)
		fputs("-", fp);
	else
		fprintf(fp, "%lld", (long long)v);
}

int quota_write_fp(const quota_table_t *t, FILE *fp)
{
	if (!t->device || !t->precision || !t->weights) {
		log_error("quota table: device, precision and weights must be set");
		return -1;
	}
	/* the shortest safety text that reads back as the same double */
	char sf[32];
	for (int prec = 6; prec <= 17; prec++) {
		snprintf(sf, sizeof sf, "%.*g", prec, t->safety);
		if (strtod(sf, NULL) == t->safety) break;
	}
	fprintf(fp, "%s\t%s\tdevice=%s\tprecision=%s\tweights=%s\tsafety=%s",
	        QUOTA_MAGIC, QUOTA_VERSION, t->device, t->precision, t->weights, sf);
	for (int i = 0; i < t->nextra; i++)
		fprintf(fp, "\t%s=%s", t->extra_key[i], t->extra_val[i]);
	fputs("\n" QUOTA_COLUMNS "\n", fp);
	for (int i = 0; i < t->nrows; i++) {
		const quota_row_t *r = &t->rows[i];
		fprintf(fp, "%lld\t", (long long)r->max_len);
		put_bytes(fp, r->peak_allocated);
		fputc('\t', fp);
		put_bytes(fp, r->peak_reserved);
		fputc('\t', fp);
		put_bytes(fp, r->device_used);
		fprintf(fp, "\t%lld\n", (long long)r->quota);
	}
	return ferror(fp) ? -1 : 0;
}

int quota_write(const quota_table_t *t, const char *path)
{
	atomic_file_t a;

	if (!atomic_file_open(&a, path)) return -1;
	return atomic_file_close(&a, quota_write_fp(t, a.f) == 0);
}
