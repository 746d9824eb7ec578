/* test_scheduler.c - the scheduler on constructed inputs:
 *  - a record is encoded and planned once: placing it encodes it and plans
 *    it on each device, and folding it neither encodes nor plans again
 *    (tok_encode and fwd_plan_begin are counted by wrapping them at link
 *    time: -Wl,--wrap);
 *  - sched_plan: on two devices of different budgets every record is
 *    started exactly once, on a device whose budget holds its quota, no
 *    device ever holds more quota than its budget, and the plan leaves
 *    every item waiting. */
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

#define WEIGHTS TEST_DATA "/tiny_a/weights.safetensors"

/* ---- counting wrappers (the linker sends every call from another object
 * file here) ---- */

static int n_encode, n_plan;

int  __real_tok_encode(tok_t *t, const char *seq, const cfg_t *c);
void __real_fwd_plan_begin(fwd_t *fx, be_t *be);

int __wrap_tok_encode(tok_t *t, const char *seq, const cfg_t *c)
{
	n_encode++;
	return __real_tok_encode(t, seq, c);
}

void __wrap_fwd_plan_begin(fwd_t *fx, be_t *be)
{
	n_plan++;
	return __real_fwd_plan_begin(fx, be);
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
		assert_int_equal(model_load(&d->model, e->w, d->be), 0);
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
	return (sched_opt_t){ .passes = 1, .safety = 1.0, .stop = &e->stop, .done = count_done,
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
		assert_int_equal(sched_item(s, i)->state, SCHED_DONE);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plan_once),
		cmocka_unit_test(test_sched_plan),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
