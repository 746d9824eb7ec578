/* job.c - job records and unique, file-safe output names (see job.h). */
#include "io/job.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <htslib/khash_str2int.h>

#include "util/log.h"

void job_init(job_t *j)
{
	memset(j, 0, sizeof *j);
	j->status = JOB_OK;
}

void job_free(job_t *j)
{
	if (!j)
		return;
	free(j->header);
	free(j->name);
	free(j->outname);
	free(j->seq);
	free(j->reason);
	job_init(j);
}

int job_fail(job_t *j, const char *fmt, ...)
{
	va_list ap;
	char *r = NULL;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&r, fmt, ap);
	va_end(ap);
	free(j->seq);
	j->seq = NULL;
	j->len = 0;
	j->nchains = 0;
	j->status = JOB_FAILED;
	free(j->reason);
	j->reason = n < 0 ? NULL : r;
	return n < 0 ? -1 : 0;
}

const char *job_status_name(job_status_t s)
{
	return s == JOB_OK ? "ok" : "failed";
}

static int safe_char(int c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

size_t job_safe_name(const char *name, char *out, size_t cap)
{
	size_t n = 0, lim;

	if (!out || cap == 0)
		return 0;
	lim = cap - 1 < JOB_NAME_MAX ? cap - 1 : JOB_NAME_MAX;
	if (name) {
		const unsigned char *p = (const unsigned char *)name;
		while (*p == '.' || *p == '-')
			p++;
		for (; *p && n < lim; p++)
			out[n++] = safe_char(*p) ? (char)*p : '_';
	}
	out[n] = '\0';
	return n;
}

/* --- unique names ------------------------------------------------------- */

struct job_names {
	void *used;   /* khash str2int: lower-cased names already given out */
};

job_names_t *job_names_init(void)
{
	job_names_t *n = calloc(1, sizeof *n);
	if (!n)
		return NULL;
	n->used = khash_str2int_init();
	if (!n->used) {
		free(n);
		return NULL;
	}
	return n;
}

void job_names_free(job_names_t *n)
{
	if (!n)
		return;
	khash_str2int_destroy_free(n->used);
	free(n);
}

static void lower(char *s)
{
	for (; *s; s++)
		*s = (char)tolower((unsigned char)*s);
}

/* 1 if taken, 0 if free, -1 on ENOMEM */
static int taken(job_names_t *n, const char *cand)
{
	char key[JOB_NAME_MAX + 1];
	snprintf(key, sizeof key, "%s", cand);
	lower(key);
	return khash_str2int_has_key(n->used, key);
}

static int take(job_names_t *n, const char *cand)
{
	char *key = strdup(cand);
	if (!key)
		return -1;
	lower(key);
	if (khash_str2int_set(n->used, key, 1) < 0) {
		free(key);
		return -1;
	}
	return 0;
}

/* s[0..n) is one or more decimal digits */
static int digits(const char *s, size_t n)
{
	if (n == 0) return 0;
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9') return 0;
	return 1;
}

int job_name_reserved(const char *name)
{
	const char *dot = strrchr(name, '.'), *p, *q;

	if (!dot) return 0;
	p = dot + 1;
	if (!strncasecmp(p, "part", 4)) {   /* .partIofN */
		p += 4;
		for (q = p; *q >= '0' && *q <= '9'; q++) continue;
		return digits(p, q - p) && !strncasecmp(q, "of", 2) && digits(q + 2, strlen(q + 2));
	}
	if (!strncasecmp(p, "frag", 4)) {   /* .fragA-B */
		p += 4;
		if (!(q = strchr(p, '-'))) return 0;
		return digits(p, q - p) && digits(q + 1, strlen(q + 1));
	}
	return 0;
}

int job_names_assign(job_names_t *n, const char *name, int64_t recno,
                     char **out)
{
	char base[JOB_NAME_MAX + 1], cand[JOB_NAME_MAX + 1];
	int changed = 0, reserved;

	*out = NULL;
	if (job_safe_name(name, base, sizeof base) == 0)
		snprintf(base, sizeof base, "record_%lld", (long long)recno);
	snprintf(cand, sizeof cand, "%s", base);
	reserved = job_name_reserved(cand);
	for (long k = 2; reserved || taken(n, cand); k++) {
		char suf[32];
		int sl = snprintf(suf, sizeof suf, "_%ld", k);
		size_t bl = strlen(base);
		if (bl + (size_t)sl > JOB_NAME_MAX)
			bl = JOB_NAME_MAX - (size_t)sl;
		snprintf(cand, sizeof cand, "%.*s%s", (int)bl, base, suf);
		changed = 1;
		reserved = 0;   /* a name ending in _K is none of a fragment's */
	}
	if (take(n, cand) < 0)
		return -1;
	*out = strdup(cand);
	if (!*out)
		return -1;
	if (changed && job_name_reserved(base))
		log_warn("record %lld: output name '%s' is reserved for the fragments of a "
		         "split record; using '%s'", (long long)recno, base, cand);
	else if (changed)
		log_warn("record %lld: output name '%s' is taken; using '%s'",
		         (long long)recno, base, cand);
	return changed;
}
