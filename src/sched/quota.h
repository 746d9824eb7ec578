/* quota.h (prefix quota_) - bucket quota tables: the per-length memory figures a device
 * needs, as a TSV file (format in buckets/README).
 *
 *   #esmbatch-quota<TAB>v1<TAB>device=...<TAB>precision=...<TAB>weights=...
 *       <TAB>safety=1.15[<TAB>key=value ...]
 *   # comment lines anywhere after the first line; blank lines are skipped
 *   max_len<TAB>peak_allocated<TAB>peak_reserved<TAB>device_used<TAB>quota
 *   512<TAB>11059540378<TAB>13099650252<TAB>-<TAB>15032385536
 *
 * Rows are keyed by an upper bound on the model length, strictly
 * ascending, at most QUOTA_LEN_MAX; every figure is a count of bytes, at
 * most QUOTA_BYTES_MAX, "-" where unknown (never for max_len or quota).
 * Header values may hold spaces, not tabs.  The numeric header keys
 * (safety, worker_overhead, memory, context, weights_bytes, chunk_size,
 * recycles, seconds_per_cost) are range-checked as they are set or read,
 * so what reads them may convert them without a check of its own.
 *
 * Ownership: a quota_table_t owns all its strings and rows.
 */
#ifndef ESMBATCH_SCHED_QUOTA_H
#define ESMBATCH_SCHED_QUOTA_H

#include <stdint.h>
#include <stdio.h>

#include "sched/bucket.h"

#define QUOTA_MAGIC   "#esmbatch-quota"
#define QUOTA_VERSION "v1"
#define QUOTA_LEN_MAX   ((int64_t)INT32_MAX)     /* a row's max_len */
#define QUOTA_BYTES_MAX ((int64_t)1 << 50)       /* any byte figure: 1 PiB */
#define QUOTA_COLUMNS "max_len\tpeak_allocated\tpeak_reserved\tdevice_used\tquota"

typedef struct {
	int64_t max_len;          /* upper bound on the model length */
	int64_t peak_allocated;   /* bytes of live tensors at the peak; -1 = unknown */
	int64_t peak_reserved;    /* bytes taken from the device; -1 = unknown */
	int64_t device_used;      /* total - free at the peak; -1 = unknown */
	int64_t quota;            /* bytes a job of this bucket is granted */
} quota_row_t;

typedef struct {
	char   *device;      /* e.g. "NVIDIA GeForce RTX 5090" */
	char   *precision;   /* fp32, bf16, fp16 */
	char   *weights;     /* weights fingerprint, e.g. "sha256:..." */
	double  safety;      /* quota = ceil(peak reserved x safety) + overhead */
	int     nextra;      /* other header keys, kept in order */
	char  **extra_key, **extra_val;
	int     nrows;
	quota_row_t *rows;   /* ascending max_len */
} quota_table_t;

quota_table_t *quota_init(void);            /* empty table, safety 1.15 */
void           quota_free(quota_table_t *t);

/* Read a table; NULL after one line naming the file and line. */
quota_table_t *quota_read(const char *path);
quota_table_t *quota_read_fp(FILE *fp, const char *name);
/* Write PATH.tmp.PID, then rename to PATH; 0 or -1 after logging. */
int quota_write(const quota_table_t *t, const char *path);
int quota_write_fp(const quota_table_t *t, FILE *fp);

/* Set a header key (device, precision, weights, safety, or any other
 * key made of [A-Za-z0-9_.-]); 0 or -1 on a bad key or value (a numeric
 * key's value out of its range). */
int quota_set(quota_table_t *t, const char *key, const char *value);
const char *quota_get(const quota_table_t *t, const char *key);
/* Append a row; its max_len must exceed the last one's and its figures
 * lie in the ranges above. 0 or -1. */
int quota_add_row(quota_table_t *t, const quota_row_t *row);

/* The row for a length: smallest max_len >= len; NULL above the last. */
const quota_row_t *quota_find(const quota_table_t *t, int64_t len);
/* Quota for bucket b of s: that of the row covering the bucket's bound;
 * -1 for "over" or when no row covers it. */
int64_t quota_for_bucket(const quota_table_t *t, const bucket_set_t *s, int b);

#endif
