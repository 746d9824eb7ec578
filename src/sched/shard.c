/* shard.c - a deterministic cost-balanced partition of an input (shard.h). */
#include "sched/shard.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

/* a whole decimal number in [lo, hi]; 0 or -1 */
static int shard_num(const char *s, size_t n, long lo, long hi, long *out)
{
	char buf[24], *end;
	long v;

	if (n == 0 || n >= sizeof buf || strspn(s, "0123456789") < n) return -1;
	memcpy(buf, s, n);
	buf[n] = 0;
	errno = 0;
	v = strtol(buf, &end, 10);
	if (errno || *end || v < lo || v > hi) return -1;
	*out = v;
	return 0;
}

/* an environment variable as a number in [lo, hi]; 0, 1 when absent and
 * optional, -1 after logging */
static int shard_env(const char *name, long lo, long hi, int optional, long *out)
{
	const char *v = getenv(name);

	if (!v || !*v) {
		if (optional) return 1;
		log_error("--shard auto: %s is not set (not a Slurm array task? give --shard K/N)", name);
		return -1;
	}
	if (shard_num(v, strlen(v), lo, hi, out) < 0) {
		log_error("--shard auto: %s='%s' is not a number in [%ld, %ld]", name, v, lo, hi);
		return -1;
	}
	return 0;
}

/* K and N from the Slurm array task's environment */
static int shard_from_slurm(shard_t *out)
{
	long id, min, count, max, step;
	int rc;

	if (shard_env("SLURM_ARRAY_TASK_ID", 0, 0x7fffffff, 0, &id) < 0 ||
	    shard_env("SLURM_ARRAY_TASK_MIN", 0, 0x7fffffff, 0, &min) < 0 ||
	    shard_env("SLURM_ARRAY_TASK_COUNT", 1, SHARD_MAX, 0, &count) < 0)
		return -1;
	if ((rc = shard_env("SLURM_ARRAY_TASK_STEP", 1, 0x7fffffff, 1, &step)) < 0) return -1;
	if (rc == 0 && step != 1) {
		log_error("--shard auto: SLURM_ARRAY_TASK_STEP=%ld: the array must be MIN-MAX by 1 "
		          "(e.g. --array=1-%ld)", step, count);
		return -1;
	}
	if ((rc = shard_env("SLURM_ARRAY_TASK_MAX", 0, 0x7fffffff, 1, &max)) < 0) return -1;
	if (rc == 0 && max - min + 1 != count) {
		log_error("--shard auto: SLURM_ARRAY_TASK_MIN=%ld, _MAX=%ld and _COUNT=%ld disagree: "
		          "the array must be MIN-MAX by 1, no gaps", min, max, count);
		return -1;
	}
	if (id < min || id - min + 1 > count) {
		log_error("--shard auto: SLURM_ARRAY_TASK_ID=%ld is outside MIN=%ld .. MIN+COUNT-1=%ld",
		          id, min, min + count - 1);
		return -1;
	}
	out->k = (int)(id - min + 1);
	out->n = (int)count;
	return 0;
}

int shard_parse(const char *arg, shard_t *out)
{
	const char *slash = arg ? strchr(arg, '/') : NULL;
	long k, n;

	if (arg && !strcmp(arg, "auto")) return shard_from_slurm(out);
	if (!slash || shard_num(slash + 1, strlen(slash + 1), 1, SHARD_MAX, &n) < 0 ||
	    shard_num(arg, slash - arg, 1, SHARD_MAX, &k) < 0) {
		log_error("--shard: expected K/N (1 <= K <= N <= %d) or auto, got '%s'", SHARD_MAX,
		          arg ? arg : "");
		return -1;
	}
	if (k > n) {
		log_error("--shard %s: K must be at most N (shards are numbered 1 to %ld)", arg, n);
		return -1;
	}
	out->k = (int)k;
	out->n = (int)n;
	return 0;
}

/* descending cost, then ascending index (qsort_r; ctx: the costs) */
static int shard_cmp(const void *a, const void *b, void *ctx)
{
	const int64_t *cost = ctx;
	int i = *(const int *)a, j = *(const int *)b;

	if (cost[i] != cost[j]) return cost[i] > cost[j] ? -1 : 1;
	return (i > j) - (i < j);
}

/* shard a before shard b in the heap: less load, then the lower number */
static int shard_less(const int64_t *load, int a, int b)
{
	return load[a] < load[b] || (load[a] == load[b] && a < b);
}

/* heap[0..n) a min-heap of shards by shard_less; restore it downwards from
 * position i */
static void shard_sift(int *heap, int n, const int64_t *load, int i)
{
	for (;;) {
		int c = 2 * i + 1, m = i;
		if (c < n && shard_less(load, heap[c], heap[m])) m = c;
		if (c + 1 < n && shard_less(load, heap[c + 1], heap[m])) m = c + 1;
		if (m == i) return;
		int t = heap[i];
		heap[i] = heap[m];
		heap[m] = t;
		i = m;
	}
}

int shard_assign(const int64_t *cost, int n, int nshards, int *of)
{
	int *order = malloc((n ? n : 1) * sizeof *order);
	int *heap = malloc(nshards * sizeof *heap);
	int64_t *load = calloc(nshards, sizeof *load);
	int rc = -1;

	if (!order || !heap || !load) goto done;
	for (int i = 0; i < n; i++) order[i] = i;
	/* the comparison is a total order: the sorted order is unique */
	qsort_r(order, n, sizeof *order, shard_cmp, (void *)cost);
	for (int k = 0; k < nshards; k++) heap[k] = k;   /* all 0: sorted by number */
	for (int r = 0; r < n; r++) {
		int best = heap[0];
		of[order[r]] = best;
		load[best] += cost[order[r]];
		shard_sift(heap, nshards, load, 0);
	}
	rc = 0;
done:
	free(order);
	free(heap);
	free(load);
	return rc;
}

void shard_suffix(const shard_t *s, char *buf, size_t cap)
{
	if (s->n > 0) snprintf(buf, cap, ".%d-of-%d", s->k, s->n);
	else if (cap) buf[0] = 0;
}
