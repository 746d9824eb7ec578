/* test_cpu_dnnl.c - the CPU backend's bf16 GEMMs (--precision bf16,
 * cpu_dnnl.c) against double references, on whichever path this process
 * takes (tests/test_cpu_bf16.sh runs it on oneDNN's bf16 matmul and, with
 * DNNL_MAX_CPU_ISA=AVX2, on the widened one).
 *
 * The bounds, from bf16 rounding (u = 2^-8, bf16's unit roundoff with
 * its 8-bit significand) and fp32 summation (gamma_n = n 2^-24 /
 * (1 - n 2^-24), any order, for the k products and the beta and bias
 * terms, n = k + 2): with a^, b^ the operands rounded to bf16 (to nearest
 * even) and S^ = |alpha| sum |a^||b^| + |beta c0| + |bias|,
 *   |C - ref(a^, b^)| <= gamma_n S^
 * (the products a^ b^ are exact in fp32: 8-bit by 8-bit significands);
 * against the unrounded operands, since |a^ b^ - a b| <= (2u + u^2) |a b|,
 *   |C - ref(a, b)| <= (2u + u^2) |alpha| sum |a||b| + gamma_n S^.
 * A GEMM that asks for fp32 on a bf16 backend (the precision policy's)
 * gives the fp32 backend's bits; and bf16 must round: some element of
 * the rounded product differs from the fp32 one.  Where oneDNN does not
 * take a GEMM its bits are cpu_dnnl_widened's (the own kernel's nn.Linear
 * form widens a bf16 weight as it packs it instead of into a copy). */
#include <errno.h>
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
#include "backend/cpu_dnnl.h"
#include "io/safetensors.h"
#include "xorshift.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

typedef struct {
	int transa, transb, m, n, k, batch;
	float alpha, beta;
	int bias, relu, wb;   /* wb: B a bf16 weight (b_bf16; batch 1, transb) */
} gcase_t;

static float bf(float x) { return safetensors_bf16_to_f32(safetensors_f32_to_bf16(x)); }

/* element (i, p) of op(X[b]) stored at ld, stride */
static double at(const float *x, int trans, int64_t ld, int64_t stride, int b, int i, int p, int rnd)
{
	float v = x[b * stride + (trans ? (int64_t)p * ld + i : (int64_t)i * ld + p)];
	return rnd ? bf(v) : v;
}

static void run_case(be_t *f32, be_t *b16, const gcase_t *t)
{
	int m = t->m, n = t->n, k = t->k, B = t->batch;
	int64_t lda = (t->transa ? m : k) + 3, ldb = (t->transb ? k : n) + 5, ldc = n + 2;
	int64_t sa = (int64_t)lda * (t->transa ? k : m), sb = (int64_t)ldb * (t->transb ? n : k);
	int64_t sc = ldc * m;
	float *a = xs_vec(&rng, sa * B, 1.0f, 0.0f), *bm = xs_vec(&rng, sb * B, 1.0f, 0.0f);
	float *c0 = xs_vec(&rng, sc * B, 1.0f, 0.0f), *bias = xs_vec(&rng, n, 1.0f, 0.0f);
	float *c = malloc(sizeof *c * (size_t)(sc * B)), *cf = malloc(sizeof *cf * (size_t)(sc * B));
	uint16_t *w16 = malloc(sizeof *w16 * (size_t)(sb * B));
	double gam = (k + 2) * ldexp(1.0, -24) / (1.0 - (k + 2) * ldexp(1.0, -24)), u = ldexp(1.0, -8);
	double worst_r = 0.0, worst_u = 0.0;
	int differs = 0;

	assert_true(c && cf && w16);
	for (int64_t i = 0; i < sb * B; i++) w16[i] = safetensors_f32_to_bf16(bm[i]);
	be_gemm_t g = {
		.transa = t->transa, .transb = t->transb, .m = m, .n = n, .k = k,
		.alpha = t->alpha, .beta = t->beta,
		.a = a, .lda = lda, .stride_a = sa, .b = t->wb ? (const float *)w16 : bm, .ldb = ldb,
		.stride_b = sb, .c = c, .ldc = ldc, .stride_c = sc, .batch = B,
		.bias = t->bias ? bias : NULL, .b_bf16 = t->wb, .relu = t->relu,
	};
	memcpy(c, c0, sizeof *c * (size_t)(sc * B));
	assert_int_equal(b16->gemm(b16, &g), 0);
	/* not on oneDNN: cpu_dnnl_widened's bits, whether the weight was
	 * widened into a copy or (the own kernel's nn.Linear form) as packed */
	if (!cpu_dnnl_takes(&g)) {
		be_gemm_t h = g;
		float *cw = malloc(sizeof *cw * (size_t)(sc * B));
		assert_non_null(cw);
		memcpy(cw, c0, sizeof *cw * (size_t)(sc * B));
		h.c = cw;
		assert_int_equal(cpu_dnnl_widened(b16, &h), 0);
		assert_memory_equal(c, cw, sizeof *cw * (size_t)(sc * B));
		free(cw);
	}
	/* the same GEMM asking for fp32: the fp32 backend's bits */
	if (!t->wb) {
		be_gemm_t h = g;
		float *c2 = malloc(sizeof *c2 * (size_t)(sc * B));
		assert_non_null(c2);
		memcpy(c2, c0, sizeof *c2 * (size_t)(sc * B));
		memcpy(cf, c0, sizeof *cf * (size_t)(sc * B));
		h.c = c2;
		h.prec = BE_PREC_FP32;
		assert_int_equal(b16->gemm(b16, &h), 0);
		h.c = cf;
		assert_int_equal(f32->gemm(f32, &h), 0);
		assert_memory_equal(c2, cf, sizeof *cf * (size_t)(sc * B));
		free(c2);
	}
	for (int b = 0; b < B; b++)
		for (int i = 0; i < m; i++)
			for (int j = 0; j < n; j++) {
				double r = 0.0, ru = 0.0, s = 0.0, su = 0.0, extra;
				for (int p = 0; p < k; p++) {
					double x = at(a, t->transa, lda, sa, b, i, p, 1), y = at(bm, !t->transb, ldb, sb, b, j, p, 1);
					double xu = at(a, t->transa, lda, sa, b, i, p, 0), yu = at(bm, !t->transb, ldb, sb, b, j, p, 0);
					r += x * y; s += fabs(x * y);
					ru += xu * yu; su += fabs(xu * yu);
				}
				double cv = c0[b * sc + i * ldc + j], bv = t->bias ? bias[j] : 0.0;
				r = t->alpha * r + t->beta * cv + bv;
				ru = t->alpha * ru + t->beta * cv + bv;
				extra = fabs(t->beta * cv) + fabs(bv);
				if (t->relu) { r = r > 0 ? r : 0; ru = ru > 0 ? ru : 0; }
				double got = c[b * sc + i * ldc + j];
				double bound_r = gam * (fabs(t->alpha) * s + extra);
				double bound_u = (2 * u + u * u) * fabs(t->alpha) * su + bound_r;
				if (fabs(got - r) > bound_r || fabs(got - ru) > bound_u)
					fail_msg("[%d,%d]x[%d,%d] batch %d ta %d tb %d: C[%d,%d,%d] = %.9g, rounded ref %.9g "
					         "(bound %.3g), unrounded ref %.9g (bound %.3g)", m, k, k, n, B, t->transa,
					         t->transb, b, i, j, got, r, bound_r, ru, bound_u);
				if (bound_r > 0) worst_r = fmax(worst_r, fabs(got - r) / bound_r);
				if (bound_u > 0) worst_u = fmax(worst_u, fabs(got - ru) / bound_u);
				differs |= fabs(got - ru) > bound_r;
			}
	print_message("[%d,%d]x[%d,%d] batch %d ta %d tb %d bias %d relu %d wb %d: worst |dev| / bound "
	              "%.3f (rounded operands), %.3f (fp32 operands)\n", m, k, k, n, B, t->transa, t->transb,
	              t->bias, t->relu, t->wb, worst_r, worst_u);
	if (m * n * k >= 4096) assert_true(differs);   /* bf16 does round */
	free(a); free(bm); free(c0); free(bias); free(c); free(cf); free(w16);
}

static void test_bf16_gemm(void **state)
{
	be_t *f32 = be_cpu_init(0), *b16 = be_cpu_init(0);
	static const gcase_t cases[] = {
		{ 0, 1, 70, 96, 64, 1, 1.0f, 0.0f, 1, 0, 1 },     /* nn.Linear, bf16 weight */
		{ 0, 1, 60, 300, 37, 1, 1.0f, 1.0f, 1, 0, 1 },    /* the copy's product: cpu_gemm_few */
		{ 0, 1, 33, 256, 128, 1, 1.0f, 0.0f, 1, 1, 1 },   /* with ReLU */
		{ 0, 1, 300, 128, 128, 1, 1.0f, 1.0f, 1, 0, 1 },  /* a pair linear, residual */
		{ 0, 1, 5, 40, 320, 1, 1.0f, 0.0f, 0, 0, 1 },     /* few rows, deep */
		{ 0, 0, 37, 29, 51, 1, 0.5f, 0.25f, 1, 0, 0 },    /* both fp32, alpha, beta */
		{ 1, 0, 20, 24, 17, 3, 1.0f, 0.0f, 0, 0, 0 },     /* batched, A transposed */
		{ 0, 1, 16, 18, 40, 4, 0.125f, 1.0f, 1, 1, 0 },   /* batched, alpha and bias */
		{ 0, 1, 24, 40, 33, 3, 1.0f, 1.0f, 1, 1, 0 },     /* batched, bias, ReLU */
		{ 1, 1, 1, 64, 64, 1, 1.0f, 0.0f, 1, 0, 0 },      /* one row */
	};
	const char *isa;
	int native = cpu_dnnl_probe(&isa);

	(void)state;
	assert_non_null(f32);
	assert_non_null(b16);
	assert_int_equal(be_cpu_set_precision(b16, BE_PREC_BF16), 0);
	assert_int_equal(b16->weights_bf16, 1);
	assert_string_equal(b16->precision, "bf16");
	assert_int_equal(be_cpu_set_precision(b16, BE_PREC_FP16), -EINVAL);
	print_message("oneDNN's ISA %s: %s\n", isa, native == 1 ? "oneDNN's bf16 matmul" : "widened to fp32");
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(f32, b16, &cases[i]);
	be_free(b16);
	be_free(f32);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bf16_gemm),
	};

	if (cpu_dnnl_probe(NULL) < 0) {
		puts("SKIP: built without oneDNN (--precision bf16 is refused on the CPU)");
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
