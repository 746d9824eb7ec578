/* shard.h (prefix shard_) - one input split into N shards of near-equal
 * predicted cost, for N processes (a Slurm job array) that fold one shard
 * each into one output directory.
 *
 * The partition is longest-processing-time first over the planner's cost
 * (sched_cost): records by descending cost, ties by input order, each to
 * the shard with the least cost so far, ties to the lowest shard.  It is a
 * function of the costs in input order and N only (integer arithmetic), so
 * every machine computes the same one.
 */
#ifndef ESMBATCH_SCHED_SHARD_H
#define ESMBATCH_SCHED_SHARD_H

#include <stddef.h>
#include <stdint.h>

#define SHARD_MAX 100000

typedef struct {
	int k, n;   /* shard k of n, 1 <= k <= n; n == 0: not sharded */
} shard_t;

/* arg "K/N" (1 <= K <= N <= SHARD_MAX), or "auto": K and N of a Slurm
 * array task, K = SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN + 1 and
 * N = SLURM_ARRAY_TASK_COUNT (SLURM_ARRAY_TASK_MAX and _STEP, when set,
 * must say the array is MIN..MAX by 1).  0, or -1 after one line naming
 * what is wrong. */
int shard_parse(const char *arg, shard_t *out);

/* of[i] = the shard (0-based) of item i of cost[0..n) (each >= 0) among
 * nshards >= 1.  0, or -1 when out of memory. */
int shard_assign(const int64_t *cost, int n, int nshards, int *of);

/* ".K-of-N" in buf (cap bytes), "" when not sharded; file names of a
 * shard: summary.K-of-N.tsv, done.K-of-N.jsonl, run.K-of-N.jsonl */
void shard_suffix(const shard_t *s, char *buf, size_t cap);

#endif
