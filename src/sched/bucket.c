/* bucket.c - length buckets (see bucket.h). */
#include "sched/bucket.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const bucket_set_t default_set = {
	BUCKET_NDEFAULT, { 512, 768, 1024, 1344 }
};

static const bucket_set_t *set_or_default(const bucket_set_t *s)
{
	return s ? s : &default_set;
}

void bucket_set_default(bucket_set_t *s)
{
	*s = default_set;
}

int bucket_set_init(bucket_set_t *s, const int64_t *bounds, int n)
{
	if (!s || n < 0 || n > BUCKET_MAX || (n > 0 && !bounds))
		return -1;
	for (int i = 0; i < n; i++)
		if (bounds[i] <= 0 || (i > 0 && bounds[i] <= bounds[i - 1]))
			return -1;
	memset(s, 0, sizeof *s);
	s->n = n;
	for (int i = 0; i < n; i++)
		s->bound[i] = bounds[i];
	return 0;
}

int bucket_of(const bucket_set_t *s, int64_t len)
{
	s = set_or_default(s);
	if (len <= 0)
		return -1;
	for (int i = 0; i < s->n; i++)
		if (len <= s->bound[i])
			return i;
	return s->n;
}

int bucket_over(const bucket_set_t *s)
{
	return set_or_default(s)->n;
}

int64_t bucket_bound(const bucket_set_t *s, int b)
{
	s = set_or_default(s);
	return (b >= 0 && b < s->n) ? s->bound[b] : -1;
}

const char *bucket_label(const bucket_set_t *s, int b, char *buf, size_t cap)
{
	s = set_or_default(s);
	if (b >= 0 && b < s->n)
		snprintf(buf, cap, "%lld", (long long)s->bound[b]);
	else if (b == s->n)
		snprintf(buf, cap, "over");
	else
		snprintf(buf, cap, "?");
	return buf;
}

int bucket_parse(const bucket_set_t *s, const char *label)
{
	char *end;
	long long v;

	s = set_or_default(s);
	if (!label || !*label)
		return -1;
	if (strcmp(label, "over") == 0)
		return s->n;
	v = strtoll(label, &end, 10);
	if (*end || label[0] == '-' || label[0] == '+')
		return -1;
	for (int i = 0; i < s->n; i++)
		if (s->bound[i] == v)
			return i;
	return -1;
}
