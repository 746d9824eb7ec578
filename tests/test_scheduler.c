/* test_scheduler.c - the scheduler on constructed inputs:
 *  - a record is encoded and planned once: placing it encodes it and plans
 *    it on each device, and folding it neither encodes nor plans again
 *    (tok_encode and fwd_plan_begin are counted by wrapping them at link
 *    time: -Wl,--wrap);
 *  - sched_plan: on two devices of different budgets every record is
 *    started exactly once, on a device whose budget holds its quota, no
 *    device ever holds more quota than its budget, and the plan leaves
 *    every item waiting;
 *  - the wait queue (waitq.h) picks what a scan of every waiting item
 *    would, on random puts, takes and limits;
 *  - a fold where no record fits any device ends after a dry run per
 *    length and chunk, with few items per record, not one per residue;
 *  - a record of 1,048,576 residues is planned without a dry run of any
 *    length whose pair representation alone is over the budget, in
 *    O(log L) dry runs;
 *  - the stop flag raised during a dry run ends planning: no more dry
 *    runs, the records not placed failed as interrupted. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/devices.h"
#include "compute/forward.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "model/weights.h"
#include "sched/scheduler.h"
#include "sched/waitq.h"
#include "xorshift.h"

#define WEIGHTS TEST_DATA "/tiny_a/weights.safetensors"

/* ---- counting wrappers (the linker sends every call from another object
 * file here) ---- */

static int n_encode, n_plan;
/* the dry runs: at most plan_cap (0: any number), none of more than
 * plan_max_L residues (0: any); after stop_after of them, *stop_flag = 1 */
static int plan_cap, plan_max_L, stop_after;
static volatile sig_atomic_t *stop_flag;

int  __real_tok_encode(tok_t *t, const char *seq, const hparams_t *c);
void __real_fwd_plan_begin(fwd_t *fx, be_t *be);
int  __real_model_plan(const model_t *m, const tok_t *t, const model_run_t *r, model_plan_t *p);

int __wrap_tok_encode(tok_t *t, const char *seq, const hparams_t *c)
{
	n_encode++;
	return __real_tok_encode(t, seq, c);
}

void __wrap_fwd_plan_begin(fwd_t *fx, be_t *be)
{
	n_plan++;
	if (plan_cap && n_plan > plan_cap) fail_msg("more than %d dry runs", plan_cap);
	if (stop_after && n_plan == stop_after) *stop_flag = 1;   /* a signal mid-planning */
	return __real_fwd_plan_begin(fx, be);
}

int __wrap_model_plan(const model_t *m, const tok_t *t, const model_run_t *r, model_plan_t *p)
{
	if (plan_max_L && t->L > plan_max_L)
		fail_msg("a dry run of %d residues, whose pair representation is over the budget", t->L);
	return __real_model_plan(m, t, r, p);
}

/* ---- fixtures ---- */

static const char *seqs[] = { "MKTAYIAKQRQISFVKSHFSRQ", "ACDEFGHIKLMNPQRSTVWYACDEFGHIKLMNPQ",
                              "MKTAYIAKQR:GSHMSELKNV", "GGSAGSAGSAGSAGSAGSAGSAGSAGSAGSAGSAGSAGSAGSAGSAGS" };
#define NSEQ ((int)(sizeof seqs / sizeof *seqs))

typedef struct {
	weights_t    *w;
	sched_dev_t   dev[2];
	int           ndev;
	volatile sig_atomic_t stop;
	int           done[NSEQ];
} fx_env_t;

static void env_open(fx_env_t *e, int ndev, const int64_t *budget)
{
	memset(e, 0, sizeof *e);
	assert_non_null(e->w = weights_open(WEIGHTS));
	e->ndev = ndev;
	for (int i = 0; i < ndev; i++) {
		sched_dev_t *d = &e->dev[i];
		assert_non_null(d->spec = strdup("cpu"));
		assert_non_null(d->be = dev_open("cpu", 1));
		assert_int_equal(model_load(&d->model, e->w, d->be, 0), 0);
		d->loaded = 1;
		d->workers = 1;
		d->budget = budget[i];
	}
}

static void env_close(fx_env_t *e)
{
	weights_close(e->w);   /* before the backends its buffers live on */
	for (int i = 0; i < e->ndev; i++) {
		model_free(&e->dev[i].model);
		be_free(e->dev[i].be);
		free(e->dev[i].spec);
	}
}

static int count_done(void *ctx, const sched_item_t *it, const sched_dev_t *d, const tok_t *t,
                      const model_out_t *out, const mem_fig_t *fig, double secs, char *reason,
                      size_t cap)
{
	fx_env_t *e = ctx;
	assert_int_equal(out->L, t->L);
	e->done[it->rec]++;
	return 0;
}

static sched_opt_t env_opt(fx_env_t *e)
{
	return (sched_opt_t){ .passes = 1, .safety = 1.0, .stop = &e->stop, .folded = count_done,
	                      .ctx = e };
}

/* ---- tests ---- */

static void test_plan_once(void **state)
{
	fx_env_t e;
	env_open(&e, 1, (int64_t[]){ (int64_t)1 << 32 });
	sched_opt_t o = env_opt(&e);
	sched_t *s = sched_init(e.dev, e.ndev, &o);
	assert_non_null(s);

	n_encode = n_plan = 0;
	for (int i = 0; i < NSEQ; i++) assert_int_equal(sched_add(s, i, seqs[i]), 0);
	assert_int_equal(n_encode, NSEQ);
	assert_int_equal(n_plan, NSEQ);     /* one device, one chunk tried */
	assert_int_equal(sched_run(s), 0);
	assert_int_equal(n_encode, NSEQ);   /* the folds encoded nothing */
	assert_int_equal(n_plan, NSEQ);     /* and planned nothing */
	for (int i = 0; i < NSEQ; i++) {
		assert_int_equal(e.done[i], 1);
		assert_int_equal(sched_item(s, i)->state, SCHED_FOLDED);
	}
	sched_free(s);
	env_close(&e);
}

/* the third table of sched_plan: start device worker record residues chunk quota */
static void test_sched_plan(void **state)
{
	fx_env_t e;
	int64_t q[NSEQ], qmax = 0, qmin = INT64_MAX;

	/* the quotas, from a one-device scheduler with room for everything */
	env_open(&e, 1, (int64_t[]){ (int64_t)1 << 32 });
	sched_opt_t o = env_opt(&e);
	sched_t *s = sched_init(e.dev, e.ndev, &o);
	for (int i = 0; i < NSEQ; i++) {
		assert_int_equal(sched_add(s, i, seqs[i]), 0);
		q[i] = sched_item(s, i)->quota;
		if (q[i] > qmax) qmax = q[i];
		if (q[i] < qmin) qmin = q[i];
	}
	sched_free(s);
	env_close(&e);
	assert_true(qmin < qmax);

	/* device 0 holds only the smallest quota, device 1 everything */
	int64_t budget[2] = { qmin, qmax };
	env_open(&e, 2, budget);
	o = env_opt(&e);
	assert_non_null(s = sched_init(e.dev, e.ndev, &o));
	for (int i = 0; i < NSEQ; i++) assert_int_equal(sched_add(s, i, seqs[i]), 0);

	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	assert_non_null(f);
	assert_int_equal(sched_plan(s, f, 1), 0);
	fclose(f);

	int started[NSEQ] = { 0 }, tables = 0, rows = 0;
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		char dev[64];
		int rec, chunk;
		long long quota, budget_row, peak;
		int workers;
		double at;
		if (!strncmp(line, "device\t", 7) || !strncmp(line, "start\t", 6)) {
			tables++;
			continue;
		}
		if (tables == 1 && sscanf(line, "%63s %lld %d %lld", dev, &budget_row, &workers, &peak) == 4) {
			assert_true(peak <= budget_row);   /* never more quota at once than the budget */
			continue;
		}
		if (tables == 3 && sscanf(line, "%lf %63s %*d %d %*d-%*d %d %lld", &at, dev, &rec, &chunk,
		                          &quota) == 5) {
			assert_true(rec >= 0 && rec < NSEQ);
			started[rec]++;
			assert_int_equal(quota, q[rec]);
			rows++;
		}
	}
	assert_int_equal(tables, 3);
	assert_int_equal(rows, NSEQ);
	for (int i = 0; i < NSEQ; i++) {
		assert_int_equal(started[i], 1);
		assert_int_equal(sched_item(s, i)->state, SCHED_WAIT);
	}
	free(text);
	sched_free(s);
	env_close(&e);
}

/* the wait queue against the rule it stands for: of the queued items
 * whose quota is <= lim, the longest, the first in index order on a tie */
static void test_waitq_random(void **state)
{
	enum { N = 400, STEPS = 20000 };
	int64_t quota[N];
	int len[N], in[N] = { 0 };
	uint64_t rng = 2026;
	wq_t q;

	wq_init(&q);
	assert_int_equal(wq_reserve(&q, N), 0);
	for (int step = 0; step < STEPS; step++) {
		int i = (int)(xs_next(&rng) % N), op = (int)(xs_next(&rng) % 3);
		if (op == 0 && !in[i]) {   /* few distinct values: many ties */
			quota[i] = (int64_t)(xs_next(&rng) % 50) * 1000;
			len[i] = 1 + (int)(xs_next(&rng) % 30);
			wq_put(&q, i, quota[i], len[i]);
			in[i] = 1;
		} else if (op == 1) {
			wq_take(&q, i);
			in[i] = 0;
		}
		int64_t lim = (int64_t)(xs_next(&rng) % 52) * 1000 - 1000, least = -1;
		int want = -1, count = 0;
		for (int k = 0; k < N; k++) {
			if (!in[k]) continue;
			count++;
			if (least < 0 || quota[k] < least) least = quota[k];
			if (quota[k] <= lim && (want < 0 || len[k] > len[want])) want = k;
		}
		assert_int_equal(wq_pick(&q, lim), want);
		assert_int_equal(wq_least(&q), least);
		assert_int_equal(q.count, count);
	}
	wq_free(&q);
}

static int never_done(void *ctx, const sched_item_t *it, const sched_dev_t *d, const tok_t *t,
                      const model_out_t *out, const mem_fig_t *fig, double secs, char *reason,
                      size_t cap)
{
	fail_msg("record %d folded", it->rec);
	return -1;
}

/* n random sequences of 5..40 residues, each s[i] malloc'ed */
static char **random_seqs(int n, uint64_t seed)
{
	char **s = malloc(n * sizeof *s);
	assert_non_null(s);
	for (int i = 0; i < n; i++) {
		int L = 5 + (int)(xs_next(&seed) % 36);
		assert_non_null(s[i] = malloc(L + 1));
		for (int k = 0; k < L; k++) s[i][k] = "ACDEFGHIKLMNPQRSTVWY"[xs_next(&seed) % 20];
		s[i][L] = 0;
	}
	return s;
}

/* the quota of one residue on a device with room for anything */
static int64_t one_residue_quota(void)
{
	fx_env_t e;
	env_open(&e, 1, (int64_t[]){ (int64_t)1 << 32 });
	sched_opt_t o = env_opt(&e);
	sched_t *s = sched_init(e.dev, e.ndev, &o);
	assert_int_equal(sched_add(s, 0, "A"), 0);
	int64_t q = sched_item(s, 0)->quota;
	sched_free(s);
	env_close(&e);
	return q;
}

/* 20,000 records on a device too small for even one residue: every record
 * fails after a dry run per length and chunk (halving stops at its first
 * fragment that fits nowhere), the run ends at once */
static void test_nofit_prompt(void **state)
{
	enum { N = 20000 };
	fx_env_t e;
	char **seq = random_seqs(N, 77);
	int64_t budget = one_residue_quota() - 1;

	env_open(&e, 1, &budget);
	sched_opt_t o = env_opt(&e);
	o.folded = never_done;
	sched_t *s = sched_init(e.dev, e.ndev, &o);
	assert_non_null(s);
	n_plan = 0;
	plan_cap = 1000;   /* lengths 1..40, a few chunks each */
	for (int i = 0; i < N; i++) assert_int_equal(sched_add(s, i, seq[i]), 0);
	plan_cap = 0;
	/* a fragment per halving down to one residue: log2(40) + 2 per record */
	assert_true(sched_count(s) <= 8 * N);
	assert_int_equal(sched_run(s), 0);
	for (int i = 0; i < N; i++) {
		sched_item_t *v;
		int n = sched_outcome(s, i, &v);
		assert_true(n >= 1);
		for (int k = 0; k < n; k++) assert_int_equal(v[k].state, SCHED_FAILED);
		assert_non_null(strstr(v[0].reason, "more than any device's budget"));
		assert_int_equal(v[0].unrun, 0);   /* its own reason: final */
		free(v);
		free(seq[i]);
	}
	free(seq);
	sched_free(s);
	env_close(&e);
}

/* the longest record the FASTA reader takes, on a 64 MiB budget: halved
 * without a dry run while its pair representation alone (L^2 c_z floats)
 * is over the budget, then a few dry runs per length; its fragments
 * cover it */
static void test_longest_record(void **state)
{
	enum { L = 1048576 };
	fx_env_t e;
	int64_t budget = (int64_t)64 << 20;
	char *seq = malloc(L + 1);
	uint64_t rng = 5;

	assert_non_null(seq);
	for (int k = 0; k < L; k++) seq[k] = "ACDEFGHIKLMNPQRSTVWY"[xs_next(&rng) % 20];
	seq[L] = 0;
	env_open(&e, 1, &budget);
	sched_opt_t o = env_opt(&e);
	sched_t *s = sched_init(e.dev, e.ndev, &o);
	int c_z = e.dev[0].model.cfg->c_z, covered = 0, parts = 0;
	/* the longest whose z fits: L^2 c_z 4 <= budget */
	int zmax = 1;
	while ((int64_t)(zmax + 1) * (zmax + 1) * c_z * 4 <= budget) zmax++;
	n_plan = 0;
	plan_max_L = zmax;
	plan_cap = 6 * 2 * 21;   /* <= 6 chunks x 2 lengths per halving x log2(L) + 1 */
	assert_int_equal(sched_add(s, 0, seq), 0);
	plan_max_L = plan_cap = 0;
	assert_true(n_plan >= 1);
	for (int i = 0; i < sched_count(s); i++) {
		const sched_item_t *it = sched_item(s, i);
		if (it->state == SCHED_SPLIT) continue;
		assert_int_equal(it->state, SCHED_WAIT);
		assert_true(it->quota <= budget);
		covered += it->len;
		parts++;
	}
	assert_int_equal(covered, L);
	assert_true(parts > 1);
	free(seq);
	sched_free(s);
	env_close(&e);
}

/* the stop flag raised during the 3rd dry run: no 4th one; the records
 * not placed yet fail as interrupted, and the run takes none */
static void test_stop_planning(void **state)
{
	enum { N = 200 };
	fx_env_t e;
	char *seq[N];

	env_open(&e, 1, (int64_t[]){ (int64_t)1 << 32 });
	sched_opt_t o = env_opt(&e);
	o.folded = never_done;
	sched_t *s = sched_init(e.dev, e.ndev, &o);
	for (int i = 0; i < N; i++) {   /* every length a dry run of its own */
		assert_non_null(seq[i] = malloc(i + 2));
		memset(seq[i], 'A', i + 1);
		seq[i][i + 1] = 0;
	}
	n_plan = 0;
	stop_flag = &e.stop;
	stop_after = 3;
	for (int i = 0; i < N; i++) assert_int_equal(sched_add(s, i, seq[i]), 0);
	stop_after = 0;
	assert_int_equal(n_plan, 3);
	assert_int_equal(sched_run(s), -1);   /* stopped */
	for (int i = 3; i < N; i++) {
		sched_item_t *v;
		assert_int_equal(sched_outcome(s, i, &v), 1);
		assert_int_equal(v[0].state, SCHED_FAILED);
		assert_string_equal(v[0].reason, "interrupted before it ran");
		assert_int_equal(v[0].unrun, 1);   /* a rerun folds it */
		free(v);
	}
	for (int i = 0; i < N; i++) free(seq[i]);
	sched_free(s);
	env_close(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plan_once),
		cmocka_unit_test(test_sched_plan),
		cmocka_unit_test(test_waitq_random),
		cmocka_unit_test(test_nofit_prompt),
		cmocka_unit_test(test_longest_record),
		cmocka_unit_test(test_stop_planning),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
