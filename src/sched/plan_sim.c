/* plan_sim.c - the dry run of `esmbatch plan` (sched_plan, see
 * scheduler.h): the workers simulated on the scheduler's own policy
 * (scheduler_impl.h), a fold's duration sched_cost, then the tables
 * printed and every item left waiting again. */
#include <stdio.h>
#include <stdlib.h>

#include "sched/bucket.h"
#include "sched/scheduler.h"
#include "sched/scheduler_impl.h"
#include "sched/waitq.h"

#define SIM_NB (BUCKET_MAX + 1)   /* buckets a device's tally holds */

/* what a device ran in one bucket */
typedef struct {
	int64_t items, longest, quota, at_once, peak;
} sched_tally_t;

/* a simulated worker */
typedef struct {
	int     dev;    /* its device */
	int     busy;   /* the item it runs, -1 none */
	double  fin;    /* when that item ends */
	int64_t hold;   /* what it holds granted (sched_hold) */
} sched_sim_wk_t;

/* an item started: which, and when */
typedef struct {
	int    item;
	double at;
} sched_sim_start_t;

typedef struct {
	sched_sim_wk_t    *wk;      /* [nw] */
	int                nw;
	sched_sim_start_t *start;   /* [n + 1] in the order started */
	int                nstart;
	double             t;       /* now; at the end, the run's length */
	int64_t           *peak;    /* [ndev] most quota granted at once */
	sched_tally_t     *tl;      /* [ndev * SIM_NB] */
} sched_sim_t;

/* 0, or -1 out of memory (sched_sim_free frees what was made) */
static int sched_sim_init(sched_sim_t *m, const sched_t *s)
{
	int w = 0;

	m->nw = 0;
	for (int i = 0; i < s->ndev; i++) m->nw += s->dev[i].workers;
	m->wk = calloc(m->nw > 0 ? m->nw : 1, sizeof *m->wk);
	m->start = malloc((s->n + 1) * sizeof *m->start);
	m->peak = calloc(s->ndev, sizeof *m->peak);
	m->tl = calloc((size_t)s->ndev * SIM_NB, sizeof *m->tl);
	if (!m->wk || !m->start || !m->peak || !m->tl) return -1;
	for (int i = 0; i < s->ndev; i++)
		for (int k = 0; k < s->dev[i].workers; k++, w++) {
			m->wk[w].dev = i;
			m->wk[w].busy = -1;
		}
	return 0;
}

static void sched_sim_free(sched_sim_t *m)
{
	free(m->wk);
	free(m->start);
	free(m->peak);
	free(m->tl);
}

/* every idle worker takes what the policy gives it at time m->t */
static void sched_sim_take(sched_t *s, sched_sim_t *m)
{
	for (int w = 0; w < m->nw; w++) {
		sched_sim_wk_t *k = &m->wk[w];
		sched_dev_t *d = &s->dev[k->dev];
		int any, i;
		if (k->busy >= 0) continue;
		if ((i = sched_pick(s, d, k->hold, &any)) < 0 && sched_hold(d, NULL, any, &k->hold))
			i = sched_pick(s, d, 0, &any);   /* its kept arena given back */
		if (i < 0) continue;
		sched_start(s, i);
		s->it[i].dev = k->dev;
		s->it[i].worker = w;
		sched_hold(d, &s->it[i], 1, &k->hold);
		k->busy = i;
		k->fin = m->t + (double)sched_cost(s->it[i].len);
		m->start[m->nstart].item = i;
		m->start[m->nstart++].at = m->t;
	}
}

/* what runs now, per device and bucket */
static void sched_sim_tally(const sched_t *s, sched_sim_t *m)
{
	for (int i = 0; i < s->ndev; i++) {
		int64_t now[SIM_NB] = { 0 };
		if (s->dev[i].granted > m->peak[i]) m->peak[i] = s->dev[i].granted;
		for (int w = 0; w < m->nw; w++)
			if (m->wk[w].busy >= 0 && m->wk[w].dev == i)
				now[bucket_of(NULL, s->it[m->wk[w].busy].tok.L)]++;
		for (int b = 0; b < SIM_NB; b++) {
			sched_tally_t *x = &m->tl[i * SIM_NB + b];
			if (now[b] > x->at_once) x->at_once = now[b];
			if (now[b] && s->dev[i].granted > x->peak) x->peak = s->dev[i].granted;
		}
	}
}

/* on to the earliest end: the items ending then are done, their workers
 * idle.  0 when nothing was running (the run is over) */
static int sched_sim_step(sched_t *s, sched_sim_t *m)
{
	int running = 0;

	for (int w = 0; w < m->nw; w++)
		if (m->wk[w].busy >= 0 && (!running++ || m->wk[w].fin < m->t)) m->t = m->wk[w].fin;
	if (!running) return 0;
	for (int w = 0; w < m->nw; w++) {
		sched_sim_wk_t *k = &m->wk[w];
		if (k->busy < 0 || k->fin > m->t) continue;
		s->it[k->busy].state = SCHED_FOLDED;
		if (!sched_keeps(&s->dev[k->dev])) {
			s->dev[k->dev].granted -= k->hold;
			k->hold = 0;
		}
		k->busy = -1;
	}
	return 1;
}

/* per device and bucket: items, the longest, the largest quota */
static void sched_sim_count(const sched_t *s, sched_sim_t *m)
{
	for (int k = 0; k < m->nstart; k++) {
		const sched_item_t *it = &s->it[m->start[k].item];
		sched_tally_t *x = &m->tl[it->dev * SIM_NB + bucket_of(NULL, it->tok.L)];
		x->items++;
		if (it->len > x->longest) x->longest = it->len;
		if (it->quota > x->quota) x->quota = it->quota;
	}
}

/* the three tables of sched_plan (the third with order) */
static void sched_sim_print(const sched_t *s, const sched_sim_t *m, FILE *out, int order)
{
	char lab[32];

	fprintf(out, "device\tbudget\tworkers\tpeak\tkept\n");
	for (int i = 0; i < s->ndev; i++)   /* kept: the workers' arenas at the end */
		fprintf(out, "%s\t%lld\t%d\t%lld\t%lld\n", s->dev[i].be->name, (long long)s->dev[i].budget,
		        s->dev[i].workers, (long long)m->peak[i], (long long)s->dev[i].granted);
	fprintf(out, "\ndevice\tbucket\titems\tlongest\tquota\tat_once\tpeak\n");
	for (int i = 0; i < s->ndev; i++)
		for (int b = 0; b < SIM_NB; b++) {
			const sched_tally_t *x = &m->tl[i * SIM_NB + b];
			if (!x->items) continue;
			fprintf(out, "%s\t%s\t%lld\t%lld\t%lld\t%lld\t%lld\n", s->dev[i].be->name,
			        bucket_label(NULL, b, lab, sizeof lab), (long long)x->items,
			        (long long)x->longest, (long long)x->quota, (long long)x->at_once,
			        (long long)x->peak);
		}
	if (!order) return;
	fprintf(out, "\nstart\tdevice\tworker\trecord\tresidues\tchunk\tquota\n");
	for (int k = 0; k < m->nstart; k++) {
		const sched_item_t *it = &s->it[m->start[k].item];
		fprintf(out, "%.1f\t%s\t%d\t%d\t%d-%d\t%d\t%lld\n",
		        m->t > 0 ? 100.0 * m->start[k].at / m->t : 0.0, s->dev[it->dev].be->name,
		        it->worker, it->rec, it->start + 1, it->start + it->len, it->chunk,
		        (long long)it->quota);
	}
}

/* nothing ran: every item the run started is waiting again, nothing granted */
static void sched_sim_undo(sched_t *s, const sched_sim_t *m)
{
	for (int k = 0; k < m->nstart; k++) {
		sched_item_t *it = &s->it[m->start[k].item];
		it->state = SCHED_WAIT;
		it->dev = it->worker = -1;
		wq_put(&s->wq, m->start[k].item, it->quota, it->len);
	}
	for (int i = 0; i < s->ndev; i++) s->dev[i].granted = s->dev[i].seen = 0;
}

int sched_plan(sched_t *s, FILE *out, int order)
{
	sched_sim_t m = { 0 };
	int rc = -1;

	if (sched_sim_init(&m, s) < 0) goto done;
	do {
		sched_sim_take(s, &m);
		sched_sim_tally(s, &m);
	} while (sched_sim_step(s, &m));
	sched_sim_count(s, &m);
	sched_sim_print(s, &m, out, order);
	rc = ferror(out) ? -1 : 0;
done:
	sched_sim_undo(s, &m);
	sched_sim_free(&m);
	return rc;
}
