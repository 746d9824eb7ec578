/* scheduler_impl.h (prefix sched_) - the scheduler's state, shared by
 * scheduler.c (the workers) and plan_sim.c (the dry run of `esmbatch
 * plan`), and the policy both follow: which item a worker picks, what it
 * holds.  Private to src/sched/scheduler.c and plan_sim.c.
 */
#ifndef ESMBATCH_SCHED_SCHEDULER_IMPL_H
#define ESMBATCH_SCHED_SCHEDULER_IMPL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "sched/memory.h"
#include "sched/scheduler.h"
#include "sched/waitq.h"

/* a dry run's outcome for a length and chunk on one device (the plan is a
 * function of those alone: memory model, DESIGN.md section 4) */
typedef struct {
	int          used, dev, L, chunk, ok;
	model_plan_t plan;
} sched_memo_t;

/* an event for the output step: a line of run.jsonl, or a settled record */
typedef struct sched_ev {
	struct sched_ev *next;
	sched_item_t     it;        /* the fold as it ended (seq NULL) */
	mem_fig_t        fig;
	int              has_fig;
	const char      *status;    /* NULL: record it.rec settled, with v[0..n) */
	sched_item_t    *v;
	int              n;
} sched_ev_t;

struct sched {
	sched_dev_t    *dev;
	int             ndev;
	sched_opt_t     o;
	sched_item_t   *it;        /* [n] (capacity cap_it) */
	int             n;
	size_t          cap_it, cap_next;
	int             running;
	double          t_start;
	pthread_mutex_t lock;      /* items, grants, the event queue */
	pthread_cond_t  cond;
	sched_ev_t     *head, **tail;   /* events not yet written, oldest first */
	pthread_mutex_t out;       /* held by the one thread on the output step */
	int            *gone;      /* [ndev] 1: the device is lost, retired */
	int             nlive;     /* devices not retired */
	char            lost[200]; /* why the last device was retired */
	wq_t            wq;        /* the waiting items (waitq.h) */
	int            *next;      /* [n] the next item of the same record, -1 */
	int            *last;      /* [nrec] a record's last item made, -1 */
	int             nrec;
	sched_memo_t   *memo;      /* [nmemo] open addressing, a power of two */
	int             nmemo, nmemo_used;
	double          t_place, t_said;   /* placing the current record: since, last line */
};

/* 1: d's workers keep their arenas from one fold to the next (a device
 * with a driver's memory: a card, sim:SIZE); the CPU reserves one per fold
 * (host pages, whose growth a fold's figures measure) */
int  sched_keeps(const sched_dev_t *d);
/* the longest waiting item that a worker of d holding `hold` can take now
 * (what it adds fits the budget not yet granted); -1 none.  *any: some
 * waiting item could ever run on d */
int  sched_pick(sched_t *s, sched_dev_t *d, int64_t hold, int *any);
/* item i leaves the queue to run */
void sched_start(sched_t *s, int i);
/* A worker of d holding *hold takes item i, or, i < 0 while items wait
 * that the device could run, gives its kept arena back (*hold -> 0; the
 * caller releases it) so that the memory serves another worker or a
 * larger item.  Returns 1 when the arena is to be released.  The same
 * policy runs the workers and the plan.  Lock held. */
int  sched_hold(sched_dev_t *d, sched_item_t *it, int any, int64_t *hold);

#endif
