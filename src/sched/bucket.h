/* bucket.h (prefix bucket_) - length buckets: sequences are grouped by an upper bound on
 * their model length (residues plus chain linkers: tok_model_len).
 *
 * The default bounds are 512 / 768 / 1024 / 1344; a length above the last
 * bound falls in the "over" bucket (index n), whose jobs are candidates for
 * a smaller chunk size or halving.  A bucket_set_t is a plain value: no
 * allocation, nothing to free.
 */
#ifndef ESMBATCH_SCHED_BUCKET_H
#define ESMBATCH_SCHED_BUCKET_H

#include <stddef.h>
#include <stdint.h>

#define BUCKET_MAX 32            /* most bounds one set may hold */
#define BUCKET_NDEFAULT 4

typedef struct {
	int     n;                   /* number of bounds; bucket n is "over" */
	int64_t bound[BUCKET_MAX];   /* strictly ascending, > 0 */
} bucket_set_t;

/* The default set: 512, 768, 1024, 1344. */
void bucket_set_default(bucket_set_t *s);
/* Fill s from n strictly ascending positive bounds; 0, or -1 if invalid. */
int  bucket_set_init(bucket_set_t *s, const int64_t *bounds, int n);

/* Bucket index of a length: 0..n-1, n for "over", -1 for len <= 0.
 * s == NULL means the default set. */
int  bucket_of(const bucket_set_t *s, int64_t len);
/* Index of the "over" bucket (== n). */
int  bucket_over(const bucket_set_t *s);
/* Upper bound of bucket b, or -1 for "over" / out of range. */
int64_t bucket_bound(const bucket_set_t *s, int b);
/* Label of bucket b into buf: the bound ("512") or "over"; returns buf,
 * "?" for an index out of range. */
const char *bucket_label(const bucket_set_t *s, int b, char *buf, size_t cap);
/* Inverse of bucket_label; -1 if label names no bucket of s. */
int  bucket_parse(const bucket_set_t *s, const char *label);

#endif
