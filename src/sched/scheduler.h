/* scheduler.h - the scheduler (prefix sched_; not sched.h, which would
 * shadow the system header): devices with memory budgets, worker threads,
 * smaller chunks then halving for what fits nowhere, out-of-memory events
 * survived.
 *
 * Every record becomes one or more items (its fragments once halved).  An
 * item's quota is its planned arena x safety plus the device's per-worker
 * overhead (or the quota table's row for its length).  A device's budget
 * is what is left of it once its weights are loaded, less a reserve; its
 * workers (OpenMP threads) each take the longest waiting item whose quota
 * fits the budget not yet granted, so running quotas never sum beyond the
 * budget.  On a card (or sim:SIZE) a worker keeps its arena from one fold
 * to the next (arena.h: no device allocation or release per fold) and
 * holds, granted to it while idle too, the largest quota it has run since
 * the arena was last released: an item then adds only what its quota
 * exceeds that; an idle worker that cannot take a waiting item gives its
 * arena back, and so does a refused one.  An item that fits no device is
 * planned with smaller chunk sizes, then split into two halves,
 * recursively (--no-split: failed); a length whose pair representation
 * alone (L^2 c_z floats) puts its quota over every budget is halved with
 * no dry run, a dry run's outcome is kept per device, length and chunk,
 * and a fragment that fits nowhere fails its record at once (its waiting
 * fragments with it, no more halves made).  The waiting items are a
 * queue ordered by quota (waitq.h): a pick, a placement and a settled
 * record cost O(log n), not a scan of every item.  The stop flag is seen
 * between dry runs: the items not placed yet fail as interrupted (unrun).  A
 * fold that fails for memory (arena refused, ESMBATCH_FAULT) releases its
 * quota and is requeued the same way; other workers carry on.
 */
#ifndef ESMBATCH_SCHED_SCHEDULER_H
#define ESMBATCH_SCHED_SCHEDULER_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "backend/backend.h"
#include "sched/memory.h"
#include "model/model.h"
#include "sched/quota.h"
#include "io/safetensors.h"
#include "model/tokenizer.h"

typedef enum { SCHED_WAIT, SCHED_RUN, SCHED_FOLDED, SCHED_FAILED, SCHED_SPLIT } sched_state_t;

typedef struct {
	int           rec;        /* the record it belongs to (caller's index) */
	int           start, len; /* characters of the record's sequence */
	char         *seq;        /* this item's sequence (owned) */
	tok_t         tok;        /* its encoding, made once with the item (L 0:
	                             it cannot be encoded) */
	int           chunk;
	int64_t       quota;      /* bytes granted while it runs */
	model_plan_t *plan;       /* [ndev]: each device's plan at chunk, made
	                             while placing (arena 0: none, the quota came
	                             from the quota table; the fold plans) */
	sched_state_t state;
	int           dev, worker;
	double        t0, t1;     /* seconds since the run began */
	char          reason[256];
	int           unrun;      /* failed before it ran for no fault of its
	                             own: the run was stopped, or no device was
	                             left (a rerun folds it) */
} sched_item_t;

typedef struct {
	char   *spec;
	be_t   *be;
	model_t model;
	int     loaded;
	int64_t budget;          /* bytes jobs may hold at once */
	int64_t granted;         /* quotas of running items, and the kept
	                            arenas' holds (sched_run) */
	int64_t seen;            /* the most granted at once (sched_run) */
	int64_t overhead;        /* per worker, added to every quota */
	int     workers;         /* 0: auto (sched_auto_workers) */
} sched_dev_t;

typedef struct sched sched_t;

/* Called by a worker (no lock held) when an item's fold succeeded; writes
 * its outputs.  0, or negative: the item fails with `reason`. */
typedef int (*sched_folded_fn)(void *ctx, const sched_item_t *it, const sched_dev_t *d, const tok_t *t,
                             const model_out_t *out, const mem_fig_t *fig, double secs,
                             char *reason, size_t cap);

/* Called on the scheduler's output step once no item of record rec waits
 * or runs any more: the record's outcome is final.  v[0..n) are copies of
 * its final items (its fragments by ascending start, halved items left
 * out, seq NULL).  The output step is taken by one worker at a time (the
 * first to find it free after queueing an event; see sched_run), never
 * with the scheduler's lock held, and sees the events in the order they
 * happened: a record's callback comes before the run.jsonl line of the
 * fold that settled it.  The callback may call sched_granted. */
typedef void (*sched_settled_fn)(void *ctx, sched_t *s, int rec, const sched_item_t *v, int n);

typedef struct {
	int                  chunk;       /* first chunk size tried */
	int                  passes;
	int                  no_split;
	double               safety;      /* quota = ceil(arena x safety) + overhead */
	const quota_table_t *qt;          /* or NULL */
	FILE                *jsonl;       /* one line per device and per fold */
	volatile sig_atomic_t *stop;      /* nonzero: take no more items */
	sched_folded_fn      folded;
	sched_settled_fn     settled;     /* or NULL */
	void                *ctx;
	safetensors_writer_t         *dump;        /* --dump-tensors (one worker only) */
	const char *const   *names;       /* record names for the dump */
} sched_opt_t;

sched_t *sched_init(sched_dev_t *devs, int ndev, const sched_opt_t *o);
void     sched_free(sched_t *s);
/* Queue the record's sequence as one item (planned, maybe split; it may
 * fail here: fits nowhere, or stopped).  A record that takes long to
 * place logs a line every 2 s, and one that is split one line with its
 * fragment count.  0, or -1 out of memory. */
int      sched_add(sched_t *s, int rec, const char *seq);
/* Auto workers: for every device whose workers is 0, as many as the
 * quotas allow for the queued work: the commonest bucket (bucket_of on
 * tok.L; the smaller on a tie) among the waiting items that fit the
 * device, q its largest quota among those items, and workers = budget / q
 * clamped to [1, 4] on a card (or sim:SIZE), [1, 1] on the CPU (host
 * memory, no mem_info; its ops use every thread already); 1 when no item
 * fits.  One log line per device.
 * Call once every record is added, before sched_plan and sched_run (a
 * device still at 0 runs one worker).  0. */
int      sched_auto_workers(sched_t *s);
/* The plan: a dry run of the workers' policy over the queued items, a
 * fold's duration taken as proportional to sched_cost, L^2 (enough to order the work),
 * nothing folded and every item left waiting.  Writes three TSV tables to
 * out, separated by blank lines:
 *   device  budget  workers  peak  kept      (peak: most quota held at once,
 *                                             kept arenas included; kept:
 *                                             what the workers' kept arenas
 *                                             hold at the end)
 *   device  bucket  items  longest  quota  at_once  peak
 *       (per bucket: its largest quota, most of its items running at once
 *        on the device, and the device's quota held while one runs)
 *   start  device  worker  record  residues  chunk  quota
 *       (every item in the order it starts; start: percent of the run)
 * With order == 0 the third table is left out.  0, or -1 on a write error. */
int      sched_plan(sched_t *s, FILE *out, int order);
/* Run every item to an end.  Every line of run.jsonl and every settled
 * callback is queued by the worker that caused it and written on the
 * output step (one writer at a time, in order, outside the lock the
 * workers share); everything queued is written before sched_run returns.
 * 0, or -1 when stopped early. */
int      sched_run(sched_t *s);
/* The planner's cost of folding len residues, in its own unit (len^2):
 * what sched_plan takes a fold's duration to be proportional to, and what
 * shards are balanced by (shard.h). */
int64_t  sched_cost(int len);
/* model_fold with the memory figures (memory.h) measured around it (on
 * the CPU this restarts the process's peak RSS count): a worker's fold,
 * and calibrate's. */
int      sched_fold(const model_t *m, const tok_t *t, const model_run_t *r,
                    const model_plan_t *p, model_out_t *out, mem_fig_t *fig, char *err,
                    size_t errcap);
/* The chunk size an item of len characters is planned at first (the one
 * it runs at unless no device has room for it): the run's chunk, or with
 * auto (0) the CPU's cache chunk for its length, else 0. */
int      sched_first_chunk(const sched_t *s, int len);
/* Seconds on the monotonic clock. */
double   sched_now(void);
/* Items, in the order made (a record's fragments: ascending start). */
int                 sched_count(const sched_t *s);
const sched_item_t *sched_item(const sched_t *s, int i);
/* *v = copies of record rec's final items (halved ones left out; seq,
 * tok and plan empty), by ascending start, malloc'ed (the caller frees it; NULL when
 * none); their count, or -1 when out of memory.  Not while sched_run runs
 * (its workers use it under the lock). */
int                 sched_outcome(const sched_t *s, int rec, sched_item_t **v);
/* The most bytes device dev has had granted at once (running items, kept
 * arenas) since the run began: on the CPU, whose worker gives its quota
 * back as each fold ends, not 0 between folds (takes the lock). */
int64_t             sched_granted(sched_t *s, int dev);
/* How many items run now; *rec and *secs: the record of the one running
 * longest and for how many seconds (untouched when none).  While
 * sched_run runs, from any thread (takes the lock). */
int                 sched_running(sched_t *s, int *rec, double *secs);

#endif
