/* test_transition.c - the CPU backend's transition (be->transition,
 * be_transition_t) against the three ops it fuses, run apart on the same
 * backend: layernorm into t: [R, d], a GEMM with bias and ReLU into
 * h: [R, 4d], a GEMM with bias and beta 1 into x.  The fused op runs the
 * same entries on tiles of rows (cpu_transition.c): the norm is the same
 * row function, bit for bit, but a product's summation order may depend
 * on the rows a GEMM is given (OpenBLAS blocks them: with 1003 rows at
 * once and with 128, row 121 differs in its last bit), so each element is
 * held to the bound of two fp32 sums of the same terms in any order,
 * propagated through the ReLU: per hidden j, e_j = 2 gamma_d (|b1_j| +
 * sum_k |w1_jk t_k|); per output c, sum_j |w2_cj| e_j + 2 gamma_h (|x_c|
 * + |b2_c| + sum_j |w2_cj h_j|), gamma_n = n u / (1 - n u), u = 2^-24.
 * Whether the two are equal is printed.  Rows 1, 17 and
 * over 1000 (past the 128-row tile), widths 16, 24 and 32 (the fixtures'),
 * 128 and 1024 (esmfold_v1's c_z and c_s), one and three threads, with
 * and without the Linears' biases. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "xorshift.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;

static void trans_case(be_t *cpu, int64_t R, int d, int biases)
{
	int h = 4 * d;
	float *x = xs_vec(&rng, R * d, 2.0f, 0.0f), *ref = malloc(sizeof *ref * (size_t)R * d);
	float *t = malloc(sizeof *t * (size_t)R * d), *hid = malloc(sizeof *hid * (size_t)R * h);
	float *lw = xs_vec(&rng, d, 1.0f, 0.0f), *lb = xs_vec(&rng, d, 0.5f, 0.0f);
	float *w1 = xs_vec(&rng, (int64_t)h * d, 1.0f / (float)d, 0.0f), *b1 = xs_vec(&rng, h, 0.2f, 0.0f);
	float *w2 = xs_vec(&rng, (int64_t)d * h, 1.0f / (float)h, 0.0f), *b2 = xs_vec(&rng, d, 0.2f, 0.0f);
	be_transition_t tr = { .x = x, .rows = R, .d = d, .h = h, .ln_w = lw, .ln_b = lb, .eps = 1e-5f,
	                       .w1 = w1, .b1 = biases ? b1 : NULL, .w2 = w2, .b2 = biases ? b2 : NULL };
	be_gemm_t g1 = { .transb = 1, .m = (int)R, .n = h, .k = d, .alpha = 1.0f, .a = t, .lda = d,
	                 .b = w1, .ldb = d, .c = hid, .ldc = h, .batch = 1, .bias = tr.b1, .relu = 1 };
	be_gemm_t g2 = { .transb = 1, .m = (int)R, .n = d, .k = h, .alpha = 1.0f, .beta = 1.0f,
	                 .a = hid, .lda = h, .b = w2, .ldb = h, .c = ref, .ldc = d, .batch = 1,
	                 .bias = tr.b2 };

	assert_true(ref && t && hid);
	memcpy(ref, x, sizeof *ref * (size_t)R * d);
	assert_int_equal(cpu->layernorm(cpu, &(be_layernorm_t){
		.y = t, .x = ref, .rows = R, .d = d, .w = lw, .b = lb, .eps = 1e-5f,
	}), 0);
	assert_int_equal(cpu->gemm(cpu, &g1), 0);
	assert_int_equal(cpu->gemm(cpu, &g2), 0);
	assert_int_equal(cpu->transition(cpu, &tr), 0);
	/* the bound: t is the same (one row function), the products differ in
	 * summation order only; gamma_n = n u / (1 - n u) */
	double worst = 0.0, u = 0x1p-24, gd = d * u / (1 - d * u), gh = h * u / (1 - h * u);
	double *e = malloc(sizeof *e * (size_t)h);
	int same = memcmp(x, ref, sizeof *x * (size_t)R * d) == 0;
	assert_non_null(e);
	for (int64_t r = 0; r < R; r++) {
		const float *tr_ = t + r * d, *hr = hid + r * h;
		for (int j = 0; j < h; j++) {
			double m = tr.b1 ? fabs(tr.b1[j]) : 0.0;
			for (int k = 0; k < d; k++) m += fabs((double)w1[(int64_t)j * d + k] * tr_[k]);
			e[j] = 2.0 * gd * m;
		}
		for (int c = 0; c < d; c++) {
			double m = fabs(ref[r * d + c]) + (tr.b2 ? fabs(tr.b2[c]) : 0.0), ej = 0.0;
			for (int j = 0; j < h; j++) {
				m += fabs((double)w2[(int64_t)c * h + j] * hr[j]);
				ej += fabs((double)w2[(int64_t)c * h + j]) * e[j];
			}
			double bound = ej + 2.0 * gh * m, err = fabs((double)x[r * d + c] - ref[r * d + c]);
			double ratio = err == 0.0 ? 0.0 : err / bound;
			if (!(ratio <= worst)) worst = isnan(ratio) ? INFINITY : ratio;
		}
	}
	free(e);
	printf("  transition R %5lld d %4d%s: %s, largest difference / bound %.3g\n", (long long)R, d,
	       biases ? "" : " no biases", same ? "equal" : "not equal", worst);
	assert_true(worst <= 1.0);
	free(x); free(ref); free(t); free(hid); free(lw); free(lb);
	free(w1); free(b1); free(w2); free(b2);
}

/* the same rows through one thread and three: equal bit for bit (the
 * tiles follow the shape, not the thread count) */
static void test_transition_threads(void **state)
{
	int64_t R = 300;
	int d = 32, h = 4 * d;
	float *x1 = xs_vec(&rng, R * d, 2.0f, 0.0f), *x3 = malloc(sizeof *x3 * (size_t)R * d);
	float *lw = xs_vec(&rng, d, 1.0f, 0.0f), *lb = xs_vec(&rng, d, 0.5f, 0.0f);
	float *w1 = xs_vec(&rng, (int64_t)h * d, 1.0f / (float)d, 0.0f), *b1 = xs_vec(&rng, h, 0.2f, 0.0f);
	float *w2 = xs_vec(&rng, (int64_t)d * h, 1.0f / (float)h, 0.0f), *b2 = xs_vec(&rng, d, 0.2f, 0.0f);
	be_transition_t tr = { .x = x1, .rows = R, .d = d, .h = h, .ln_w = lw, .ln_b = lb, .eps = 1e-5f,
	                       .w1 = w1, .b1 = b1, .w2 = w2, .b2 = b2 };

	assert_non_null(x3);
	memcpy(x3, x1, sizeof *x3 * (size_t)R * d);
	for (int threads = 1; threads <= 3; threads += 2) {
		be_t *cpu = be_cpu_init(threads);
		assert_non_null(cpu);
		tr.x = threads == 1 ? x1 : x3;
		assert_int_equal(cpu->transition(cpu, &tr), 0);
		be_free(cpu);
	}
	assert_memory_equal(x1, x3, sizeof *x1 * (size_t)R * d);
	free(x1); free(x3); free(lw); free(lb); free(w1); free(b1); free(w2); free(b2);
}

static void test_transition_cpu(void **state)
{
	static const struct { int64_t R; int d; } cs[] = {
		{ 1, 16 }, { 17, 32 }, { 1003, 16 }, { 33, 24 }, { 1030, 128 }, { 70, 128 }, { 5, 1024 },
	};

	for (int threads = 1; threads <= 3; threads += 2) {
		be_t *cpu = be_cpu_init(threads);
		assert_non_null(cpu);
		printf(" %d thread(s)\n", threads);
		for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) trans_case(cpu, cs[i].R, cs[i].d, 1);
		trans_case(cpu, 300, 32, 0);
		trans_case(cpu, 0, 32, 1);
		be_free(cpu);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_transition_cpu),
		cmocka_unit_test(test_transition_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
