/* test_esm2.c - golden test of the input encoding and the language model:
 * esm_tokens, aatype, residue_index, esm_hidden_states, esm_s_combined and
 * s_s_0 of every sequence of both public fixtures, within the fixtures'
 * tolerance rule; plus a weights file whose config does not match. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "golden_json.h"
#include "model/esm2.h"
#include "io/safetensors.h"
#include "model/tokenizer.h"
#include "model/weights.h"

/* integer tensor seq/name equals got[n] exactly */
static int ints_equal(const safetensors_t *exp, const char *seq, const char *name, const int32_t *got, int n)
{
	float *f = malloc(sizeof *f * n);
	for (int i = 0; i < n; i++) f[i] = (float)got[i];
	double d = golden_max_diff(exp, seq, name, f, n);
	free(f);
	if (d != 0.0) fprintf(stderr, "%s/%s differs (max diff %g)\n", seq, name, d);
	return d == 0.0;
}

static void run_fixture(const char *fixture)
{
	char path[1024];
	be_t *be = be_cpu_init(1);
	weights_t *w;
	esm2_t lm;
	safetensors_t *exp;
	json_t *ej;
	size_t i;
	json_t *sj;
	int failures = 0, nseq = 0;

	snprintf(path, sizeof path, "%s/%s/weights.safetensors", TEST_DATA, fixture);
	assert_non_null(w = weights_open(path));
	const hparams_t *c = weights_cfg(w);
	assert_int_equal(esm2_load(&lm, c, w, be, 0), 0);
	assert_int_equal(golden_open(fixture, &exp, &ej), 0);

	json_array_foreach(json_object_get(ej, "sequences"), i, sj) {
		const char *name = json_string_value(json_object_get(sj, "name"));
		char *seq = golden_sequence(json_string_value(json_object_get(sj, "sequence")));
		tok_t t;
		fwd_t fx;

		assert_int_equal(tok_encode(&t, seq, c), 0);
		int L = t.L, T = L + 2, D = c->lm_dim;
		int32_t aa32[L];
		for (int k = 0; k < L; k++) aa32[k] = t.aatype[k];
		failures += !ints_equal(exp, name, "esm_tokens", t.tokens, T);
		failures += !ints_equal(exp, name, "aatype", aa32, L);
		failures += !ints_equal(exp, name, "residue_index", t.residx, L);

		/* plan, then run in exactly the planned arena */
		fwd_plan_begin(&fx, be);
		tensor_t s = fwd_new2(&fx, L, c->c_s);
		esm2_forward(&fx, &lm, c, t.tokens, t.aatype, s, NULL, NULL);
		fwd_drop(&fx, &s);
		if (fx.err) fprintf(stderr, "%s: %s\n", name, fx.errmsg);
		assert_int_equal(fx.err, 0);
		size_t arena = fx.place.high;
		fwd_end(&fx);
		assert_true(arena > 0);

		float *hidden = malloc(sizeof(float) * (c->lm_layers + 1) * T * D);
		float *comb = malloc(sizeof(float) * L * D), *s0 = malloc(sizeof(float) * L * c->c_s);
		assert_int_equal(fwd_exec_begin(&fx, be, arena), 0);
		s = fwd_new2(&fx, L, c->c_s);
		esm2_forward(&fx, &lm, c, t.tokens, t.aatype, s, hidden, comb);
		fwd_get(&fx, s, s0);
		fwd_drop(&fx, &s);
		if (fx.err) fprintf(stderr, "%s: %s\n", name, fx.errmsg);
		assert_int_equal(fx.err, 0);
		fwd_end(&fx);

		failures += !golden_check(exp, sj, name, "esm_hidden_states", hidden,
		                          (int64_t)(c->lm_layers + 1) * T * D);
		failures += !golden_check(exp, sj, name, "esm_s_combined", comb, (int64_t)L * D);
		failures += !golden_check(exp, sj, name, "s_s_0", s0, (int64_t)L * c->c_s);
		free(hidden);
		free(comb);
		free(s0);
		free(seq);
		tok_free(&t);
		nseq++;
	}
	assert_true(nseq >= 5);
	assert_int_equal(failures, 0);
	json_decref(ej);
	safetensors_close(exp);
	esm2_free(&lm);
	weights_close(w);
	be_free(be);
}

static void test_lm_tiny_a(void **state) { (void)state; run_fixture("tiny_a"); }
static void test_lm_tiny_b(void **state) { (void)state; run_fixture("tiny_b"); }

/* tiny_b's config against tiny_a's tensors: the loader names a tensor */
static void test_lm_config_mismatch(void **state)
{
	char path[1024];
	hparams_t c;
	esm2_t lm;
	weights_t *w;

	(void)state;
	snprintf(path, sizeof path, "%s/tiny_a/weights.safetensors", TEST_DATA);
	assert_non_null(w = weights_open(path));
	snprintf(path, sizeof path, "%s/tiny_b/config.json", TEST_DATA);
	assert_int_equal(hparams_load(&c, path), 0);
	assert_true(esm2_load(&lm, &c, w, NULL, 0) < 0);
	weights_close(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lm_tiny_a),
		cmocka_unit_test(test_lm_tiny_b),
		cmocka_unit_test(test_lm_config_mismatch),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
