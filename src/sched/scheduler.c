/* scheduler.c - devices, budgets, workers and the folds they run
 * (measured: sched_fold), halving (see scheduler.h). */
#include "sched/scheduler.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <jansson.h>

#include "util/grow.h"
#include "util/log.h"
#include "util/status.h"
#include "util/sysmem.h"
#include "io/job.h"
#include "backend/devices.h"
#include "sched/bucket.h"
#include "sched/scheduler_impl.h"
#include "sched/waitq.h"

#define SCHED_MIN_CHUNK 8
#define SCHED_CPU_CHUNK 32   /* smallest auto chunk in host memory */
#define SCHED_AUTO_CAP 4     /* most auto workers on a card (sched_auto_workers) */
#define SCHED_SAY_SECS 2.0   /* placing one record: a progress line this often */
#define SCHED_MEMO_FIRST 256 /* slots of the dry runs' memo at first */

int64_t sched_cost(int len)
{
	return (int64_t)len * len;
}

double sched_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* the chunk size after c, or -1 when there is none */
static int sched_next_chunk(int c, int L)
{
	int n = c == 0 ? 128 : c / 2;
	while (n >= L && n >= SCHED_MIN_CHUNK) n /= 2;   /* a chunk >= L is no chunk */
	return n >= SCHED_MIN_CHUNK ? n : -1;
}

/* how item it runs at chunk: the same for its plan and its fold (a dump's
 * staging is planned too); dump: the emit hook's context, filled */
static model_run_t sched_run_of(const sched_t *s, const sched_item_t *it, int chunk,
                                model_dump_t *dump)
{
	*dump = (model_dump_t){ .w = s->o.dump, .name = s->o.names ? s->o.names[it->rec] : NULL };
	return (model_run_t){ .chunk = chunk, .passes = s->o.passes,
	                      .emit = s->o.dump ? model_dump_emit : NULL, .emit_ctx = dump };
}

/* the quota on d of a job whose arena is `arena` bytes */
static int64_t sched_quota_of(const sched_t *s, const sched_dev_t *d, double arena)
{
	return (int64_t)ceil((arena + d->be->workspace) * s->o.safety) + d->overhead;
}

/* the memo's slot for (di, L, chunk): its entry, or the free slot where it
 * goes; NULL without a memo */
static sched_memo_t *sched_memo_slot(const sched_t *s, int di, int L, int chunk)
{
	uint64_t h = ((uint64_t)(unsigned)L * 0x9e3779b97f4a7c15u) ^ ((uint64_t)(unsigned)chunk << 20) ^
	             (uint64_t)(unsigned)di;

	if (!s->nmemo) return NULL;
	for (size_t k = (h ^ (h >> 29)) & (s->nmemo - 1);; k = (k + 1) & (s->nmemo - 1)) {
		sched_memo_t *m = &s->memo[k];
		if (!m->used || (m->dev == di && m->L == L && m->chunk == chunk)) return m;
	}
}

/* keep a dry run's outcome (at most half the slots used; a memo that
 * cannot grow keeps what it has) */
static void sched_memo_add(sched_t *s, int di, int L, int chunk, int ok, const model_plan_t *p)
{
	sched_memo_t *m;

	if (2 * (s->nmemo_used + 1) > s->nmemo) {
		int n = s->nmemo ? 2 * s->nmemo : SCHED_MEMO_FIRST;   /* rehashed, not grown */
		sched_memo_t *old = s->memo, *nm = calloc(n, sizeof *nm);
		int on = s->nmemo;
		if (!nm) return;
		s->memo = nm;
		s->nmemo = n;
		for (int i = 0; i < on; i++)
			if (old[i].used) *sched_memo_slot(s, old[i].dev, old[i].L, old[i].chunk) = old[i];
		free(old);
	}
	m = sched_memo_slot(s, di, L, chunk);
	*m = (sched_memo_t){ .used = 1, .dev = di, .L = L, .chunk = chunk, .ok = ok, .plan = *p };
	s->nmemo_used++;
}

/* quota of item it at chunk on device di, its plan there in it->plan[di];
 * -1 when it cannot be planned.  A dry run's outcome is kept for the next
 * item of that length (not with --dump-tensors, whose emit hook sees
 * every pass). */
static int64_t sched_quota(sched_t *s, int di, sched_item_t *it, int chunk)
{
	const sched_dev_t *d = &s->dev[di];
	model_dump_t dump;
	model_run_t run = sched_run_of(s, it, chunk, &dump);
	model_plan_t *p = &it->plan[di];
	sched_memo_t *m;
	int L = it->tok.L, ok;

	memset(p, 0, sizeof *p);
	if (L == 0) return -1;
	if (s->o.qt && chunk == s->o.chunk) {
		const quota_row_t *r = quota_find(s->o.qt, L);
		if (r) return r->quota;
	}
	if (!s->o.dump && (m = sched_memo_slot(s, di, L, chunk)) && m->used) {
		ok = m->ok;
		*p = m->plan;
	} else {
		ok = model_plan(&d->model, &it->tok, &run, p) == 0;
		if (!ok) memset(p, 0, sizeof *p);
		if (!s->o.dump) sched_memo_add(s, di, L, chunk, ok, p);
	}
	return ok ? sched_quota_of(s, d, (double)p->arena) : -1;
}

/* The least quota item it can have on any live device at any chunk, when
 * it holds on none of them: then no dry run can make it fit.  It is the
 * quota of an arena holding only the pair representation z [L, L, c_z]
 * floats, which lives through the trunk whatever the chunk.  -1 where
 * some device might hold it, or a quota table row gives its quota. */
static int64_t sched_floor(const sched_t *s, const sched_item_t *it, int chunk)
{
	int64_t least = -1;
	int L = it->tok.L;

	if (L == 0 || (s->o.qt && chunk == s->o.chunk && quota_find(s->o.qt, L))) return -1;
	for (int i = 0; i < s->ndev; i++) {
		const sched_dev_t *d = &s->dev[i];
		if (s->gone[i]) continue;
		int64_t q = sched_quota_of(s, d, (double)L * L * d->model.cfg->c_z * sizeof(float));
		if (q <= d->budget) return -1;
		if (least < 0 || q < least) least = q;
	}
	return least;
}

/* the device item it fits best at chunk (the last that holds its quota;
 * its plans made), or -1; *quota: its least quota over the devices (-1:
 * none planned), *floor: that is a lower bound only, no device planned
 * (sched_floor) */
static int64_t sched_best_fit(sched_t *s, sched_item_t *it, int chunk, int64_t *quota, int *floor)
{
	int64_t best = -1;
	*quota = sched_floor(s, it, chunk);
	if ((*floor = *quota >= 0)) return -1;
	for (int i = 0; i < s->ndev; i++) {
		if (s->gone[i]) continue;
		int64_t q = sched_quota(s, i, it, chunk);
		if (q < 0) continue;
		if (*quota < 0 || q < *quota) *quota = q;
		if (q <= s->dev[i].budget) best = i;
	}
	return best;
}

/* release what an item holds for its folds (its encoding, its plans) once
 * it has ended: done, failed or split */
static void sched_item_end(sched_item_t *it)
{
	tok_free(&it->tok);
	free(it->plan);
	it->plan = NULL;
}

/* append an item for the text frag[0..len) starting at character start of
 * record rec; NULL when out of memory (s->it may move) */
static sched_item_t *sched_push(sched_t *s, int rec, const char *frag, int start, int len)
{
	sched_item_t *it;

	if (rec < 0) return NULL;
	if (grow_array(&s->it, &s->cap_it, (size_t)s->n + 1, sizeof *s->it) < 0 ||
	    grow_array(&s->next, &s->cap_next, (size_t)s->n + 1, sizeof *s->next) < 0 ||
	    wq_reserve(&s->wq, (int)s->cap_it) < 0)
		return NULL;
	if (rec >= s->nrec) {
		int nh = rec + 1 > 2 * s->nrec ? rec + 1 : 2 * s->nrec;
		int *h = realloc(s->last, nh * sizeof *h);
		if (!h) return NULL;
		for (int k = s->nrec; k < nh; k++) h[k] = -1;
		s->last = h;
		s->nrec = nh;
	}
	it = &s->it[s->n];
	memset(it, 0, sizeof *it);
	if (!(it->seq = strndup(frag, len)) || !(it->plan = calloc(s->ndev, sizeof *it->plan))) {
		free(it->seq);
		return NULL;
	}
	if (tok_encode(&it->tok, it->seq, s->dev[0].model.cfg) < 0) memset(&it->tok, 0, sizeof it->tok);
	it->rec = rec;
	it->start = start;
	it->len = len;
	it->dev = it->worker = -1;
	s->next[s->n] = s->last[rec];
	s->last[rec] = s->n;
	s->n++;
	return it;
}

static int sched_place(sched_t *s, int i, int c0);

/* item i became two halves, appended and placed (the second only while
 * the first leaves the record foldable); what sched_place returns.  The
 * halves are [0, h) and [h2, L): where the middle falls on a chain break
 * ':' the cut is that chain boundary and the ':' belongs to neither, so no
 * fragment begins or ends with a linker (an item never does: the FASTA
 * reader refuses ':' at either end and empty chains) */
static int sched_split(sched_t *s, int i)
{
	sched_item_t *it = &s->it[i];
	char *seq = it->seq;
	int rec = it->rec, start = it->start, L = it->len, h = L / 2, h2, rc = -1;

	if (seq[h] == ':') h2 = h + 1;
	else if (seq[h - 1] == ':') h2 = h--;
	else h2 = h;
	it->seq = NULL;
	sched_item_end(it);
	it->state = SCHED_SPLIT;
	log_debug("record %d: residues %d-%d halved", rec, start + 1, start + L);
	if (sched_push(s, rec, seq, start, h) && (rc = sched_place(s, s->n - 1, s->o.chunk)) == 0)
		rc = sched_push(s, rec, seq + h2, start + h2, L - h2) ? sched_place(s, s->n - 1, s->o.chunk)
		                                                      : -1;
	free(seq);
	return rc;
}

/* item i has failed (its reason set): so has its record, whose other
 * waiting items fail with the same reason rather than be folded for
 * nothing.  Lock held (or before the run). */
static void sched_abandon(sched_t *s, int i)
{
	for (int k = s->last[s->it[i].rec]; k >= 0; k = s->next[k]) {
		sched_item_t *x = &s->it[k];
		if (k == i || x->state != SCHED_WAIT) continue;
		wq_take(&s->wq, k);
		x->state = SCHED_FAILED;
		sched_item_end(x);
		snprintf(x->reason, sizeof x->reason, "%s", s->it[i].reason);
		x->unrun = s->it[i].unrun;
	}
}

/* placing a record (sched_add) has taken long: one line every
 * SCHED_SAY_SECS of what it is doing */
static void sched_say(sched_t *s, const sched_item_t *it, int chunk)
{
	double now;

	if (s->t_place <= 0 || (now = sched_now()) - s->t_said < SCHED_SAY_SECS) return;
	s->t_said = now;
	log_info("record %d: planning residues %d-%d at chunk %d (%.0f s so far)", it->rec,
	         it->start + 1, it->start + it->len, chunk, now - s->t_place);
}

/* The first chunk of auto (--chunk-size 0) for length L where every device
 * computes in host memory (the CPU), below L (else 0): SCHED_CPU_CHUNK rows
 * up to L = 256, so that the pair ops' slabs (32 L rows of c_z floats) stay
 * in cache from one op to the next (bench folds: L 256 7% faster than in
 * 64 rows, L 128 faster than in 64, as fast as in 16), and beyond, a
 * quarter of the rows (a power of two), so that the triangle
 * multiplication, which streams its whole second projection once per
 * chunk, makes few passes.  Elsewhere 0: unchunked. */
static int sched_cache_chunk(const sched_t *s, int L)
{
	int n = SCHED_CPU_CHUNK;

	for (int i = 0; i < s->ndev; i++)
		if (!s->dev[i].be->host_mem) return 0;
	while (L > 256 && 4 * (2 * n) <= L) n *= 2;
	return n < L ? n : 0;
}

int sched_first_chunk(const sched_t *s, int len)
{
	return s->o.chunk ? s->o.chunk : sched_cache_chunk(s, len);
}

/* the stop flag is up */
static int sched_stopped(const sched_t *s)
{
	return s->o.stop && *s->o.stop;
}

/* Make item i fit some device: from chunk c0 on (0: auto), smaller chunks,
 * then two halves (appended), recursively; a waiting item is queued.  0,
 * 1 when the record has failed (item i or one of its halves: its other
 * waiting items fail with it, sched_abandon), or -1 out of memory.  The
 * stop flag is seen between dry runs.  Lock held (or before the run). */
static int sched_place(sched_t *s, int i, int c0)
{
	sched_item_t *it = &s->it[i];
	int64_t q = -1;
	int L = it->len, floor = 0;

	wq_take(&s->wq, i);   /* its quota changes */
	if (s->nlive == 0 || sched_stopped(s)) {   /* nothing smaller would help */
		it->state = SCHED_FAILED;
		sched_item_end(it);
		if (s->nlive == 0) snprintf(it->reason, sizeof it->reason, "no device left: %s", s->lost);
		else snprintf(it->reason, sizeof it->reason, "interrupted before it ran");
		it->unrun = 1;
		sched_abandon(s, i);
		return 1;
	}
	if (c0 == 0) c0 = sched_cache_chunk(s, L);
	for (int c = c0; c >= 0; c = sched_next_chunk(c, L)) {
		if (sched_stopped(s)) return sched_place(s, i, c);   /* fails it */
		sched_say(s, it, c);
		if (sched_best_fit(s, it, c, &q, &floor) >= 0) {
			it->chunk = c;
			it->quota = q;
			it->state = SCHED_WAIT;
			wq_put(&s->wq, i, q, L);
			return 0;
		}
	}
	if (s->o.no_split || L < 2) {
		it->state = SCHED_FAILED;
		snprintf(it->reason, sizeof it->reason,
		         "needs %s%lld bytes at the smallest chunk, more than any device's budget%s",
		         floor ? "at least " : "", (long long)q, s->o.no_split ? " (--no-split)" : "");
		sched_abandon(s, i);
		return 1;
	}
	return sched_split(s, i);   /* the halves keep the numbering through start */
}

sched_t *sched_init(sched_dev_t *devs, int ndev, const sched_opt_t *o)
{
	sched_t *s = calloc(1, sizeof *s);

	if (!s) return NULL;
	if (!(s->gone = calloc(ndev > 0 ? ndev : 1, sizeof *s->gone))) {
		free(s);
		return NULL;
	}
	s->dev = devs;
	s->ndev = ndev;
	s->nlive = ndev;
	s->o = *o;
	s->tail = &s->head;
	wq_init(&s->wq);
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	pthread_mutex_init(&s->out, NULL);
	/* a table's quota holds at the chunk it was asked for; auto on the
	 * CPU first tries a cache chunk (sched_cache_chunk), where it is not */
	if (o->qt && o->chunk == 0 && sched_cache_chunk(s, SCHED_CPU_CHUNK + 1) > 0)
		log_warn("quota table: not used on the CPU with --chunk-size 0 for sequences of more "
		         "than %d residues (auto chunks them; their quotas are planned); give "
		         "--chunk-size to use it", SCHED_CPU_CHUNK);
	return s;
}

int sched_auto_workers(sched_t *s)
{
	for (int di = 0; di < s->ndev; di++) {
		sched_dev_t *d = &s->dev[di];
		int64_t count[BUCKET_MAX + 1] = { 0 }, qmax[BUCKET_MAX + 1] = { 0 }, q = 0, w;
		/* the CPU: host memory with no driver figures (a sim:SIZE device,
		 * host memory behind a card's budget, counts as a card) */
		int cpu = d->be->host_mem && !be_supports(d->be, BE_OP_MEM_INFO);
		int b = -1, cap = cpu ? 1 : SCHED_AUTO_CAP;
		char lab[32];

		if (d->workers > 0) continue;   /* forced (--workers N, --dump-tensors) */
		/* per bucket, the waiting items that fit d and their largest quota;
		 * then the commonest bucket (the smaller on a tie) */
		int queued = 0;
		for (int i = 0; i < s->n; i++) {
			const sched_item_t *it = &s->it[i];
			int k = bucket_of(NULL, it->tok.L);
			queued += it->state == SCHED_WAIT;
			if (it->state != SCHED_WAIT || it->quota > d->budget || k < 0) continue;
			count[k]++;
			if (it->quota > qmax[k]) qmax[k] = it->quota;
		}
		for (int k = 0; k <= BUCKET_MAX; k++)
			if (count[k] > 0 && (b < 0 || count[k] > count[b])) b = k;
		if (b >= 0) q = qmax[b];
		w = q > 0 ? d->budget / q : 1;
		d->workers = (int)(w < 1 ? 1 : w > cap ? cap : w);
		if (q > 0)
			log_info("device %s: %d worker(s) (auto): bucket %s, %lld item(s), quota %.1f MiB, "
			         "budget %.1f MiB (at most %d on %s)", d->be->name, d->workers,
			         bucket_label(NULL, b, lab, sizeof lab), (long long)count[b],
			         q / 1048576.0, d->budget / 1048576.0, cap,
			         cpu ? "the CPU" : "a card");
		else if (queued)
			log_info("device %s: 1 worker (auto): no queued item fits its budget %.2f GiB",
			         d->be->name, d->budget / 1073741824.0);
		else
			log_info("device %s: 1 worker (auto): nothing is queued", d->be->name);
	}
	return 0;
}

void sched_free(sched_t *s)
{
	if (!s) return;
	while (s->head) {
		sched_ev_t *e = s->head;
		s->head = e->next;
		free(e->v);
		free(e);
	}
	for (int i = 0; i < s->n; i++) {
		sched_item_end(&s->it[i]);
		free(s->it[i].seq);
	}
	free(s->it);
	free(s->next);
	free(s->last);
	free(s->memo);
	wq_free(&s->wq);
	free(s->gone);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->out);
	free(s);
}

int sched_add(sched_t *s, int rec, const char *seq)
{
	int i = s->n, rc, parts = 0;

	if (!sched_push(s, rec, seq, 0, (int)strlen(seq))) return -1;
	s->t_place = s->t_said = sched_now();
	rc = sched_place(s, i, s->o.chunk);
	s->t_place = 0;
	if (rc == 0 && s->it[i].state == SCHED_SPLIT) {
		for (int k = s->last[rec]; k >= 0 && k >= i; k = s->next[k]) parts += s->it[k].state == SCHED_WAIT;
		log_info("record %d: %d residues fit no device whole: %d fragments", rec, s->it[i].len, parts);
	}
	return rc < 0 ? -1 : 0;
}

int sched_count(const sched_t *s) { return s->n; }
const sched_item_t *sched_item(const sched_t *s, int i) { return &s->it[i]; }

int sched_keeps(const sched_dev_t *d)
{
	return be_supports(d->be, BE_OP_MEM_INFO);
}

/* what a worker holding `hold` (the largest quota it ran since its arena
 * was last released) adds to its device's grant to run an item of quota q */
static int64_t sched_extra(int64_t hold, int64_t q)
{
	return q > hold ? q - hold : 0;
}

int sched_pick(sched_t *s, sched_dev_t *d, int64_t hold, int *any)
{
	int64_t least = wq_least(&s->wq), free = d->budget - d->granted, lim;

	/* sched_extra(hold, q) <= free: q <= hold + free, given free >= 0 */
	*any = least >= 0 && least <= d->budget;
	if (!*any || free < 0) return -1;
	lim = hold + free < d->budget ? hold + free : d->budget;
	return wq_pick(&s->wq, lim);
}

void sched_start(sched_t *s, int i)
{
	wq_take(&s->wq, i);
	s->it[i].state = SCHED_RUN;
}

int sched_hold(sched_dev_t *d, sched_item_t *it, int any, int64_t *hold)
{
	if (it) {
		int64_t x = sched_extra(*hold, it->quota);
		d->granted += x;
		if (d->granted > d->seen) d->seen = d->granted;
		*hold += x;
		return 0;
	}
	if (!any || *hold == 0) return 0;
	d->granted -= *hold;
	*hold = 0;
	return 1;
}

static int sched_cmp_start(const void *a, const void *b)
{
	const sched_item_t *x = a, *y = b;
	return (x->start > y->start) - (x->start < y->start);
}

int sched_outcome(const sched_t *s, int rec, sched_item_t **v)
{
	int n = 0;

	*v = NULL;
	if (rec < 0 || rec >= s->nrec) return 0;
	for (int i = s->last[rec]; i >= 0; i = s->next[i])
		if (s->it[i].state != SCHED_SPLIT) n++;
	if (n == 0) return 0;
	if (!(*v = malloc(n * sizeof **v))) return -1;
	n = 0;
	for (int i = s->last[rec]; i >= 0; i = s->next[i]) {
		if (s->it[i].state == SCHED_SPLIT) continue;
		(*v)[n] = s->it[i];
		(*v)[n].seq = NULL;   /* the copy owns nothing */
		(*v)[n].plan = NULL;
		memset(&(*v)[n++].tok, 0, sizeof s->it[i].tok);
	}
	qsort(*v, n, sizeof **v, sched_cmp_start);
	return n;
}

int64_t sched_granted(sched_t *s, int dev)
{
	int64_t g;

	pthread_mutex_lock(&s->lock);
	g = s->dev[dev].seen;
	pthread_mutex_unlock(&s->lock);
	return g;
}

int sched_running(sched_t *s, int *rec, double *secs)
{
	int n = 0, first = -1;

	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < s->n; i++) {
		if (s->it[i].state != SCHED_RUN) continue;
		if (!n++ || s->it[i].t0 < s->it[first].t0) first = i;
	}
	if (n) {
		*rec = s->it[first].rec;
		*secs = sched_now() - s->t_start - s->it[first].t0;
	}
	pthread_mutex_unlock(&s->lock);
	return n;
}

/* queue an event for the output step.  Lock held. */
static void sched_queue(sched_t *s, sched_ev_t *e)
{
	e->next = NULL;
	*s->tail = e;
	s->tail = &e->next;
}

/* queue the run.jsonl line of a fold that ended.  Lock held. */
static void sched_log_fold(sched_t *s, const sched_item_t *it, const mem_fig_t *fig,
                           const char *status)
{
	sched_ev_t *e;

	if (!s->o.jsonl) return;
	if (!(e = calloc(1, sizeof *e))) {
		log_error("record %d: out of memory; its fold is missing from run.jsonl", it->rec);
		return;
	}
	e->it = *it;
	e->it.seq = NULL;
	e->status = status;
	if (fig) {
		e->fig = *fig;
		e->has_fig = 1;
	}
	sched_queue(s, e);
}

/* queue the settled callback of record rec.  Lock held. */
static void sched_log_settled(sched_t *s, int rec)
{
	sched_ev_t *e;

	if (!s->o.settled) return;
	if (!(e = calloc(1, sizeof *e)) || (e->n = sched_outcome(s, rec, &e->v)) < 0) {
		/* the caller finishes it after the run (its row is not set) */
		log_error("record %d: out of memory; finished after the run", rec);
		free(e);
		return;
	}
	e->it.rec = rec;
	sched_queue(s, e);
}

/* write one event.  No lock held: the output step. */
static void sched_write(sched_t *s, const sched_ev_t *e)
{
	const sched_item_t *it = &e->it;

	if (!e->status) {
		s->o.settled(s->o.ctx, s, it->rec, e->v, e->n);
		return;
	}
	fprintf(s->o.jsonl, "{\"event\":\"fold\",\"record\":%d,\"start\":%d,\"length\":%d,"
	        "\"device\":\"%s\",\"worker\":%d,\"chunk\":%d,\"quota\":%lld,\"t0\":%.4f,"
	        "\"t1\":%.4f,\"status\":\"%s\"", it->rec, it->start, it->len,
	        s->dev[it->dev].be->name, it->worker, it->chunk, (long long)it->quota, it->t0, it->t1,
	        e->status);
	if (e->has_fig)
		fprintf(s->o.jsonl, ",\"predicted\":%zu,\"allocated\":%zu,\"reserved\":%zu,"
		        "\"device_used\":%lld,\"growth\":%lld", e->fig.predicted, e->fig.allocated,
		        e->fig.reserved, (long long)e->fig.device_used, (long long)e->fig.growth);
	fputs("}\n", s->o.jsonl);
	fflush(s->o.jsonl);
}

/* The output step (the last, ordered step of a pipeline): unless another
 * thread holds it, take it and write the queued events oldest first until
 * none is left.  Called with no lock held.  The role is given up under the
 * scheduler's lock in the same breath as the queue is seen empty, so an
 * event queued later finds it free: no event is left behind. */
static void sched_drain(sched_t *s)
{
	if (pthread_mutex_trylock(&s->out) != 0) return;   /* its holder writes ours too */
	for (;;) {
		sched_ev_t *e;
		pthread_mutex_lock(&s->lock);
		if (!(e = s->head)) {
			pthread_mutex_unlock(&s->out);
			pthread_mutex_unlock(&s->lock);
			return;
		}
		if (!(s->head = e->next)) s->tail = &s->head;
		pthread_mutex_unlock(&s->lock);
		sched_write(s, e);
		free(e->v);
		free(e);
	}
}

/* record rec has no item waiting or running */
static int sched_settled(const sched_t *s, int rec)
{
	for (int i = s->last[rec]; i >= 0; i = s->next[i])
		if (s->it[i].state == SCHED_WAIT || s->it[i].state == SCHED_RUN) return 0;
	return 1;
}

/* Device di is lost (a sticky error poisoned its context; why: the fold's
 * error): its workers take no more work, and every item waiting -- the
 * caller's own, set back to waiting, among them -- is placed again over
 * the devices left, or failed with the reason when none is left.  One log
 * line; the records this settles are queued.  Lock held. */
static void sched_retire(sched_t *s, int di, const char *why)
{
	int n = s->n, maxrec = 0, nwait = 0;
	unsigned char *was = NULL, *open = NULL;

	s->gone[di] = 1;
	s->nlive--;
	snprintf(s->lost, sizeof s->lost, "%s lost (%s)", s->dev[di].be->name, why);
	for (int i = 0; i < n; i++) {
		if (s->it[i].rec > maxrec) maxrec = s->it[i].rec;
		nwait += s->it[i].state == SCHED_WAIT;
	}
	log_error("device %s retired: %s; %d item%s waiting %s", s->dev[di].be->name, why, nwait,
	          nwait == 1 ? "" : "s", s->nlive ? "go to the other devices" : "fail: no device left");
	/* was[i]: item i is placed again here; open[rec]: rec has an item
	 * waiting or running after it (no allocation: settled per item) */
	was = calloc(n > 0 ? (size_t)n : 1, 1);
	open = calloc((size_t)maxrec + 1, 1);
	for (int i = 0; i < n; i++) {
		if (s->it[i].state != SCHED_WAIT) continue;
		if (was) was[i] = 1;
		if (sched_place(s, i, s->o.chunk) < 0) s->it[i].state = SCHED_FAILED;
	}
	if (!was || !open) {
		for (int i = 0; i < n; i++)
			if (s->it[i].state == SCHED_FAILED && sched_settled(s, s->it[i].rec))
				sched_log_settled(s, s->it[i].rec);
		goto done;
	}
	for (int i = 0; i < s->n; i++)
		if (s->it[i].state == SCHED_WAIT || s->it[i].state == SCHED_RUN) open[s->it[i].rec] = 1;
	for (int i = 0; i < s->n; i++) {
		int rec = s->it[i].rec;
		if ((i < n && !was[i]) || s->it[i].state != SCHED_FAILED || open[rec]) continue;
		open[rec] = 1;   /* logged once */
		sched_log_settled(s, rec);
	}
done:
	free(was);
	free(open);
}

/* model_fold with the figures measured around it (scheduler.h) */
int sched_fold(const model_t *m, const tok_t *t, const model_run_t *r, const model_plan_t *p,
               model_out_t *out, mem_fig_t *fig, char *err, size_t errcap)
{
	int cpu = !be_supports(m->be, BE_OP_MEM_INFO), rc;
	int64_t before = -1;

	memset(fig, 0, sizeof *fig);
	fig->device_used = fig->growth = -1;
	if (cpu && sysmem_peak_reset() == 0) before = sysmem_rss_anon();
	rc = model_fold(m, t, r, p, out, err, errcap);
	if (rc < 0) return rc;
	fig->predicted = out->arena + m->be->workspace;
	fig->allocated = out->exec_peak_live;
	fig->reserved = out->exec_arena + m->be->workspace;
	if (cpu) {
		/* peak - (rss - anon) = the anonymous part at the peak */
		int64_t peak = sysmem_rss_peak(), rss = sysmem_rss(), anon = sysmem_rss_anon();
		fig->device_used = peak;
		if (peak >= 0 && rss >= 0 && anon >= 0 && before >= 0)
			fig->growth = peak - (rss - anon) - before;
	} else {
		fig->device_used = out->device_used;
	}
	return 0;
}

/* one worker: its device and number, the device's model run on the
 * worker's own backend where the device has per-worker ones (CUDA: stream,
 * cuBLAS handle), its kept arena and the grant it holds for it */
typedef struct {
	int     di, wi;
	model_t m;
	be_t   *wbe;
	arena_t arena;
	int64_t hold;
} sched_wk_t;

static void sched_wk_init(sched_t *s, sched_wk_t *w, int di, int wi)
{
	sched_dev_t *d = &s->dev[di];

	w->di = di;
	w->wi = wi;
	w->m = d->model;
	w->wbe = be_supports(d->be, BE_OP_WORKER) ? d->be->worker(d->be) : NULL;
	w->hold = 0;
	if (w->wbe) w->m.be = w->wbe;
	else if (be_supports(d->be, BE_OP_WORKER)) log_warn("device %s: worker %d shares the device's stream", d->be->name, wi);
	arena_init(&w->arena, w->m.be);
}

/* the worker's grant, arena and backend given back */
static void sched_wk_free(sched_t *s, sched_wk_t *w)
{
	pthread_mutex_lock(&s->lock);
	s->dev[w->di].granted -= w->hold;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	arena_free(&w->arena);
	be_free(w->wbe);
}

/* What the end of item i's fold on device di makes of it (rc: the fold's
 * status, err its error, fig its figures when ok): ok (its record settled
 * when it was the last), out of memory (a smaller chunk, else halves, else
 * failed), device lost (the device retired, the item placed again) or
 * failed; its run.jsonl line and a settled record queued.  Lock held. */
static void sched_fold_ended(sched_t *s, int i, int di, int rc, const char *err,
                             const mem_fig_t *fig)
{
	sched_dev_t *d = &s->dev[di];
	sched_item_t *it = &s->it[i];
	int retired = 0;

	if (rc == 0) {
		/* the record's files are final before its fold is logged as ok */
		it->state = SCHED_FOLDED;
		sched_item_end(it);
		if (sched_settled(s, it->rec)) sched_log_settled(s, it->rec);
		sched_log_fold(s, &s->it[i], fig, "ok");
	} else if (rc == STATUS_OOM) {
		/* out of memory: an event; smaller chunk, then halves */
		log_warn("record %d (residues %d-%d) on %s: %s; retrying smaller", it->rec,
		         it->start + 1, it->start + it->len, d->be->name, err);
		sched_log_fold(s, it, NULL, "oom");
		int c = sched_next_chunk(it->chunk, it->len);
		if (c >= 0) {
			it->state = SCHED_WAIT;
			if (sched_place(s, i, c) < 0) s->it[i].state = SCHED_FAILED;
		} else if (s->o.no_split || it->len < 2) {
			it->state = SCHED_FAILED;
			sched_item_end(it);
			snprintf(it->reason, sizeof it->reason, "%s", err);
		} else if (sched_split(s, i) < 0) {
			log_error("record %d: cannot queue its halves", s->it[i].rec);
		}
	} else if (rc == STATUS_DEVICE) {
		/* not this record's fault: it goes back with the rest */
		sched_log_fold(s, it, NULL, "lost");
		it->state = SCHED_WAIT;
		if (!s->gone[di]) {
			sched_retire(s, di, err);
			retired = 1;
		} else if (sched_place(s, i, s->o.chunk) < 0) {
			s->it[i].state = SCHED_FAILED;
		}
	} else {
		if (rc == STATUS_PLAN)
			log_error("record %d (residues %d-%d) on %s: %s: a bug, please report it",
			          it->rec, it->start + 1, it->start + it->len, d->be->name, err);
		it->state = SCHED_FAILED;
		sched_item_end(it);
		snprintf(it->reason, sizeof it->reason, "%s", err);
		sched_log_fold(s, it, NULL, "failed");
	}
	it = &s->it[i];
	if (it->state == SCHED_FAILED && !retired && sched_settled(s, it->rec))
		sched_log_settled(s, it->rec);
}

/* Worker w takes items until nothing more will come to it, or, once, for
 * one turn: an item run, its arena given back, or nothing it can do now
 * (where it would wait).  Returns 1 when it ran an item or gave its arena
 * back. */
static int sched_worker(sched_t *s, sched_wk_t *w, int once)
{
	const int di = w->di, wi = w->wi;
	sched_dev_t *d = &s->dev[di];
	int did = 0;

	pthread_mutex_lock(&s->lock);
	while (!once || !did) {
		int any, i;
		if (*s->o.stop || s->gone[di]) break;
		i = sched_pick(s, d, w->hold, &any);
		if (i < 0) {
			if (!any && s->running == 0) break;   /* nothing will ever come */
			if (sched_hold(d, NULL, any, &w->hold)) {
				/* short of memory: the kept arena goes back first */
				pthread_mutex_unlock(&s->lock);
				arena_release(&w->arena);
				pthread_mutex_lock(&s->lock);
				pthread_cond_broadcast(&s->cond);
				did = 1;
				continue;
			}
			if (once) break;
			pthread_cond_wait(&s->cond, &s->lock);
			continue;
		}
		sched_item_t *it = &s->it[i];
		sched_start(s, i);
		it->dev = di;
		it->worker = wi;
		it->t0 = sched_now() - s->t_start;
		sched_hold(d, it, 1, &w->hold);
		s->running++;
		/* the item's encoding and plan stay put while it runs; the item
		 * array may move (another worker splitting): a copy for `done` */
		const sched_item_t snap = *it;
		const tok_t t = it->tok;
		const model_plan_t plan = it->plan[di];
		model_dump_t dump;
		model_run_t run = sched_run_of(s, it, it->chunk, &dump);
		pthread_mutex_unlock(&s->lock);
		if (sched_keeps(d)) run.arena = &w->arena;

		model_out_t out = { 0 };
		mem_fig_t fig;
		char err[256] = "";
		double t0 = sched_now();
		int rc = sched_fold(&w->m, &t, &run, &plan, &out, &fig, err, sizeof err);
		if (rc == 0 && s->o.folded(s->o.ctx, &snap, d, &t, &out, &fig, sched_now() - t0, err,
		                         sizeof err) < 0)
			rc = -1;
		model_out_free(&out);

		pthread_mutex_lock(&s->lock);
		it = &s->it[i];   /* the array may have grown */
		it->t1 = sched_now() - s->t_start;
		if (!sched_keeps(d) || !w->arena.base) {   /* none kept (or refused, lost) */
			d->granted -= w->hold;
			w->hold = 0;
		}
		sched_fold_ended(s, i, di, rc, err, &fig);
		s->running--;
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
		sched_drain(s);
		pthread_mutex_lock(&s->lock);
		did = 1;
	}
	pthread_mutex_unlock(&s->lock);
	return did;
}

/* worker wi of device di from its start to its end (a thread of the team) */
static void sched_worker_run(sched_t *s, int di, int wi)
{
	sched_wk_t w;

	sched_wk_init(s, &w, di, wi);
	sched_worker(s, &w, 0);
	sched_wk_free(s, &w);
}

#ifndef _OPENMP
/* Without OpenMP the one thread serves every device's workers in turn, a
 * turn each (sched_worker once), until a round in which none of them had
 * anything to do.  0, or -1 out of memory. */
static int sched_serve(sched_t *s, int total)
{
	sched_wk_t *w = calloc((size_t)total, sizeof *w);
	int more = 1;

	if (!w) return -1;
	for (int di = 0, k = 0; di < s->ndev; di++)
		for (int j = 0; j < s->dev[di].workers; j++, k++) sched_wk_init(s, &w[k], di, k);
	while (more) {
		more = 0;
		for (int k = 0; k < total; k++) more |= sched_worker(s, &w[k], 1);
	}
	for (int k = 0; k < total; k++) sched_wk_free(s, &w[k]);
	free(w);
	return 0;
}
#endif

int sched_run(sched_t *s)
{
	int total = 0, stopped = 0;

	s->t_start = sched_now();
	for (int i = 0; i < s->ndev; i++) {
		if (s->dev[i].workers < 1) s->dev[i].workers = 1;   /* auto never resolved */
		total += s->dev[i].workers;
	}
	for (int i = 0; i < s->ndev && s->o.jsonl; i++) {   /* the final counts */
		fprintf(s->o.jsonl, "{\"event\":\"device\",\"device\":\"%s\",\"budget\":%lld,"
		        "\"overhead\":%lld,\"workers\":%d}\n", s->dev[i].be->name,
		        (long long)s->dev[i].budget, (long long)s->dev[i].overhead, s->dev[i].workers);
		fflush(s->o.jsonl);
	}
	if (total <= 1) {
		sched_worker_run(s, 0, 0);
	} else {
#ifdef _OPENMP
		/* The workers are OpenMP threads, and each runs its ops' parallel
		 * loops on a team of its own: the threads (--threads) shared out
		 * evenly, at least one each (two levels of parallelism). */
		int share = omp_get_max_threads() / total;
		omp_set_max_active_levels(2);
		#pragma omp parallel num_threads(total)
		{
			int w = omp_get_thread_num(), di = 0;
			omp_set_num_threads(share > 1 ? share : 1);
			int k = w;
			while (di < s->ndev && k >= s->dev[di].workers) k -= s->dev[di++].workers;
			if (di < s->ndev) sched_worker_run(s, di, w);
		}
#else
		if (sched_serve(s, total) < 0) log_error("scheduler: out of memory for %d workers", total);
#endif
	}
	sched_drain(s);   /* what the last workers queued */
	for (int i = 0; i < s->n; i++)
		if (s->it[i].state == SCHED_WAIT || s->it[i].state == SCHED_RUN) {
			wq_take(&s->wq, i);
			s->it[i].state = SCHED_FAILED;
			snprintf(s->it[i].reason, sizeof s->it[i].reason,
			         *s->o.stop ? "interrupted before it ran" : "fits no device");
			s->it[i].unrun = *s->o.stop != 0;
			stopped = 1;
		}
	return stopped && *s->o.stop ? -1 : 0;
}
