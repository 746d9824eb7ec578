/* test_heads.c - golden test of the output heads on the reference's own
 * inputs: lm_logits from s_s (every sequence); ptm, predicted_aligned_error,
 * max_predicted_aligned_error and distogram_logits from s_z (where stored;
 * the aligned error once whole and once in row chunks); plddt and
 * plddt_residue from the last block's states (the recycle-detail sequence);
 * and fair-esm's mean_plddt formula from the stored plddt and atom37_mask of
 * every sequence, multimers (linker-masked atom37_mask) included.  Each pass
 * is planned first and then run in exactly the planned arena. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "golden_json.h"
#include "model/heads.h"
#include "protein/residue.h"
#include "io/safetensors.h"
#include "model/weights.h"

typedef struct {
	const hparams_t *c;
	const heads_t *hd;
	int L, chunk;
	const float *s_s;      /* [L, c_s] */
	const float *s_z;      /* [L, L, c_z] or NULL */
	const float *states;   /* [L, sm_c_s] or NULL */
	float *lm, *disto;     /* [L, 23], [L, L, 64] (disto NULL: not computed) */
	float *pae, *plddt, *plddt_res, max_pae;
	double ptm;
} pass_t;

/* one planning or executing pass; returns the arena high-water mark */
static size_t run_pass(fwd_t *fx, pass_t *p)
{
	const hparams_t *c = p->c;
	int L = p->L;

	tensor_t s_s = fwd_new2(fx, L, c->c_s), lm = fwd_new2(fx, L, HEADS_LM_TOKENS);
	fwd_set(fx, s_s, p->s_s);
	heads_lm(fx, p->hd, s_s, lm);
	fwd_get(fx, lm, p->lm);
	fwd_drop(fx, &lm);
	fwd_drop(fx, &s_s);
	if (p->s_z) {
		tensor_t s_z = fwd_new3(fx, L, L, c->c_z);
		fwd_set(fx, s_z, p->s_z);
		heads_pae(fx, p->hd, s_z, p->chunk, p->pae, &p->ptm, &p->max_pae);
		if (p->disto) {
			tensor_t d = fwd_new3(fx, L, L, HEADS_PAE_BINS);
			heads_distogram(fx, p->hd, s_z, d);
			fwd_get(fx, d, p->disto);
			fwd_drop(fx, &d);
		}
		fwd_drop(fx, &s_z);
	}
	if (p->states) {
		tensor_t st = fwd_new2(fx, L, c->sm_c_s);
		fwd_set(fx, st, p->states);
		heads_plddt(fx, p->hd, st, p->plddt, p->plddt_res);
		fwd_drop(fx, &st);
	}
	if (fx->err) fprintf(stderr, "pass: %s\n", fx->errmsg);
	return fx->place.high;
}

static void plan_and_run(be_t *be, pass_t *p)
{
	fwd_t fx;

	fwd_plan_begin(&fx, be);
	size_t arena = run_pass(&fx, p);
	assert_int_equal(fx.err, 0);
	fwd_end(&fx);
	assert_int_equal(fwd_exec_begin(&fx, be, arena), 0);
	run_pass(&fx, p);
	assert_int_equal(fx.err, 0);
	fwd_end(&fx);
}

static void run_fixture(const char *fixture)
{
	char path[1024];
	be_t *be = be_cpu_init(1);
	weights_t *w;
	heads_t hd;
	safetensors_t *exp;
	json_t *ej, *sj;
	size_t i;
	int failures = 0, nz = 0, nstates = 0, nseq = 0;

	assert_non_null(be);
	snprintf(path, sizeof path, "%s/%s/weights.safetensors", TEST_DATA, fixture);
	assert_non_null(w = weights_open(path));
	const hparams_t *c = weights_cfg(w);
	assert_int_equal(heads_load(&hd, c, w, NULL), 0);   /* names and shapes only */
	assert_int_equal(heads_load(&hd, c, w, be), 0);
	assert_int_equal(golden_open(fixture, &exp, &ej), 0);

	json_array_foreach(json_object_get(ej, "sequences"), i, sj) {
		const char *name = json_string_value(json_object_get(sj, "name"));
		int64_t L, n;
		float *s_s = golden_f32(exp, name, "s_s", &L);
		float *s_z = golden_f32(exp, name, "s_z", NULL);
		float *states = golden_f32(exp, name, "states", &n);
		float *want_plddt = golden_f32(exp, name, "plddt", NULL);
		float *m37 = golden_f32(exp, name, "atom37_mask", NULL);
		char key[256];

		assert_true(s_s && want_plddt && m37);
		L /= c->c_s;
		snprintf(key, sizeof key, "%s/distogram_logits", name);
		pass_t p = { .c = c, .hd = &hd, .L = (int)L, .s_s = s_s, .s_z = s_z,
		             .states = states ? states + n - L * c->sm_c_s : NULL };
		p.lm = malloc(sizeof(float) * L * HEADS_LM_TOKENS);
		p.pae = malloc(sizeof(float) * L * L);
		p.plddt = malloc(sizeof(float) * L * RESIDUE_NUM_ATOM37);
		p.plddt_res = malloc(sizeof(float) * L);
		p.disto = safetensors_find(exp, key) ? malloc(sizeof(float) * L * L * HEADS_PAE_BINS) : NULL;
		assert_true(p.lm && p.pae && p.plddt && p.plddt_res);
		plan_and_run(be, &p);

		failures += !golden_check(exp, sj, name, "lm_logits", p.lm, L * HEADS_LM_TOKENS);
		if (s_z) {
			float ptm = (float)p.ptm;
			failures += !golden_check(exp, sj, name, "ptm", &ptm, 1);
			failures += !golden_check(exp, sj, name, "predicted_aligned_error", p.pae, L * L);
			failures += !golden_check(exp, sj, name, "max_predicted_aligned_error", &p.max_pae, 1);
			if (p.disto)
				failures += !golden_check(exp, sj, name, "distogram_logits", p.disto,
				                          L * L * HEADS_PAE_BINS);
			/* the same in row chunks of 5 meets the same reference: the
			 * GEMMs then see other row counts, and a BLAS may sum in
			 * another order for them (OpenBLAS without AVX-512 does) */
			free(p.pae);
			p.pae = malloc(sizeof(float) * L * L);
			assert_non_null(p.pae);
			p.chunk = 5;
			plan_and_run(be, &p);
			ptm = (float)p.ptm;
			failures += !golden_check(exp, sj, name, "ptm", &ptm, 1);
			failures += !golden_check(exp, sj, name, "predicted_aligned_error", p.pae, L * L);
			failures += !golden_check(exp, sj, name, "max_predicted_aligned_error", &p.max_pae, 1);
			nz++;
		}
		if (states) {
			failures += !golden_check(exp, sj, name, "plddt", p.plddt, L * RESIDUE_NUM_ATOM37);
			failures += !golden_check(exp, sj, name, "plddt_residue", p.plddt_res, L);
			nstates++;
		}
		/* fair-esm: mean over the atom37 mask, linker residues masked out */
		float mean = (float)heads_mean_plddt((int)L, want_plddt, m37);
		failures += !golden_check(exp, sj, name, "mean_plddt", &mean, 1);
		nseq++;
		free(p.lm), free(p.pae), free(p.plddt), free(p.plddt_res), free(p.disto);
		free(s_s), free(s_z), free(states), free(want_plddt), free(m37);
	}
	assert_true(nseq >= 5 && nz >= 3 && nstates == 1);
	assert_int_equal(failures, 0);
	json_decref(ej);
	safetensors_close(exp);
	weights_close(w);
	be_free(be);
}

static void test_heads_tiny_a(void **state) { (void)state; run_fixture("tiny_a"); }
static void test_heads_tiny_b(void **state) { (void)state; run_fixture("tiny_b"); }

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_heads_tiny_a),
		cmocka_unit_test(test_heads_tiny_b),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
