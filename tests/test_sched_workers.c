/* test_sched_workers.c - sched_run's workers, built twice: with OpenMP
 * (tests/test_sched_workers: the workers are a team of threads) and with
 * the scheduler compiled without it (tests/test_sched_workers_noomp: the
 * one thread serves every device's workers in turn):
 *  - two sim: devices of two workers each: every worker folds (the
 *    run's (device, worker) pairs are (0,0) (0,1) (1,2) (1,3)) and every
 *    record is done;
 *  - records whose quota only the second device's budget holds fold
 *    there, the rest on either, none fails. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "backend/devices.h"
#include "model/model.h"
#include "model/weights.h"
#include "sched/scheduler.h"

#define WEIGHTS TEST_DATA "/tiny_a/weights.safetensors"
#define NDEV 2
#define NWK  2   /* workers per device */

static const char *seqs[] = { "MKTAYIAKQRQISFVKSHFSRQ", "ACDEFGHIKLMNPQRSTVWYACDEFGHIKLMNPQ",
                              "MKTAYIAKQR:GSHMSELKNV", "GGSAGSAGSAGSAGSAGSAGSAGSAGSAGSAGSAGS",
                              "MSELKNVAAQ", "PEPTIDEPEPTIDEPEPTIDE", "KRKRKRKRKRKRKRKRKRKRKRKRKR",
                              "WYWYWYWYWYWY" };
#define NSEQ ((int)(sizeof seqs / sizeof *seqs))

typedef struct {
	weights_t       *w;
	sched_dev_t      dev[NDEV];
	volatile sig_atomic_t stop;
	pthread_mutex_t  lock;
	pthread_cond_t   cond;
	int              folded[NDEV][NDEV * NWK];   /* folds by (device, worker) */
	int              nfolding;                   /* workers that reached a fold */
	int              gather;                     /* workers a first fold waits for */
	int              done[NSEQ];
} fx_env_t;

static void env_open(fx_env_t *e)
{
	memset(e, 0, sizeof *e);
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->cond, NULL);
	assert_non_null(e->w = weights_open(WEIGHTS));
	for (int i = 0; i < NDEV; i++) {
		sched_dev_t *d = &e->dev[i];
		assert_non_null(d->spec = strdup("sim:256M"));
		assert_non_null(d->be = dev_open(d->spec, 1));
		assert_int_equal(model_load(&d->model, e->w, d->be, 0), 0);
		d->loaded = 1;
		d->workers = NWK;
		d->budget = dev_budget(d->be, d->spec, 0, 0, 1);
	}
}

static void env_close(fx_env_t *e)
{
	weights_close(e->w);   /* before the backends its buffers live on */
	for (int i = 0; i < NDEV; i++) {
		model_free(&e->dev[i].model);
		be_free(e->dev[i].be);
		free(e->dev[i].spec);
	}
	pthread_cond_destroy(&e->cond);
	pthread_mutex_destroy(&e->lock);
}

/* With OpenMP the workers are threads: each waits in its first fold (up to
 * 60 s) until e->gather workers are folding, so that no thread takes every
 * item before the others start.  Without it the workers take turns on one
 * thread: none waits. */
static int note_fold(void *ctx, const sched_item_t *it, const sched_dev_t *d, const tok_t *t,
                     const model_out_t *out, const mem_fig_t *fig, double secs, char *reason,
                     size_t cap)
{
	fx_env_t *e = ctx;

	assert_int_equal(out->L, t->L);
	assert_true(it->dev >= 0 && it->dev < NDEV);
	assert_true(it->worker >= 0 && it->worker < NDEV * NWK);
	pthread_mutex_lock(&e->lock);
	e->done[it->rec]++;
	int first = 1;
	for (int i = 0; i < NDEV; i++) first &= !e->folded[i][it->worker];
	e->folded[it->dev][it->worker]++;
	e->nfolding += first;
	pthread_cond_broadcast(&e->cond);
#ifdef _OPENMP
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 60;
	while (first && e->nfolding < e->gather)
		if (pthread_cond_timedwait(&e->cond, &e->lock, &until) != 0) break;
#endif
	pthread_mutex_unlock(&e->lock);
	return 0;
}

static sched_t *env_sched(fx_env_t *e, sched_opt_t *o)
{
	*o = (sched_opt_t){ .passes = 1, .safety = 1.0, .stop = &e->stop, .folded = note_fold, .ctx = e };
	sched_t *s = sched_init(e->dev, NDEV, o);
	assert_non_null(s);
	for (int i = 0; i < NSEQ; i++) assert_int_equal(sched_add(s, i, seqs[i]), 0);
	return s;
}

/* every record folded once, every item done */
static void assert_all_done(const fx_env_t *e, const sched_t *s)
{
	for (int i = 0; i < NSEQ; i++)
		if (e->done[i] != 1) fail_msg("record %d folded %d times", i, e->done[i]);
	for (int i = 0; i < sched_count(s); i++) {
		const sched_item_t *it = sched_item(s, i);
		if (it->state != SCHED_FOLDED) fail_msg("item %d of record %d not done: %s", i, it->rec, it->reason);
	}
}

static void test_every_worker(void **state)
{
	fx_env_t e;
	sched_opt_t o;

	env_open(&e);
	e.gather = NDEV * NWK;
	sched_t *s = env_sched(&e, &o);
	assert_int_equal(sched_run(s), 0);
	assert_all_done(&e, s);
	/* device 0: workers 0 and 1; device 1: workers 2 and 3 */
	for (int i = 0; i < NDEV; i++)
		for (int k = 0; k < NDEV * NWK; k++) {
			if (k / NWK == i && !e.folded[i][k]) fail_msg("worker %d of device %d never folded", k, i);
			if (k / NWK != i && e.folded[i][k]) fail_msg("device %d ran a worker %d", i, k);
		}
	sched_free(s);
	env_close(&e);
}

static void test_second_device_only(void **state)
{
	fx_env_t e;
	sched_opt_t o;
	int64_t qmin = INT64_MAX, qmax = 0;

	env_open(&e);
	sched_t *s = env_sched(&e, &o);
	for (int i = 0; i < NSEQ; i++) {
		int64_t q = sched_item(s, i)->quota;
		if (q < qmin) qmin = q;
		if (q > qmax) qmax = q;
	}
	sched_free(s);
	assert_true(qmin < qmax);
	assert_true(qmax <= e.dev[1].budget);
	e.dev[0].budget = qmin;   /* device 0 holds only the smallest quota */
	memset(e.done, 0, sizeof e.done);
	s = env_sched(&e, &o);
	assert_int_equal(sched_run(s), 0);
	assert_all_done(&e, s);
	for (int i = 0; i < sched_count(s); i++) {
		const sched_item_t *it = sched_item(s, i);
		if (it->quota > qmin) assert_int_equal(it->dev, 1);
	}
	sched_free(s);
	env_close(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_worker),
		cmocka_unit_test(test_second_device_only),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
