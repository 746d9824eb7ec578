/* test_cuda_ops.c - every op of the CUDA backend against the CPU backend on
 * random inputs of awkward shapes, within a normalised-mean-square-error
 * bound per op (float32 unless a case says otherwise).  Exits 77 (skip)
 * when there is no CUDA device, so `make check` skips it on such hosts.
 * TEST_CUDA_OPS_ONLY=PATTERN runs only the tests whose name matches it. */
#include <errno.h>
#include <float.h>
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
#include "backend/cuda.h"
#include "io/safetensors.h"
#include "xorshift.h"

static be_t *cpu, *gpu;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

/* one tensor on both backends, same contents */
typedef struct { float *c, *g; int64_t n; } pair_t;

static pair_t pair_new(int64_t n)
{
	pair_t p = { .n = n };
	size_t nb = sizeof(float) * (size_t)(n ? n : 1);
	assert_int_equal(cpu->alloc(cpu, nb, (void **)&p.c), 0);
	assert_int_equal(gpu->alloc(gpu, nb, (void **)&p.g), 0);
	for (int64_t i = 0; i < n; i++) p.c[i] = xs_unif(&rng);
	assert_int_equal(gpu->upload(gpu, p.g, p.c, nb), 0);
	return p;
}

static void pair_free(pair_t *p)
{
	cpu->free(cpu, p->c);
	gpu->free(gpu, p->g);
}

/* NMSE of the GPU copy against the CPU copy, printed, checked and returned */
static double pair_check(const pair_t *p, double bound, const char *what)
{
	float *h = malloc(sizeof *h * (size_t)(p->n ? p->n : 1));
	double num = 0.0, den = 0.0;

	assert_non_null(h);
	assert_int_equal(gpu->sync(gpu), 0);
	assert_int_equal(gpu->download(gpu, h, p->g, sizeof *h * (size_t)p->n), 0);
	for (int64_t i = 0; i < p->n; i++) {
		double d = (double)h[i] - p->c[i];
		num += d * d;
		den += (double)p->c[i] * p->c[i];
	}
	free(h);
	double nmse = den > 0.0 ? num / den : num;
	printf("  %-48s nmse %.3g (bound %.1g)\n", what, nmse, bound);
	assert_true(nmse <= bound);   /* false for NaN too */
	return nmse;
}

/* --- gemm --- */

/* one GEMM on both backends, the call's precision prec; its NMSE */
static double gemm_case(int ta, int tb, int m, int n, int k, int batch, int shared_a,
                        int bias, float beta, be_prec_t prec, double bound, const char *tag)
{
	int ra = ta ? k : m, ca = ta ? m : k, rb = tb ? n : k, cb = tb ? k : n;
	int64_t lda = ca + 3, ldb = cb + 1, ldc = n + 2;
	int64_t sa = shared_a ? 0 : ra * lda, sb = rb * ldb, sc = m * ldc;
	pair_t A = pair_new(shared_a ? sa + ra * lda : sa * batch), B = pair_new(sb * batch),
	       C = pair_new(sc * batch), bi = pair_new(n);
	be_gemm_t g = { .transa = ta, .transb = tb, .m = m, .n = n, .k = k, .alpha = 0.75f,
	                .beta = beta, .lda = lda, .stride_a = sa, .ldb = ldb, .stride_b = sb,
	                .ldc = ldc, .stride_c = sc, .batch = batch, .prec = prec };
	char what[128];
	double nmse;

	g.a = A.c; g.b = B.c; g.c = C.c; g.bias = bias ? bi.c + (bias == 2) : NULL;
	assert_int_equal(cpu->gemm(cpu, &g), 0);
	g.a = A.g; g.b = B.g; g.c = C.g; g.bias = bias ? bi.g : NULL;
	assert_int_equal(gpu->gemm(gpu, &g), 0);
	snprintf(what, sizeof what, "gemm%s %c%c m%d n%d k%d b%d%s%s beta%g", tag, ta ? 'T' : 'N',
	         tb ? 'T' : 'N', m, n, k, batch, shared_a ? " sharedA" : "", bias ? " bias" : "",
	         beta);
	nmse = pair_check(&C, bound, what);
	pair_free(&A); pair_free(&B); pair_free(&C); pair_free(&bi);
	return nmse;
}

/* GEMMs with the ReLU epilogue (beta 0; product, then bias and ReLU in one
 * pass on CUDA) against the CPU's, batched, with and without bias */
static void test_gemm_relu(void **state)
{
	static const struct { int ta, tb, m, n, k, batch, bias; } cs[] = {
		{ 0, 1, 301, 70, 33, 1, 1 }, { 1, 0, 37, 53, 29, 3, 0 }, { 0, 0, 130, 300, 17, 2, 1 },
	};
	char what[96];

	for (size_t t = 0; t < sizeof cs / sizeof *cs; t++) {
		int m = cs[t].m, n = cs[t].n, k = cs[t].k, batch = cs[t].batch;
		int ra = cs[t].ta ? k : m, ca = cs[t].ta ? m : k, rb = cs[t].tb ? n : k, cb = cs[t].tb ? k : n;
		int64_t lda = ca + 1, ldb = cb + 2, ldc = n + 3, sa = ra * lda, sb = rb * ldb, sc = m * ldc + 1;
		pair_t A = pair_new(sa * batch), B = pair_new(sb * batch), C = pair_new(sc * batch), bi = pair_new(n);
		be_gemm_t g = { .transa = cs[t].ta, .transb = cs[t].tb, .m = m, .n = n, .k = k, .alpha = 0.75f,
		                .lda = lda, .stride_a = sa, .ldb = ldb, .stride_b = sb, .ldc = ldc,
		                .stride_c = sc, .batch = batch, .relu = 1 };
		g.a = A.c; g.b = B.c; g.c = C.c; g.bias = cs[t].bias ? bi.c : NULL;
		assert_int_equal(cpu->gemm(cpu, &g), 0);
		g.a = A.g; g.b = B.g; g.c = C.g; g.bias = cs[t].bias ? bi.g : NULL;
		assert_int_equal(gpu->gemm(gpu, &g), 0);
		snprintf(what, sizeof what, "gemm relu %c%c m%d n%d k%d b%d%s", cs[t].ta ? 'T' : 'N',
		         cs[t].tb ? 'T' : 'N', m, n, k, batch, cs[t].bias ? " bias" : "");
		pair_check(&C, 1e-10, what);
		pair_free(&A); pair_free(&B); pair_free(&C); pair_free(&bi);
	}
}

/* the cases at the call precision prec; the smallest NMSE of those with
 * more than one product */
static double gemm_cases(const char *tag, be_prec_t prec, double bound)
{
	double least = INFINITY, e;

	for (int ta = 0; ta < 2; ta++)
		for (int tb = 0; tb < 2; tb++) {
			e = gemm_case(ta, tb, 37, 53, 29, 1, 0, 1, 0.0f, prec, bound, tag);
			least = fmin(least, e);
			e = gemm_case(ta, tb, 130, 7, 200, 3, 0, 0, 0.5f, prec, bound, tag);
			least = fmin(least, e);
			e = gemm_case(ta, tb, 65, 129, 33, 2, 1, 1, 1.0f, prec, bound, tag);
			least = fmin(least, e);
		}
	/* 1 x 1 x 1 not counted: its one product may round exactly */
	gemm_case(0, 1, 1, 1, 1, 1, 0, 1, 0.0f, prec, bound, tag);
	e = gemm_case(0, 1, 1000, 320, 1024, 1, 0, 1, 1.0f, prec, bound, tag);
	return fmin(least, e);
}

static void test_gemm(void **state)
{
	gemm_cases("", BE_PREC_AUTO, 1e-10);
}

/* the reduced-precision GEMMs: looser bounds, same results otherwise */
static void test_gemm_lowp(void **state)
{
	assert_int_equal(be_cuda_set_precision(gpu, BE_PREC_BF16), 0);
	assert_string_equal(gpu->precision, "bf16");
	gemm_cases(" bf16", BE_PREC_AUTO, 1e-4);
	assert_int_equal(be_cuda_set_precision(gpu, BE_PREC_FP16), 0);
	assert_string_equal(gpu->precision, "fp16");
	gemm_cases(" fp16", BE_PREC_AUTO, 1e-5);
	assert_int_equal(be_cuda_set_precision(gpu, BE_PREC_FP32), 0);
	assert_string_equal(gpu->precision, "fp32");
	assert_int_not_equal(be_cuda_set_precision(cpu, BE_PREC_FP32), 0);
}

/* float32 x rounded to bfloat16 (to nearest even) and back */
static float bf16_round(float x)
{
	return safetensors_bf16_to_f32(safetensors_f32_to_bf16(x));
}

/* one GEMM with a bf16 weight operand (a when wa, else b) against the CPU
 * on the same operands rounded to bf16: the GPU stages the fp32 operand as
 * bf16 and accumulates in fp32, so only the summation order differs; bias
 * 2: one whose pointer is 4 bytes off 16 (no cuBLASLt epilogue takes it);
 * relu: the ReLU epilogue (beta 0) */
static void gemm_bf16_case(int wa, int ta, int tb, int m, int n, int k, int bias, float beta, int relu)
{
	int ra = ta ? k : m, ca = ta ? m : k, rb = tb ? n : k, cb = tb ? k : n;
	int64_t lda = ca + 3, ldb = cb + 1, ldc = n + 2, nw = wa ? ra * lda : rb * ldb;
	pair_t A = pair_new(ra * lda), B = pair_new(rb * ldb), C = pair_new(m * ldc), bi = pair_new(n + 1);
	pair_t *W = wa ? &A : &B, *X = wa ? &B : &A;
	uint16_t *w16 = malloc(sizeof *w16 * (size_t)nw), *g16;
	be_gemm_t g = { .transa = ta, .transb = tb, .m = m, .n = n, .k = k, .alpha = 0.75f,
	                .beta = beta, .lda = lda, .ldb = ldb, .ldc = ldc, .batch = 1, .relu = relu };
	char what[128];

	assert_non_null(w16);
	for (int64_t i = 0; i < nw; i++) {
		w16[i] = safetensors_f32_to_bf16(W->c[i]);
		W->c[i] = safetensors_bf16_to_f32(w16[i]);
	}
	assert_int_equal(gpu->alloc(gpu, sizeof *g16 * (size_t)nw, (void **)&g16), 0);
	assert_int_equal(gpu->upload(gpu, g16, w16, sizeof *g16 * (size_t)nw), 0);
	for (int64_t i = 0; i < X->n; i++) X->c[i] = bf16_round(X->c[i]);   /* the GPU keeps fp32 */
	g.a = A.c; g.b = B.c; g.c = C.c; g.bias = bias ? bi.c + (bias == 2) : NULL;
	assert_int_equal(cpu->gemm(cpu, &g), 0);
	g.a = wa ? (const float *)g16 : A.g; g.b = wa ? B.g : (const float *)g16;
	g.a_bf16 = wa; g.b_bf16 = !wa; g.c = C.g; g.bias = bias ? bi.g + (bias == 2) : NULL;
	assert_int_equal(gpu->gemm(gpu, &g), 0);
	snprintf(what, sizeof what, "gemm bf16 %s %c%c m%d n%d k%d%s%s beta%g", wa ? "A" : "B",
	         ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, bias ? bias == 2 ? " bias+4B" : " bias" : "", relu ? " relu" : "", beta);
	pair_check(&C, 1e-10, what);
	gpu->free(gpu, g16);
	free(w16);
	pair_free(&A); pair_free(&B); pair_free(&C); pair_free(&bi);
}

/* bf16 weights (be->weights_bf16, at bf16): a weight as A or B, every
 * transpose, bias and beta, the ReLU, and products larger than the bf16
 * stage (sliced by rows, and by columns with a bias: each slice its part
 * of it, on 16 bytes), a bias off 16 bytes; refused with batch > 1 and on an fp32 device (no stage).  The
 * bias and ReLU are cuBLASLt's epilogue, or (tests/cuemu/test_lt_refused.sh,
 * cuBLASLt finding no algo) passes of their own */
static void test_gemm_bf16_weight(void **state)
{
	assert_int_equal(be_cuda_set_precision(gpu, BE_PREC_BF16), 0);
	assert_true(gpu->weights_bf16);
	for (int wa = 0; wa < 2; wa++)
		for (int ta = 0; ta < 2; ta++)
			for (int tb = 0; tb < 2; tb++)
				gemm_bf16_case(wa, ta, tb, 37, 53, 29, (ta + tb) & 1, ta ? 0.5f : 0.0f, 0);
	gemm_bf16_case(0, 0, 1, 37, 53, 29, 1, 0.0f, 1);
	gemm_bf16_case(1, 1, 0, 37, 53, 29, 0, 0.0f, 1);
	gemm_bf16_case(0, 0, 1, 2100, 9, 4096, 1, 0.0f, 0);   /* 2100 x 4096 > the 8 Mi stage */
	gemm_bf16_case(1, 0, 1, 9, 2100, 4096, 0, 1.0f, 0);
	gemm_bf16_case(1, 0, 1, 9, 2100, 4096, 1, 1.0f, 0);
	gemm_bf16_case(1, 0, 1, 9, 2100, 4096, 1, 0.0f, 1);
	gemm_bf16_case(1, 0, 1, 9, 2800, 3001, 1, 0.0f, 1);   /* slices of 2792 columns, not 2795 */
	gemm_bf16_case(1, 1, 0, 37, 53, 29, 2, 0.0f, 1);
	gemm_bf16_case(0, 0, 0, 37, 53, 29, 2, 0.5f, 0);

	pair_t A = pair_new(64), C = pair_new(64);
	be_gemm_t g = { .transb = 1, .m = 4, .n = 4, .k = 4, .alpha = 1.0f, .a = A.g, .lda = 4,
	                .b = A.g, .ldb = 4, .c = C.g, .ldc = 4, .stride_c = 16, .batch = 2,
	                .b_bf16 = 1 };
	assert_int_equal(gpu->gemm(gpu, &g), -EINVAL);
	assert_int_equal(be_cuda_set_precision(gpu, BE_PREC_FP32), 0);
	assert_false(gpu->weights_bf16);
	g.batch = 1;
	assert_int_equal(gpu->gemm(gpu, &g), -EINVAL);
	pair_free(&A); pair_free(&C);
}

/* A GEMM's own precision (be_gemm_t.prec) overrides the backend's: fp32
 * on a bf16 or fp16 device is fp32 within fp32's bound; bf16 on an fp32
 * device rounds its inputs (the CPU, fp32 only, accepts every prec); a
 * prec that names none is refused. */
static void test_gemm_prec(void **state)
{
	assert_int_equal(be_cuda_set_precision(gpu, BE_PREC_BF16), 0);
	gemm_cases(" bf16 device, fp32 call", BE_PREC_FP32, 1e-10);
	assert_int_equal(be_cuda_set_precision(gpu, BE_PREC_FP16), 0);
	gemm_cases(" fp16 device, fp32 call", BE_PREC_FP32, 1e-10);
	assert_int_equal(be_cuda_set_precision(gpu, BE_PREC_FP32), 0);
	assert_true(gemm_cases(" fp32 device, bf16 call", BE_PREC_BF16, 1e-4) > 1e-8);
	assert_true(gemm_cases(" fp32 device, fp16 call", BE_PREC_FP16, 1e-5) > 1e-10);
	assert_string_equal(gpu->precision, "fp32");

	pair_t A = pair_new(4), B = pair_new(4), C = pair_new(4);
	be_gemm_t g = { .transb = 1, .m = 2, .n = 2, .k = 2, .alpha = 1.0f, .a = A.g, .lda = 2,
	                .b = B.g, .ldb = 2, .c = C.g, .ldc = 2, .batch = 1, .prec = BE_PREC_COUNT };
	assert_int_equal(gpu->gemm(gpu, &g), -EINVAL);
	pair_free(&A); pair_free(&B); pair_free(&C);
}

/* --- attention --- */

enum { LAY_INTERLEAVED, LAY_HEAD_MAJOR, LAY_PADDED };
enum { BIAS_NONE, BIAS_PER_BATCH, BIAS_SHARED };
enum { MASK_NONE, MASK_RANDOM, MASK_ONE_EMPTY };

/* strides of a [B, L, H, D] tensor in one of the layouts; returns its size */
static int64_t attn_layout(int lay, int B, int L, int H, int D,
                           int64_t *sb, int64_t *sl, int64_t *sh)
{
	switch (lay) {
	case LAY_HEAD_MAJOR: *sh = (int64_t)L * D; *sl = D; *sb = (int64_t)H * L * D; break;
	case LAY_PADDED:     *sh = D; *sl = (int64_t)H * D + 3; *sb = L * *sl + 5; break;
	default:             *sh = D; *sl = (int64_t)H * D; *sb = L * *sl; break;
	}
	return B * *sb;
}

/* one attention problem on both backends: q, k, v uniform in [-1, 1), the
 * bias that times bias_scale, the mask 0 / 1 (MASK_ONE_EMPTY: batch B - 1
 * all 0) */
typedef struct {
	be_attn_t a;
	pair_t    q, k, v, o, bi, mk;
	int       bias, mask;
} attn_t;

static void attn_new(attn_t *t, int B, int H, int Lq, int Lk, int D, int lay, int bias, int mask,
                     float bias_scale)
{
	be_attn_t *a = &t->a;
	*a = (be_attn_t){ .B = B, .H = H, .Lq = Lq, .Lk = Lk, .D = D, .scale = 1.0f / sqrtf((float)D) };
	int64_t nq = attn_layout(lay, B, Lq, H, D, &a->q_sb, &a->q_sl, &a->q_sh);
	int64_t nk = attn_layout(lay, B, Lk, H, D, &a->k_sb, &a->k_sl, &a->k_sh);
	attn_layout(lay, B, Lk, H, D, &a->v_sb, &a->v_sl, &a->v_sh);
	attn_layout(lay, B, Lq, H, D, &a->o_sb, &a->o_sl, &a->o_sh);
	a->bias_sq = Lk % 4 ? Lk + 1 : Lk;   /* rows of Lk where 16-byte copies can take them */
	a->bias_sh = Lq * a->bias_sq;
	a->bias_sb = bias == BIAS_SHARED ? 0 : H * a->bias_sh;
	a->mask_sb = Lk;
	t->bias = bias;
	t->mask = mask;
	t->q = pair_new(nq); t->k = pair_new(nk); t->v = pair_new(nk); t->o = pair_new(nq);
	t->bi = pair_new(bias == BIAS_SHARED ? H * a->bias_sh : B * H * a->bias_sh);
	t->mk = pair_new((int64_t)B * Lk);
	for (int64_t i = 0; i < t->bi.n; i++) t->bi.c[i] *= bias_scale;
	for (int64_t i = 0; i < t->mk.n; i++)
		t->mk.c[i] = mask == MASK_ONE_EMPTY && i / Lk == B - 1 ? 0.0f : t->mk.c[i] > -0.6f;
	assert_int_equal(gpu->upload(gpu, t->bi.g, t->bi.c, sizeof(float) * t->bi.n), 0);
	assert_int_equal(gpu->upload(gpu, t->mk.g, t->mk.c, sizeof(float) * t->mk.n), 0);
}

/* t->a on the CPU's copies (be == cpu) or the GPU's, run there */
static void attn_run(attn_t *t, be_t *be)
{
	int g = be == gpu;
	be_attn_t *a = &t->a;
	a->q = g ? t->q.g : t->q.c; a->k = g ? t->k.g : t->k.c;
	a->v = g ? t->v.g : t->v.c; a->o = g ? t->o.g : t->o.c;
	a->bias = t->bias ? (g ? t->bi.g : t->bi.c) : NULL;
	a->mask = t->mask ? (g ? t->mk.g : t->mk.c) : NULL;
	assert_int_equal(be->attn(be, a), 0);
}

static void attn_free(attn_t *t)
{
	pair_free(&t->q); pair_free(&t->k); pair_free(&t->v); pair_free(&t->o);
	pair_free(&t->bi); pair_free(&t->mk);
}

static void attn_case(int B, int H, int Lq, int Lk, int D, int lay, int bias, int mask)
{
	attn_t t;
	char what[128];

	attn_new(&t, B, H, Lq, Lk, D, lay, bias, mask, 3.0f);
	attn_run(&t, cpu);
	attn_run(&t, gpu);
	snprintf(what, sizeof what, "attn B%d H%d Lq%d Lk%d D%d lay%d bias%d mask%d",
	         B, H, Lq, Lk, D, lay, bias, mask);
	pair_check(&t.o, 1e-9, what);
	attn_free(&t);
}

static void test_attn(void **state)
{
	static const int Ds[] = { 1, 7, 16, 24, 32, 33, 48, 64, 100, 128, 129, 200, 256 };
	for (size_t i = 0; i < sizeof Ds / sizeof *Ds; i++)
		attn_case(2, 3, 37, 45, Ds[i], (int)(i % 3), (int)(i % 3), (int)((i + 1) % 3));
	attn_case(1, 1, 1, 1, 32, LAY_INTERLEAVED, BIAS_NONE, MASK_NONE);
	attn_case(3, 4, 1, 70, 32, LAY_HEAD_MAJOR, BIAS_PER_BATCH, MASK_RANDOM);
	attn_case(3, 4, 70, 1, 32, LAY_HEAD_MAJOR, BIAS_SHARED, MASK_NONE);
	attn_case(2, 4, 77, 77, 32, LAY_INTERLEAVED, BIAS_SHARED, MASK_ONE_EMPTY);
	attn_case(5, 8, 129, 129, 64, LAY_PADDED, BIAS_PER_BATCH, MASK_RANDOM);
	attn_case(1, 20, 300, 300, 64, LAY_INTERLEAVED, BIAS_NONE, MASK_NONE);
	attn_case(1, 2, 33, 1000, 128, LAY_HEAD_MAJOR, BIAS_NONE, MASK_RANDOM);
}

/* --- attention at bf16: the tensor-core kernel (kernels/flash_attn.cu) ---
 * It rounds q, k, v and the probabilities to bfloat16 (unit roundoff
 * u = 2^-8) and does everything else in fp32, so for query row i (batch b,
 * head h), with A = scale max_j sum_d |q_id| |k_jd| and Bm = max_j |bias_ij|
 * over the live keys j:
 *  - each score is off by at most delta = 2.01 u A + 2^-21 (A + Bm): two
 *    roundings per product (2u + u^2), fp32 sums of D <= 64 terms
 *    (< 0.01 u A), the scale, the bias and the reference's own fp32;
 *  - so each softmax weight w_j by a factor within exp(+-2 delta), and the
 *    rounded probabilities, divided by their own sum, by (1 + u) / (1 - u)
 *    at most: w'_j = w_j (1 + e_j), |e_j| <= eta = exp(2 delta)
 *    (1 + u) / (1 - u) - 1;
 *  - o'_d = sum_j w'_j bf16(v_jd), so |o'_d - o_d| <= (eta + u (1 + eta))
 *    V_d with V_d = max_j |v_jd|, plus (2 Lk + 64) 2^-24 V_d for the fp32
 *    sums of the output, the running sum and the rescaling, and 2 2^-24
 *    V_d for 1 / l (rcp.approx, within 1 ulp).
 * A row whose keys are all dropped is 0 on both.  The case also runs the
 * fp32 kernel on the same data: the bf16 result must be measurably further
 * from the reference (it is the tensor-core kernel that ran). */
static double attn_bf16_bound(const attn_t *t, int b, int i, int h, int d)
{
	const be_attn_t *a = &t->a;
	const double u = 0x1p-8;
	double A = 0.0, Bm = 0.0, V = 0.0;
	int live = 0;

	for (int j = 0; j < a->Lk; j++) {
		if (t->mask && t->mk.c[(int64_t)b * a->mask_sb + j] == 0.0f) continue;
		double dot = 0.0;
		for (int c = 0; c < a->D; c++)
			dot += fabs(t->q.c[b * a->q_sb + i * a->q_sl + h * a->q_sh + c]) *
			       fabs(t->k.c[b * a->k_sb + j * a->k_sl + h * a->k_sh + c]);
		A = fmax(A, a->scale * dot);
		if (t->bias) Bm = fmax(Bm, fabs(t->bi.c[b * a->bias_sb + h * a->bias_sh + i * a->bias_sq + j]));
		V = fmax(V, fabs(t->v.c[b * a->v_sb + j * a->v_sl + h * a->v_sh + d]));
		live = 1;
	}
	if (!live) return 0.0;
	double delta = 2.01 * u * A + 0x1p-21 * (A + Bm);
	double eta = exp(2.0 * delta) * (1.0 + u) / (1.0 - u) - 1.0;
	return (eta + u * (1.0 + eta) + (2.0 * a->Lk + 66.0) * 0x1p-24) * V;
}

/* the GPU's bf16 output of t (downloaded into h: [t->o.n]) against the
 * CPU's (t->o.c): printed, the largest error / bound (attn_bf16_bound)
 * asserted <= 1; its NMSE */
static double attn_bf16_check(const attn_t *t, float *h, const char *what)
{
	const be_attn_t *a = &t->a;
	double worst = 0.0, num = 0.0, den = 0.0;

	assert_int_equal(gpu->sync(gpu), 0);
	assert_int_equal(gpu->download(gpu, h, t->o.g, sizeof *h * (size_t)t->o.n), 0);
	for (int b = 0; b < a->B; b++)
		for (int i = 0; i < a->Lq; i++)
			for (int hd = 0; hd < a->H; hd++)
				for (int d = 0; d < a->D; d++) {
					int64_t at = b * a->o_sb + i * a->o_sl + hd * a->o_sh + d;
					double err = fabs((double)h[at] - t->o.c[at]);
					double bound = attn_bf16_bound(t, b, i, hd, d);
					num += err * err;
					den += (double)t->o.c[at] * t->o.c[at];
					double ratio = err <= 0.0 ? 0.0 : err / bound;   /* NaN: NaN */
					if (!(ratio <= worst)) worst = isnan(ratio) ? INFINITY : ratio;
				}
	double nmse = den > 0.0 ? num / den : num;
	printf("  %-56s bf16: largest error / bound %.3g, nmse %.3g\n", what, worst, nmse);
	assert_true(worst <= 1.0);
	return nmse;
}

/* t on the CPU, the GPU's fp32 kernel and its bf16 one, checked; freed */
static void attn_bf16_run(attn_t *t, const char *what)
{
	attn_run(t, cpu);
	attn_run(t, gpu);
	double nmse32 = pair_check(&t->o, 1e-9, what);
	assert_int_equal(be_cuda_set_precision(gpu, BE_PREC_BF16), 0);
	attn_run(t, gpu);
	assert_int_equal(be_cuda_set_precision(gpu, BE_PREC_FP32), 0);

	float *h = malloc(sizeof *h * (size_t)t->o.n);
	assert_non_null(h);
	double nmse = attn_bf16_check(t, h, what);
	free(h);
	assert_true(nmse > 100.0 * nmse32);
	attn_free(t);
}

static void attn_bf16_case(int B, int H, int Lq, int Lk, int D, int lay, int bias, int mask,
                           float bias_scale)
{
	attn_t t;
	char what[160];

	attn_new(&t, B, H, Lq, Lk, D, lay, bias, mask, bias_scale);
	snprintf(what, sizeof what, "attn B%d H%d Lq%d Lk%d D%d lay%d bias%d*%g mask%d",
	         B, H, Lq, Lk, D, lay, bias, bias_scale, mask);
	attn_bf16_run(&t, what);
}

/* the kernel's stabiliser where scores move far: rising along the keys
 * (the shared bias a ramp of 0.7 a key on top: tile 4's 180, 260 in log2
 * units, above tile 0's, far past any unrenewed P's range), or all some
 * 150 down (the bias less 150) with batch row 0's first 100 keys dropped
 * (its first live ones in tile 1: 2^-216 unstabilised, 0 in fp32) */
static void attn_bf16_far(void)
{
	attn_t t;

	attn_new(&t, 2, 4, 70, 300, 32, LAY_INTERLEAVED, BIAS_SHARED, MASK_NONE, 1.0f);
	for (int64_t i = 0; i < t.bi.n; i++) t.bi.c[i] += 0.7f * (float)(i % t.a.bias_sq);
	assert_int_equal(gpu->upload(gpu, t.bi.g, t.bi.c, sizeof(float) * t.bi.n), 0);
	attn_bf16_run(&t, "attn B2 H4 Lq70 Lk300 D32, a rising bias");

	attn_new(&t, 2, 4, 70, 300, 32, LAY_INTERLEAVED, BIAS_SHARED, MASK_RANDOM, 1.0f);
	for (int64_t i = 0; i < t.bi.n; i++) t.bi.c[i] -= 150.0f;
	for (int j = 0; j < 300; j++) t.mk.c[j] = j >= 100;
	assert_int_equal(gpu->upload(gpu, t.bi.g, t.bi.c, sizeof(float) * t.bi.n), 0);
	assert_int_equal(gpu->upload(gpu, t.mk.g, t.mk.c, sizeof(float) * t.mk.n), 0);
	attn_bf16_run(&t, "attn B2 H4 Lq70 Lk300 D32, scores at -150, 100 keys dropped");
}

/* the shapes of triangle attention (D 32, 4 heads, one bias for all rows),
 * sequence attention and ESM-2 (one batch row), the fixtures' widths (8,
 * 16), lengths off the 64-query and 64-key tiles (1 to 5 key tiles: the
 * online rescaling and the cp.async double buffer), large biases, dropped
 * keys and fully dropped rows (mask 2), 16-byte copies (interleaved or
 * head-major rows, bias rows of Lk = 300 or 40 with their last tile
 * part-filled, or of 128 for Lk = 127) and 4-byte ones (padded rows, odd
 * bias rows), scores far from the first tile's (attn_bf16_far); a head over CU_FLASH_DMAX
 * stays on the exact fp32 kernel.
 * L = 300 runs with 2 batch rows, not 300 (the emulator's time) */
static void test_attn_bf16(void **state)
{
	attn_bf16_case(3, 4, 129, 127, 32, LAY_INTERLEAVED, BIAS_SHARED, MASK_ONE_EMPTY, 20.0f);
	attn_bf16_case(4, 4, 129, 129, 32, LAY_PADDED, BIAS_SHARED, MASK_RANDOM, 20.0f);
	attn_bf16_case(2, 4, 300, 300, 32, LAY_INTERLEAVED, BIAS_SHARED, MASK_ONE_EMPTY, 20.0f);
	attn_bf16_case(1, 4, 129, 129, 64, LAY_HEAD_MAJOR, BIAS_NONE, MASK_RANDOM, 1.0f);
	attn_bf16_case(2, 2, 300, 300, 64, LAY_INTERLEAVED, BIAS_SHARED, MASK_ONE_EMPTY, 20.0f);
	attn_bf16_case(3, 2, 33, 70, 64, LAY_PADDED, BIAS_PER_BATCH, MASK_ONE_EMPTY, 20.0f);
	attn_bf16_case(1, 4, 1, 1, 32, LAY_INTERLEAVED, BIAS_SHARED, MASK_NONE, 3.0f);
	attn_bf16_case(17, 4, 17, 17, 32, LAY_INTERLEAVED, BIAS_SHARED, MASK_RANDOM, 3.0f);
	attn_bf16_case(33, 4, 33, 33, 32, LAY_INTERLEAVED, BIAS_SHARED, MASK_ONE_EMPTY, 20.0f);
	attn_bf16_case(6, 4, 70, 70, 32, LAY_INTERLEAVED, BIAS_SHARED, MASK_RANDOM, 20.0f);
	attn_bf16_case(3, 2, 70, 70, 8, LAY_PADDED, BIAS_SHARED, MASK_RANDOM, 3.0f);
	attn_bf16_case(1, 4, 70, 70, 16, LAY_INTERLEAVED, BIAS_PER_BATCH, MASK_NONE, 3.0f);
	attn_bf16_case(2, 3, 45, 37, 24, LAY_HEAD_MAJOR, BIAS_PER_BATCH, MASK_RANDOM, 3.0f);
	attn_bf16_case(1, 3, 40, 40, 64, LAY_HEAD_MAJOR, BIAS_NONE, MASK_NONE, 1.0f);
	attn_bf16_case(3, 2, 1, 70, 48, LAY_INTERLEAVED, BIAS_PER_BATCH, MASK_RANDOM, 3.0f);
	attn_bf16_case(5, 2, 70, 1, 32, LAY_PADDED, BIAS_SHARED, MASK_NONE, 3.0f);
	attn_bf16_far();

	attn_t t;
	attn_new(&t, 2, 3, 37, 45, 100, LAY_INTERLEAVED, BIAS_PER_BATCH, MASK_RANDOM, 3.0f);
	attn_run(&t, cpu);
	assert_int_equal(be_cuda_set_precision(gpu, BE_PREC_BF16), 0);
	attn_run(&t, gpu);
	assert_int_equal(be_cuda_set_precision(gpu, BE_PREC_FP32), 0);
	pair_check(&t.o, 1e-9, "attn D100 at bf16: the fp32 kernel");
	attn_free(&t);
}

/* --- attention with its gate (be_attn_t.g) ---
 * Both kernels (exact fp32, and the bf16 tensor-core one) gate o as they
 * write it: the gated result must be the ungated one p of the same kernel
 * divided by 1 + exp(-g) (the BE_GATE formula) within attn_gate_tol of
 * the exact quotient, and at fp32 match the CPU backend's gated attention.
 * The fp32 kernel's bound, with u = 2^-24 (half an ulp relative) and e = exp(-g) > 0:
 * the card's expf is within 2 ulp of e (CUDA's documented maximum: the
 * MUFU.EX2 approximation and its scaling), i.e. relatively within 4 u,
 * since an ulp is at most 2 u of the value; nvcc may fuse 1 + expf into one
 * rounding of 1 + the unrounded product, whose error is then up to half an
 * ulp more: E = e (1 + d1), |d1| <= 5 u.  The sum is rounded once, D =
 * (1 + E)(1 + d2), |d2| <= u, and 1 + E = (1 + e)(1 + d1 e / (1 + e)),
 * |d1 e / (1 + e)| < |d1|.  The division is IEEE (nvcc's -prec-div
 * default): fl(p / D) = p / D (1 + d3), |d3| <= u.  So the result is the
 * exact p / (1 + e) times (1 + d3) / ((1 + d1')(1 + d2)): relatively
 * within 5 u + u + u = 7 u to first order; 7.01 u covers the second-order
 * terms and the double reference.  The host's glibc expf (used by the
 * emulator) is within 0.502 ulp, so an emulated expf 2 ulp off
 * (CUEMU_EXPF_ULP=2, tests/cuemu/test_attn_gate_ulp.sh) stays inside.
 * The bf16 kernel gates by the approximate instructions, p / D as p
 * times rcp.approx(1 + ex2.approx(-g log2 e)), the exponential as __expf
 * computes it (CUDA's documented maxima: __expf within 2 + floor(|1.173
 * g|) ulp, rcp.approx within 1 ulp; 1 + E < 2^126, i.e. g > -87.3, else
 * 0): d1 <= (2 + 1.173 |g|) 2^-23, which reaches 1 + E damped by e / (1 +
 * e), d2 <= u, the reciprocal 2^-23 and the product u; attn_gate_tol. */
#define ATTN_GATE_REL (7.01 * 0x1p-24)

/* the bound on |gated - p / (1 + exp(-g))| for ref = p / (1 + exp(-g)) */
static double attn_gate_tol(double ref, float g, int bf16)
{
	if (!bf16) return ATTN_GATE_REL * fabs(ref);
	double e = exp(-(double)g);
	return 1.01 * ((2.0 + 1.173 * fabs(g)) * 0x1p-23 * e / (1.0 + e) + 0x1p-24 + 0x1p-23 + 0x1p-24) * fabs(ref);
}
static void attn_gate_case(int B, int H, int Lq, int Lk, int D, int lay, int bias, int mask, int bf16)
{
	attn_t t;
	char what[160];
	const be_attn_t *a = &t.a;

	attn_new(&t, B, H, Lq, Lk, D, lay, bias, mask, 3.0f);
	pair_t g = pair_new(t.o.n);
	for (int64_t i = 0; i < g.n; i++) g.c[i] *= 6.0f;
	assert_int_equal(gpu->upload(gpu, g.g, g.c, sizeof(float) * g.n), 0);
	float *plain = malloc(sizeof *plain * (size_t)t.o.n), *gated = malloc(sizeof *gated * (size_t)t.o.n);
	assert_true(plain && gated);
	snprintf(what, sizeof what, "gated attn B%d H%d Lq%d Lk%d D%d lay%d bias%d mask%d %s",
	         B, H, Lq, Lk, D, lay, bias, mask, bf16 ? "bf16" : "fp32");
	if (bf16) assert_int_equal(be_cuda_set_precision(gpu, BE_PREC_BF16), 0);
	t.a.g = NULL;
	attn_run(&t, gpu);
	assert_int_equal(gpu->sync(gpu), 0);
	assert_int_equal(gpu->download(gpu, plain, t.o.g, sizeof *plain * (size_t)t.o.n), 0);
	t.a.g = g.g;
	attn_run(&t, gpu);
	assert_int_equal(gpu->sync(gpu), 0);
	assert_int_equal(gpu->download(gpu, gated, t.o.g, sizeof *gated * (size_t)t.o.n), 0);
	if (bf16) assert_int_equal(be_cuda_set_precision(gpu, BE_PREC_FP32), 0);
	double worst = 0.0;
	int64_t n = 0, nbits = 0;
	for (int b = 0; b < B; b++)
		for (int i = 0; i < Lq; i++)
			for (int hd = 0; hd < H; hd++)
				for (int d = 0; d < D; d++) {
					int64_t at = b * a->o_sb + i * a->o_sl + hd * a->o_sh + d;
					double ref = plain[at] / (1.0 + exp(-(double)g.c[at]));
					double err = fabs(gated[at] - ref), tol = attn_gate_tol(ref, g.c[at], bf16);
					if (!(err <= tol))   /* NaN too */
						fail_msg("%s: o at %lld is %.9g, not the ungated %.9g gated (%.9g)",
						         what, (long long)at, gated[at], plain[at], ref);
					if (tol > 0.0) worst = fmax(worst, err / tol);
					nbits += gated[at] != plain[at] / (1.0f + expf(-g.c[at]));
					n++;
				}
	/* how far the bound is used; how many a comparison with the host's
	 * expf bit for bit would refuse */
	printf("  %-56s gate: largest error / bound %.3g, %lld of %lld not the host expf's bits\n",
	       what, worst, (long long)nbits, (long long)n);
	if (!bf16) {   /* the CPU's gated attention against the GPU's */
		t.a.g = g.c;
		attn_run(&t, cpu);
		t.a.g = g.g;
		pair_check(&t.o, 1e-9, what);
	}
	free(plain);
	free(gated);
	pair_free(&g);
	attn_free(&t);
}

/* awkward shapes on both kernels, and triangle attention's (D 32, 4 heads,
 * one bias for all rows) */
static void test_attn_gate(void **state)
{
	for (int bf16 = 0; bf16 < 2; bf16++) {
		attn_gate_case(1, 1, 1, 1, 7, LAY_INTERLEAVED, BIAS_NONE, MASK_NONE, bf16);
		attn_gate_case(2, 3, 37, 45, 24, LAY_HEAD_MAJOR, BIAS_PER_BATCH, MASK_RANDOM, bf16);
		attn_gate_case(6, 4, 70, 70, 32, LAY_INTERLEAVED, BIAS_SHARED, MASK_ONE_EMPTY, bf16);
		attn_gate_case(3, 2, 33, 40, 64, LAY_PADDED, BIAS_SHARED, MASK_RANDOM, bf16);
	}
	attn_gate_case(1, 2, 33, 70, 100, LAY_HEAD_MAJOR, BIAS_NONE, MASK_NONE, 0);
}

/* --- attention with the rotary table (be_attn_t.rope) ---
 * ESM-2's attention rotates q and k as it loads them.  The reference is
 * attention without the table on q and k rotated first here (the rotary
 * pass's arithmetic): the CPU and both CUDA kernels (exact fp32, bf16
 * tensor cores) must give its bits exactly, and the kernels must match the
 * CPU as test_attn (fp32 NMSE) and test_attn_bf16 (the bf16 bound, on the
 * rotated q and k) demand. */

/* t's q and k (both copies) rotated in place by rope: host [P, D/2, 2] at
 * positions i (queries) and j (keys), rotate-half */
static void attn_rotate(attn_t *t, const float *rope)
{
	const be_attn_t *a = &t->a;
	int half = a->D / 2;
	struct { pair_t *x; int L; int64_t sb, sl, sh; } qk[2] = {
		{ &t->q, a->Lq, a->q_sb, a->q_sl, a->q_sh }, { &t->k, a->Lk, a->k_sb, a->k_sl, a->k_sh },
	};
	for (int w = 0; w < 2; w++) {
		for (int b = 0; b < a->B; b++)
			for (int i = 0; i < qk[w].L; i++)
				for (int h = 0; h < a->H; h++) {
					float *r = qk[w].x->c + b * qk[w].sb + i * qk[w].sl + h * qk[w].sh;
					for (int d = 0; d < half; d++) {
						float cs = rope[((int64_t)i * half + d) * 2], sn = rope[((int64_t)i * half + d) * 2 + 1];
						float x1 = r[d], x2 = r[d + half];
						r[d] = x1 * cs - x2 * sn;
						r[d + half] = x2 * cs + x1 * sn;
					}
				}
		assert_int_equal(gpu->upload(gpu, qk[w].x->g, qk[w].x->c, sizeof(float) * qk[w].x->n), 0);
	}
}

/* o of t and of r (downloaded) equal bit for bit */
static void attn_same(const attn_t *t, const attn_t *r, int gpu_copy, const char *what)
{
	int64_t n = t->o.n;
	float *x = malloc(sizeof *x * (size_t)n), *y = malloc(sizeof *y * (size_t)n);
	assert_true(x && y);
	if (gpu_copy) {
		assert_int_equal(gpu->sync(gpu), 0);
		assert_int_equal(gpu->download(gpu, x, t->o.g, sizeof *x * (size_t)n), 0);
		assert_int_equal(gpu->download(gpu, y, r->o.g, sizeof *y * (size_t)n), 0);
	} else {
		memcpy(x, t->o.c, sizeof *x * (size_t)n);
		memcpy(y, r->o.c, sizeof *y * (size_t)n);
	}
	for (int64_t i = 0; i < n; i++)
		if (memcmp(x + i, y + i, sizeof *x))
			fail_msg("%s: o[%lld] = %.9g with the table, %.9g rotated first", what, (long long)i,
			         x[i], y[i]);
	free(x);
	free(y);
}

static void attn_rope_case(int B, int H, int Lq, int Lk, int D, int lay, int bias, int mask)
{
	attn_t t, r;
	char what[160];
	int P = Lq > Lk ? Lq : Lk;
	uint64_t seed = rng;

	attn_new(&t, B, H, Lq, Lk, D, lay, bias, mask, 3.0f);
	rng = seed;
	attn_new(&r, B, H, Lq, Lk, D, lay, bias, mask, 3.0f);   /* the same numbers */
	pair_t rope = pair_new((int64_t)P * D);
	for (int p = 0; p < P; p++)   /* ESM-2's angles p 10000^(-2d/D) */
		for (int d = 0; d < D / 2; d++) {
			double ang = p * pow(10000.0, -2.0 * d / D);
			rope.c[((int64_t)p * (D / 2) + d) * 2] = (float)cos(ang);
			rope.c[((int64_t)p * (D / 2) + d) * 2 + 1] = (float)sin(ang);
		}
	assert_int_equal(gpu->upload(gpu, rope.g, rope.c, sizeof(float) * rope.n), 0);
	attn_rotate(&r, rope.c);
	snprintf(what, sizeof what, "rope attn B%d H%d Lq%d Lk%d D%d lay%d bias%d mask%d",
	         B, H, Lq, Lk, D, lay, bias, mask);

	t.a.rope = rope.c;
	attn_run(&t, cpu);
	attn_run(&r, cpu);
	attn_same(&t, &r, 0, what);
	t.a.rope = rope.g;
	attn_run(&t, gpu);
	attn_run(&r, gpu);
	attn_same(&t, &r, 1, what);
	pair_check(&t.o, 1e-9, what);
	assert_int_equal(be_cuda_set_precision(gpu, BE_PREC_BF16), 0);
	attn_run(&t, gpu);
	attn_run(&r, gpu);
	assert_int_equal(be_cuda_set_precision(gpu, BE_PREC_FP32), 0);
	attn_same(&t, &r, 1, what);
	float *h = malloc(sizeof *h * (size_t)r.o.n);
	assert_non_null(h);
	attn_bf16_check(&r, h, what);
	free(h);
	pair_free(&rope);
	attn_free(&t);
	attn_free(&r);
}

/* ESM-2's shape (one batch row, Lq = Lk = T) at T 1, 17, 70, 130 (off the
 * 16-query and 32-key tiles), heads of 16, 32 and 64, random and dropped
 * keys; more rows with a bias, Lq != Lk, a padded head (24) and one over
 * CU_FLASH_DMAX (exact kernel at bf16) */
static void test_attn_rope(void **state)
{
	attn_rope_case(1, 2, 1, 1, 16, LAY_INTERLEAVED, BIAS_NONE, MASK_NONE);
	attn_rope_case(1, 3, 17, 17, 32, LAY_INTERLEAVED, BIAS_NONE, MASK_RANDOM);
	attn_rope_case(1, 4, 70, 70, 64, LAY_INTERLEAVED, BIAS_NONE, MASK_RANDOM);
	attn_rope_case(1, 2, 130, 130, 16, LAY_PADDED, BIAS_NONE, MASK_NONE);
	attn_rope_case(1, 2, 130, 130, 64, LAY_INTERLEAVED, BIAS_NONE, MASK_RANDOM);
	attn_rope_case(3, 2, 70, 70, 32, LAY_HEAD_MAJOR, BIAS_PER_BATCH, MASK_ONE_EMPTY);
	attn_rope_case(2, 3, 37, 45, 24, LAY_PADDED, BIAS_SHARED, MASK_RANDOM);
	attn_rope_case(2, 2, 45, 17, 64, LAY_INTERLEAVED, BIAS_PER_BATCH, MASK_NONE);
	attn_rope_case(1, 2, 33, 40, 100, LAY_HEAD_MAJOR, BIAS_NONE, MASK_RANDOM);
}

/* --- row ops --- */

static void test_layernorm(void **state)
{
	static const int ds[] = { 1, 7, 32, 128, 1030, 2560 };
	for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) {
		int d = ds[i];
		int64_t rows = 333;
		pair_t x = pair_new(rows * d), y = pair_new(rows * d), w = pair_new(d), b = pair_new(d);
		char what[64];
		for (int64_t j = 0; j < x.n; j++) x.c[j] = 4.0f * x.c[j] + 2.0f;
		assert_int_equal(gpu->upload(gpu, x.g, x.c, sizeof(float) * x.n), 0);
		assert_int_equal(cpu->layernorm(cpu, &(be_layernorm_t){
			.y = y.c, .x = x.c, .rows = rows, .d = d, .w = w.c, .b = b.c, .eps = 1e-5f,
		}), 0);
		assert_int_equal(gpu->layernorm(gpu, &(be_layernorm_t){
			.y = y.g, .x = x.g, .rows = rows, .d = d, .w = w.g, .b = b.g, .eps = 1e-5f,
		}), 0);
		snprintf(what, sizeof what, "layernorm rows%lld d%d", (long long)rows, d);
		pair_check(&y, 1e-10, what);
		/* in place */
		assert_int_equal(cpu->layernorm(cpu, &(be_layernorm_t){
			.y = x.c, .x = x.c, .rows = rows, .d = d, .w = w.c, .b = b.c, .eps = 1e-5f,
		}), 0);
		assert_int_equal(gpu->layernorm(gpu, &(be_layernorm_t){
			.y = x.g, .x = x.g, .rows = rows, .d = d, .w = w.g, .b = b.g, .eps = 1e-5f,
		}), 0);
		snprintf(what, sizeof what, "layernorm in place rows%lld d%d", (long long)rows, d);
		pair_check(&x, 1e-10, what);
		pair_free(&x); pair_free(&y); pair_free(&w); pair_free(&b);
	}
}

static void test_softmax(void **state)
{
	static const int ds[] = { 1, 5, 33, 1500 };
	for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) {
		int d = ds[i];
		int64_t rows = 77;
		pair_t x = pair_new(rows * d);
		char what[64];
		for (int64_t j = 0; j < x.n; j++) x.c[j] *= 20.0f;
		assert_int_equal(gpu->upload(gpu, x.g, x.c, sizeof(float) * x.n), 0);
		assert_int_equal(cpu->softmax(cpu, &(be_softmax_t){ .x = x.c, .rows = rows, .d = d }), 0);
		assert_int_equal(gpu->softmax(gpu, &(be_softmax_t){ .x = x.g, .rows = rows, .d = d }), 0);
		snprintf(what, sizeof what, "softmax rows%lld d%d", (long long)rows, d);
		pair_check(&x, 1e-10, what);
		pair_free(&x);
	}
}

/* --- elementwise --- */

static void test_act_binary(void **state)
{
	static const char *an[] = { "relu", "gelu", "sigmoid" }, *bn[] = { "add", "mul", "gate" };
	const int64_t n = 100003;
	char what[64];

	for (int kind = 0; kind < 3; kind++) {
		pair_t x = pair_new(n);
		for (int64_t j = 0; j < n; j++) x.c[j] *= 6.0f;
		assert_int_equal(gpu->upload(gpu, x.g, x.c, sizeof(float) * n), 0);
		assert_int_equal(cpu->act(cpu, &(be_unary_t){ .x = x.c, .n = n, .kind = (be_act_t)kind }), 0);
		assert_int_equal(gpu->act(gpu, &(be_unary_t){ .x = x.g, .n = n, .kind = (be_act_t)kind }), 0);
		snprintf(what, sizeof what, "act %s n%lld", an[kind], (long long)n);
		pair_check(&x, 1e-10, what);
		pair_free(&x);
	}
	for (int kind = 0; kind < 3; kind++) {
		pair_t a = pair_new(n), b = pair_new(n), y = pair_new(n);
		assert_int_equal(cpu->binary(cpu, &(be_binary_t){
			.y = y.c, .a = a.c, .b = b.c, .n = n, .kind = (be_bin_t)kind,
		}), 0);
		assert_int_equal(gpu->binary(gpu, &(be_binary_t){
			.y = y.g, .a = a.g, .b = b.g, .n = n, .kind = (be_bin_t)kind,
		}), 0);
		snprintf(what, sizeof what, "binary %s n%lld", bn[kind], (long long)n);
		pair_check(&y, 1e-10, what);
		/* y aliasing b */
		assert_int_equal(cpu->binary(cpu, &(be_binary_t){
			.y = b.c, .a = a.c, .b = b.c, .n = n, .kind = (be_bin_t)kind,
		}), 0);
		assert_int_equal(gpu->binary(gpu, &(be_binary_t){
			.y = b.g, .a = a.g, .b = b.g, .n = n, .kind = (be_bin_t)kind,
		}), 0);
		snprintf(what, sizeof what, "binary %s in place", bn[kind]);
		pair_check(&b, 1e-10, what);
		pair_free(&a); pair_free(&b); pair_free(&y);
	}
}

static void test_axpby_fill(void **state)
{
	const int64_t n = 70001;
	pair_t x = pair_new(n), y = pair_new(n);

	assert_int_equal(cpu->axpby(cpu, &(be_axpby_t){
		.y = y.c, .x = x.c, .n = n, .alpha = 0.3f, .beta = -1.7f,
	}), 0);
	assert_int_equal(gpu->axpby(gpu, &(be_axpby_t){
		.y = y.g, .x = x.g, .n = n, .alpha = 0.3f, .beta = -1.7f,
	}), 0);
	pair_check(&y, 1e-12, "axpby beta -1.7");
	assert_int_equal(cpu->fill(cpu, &(be_fill_t){ .x = y.c, .n = n, .value = NAN }), 0);
	assert_int_equal(gpu->fill(gpu, &(be_fill_t){ .x = y.g, .n = n, .value = NAN }), 0);
	assert_int_equal(cpu->axpby(cpu, &(be_axpby_t){
		.y = y.c, .x = x.c, .n = n, .alpha = 2.0f, .beta = 0.0f,
	}), 0);
	assert_int_equal(gpu->axpby(gpu, &(be_axpby_t){
		.y = y.g, .x = x.g, .n = n, .alpha = 2.0f, .beta = 0.0f,
	}), 0);
	pair_check(&y, 0.0, "axpby beta 0 over NaN");
	assert_int_equal(cpu->fill(cpu, &(be_fill_t){ .x = x.c, .n = n - 1, .value = 0.625f }), 0);
	assert_int_equal(gpu->fill(gpu, &(be_fill_t){ .x = x.g, .n = n - 1, .value = 0.625f }), 0);
	pair_check(&x, 0.0, "fill n-1");
	pair_free(&x); pair_free(&y);
}

static void test_gather(void **state)
{
	const int64_t rows = 1001, ntab = 33;
	const int d = 37;
	int32_t *idx = malloc(sizeof *idx * rows);
	pair_t t = pair_new(ntab * d), y = pair_new(rows * d);

	assert_non_null(idx);
	for (int64_t r = 0; r < rows; r++) idx[r] = (int32_t)((xs_unif(&rng) + 1.0f) * 0.5f * ntab) % ntab;
	assert_int_equal(cpu->gather(cpu, &(be_gather_t){
		.y = y.c, .table = t.c, .idx = idx, .rows = rows, .d = d, .scale = 1.5f,
	}), 0);
	assert_int_equal(gpu->gather(gpu, &(be_gather_t){
		.y = y.g, .table = t.g, .idx = idx, .rows = rows, .d = d, .scale = 1.5f,
	}), 0);
	pair_check(&y, 0.0, "gather rows1001 d37");
	/* fewer rows */
	assert_int_equal(cpu->gather(cpu, &(be_gather_t){
		.y = y.c, .table = t.c, .idx = idx + 5, .rows = 3, .d = d, .scale = -1.0f,
	}), 0);
	assert_int_equal(gpu->gather(gpu, &(be_gather_t){
		.y = y.g, .table = t.g, .idx = idx + 5, .rows = 3, .d = d, .scale = -1.0f,
	}), 0);
	pair_check(&y, 0.0, "gather rows3");
	free(idx);
	pair_free(&t); pair_free(&y);
}

/* more rows than the backend's index buffer holds (CUDA: 65536): in slices */
static void test_gather_long(void **state)
{
	const int64_t rows = 2 * 65536 + 123, ntab = 29;
	const int d = 2;
	int32_t *idx = malloc(sizeof *idx * rows);
	pair_t t = pair_new(ntab * d), y = pair_new(rows * d);

	assert_non_null(idx);
	for (int64_t r = 0; r < rows; r++) idx[r] = (int32_t)((r * 7 + r / 65536) % ntab);
	assert_int_equal(cpu->gather(cpu, &(be_gather_t){
		.y = y.c, .table = t.c, .idx = idx, .rows = rows, .d = d, .scale = 0.5f,
	}), 0);
	assert_int_equal(gpu->gather(gpu, &(be_gather_t){
		.y = y.g, .table = t.g, .idx = idx, .rows = rows, .d = d, .scale = 0.5f,
	}), 0);
	pair_check(&y, 0.0, "gather rows131195 d2");
	free(idx);
	pair_free(&t); pair_free(&y);
}

static void test_transpose(void **state)
{
	static const int64_t s[][3] = { { 37, 53, 1 }, { 5, 70, 3 }, { 33, 31, 8 }, { 17, 19, 9 },
	                                { 40, 3, 128 }, { 1, 1, 1 }, { 1, 77, 2 }, { 300, 257, 4 } };
	for (size_t i = 0; i < sizeof s / sizeof *s; i++) {
		int64_t A = s[i][0], B = s[i][1], C = s[i][2];
		pair_t x = pair_new(A * B * C), y = pair_new(A * B * C);
		char what[64];
		assert_int_equal(cpu->transpose(cpu, &(be_transpose_t){
			.y = y.c, .x = x.c, .A = A, .B = B, .C = C,
		}), 0);
		assert_int_equal(gpu->transpose(gpu, &(be_transpose_t){
			.y = y.g, .x = x.g, .A = A, .B = B, .C = C,
		}), 0);
		snprintf(what, sizeof what, "transpose A%lld B%lld C%lld",
		         (long long)A, (long long)B, (long long)C);
		pair_check(&y, 0.0, what);
		pair_free(&x); pair_free(&y);
	}
}

/* the same features in bf16 (be_outer_t.bf16, the sequence-to-pair GEMM's
 * operand): each the fp32 feature y (the CPU's, which the GPU's equals)
 * rounded to nearest even, bit for bit, on the GPU and the CPU */
static void outer_bf16_check(const pair_t *y, const pair_t *q, const pair_t *k, int i0, int ni, int L, int c)
{
	int64_t n = (int64_t)ni * L * 2 * c;
	uint16_t *g16, *h = malloc(sizeof *h * (size_t)n), *hc = malloc(sizeof *hc * (size_t)n);

	assert_non_null(h); assert_non_null(hc);
	assert_int_equal(gpu->alloc(gpu, sizeof *g16 * (size_t)n, (void **)&g16), 0);
	assert_int_equal(gpu->outer(gpu, &(be_outer_t){
		.y = (float *)g16, .q = q->g, .k = k->g, .i0 = i0, .ni = ni, .L = L, .c = c, .bf16 = 1,
	}), 0);
	assert_int_equal(cpu->outer(cpu, &(be_outer_t){
		.y = (float *)hc, .q = q->c, .k = k->c, .i0 = i0, .ni = ni, .L = L, .c = c, .bf16 = 1,
	}), 0);
	assert_int_equal(gpu->sync(gpu), 0);
	assert_int_equal(gpu->download(gpu, h, g16, sizeof *h * (size_t)n), 0);
	for (int64_t i = 0; i < n; i++)
		if (h[i] != safetensors_f32_to_bf16(y->c[i]) || hc[i] != h[i])
			fail_msg("outer bf16 L%d c%d element %lld: %04x (cpu %04x), fp32 %g", L, c, (long long)i, h[i],
			         hc[i], y->c[i]);
	printf("  %-48s bf16: every element its fp32 value rounded\n", "outer");
	gpu->free(gpu, g16);
	free(h); free(hc);
}

static void test_outer(void **state)
{
	static const int s[][4] = { { 37, 5, 3, 11 }, { 64, 32, 0, 64 }, { 1, 1, 0, 1 }, { 130, 33, 129, 1 } };
	for (size_t i = 0; i < sizeof s / sizeof *s; i++) {
		int L = s[i][0], c = s[i][1], i0 = s[i][2], ni = s[i][3];
		pair_t q = pair_new((int64_t)L * c), k = pair_new((int64_t)L * c),
		       y = pair_new((int64_t)ni * L * 2 * c);
		char what[64];
		assert_int_equal(cpu->outer(cpu, &(be_outer_t){
			.y = y.c, .q = q.c, .k = k.c, .i0 = i0, .ni = ni, .L = L, .c = c,
		}), 0);
		assert_int_equal(gpu->outer(gpu, &(be_outer_t){
			.y = y.g, .q = q.g, .k = k.g, .i0 = i0, .ni = ni, .L = L, .c = c,
		}), 0);
		snprintf(what, sizeof what, "outer L%d c%d i0 %d ni%d", L, c, i0, ni);
		pair_check(&y, 0.0, what);
		outer_bf16_check(&y, &q, &k, i0, ni, L, c);
		pair_free(&q); pair_free(&k); pair_free(&y);
	}
}

/* n random unit quaternions and translations in [-scale, scale) as
 * state: [n, 7] on both backends */
static pair_t ipa_state(int n, float scale)
{
	pair_t st = pair_new((int64_t)n * 7);
	for (int i = 0; i < n; i++) {
		float *q = st.c + 7 * i, nq = 0.0f;
		for (int k = 0; k < 4; k++) nq += q[k] * q[k];
		nq = sqrtf(nq > 1e-6f ? nq : 1.0f);
		for (int k = 0; k < 4; k++) q[k] /= nq;
		for (int k = 4; k < 7; k++) q[k] *= scale;
	}
	assert_int_equal(gpu->upload(gpu, st.g, st.c, sizeof(float) * 7 * n), 0);
	return st;
}

/* pair p's values times f on both backends */
static void pair_scale(pair_t *p, float f)
{
	for (int64_t i = 0; i < p->n; i++) p->c[i] *= f;
	assert_int_equal(gpu->upload(gpu, p->g, p->c, sizeof(float) * p->n), 0);
}

/* the device's compensated squared norms: ka's -w/2 sum |g|^2 of its own
 * fp32 points g within the sum's and the product's roundings (2 u, u =
 * 2^-24), which a plain fp32 sum or an fma-contracted TwoSum exceeds */
static void ipa_sumsq_check(const pair_t *ka, const pair_t *hw, int L, int H, int Pq)
{
	int Dp = 3 * Pq + 2;
	float *k = malloc(sizeof(float) * (size_t)ka->n);
	const double u = FLT_EPSILON / 2;
	double worst = 0.0;

	assert_non_null(k);
	assert_int_equal(gpu->sync(gpu), 0);
	assert_int_equal(gpu->download(gpu, k, ka->g, sizeof(float) * (size_t)ka->n), 0);
	for (int ih = 0; ih < L * H; ih++) {
		double x = hw->c[ih % H], sp = x > 20.0 ? x : log1p(exp(x)), sq = 0.0;
		float wf = (float)(sp * sqrt(2.0 / (27.0 * Pq)));
		const float *r = k + (size_t)ih * Dp;
		for (int e = 0; e < 3 * Pq; e++) sq += (double)r[e] * r[e];
		double ref = -0.5 * wf * sq, err = sq > 0.0 ? fabs(r[3 * Pq + 1] - ref) / fabs(ref) : fabs(r[3 * Pq + 1]);
		worst = fmax(worst, err / u);
	}
	free(k);
	printf("  %-48s %.2f u (bound 2 u)\n", "ipa_in: device's -w/2 sum |g|^2", worst);
	assert_true(worst <= 2.0 * (1.0 + u));
}

/* the structure module's point steps (ipa_in, ipa_out, ipa_rigid)
 * against the CPU's: awkward lengths (1 to 130), head and point counts
 * of ESMFold's (12, 4, 8) and odd ones, random unit quaternions,
 * translations far from the origin (the mean is taken out on the
 * device), eight chained backbone updates; all fp32 (no GEMM), so the
 * bound is fp32 rounding: relative RMS 3e-6, some 50 ulp over chains of
 * ten operations */
static void test_ipa(void **state)
{
	static const int cs[][4] = { { 1, 12, 4, 8 }, { 7, 5, 3, 7 }, { 33, 3, 4, 1 }, { 130, 12, 4, 8 } };
	const double bound = 1e-11;
	char what[96];

	for (size_t t = 0; t < sizeof cs / sizeof *cs; t++) {
		int L = cs[t][0], H = cs[t][1], Pq = cs[t][2], Pv = cs[t][3], Dp = 3 * Pq + 2, n = H * Pv;
		int64_t ldc = 4 * n + 5, c0 = 3;
		pair_t st = ipa_state(L, 40.0f), qp = pair_new((int64_t)L * 3 * H * Pq);
		pair_t kvp = pair_new((int64_t)L * 3 * H * (Pq + Pv)), hw = pair_new(H), bb = pair_new(H);
		pair_t qa = pair_new((int64_t)L * H * Dp), ka = pair_new((int64_t)L * H * Dp);
		pair_t vp = pair_new((int64_t)L * n * 3), rig = pair_new((int64_t)L * 12);
		pair_t op = pair_new((int64_t)L * n * 3), cat = pair_new((int64_t)L * ldc);
		pair_t upd = pair_new((int64_t)L * 6), fr = pair_new((int64_t)L * 7);
		pair_scale(&qp, 8.0f);
		pair_scale(&kvp, 8.0f);
		pair_scale(&hw, 3.0f);
		pair_scale(&op, 20.0f);
		assert_int_equal(cpu->ipa_in(cpu, &(be_ipa_in_t){
			.qa = qa.c, .ka = ka.c, .vp = vp.c, .rig = rig.c, .state = st.c, .qp = qp.c,
			.kvp = kvp.c, .hw = hw.c, .bb = bb.c, .L = L, .H = H, .Pq = Pq, .Pv = Pv,
		}), 0);
		assert_int_equal(gpu->ipa_in(gpu, &(be_ipa_in_t){
			.qa = qa.g, .ka = ka.g, .vp = vp.g, .rig = rig.g, .state = st.g, .qp = qp.g,
			.kvp = kvp.g, .hw = hw.g, .bb = bb.g, .L = L, .H = H, .Pq = Pq, .Pv = Pv,
		}), 0);
		snprintf(what, sizeof what, "ipa_in L%d H%d Pq%d Pv%d: rig", L, H, Pq, Pv);
		pair_check(&rig, bound, what);
		snprintf(what, sizeof what, "ipa_in L%d H%d Pq%d Pv%d: qa", L, H, Pq, Pv);
		pair_check(&qa, bound, what);
		snprintf(what, sizeof what, "ipa_in L%d H%d Pq%d Pv%d: ka", L, H, Pq, Pv);
		pair_check(&ka, bound, what);
		snprintf(what, sizeof what, "ipa_in L%d H%d Pq%d Pv%d: vp", L, H, Pq, Pv);
		pair_check(&vp, bound, what);
		ipa_sumsq_check(&ka, &hw, L, H, Pq);
		/* points out, in the CPU's rigids on both sides */
		assert_int_equal(gpu->upload(gpu, rig.g, rig.c, sizeof(float) * 12 * L), 0);
		assert_int_equal(cpu->ipa_out(cpu, &(be_ipa_out_t){
			.cat = cat.c + c0, .ldc = ldc, .op = op.c, .rig = rig.c, .L = L, .n_pts = n,
			.eps = 1e-8f,
		}), 0);
		assert_int_equal(gpu->ipa_out(gpu, &(be_ipa_out_t){
			.cat = cat.g + c0, .ldc = ldc, .op = op.g, .rig = rig.g, .L = L, .n_pts = n,
			.eps = 1e-8f,
		}), 0);
		snprintf(what, sizeof what, "ipa_out L%d, %d points, ldc %lld", L, n, (long long)ldc);
		pair_check(&cat, bound, what);
		/* eight backbone updates from the identity, each frame checked */
		assert_int_equal(cpu->ipa_rigid(cpu, &(be_ipa_rigid_t){
			.state = st.c, .frame = NULL, .upd = NULL, .L = L, .scale = 0.0f,
		}), 0);
		assert_int_equal(gpu->ipa_rigid(gpu, &(be_ipa_rigid_t){
			.state = st.g, .frame = NULL, .upd = NULL, .L = L, .scale = 0.0f,
		}), 0);
		pair_check(&st, 0.0, "ipa_rigid identity");
		for (int blk = 0; blk < 8; blk++) {
			for (int64_t i = 0; i < upd.n; i++) upd.c[i] = xs_unif(&rng) * (i % 6 < 3 ? 0.5f : 4.0f);
			assert_int_equal(gpu->upload(gpu, upd.g, upd.c, sizeof(float) * upd.n), 0);
			assert_int_equal(cpu->ipa_rigid(cpu, &(be_ipa_rigid_t){
				.state = st.c, .frame = fr.c, .upd = upd.c, .L = L, .scale = 10.0f,
			}), 0);
			assert_int_equal(gpu->ipa_rigid(gpu, &(be_ipa_rigid_t){
				.state = st.g, .frame = fr.g, .upd = upd.g, .L = L, .scale = 10.0f,
			}), 0);
			snprintf(what, sizeof what, "ipa_rigid L%d block %d: frame", L, blk);
			pair_check(&fr, bound, what);
		}
		pair_check(&st, bound, "ipa_rigid: state after 8 blocks");
		pair_free(&st); pair_free(&qp); pair_free(&kvp); pair_free(&hw); pair_free(&bb);
		pair_free(&qa); pair_free(&ka); pair_free(&vp); pair_free(&rig); pair_free(&op);
		pair_free(&cat); pair_free(&upd); pair_free(&fr);
	}
}

/* --- transition --- */

/* n random values in [-s, s) on both backends */
static pair_t pair_scaled(int64_t n, float s)
{
	pair_t p = pair_new(n);
	for (int64_t i = 0; i < n; i++) p.c[i] *= s;
	assert_int_equal(gpu->upload(gpu, p.g, p.c, sizeof *p.c * (size_t)n), 0);
	return p;
}

/* bf16 copy of the fp32 host values w: [n] on the GPU; w rounded in place */
static uint16_t *bf16_weight(float *w, int64_t n)
{
	uint16_t *h = malloc(sizeof *h * (size_t)n), *g;
	assert_non_null(h);
	for (int64_t i = 0; i < n; i++) {
		h[i] = safetensors_f32_to_bf16(w[i]);
		w[i] = safetensors_bf16_to_f32(h[i]);
	}
	assert_int_equal(gpu->alloc(gpu, sizeof *g * (size_t)n, (void **)&g), 0);
	assert_int_equal(gpu->upload(gpu, g, h, sizeof *g * (size_t)n), 0);
	free(h);
	return g;
}

/* bf16_weight's copy of w: [n] ofs elements into an allocation of n + ofs
 * (the weights' alignment as a test asks); the allocation returned */
static uint16_t *trans_weight(float *w, int64_t n, int ofs)
{
	float *p = malloc(sizeof *p * (size_t)(n + ofs));
	uint16_t *g;

	assert_non_null(p);
	for (int i = 0; i < ofs; i++) p[i] = 0.0f;
	memcpy(p + ofs, w, sizeof *w * (size_t)n);
	g = bf16_weight(p, n + ofs);
	memcpy(w, p + ofs, sizeof *w * (size_t)n);
	free(p);
	return g;
}

/* The bf16 transition's error bound per output element, from rounding
 * (u = 2^-8 for bf16, v = 2^-24 for fp32), against the CPU's fp32 result
 * on the same bf16 weights: the normed row t (fp32 on both, its sums in
 * another order: |dt_k| <= (d + 64) v (|t_k| + |ln_w_k| + |ln_b_k|)) is
 * rounded to bf16 (u |t_k|); hidden j then errs by
 *   e_j = u S_j (1 + u) + (d + 64) v (S_j + |b1_j|) + u |h_j|,
 *   S_j = sum_k |w1_jk| (|t_k| + |dt_k|),
 * the last term its own rounding to bf16 (ReLU is 1-Lipschitz), plus u
 * |b1_j| where the bias is rounded to bf16 before it is added (the
 * sequence transition's cuBLASLt epilogue, be_cuda_seqtr_fits: b1_bf16); output
 * c by sum_j |w2_cj| e_j + (h + 64) v (|x_c| + |b2_c| + sum_j |w2_cj h_j|).
 * t, h: the row's normed values and hidden layer in double. */
static double trans_bf16_bound(const be_transition_t *t, const float *w1, const float *w2, const float *lw,
                               const float *lb, const float *b1, const float *b2, const double *tn,
                               const double *hd, float x, int c, int b1_bf16, double *e)
{
	const double u = 0x1p-8, v = 0x1p-24;
	double out = 0.0, m = fabs(x) + (b2 ? fabs(b2[c]) : 0.0);

	if (c == 0)
		for (int j = 0; j < t->h; j++) {
			double S = 0.0;
			for (int k = 0; k < t->d; k++) {
				double dt = (t->d + 64) * v * (fabs(tn[k]) + fabs(lw[k]) + fabs(lb[k]));
				S += fabs(w1[(int64_t)j * t->d + k]) * (fabs(tn[k]) + dt);
			}
			e[j] = u * S * (1.0 + u) + (t->d + 64) * v * (S + (b1 ? fabs(b1[j]) : 0.0)) + u * fabs(hd[j]) +
			       (b1 && b1_bf16 ? u * fabs(b1[j]) : 0.0);
		}
	for (int j = 0; j < t->h; j++) {
		double w = fabs(w2[(int64_t)c * t->h + j]);
		out += w * e[j];
		m += w * fabs(hd[j]);
	}
	return out + (t->h + 64) * v * m;
}

/* x: [R, d] += fc2(relu(fc1(LN(x)))), h hidden units: the fp32 kernel
 * against the CPU within fp32's NMSE bound; then the bf16 kernel (bf16
 * weights, the tensor-core tiles where d and h are multiples of 16)
 * against the CPU on the same bf16 weights, each element within
 * trans_bf16_bound, and measurably further off than the fp32 kernel (so
 * it is the bf16 path that ran).  wofs: the bf16 weights that many
 * elements past an allocation (2: on 4 bytes, not 16) */
static void trans_case(int64_t R, int d, int h, int biases, int wofs)
{
	pair_t x = pair_scaled(R * d, 2.0f), lw = pair_new(d), lb = pair_new(d);
	pair_t w1 = pair_scaled((int64_t)h * d, 1.0f / sqrtf((float)d)), b1 = pair_scaled(h, 0.3f);
	pair_t w2 = pair_scaled((int64_t)d * h, 1.0f / sqrtf((float)h)), b2 = pair_scaled(d, 0.3f);
	float *x0 = malloc(sizeof *x0 * (size_t)(R * d + 1)), *got = malloc(sizeof *got * (size_t)(R * d + 1));
	double *tn = malloc(sizeof *tn * (size_t)d), *hd = malloc(sizeof *hd * (size_t)h);
	double *e = malloc(sizeof *e * (size_t)h), worst = 0.0, num = 0.0, den = 0.0;
	be_transition_t t = { .rows = R, .d = d, .h = h, .eps = 1e-5f };
	char what[96];

	assert_true(x0 && got && tn && hd && e);
	memcpy(x0, x.c, sizeof *x0 * (size_t)R * d);
	snprintf(what, sizeof what, "transition R%lld d%d h%d%s%s", (long long)R, d, h, biases ? "" : " no biases",
	         wofs ? " unaligned" : "");
	t.x = x.c; t.ln_w = lw.c; t.ln_b = lb.c; t.w1 = w1.c; t.w2 = w2.c;
	t.b1 = biases ? b1.c : NULL; t.b2 = biases ? b2.c : NULL;
	assert_int_equal(cpu->transition(cpu, &t), 0);
	t.x = x.g; t.ln_w = lw.g; t.ln_b = lb.g; t.w1 = w1.g; t.w2 = w2.g;
	t.b1 = biases ? b1.g : NULL; t.b2 = biases ? b2.g : NULL;
	assert_int_equal(gpu->transition(gpu, &t), 0);
	double nmse32 = pair_check(&x, 1e-10, what);

	/* bf16: the CPU on the rounded weights, the GPU on the bf16 copies */
	uint16_t *g1 = trans_weight(w1.c, (int64_t)h * d, wofs), *g2 = trans_weight(w2.c, (int64_t)d * h, wofs);
	memcpy(x.c, x0, sizeof *x0 * (size_t)R * d);
	t.x = x.c; t.ln_w = lw.c; t.ln_b = lb.c; t.w1 = w1.c; t.w2 = w2.c;
	t.b1 = biases ? b1.c : NULL; t.b2 = biases ? b2.c : NULL;
	assert_int_equal(cpu->transition(cpu, &t), 0);
	assert_int_equal(gpu->upload(gpu, x.g, x0, sizeof *x0 * (size_t)R * d), 0);
	assert_int_equal(be_cuda_set_precision(gpu, BE_PREC_BF16), 0);
	t.x = x.g; t.ln_w = lw.g; t.ln_b = lb.g; t.w1 = (const float *)(g1 + wofs); t.w2 = (const float *)(g2 + wofs);
	t.b1 = biases ? b1.g : NULL; t.b2 = biases ? b2.g : NULL; t.bf16 = 1;
	assert_int_equal(gpu->transition(gpu, &t), 0);
	assert_int_equal(gpu->sync(gpu), 0);
	assert_int_equal(be_cuda_set_precision(gpu, BE_PREC_FP32), 0);
	assert_int_equal(gpu->download(gpu, got, x.g, sizeof *got * (size_t)R * d), 0);
	for (int64_t r = 0; r < R; r++) {
		const float *xr = x0 + r * d;
		double mean = 0.0, var = 0.0;
		for (int k = 0; k < d; k++) mean += xr[k];
		mean /= d;
		for (int k = 0; k < d; k++) var += (xr[k] - mean) * (xr[k] - mean);
		for (int k = 0; k < d; k++) tn[k] = (xr[k] - mean) / sqrt(var / d + 1e-5) * lw.c[k] + lb.c[k];
		for (int j = 0; j < h; j++) {
			double a = biases ? b1.c[j] : 0.0;
			for (int k = 0; k < d; k++) a += (double)w1.c[(int64_t)j * d + k] * tn[k];
			hd[j] = a > 0.0 ? a : 0.0;
		}
		for (int c = 0; c < d; c++) {
			double err = fabs((double)got[r * d + c] - x.c[r * d + c]);
			double bound = trans_bf16_bound(&t, w1.c, w2.c, lw.c, lb.c, biases ? b1.c : NULL,
			                                biases ? b2.c : NULL, tn, hd, xr[c], c, be_cuda_seqtr_fits(&t), e);
			double ratio = err == 0.0 ? 0.0 : err / bound;   /* NaN: NaN */
			if (!(ratio <= worst)) worst = isnan(ratio) ? INFINITY : ratio;
			num += err * err;
			den += (double)x.c[r * d + c] * x.c[r * d + c];
		}
	}
	double nmse = den > 0.0 ? num / den : num;
	printf("  %-48s bf16: largest error / bound %.3g, nmse %.3g\n", what, worst, nmse);
	assert_true(worst <= 1.0);
	/* and in the mean: each output's error a sum of independent roundings
	 * (relative error at most u / 2 each), which trans_bf16_bound adds up
	 * as if all had one sign: the NMSE within u^2 = 2^-16 (measured
	 * ~1.5e-7; a wrong bias or weight element: ~1e-3 and over) */
	assert_true(nmse <= 0x1p-16);
	assert_true(R == 0 || nmse > 100.0 * nmse32);
	gpu->free(gpu, g1);
	gpu->free(gpu, g2);
	free(x0); free(got); free(tn); free(hd); free(e);
	pair_free(&x); pair_free(&lw); pair_free(&lb); pair_free(&w1); pair_free(&b1);
	pair_free(&w2); pair_free(&b2);
}

/* rows 1, 17 and over 1000 (past the 128-row tiles), the fixtures' widths
 * (16, 24: no multiple of 16, bf16 on the CUDA cores; 32), esmfold_v1's
 * c_z 128 (at an odd L, 37^2 rows) and c_s 1024, with and without the
 * biases; h = 4 d, and 48 and 80 (no multiple of the staged kernel's
 * 32-unit weight slices: the wide kernel); more row tiles than its
 * persistent blocks (34,000 rows: 266 tiles); weights on 4 bytes only */
static void test_transition(void **state)
{
	static const struct { int64_t R; int d, h, biases, wofs; } cs[] = {
		{ 1, 16, 64, 1, 0 }, { 17, 32, 128, 1, 0 }, { 1001, 16, 64, 1, 0 }, { 33, 24, 96, 1, 0 },
		{ 70, 128, 512, 1, 0 }, { 1369, 128, 512, 1, 0 }, { 1030, 32, 128, 0, 0 }, { 3, 1024, 4096, 1, 0 },
		{ 45, 16, 48, 1, 0 }, { 300, 32, 80, 0, 0 }, { 34000, 16, 64, 1, 0 }, { 150, 32, 128, 1, 2 },
	};

	for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) trans_case(cs[i].R, cs[i].d, cs[i].h, cs[i].biases, cs[i].wofs);
}

/* The sequence transition (be_cuda_seqtr_fits: bf16, d a multiple of 16
 * other than 16, 32 and 128, or h no multiple of 32: kernels/transition.cu's
 * k_seqtr_ln, then the CUDA backend's two cuBLASLt products) at awkward
 * shapes, each as trans_case checks it: L 1, odd L (37), L 129, at
 * esmfold_v1's c_s 1024 and the test model's 64 (tiny_a), h = 4 d,
 * without the biases once (the ReLU and default epilogues), the weights
 * on 4 bytes once; h 48 at d 16 and 16,901 rows; h 65,536 at d 48 (the
 * stage, 8 Mi elements less the bf16 bias, holds 120 rows: 200 rows in
 * two chunks, the second of 80); 150 rows at c_s 1024 and at d 256, h
 * 1024 without the biases */
static void test_seq_transition(void **state)
{
	static const struct { int64_t R; int d, h, biases, wofs; } cs[] = {
		{ 1, 1024, 4096, 1, 0 }, { 37, 1024, 4096, 1, 0 }, { 1, 64, 256, 1, 0 }, { 37, 64, 256, 0, 0 },
		{ 129, 64, 256, 1, 0 }, { 45, 64, 256, 1, 2 }, { 16901, 16, 48, 1, 0 }, { 200, 48, 65536, 1, 0 },
		{ 150, 1024, 4096, 1, 0 }, { 150, 256, 1024, 0, 0 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof cs / sizeof *cs; i++)
		trans_case(cs[i].R, cs[i].d, cs[i].h, cs[i].biases, cs[i].wofs);
}

/* --- ln_linear --- */

/* One be_ln_linear_t case on both backends: x: [ni, nj, k] (tr: stored
 * as [nj, ni, k] and read by its strides, as the ending-node attention
 * reads z^T), layer-normed where ln, with the output groups the trunk
 * writes: a per-head bias [3][ni][nj] (no bias), channel-last
 * [ni, nj, 17] + bias, a gate pair channel-major [11][ni nj] + both
 * biases, a residual add (beta 1) into rows of 12 padded to 16 and a
 * gate pair channel-last [ni, nj, 20] + both biases (the last two on 4
 * floats: the bf16 kernel's 16-byte stores; the others its 4-byte ones). */
#define LNLIN_G 5
#define LNLIN_N (3 + 17 + 2 * 11 + 12 + 2 * 20)   /* weight rows */
typedef struct {
	int ni, nj, k, tr, ln;
	pair_t x, w, lw, lb, y[LNLIN_G], b[5];
} lnlin_t;

static void lnlin_new(lnlin_t *t, int ni, int nj, int k, int tr, int ln)
{
	int64_t rows = (int64_t)ni * nj;
	*t = (lnlin_t){ .ni = ni, .nj = nj, .k = k, .tr = tr, .ln = ln };
	t->x = pair_new(rows * k);
	for (int64_t i = 0; i < t->x.n; i++) t->x.c[i] = 3.0f * t->x.c[i] + 1.0f;   /* a mean to remove */
	assert_int_equal(gpu->upload(gpu, t->x.g, t->x.c, sizeof(float) * t->x.n), 0);
	t->w = pair_new((int64_t)LNLIN_N * k);
	t->lw = pair_new(k);
	t->lb = pair_new(k);
	t->y[0] = pair_new(3 * rows);
	t->y[1] = pair_new(17 * rows);
	t->y[2] = pair_new(11 * rows);
	t->y[3] = pair_new(16 * rows);
	t->y[4] = pair_new(20 * rows);
	t->b[0] = pair_new(17);
	t->b[1] = pair_new(11);
	t->b[2] = pair_new(11);
	t->b[3] = pair_new(20);
	t->b[4] = pair_new(20);
}

static void lnlin_free(lnlin_t *t)
{
	pair_free(&t->x); pair_free(&t->w); pair_free(&t->lw); pair_free(&t->lb);
	for (int i = 0; i < LNLIN_G; i++) pair_free(&t->y[i]);
	for (int i = 0; i < 5; i++) pair_free(&t->b[i]);
}

/* the case's descriptor on the CPU's copies (g 0) or the GPU's (g 1) */
static be_ln_linear_t lnlin_desc(const lnlin_t *t, int g)
{
#define LP(p) (g ? (p).g : (p).c)
	int64_t ni = t->ni, nj = t->nj, k = t->k, rows = ni * nj;
	be_ln_linear_t p = {
		.ni = t->ni, .nj = t->nj, .k = t->k, .x = LP(t->x),
		.x_si = t->tr ? k : nj * k, .x_sj = t->tr ? ni * k : k,
		.ln_w = t->ln ? LP(t->lw) : NULL, .ln_b = t->ln ? LP(t->lb) : NULL, .eps = 1e-5f,
		.w = LP(t->w), .ngroups = LNLIN_G,
	};
	p.out[0] = (be_lnlin_out_t){ .n = 3, .y = LP(t->y[0]), .si = nj, .sj = 1, .sc = rows };
	p.out[1] = (be_lnlin_out_t){ .n = 17, .y = LP(t->y[1]), .si = nj * 17, .sj = 17, .sc = 1, .bias = LP(t->b[0]) };
	p.out[2] = (be_lnlin_out_t){ .n = 11, .kind = BE_LNLIN_GATE, .y = LP(t->y[2]), .si = nj, .sj = 1, .sc = rows,
	                             .bias = LP(t->b[1]), .bias_g = LP(t->b[2]) };
	p.out[3] = (be_lnlin_out_t){ .n = 12, .y = LP(t->y[3]), .si = nj * 16, .sj = 16, .sc = 1, .beta = 1.0f };
	p.out[4] = (be_lnlin_out_t){ .n = 20, .kind = BE_LNLIN_GATE, .y = LP(t->y[4]), .si = nj * 20, .sj = 20, .sc = 1,
	                             .bias = LP(t->b[3]), .bias_g = LP(t->b[4]) };
#undef LP
	return p;
}

/* fp32 weights: the GPU's fp32 kernel against the CPU, every group */
static void lnlin_case(int ni, int nj, int k, int tr, int ln)
{
	lnlin_t t;
	char what[96];

	lnlin_new(&t, ni, nj, k, tr, ln);
	be_ln_linear_t pc = lnlin_desc(&t, 0), pg = lnlin_desc(&t, 1);
	assert_int_equal(cpu->ln_linear(cpu, &pc), 0);
	assert_int_equal(gpu->ln_linear(gpu, &pg), 0);
	for (int i = 0; i < LNLIN_G; i++) {
		snprintf(what, sizeof what, "ln_linear ni%d nj%d k%d%s%s group %d", ni, nj, k, tr ? " z^T" : "",
		         ln ? " ln" : "", i);
		pair_check(&t.y[i], 1e-10, what);
	}
	lnlin_free(&t);
}

/* fp32 weights, on the SIMT kernel: awkward row counts (not multiples of
 * the 64-row tile), k not a multiple of 16, transposed strides, with and
 * without the norm; a k beyond the kernel's limit is refused */
static void test_ln_linear(void **state)
{
	lnlin_case(5, 37, 45, 0, 1);
	lnlin_case(7, 19, 45, 1, 1);
	lnlin_case(1, 1, 3, 0, 1);
	lnlin_case(3, 70, 128, 1, 0);
	lnlin_case(2, 45, 300, 1, 1);   /* shared memory beyond the default 48 KiB */

	lnlin_t t;
	lnlin_new(&t, 2, 3, 513, 0, 1);   /* k beyond CU_LNLIN_KMAX (512) */
	be_ln_linear_t pg = lnlin_desc(&t, 1);
	assert_int_equal(gpu->ln_linear(gpu, &pg), -EINVAL);
	lnlin_free(&t);
}

/* bf16 weights, on the tensor cores: the CPU runs the same bf16 weight
 * values in fp32; the GPU rounds each normed input x' to bf16 (relative
 * error <= 2^-9) and accumulates in fp32, so a product P = sum_c w_c x'_c
 * is within u S, S = sum_c |w_c x'_c|, with u = 2^-8 covering the rounding
 * (2^-9), fp32 sums over k <= 512 terms and the statistics' fp32
 * difference; the gate (p * sigmoid(g), sigmoid' <= 1/4) within
 * u S_p + |p| u S_g / 4.  Every element is checked against its own bound. */
static void lnlin_bf16_case(int ni, int nj, int k, int tr, int ln)
{
	const double u = 0x1p-8;
	int64_t rows = (int64_t)ni * nj, nw = (int64_t)LNLIN_N * k;
	uint16_t *w16 = malloc(sizeof *w16 * (size_t)nw), *g16;
	float *xn = malloc(sizeof *xn * (size_t)(rows * k));
	float *h = malloc(sizeof *h * (size_t)(20 * rows));   /* the widest group */
	double worst = 0.0;
	lnlin_t t;

	assert_non_null(w16); assert_non_null(xn); assert_non_null(h);
	lnlin_new(&t, ni, nj, k, tr, ln);
	for (int64_t i = 0; i < nw; i++) {
		w16[i] = safetensors_f32_to_bf16(t.w.c[i]);
		t.w.c[i] = safetensors_bf16_to_f32(w16[i]);
	}
	assert_int_equal(gpu->alloc(gpu, sizeof *g16 * (size_t)nw, (void **)&g16), 0);
	assert_int_equal(gpu->upload(gpu, g16, w16, sizeof *g16 * (size_t)nw), 0);
	be_ln_linear_t pc = lnlin_desc(&t, 0), pg = lnlin_desc(&t, 1);
	pg.w = (const float *)g16;
	pg.w_bf16 = 1;
	assert_int_equal(cpu->ln_linear(cpu, &pc), 0);
	assert_int_equal(gpu->ln_linear(gpu, &pg), 0);
	assert_int_equal(gpu->sync(gpu), 0);
	/* x' on the host: the rows gathered by their strides, then normed */
	for (int64_t r = 0; r < rows; r++)
		memcpy(xn + r * k, t.x.c + r / nj * pc.x_si + r % nj * pc.x_sj, sizeof *xn * (size_t)k);
	if (ln) assert_int_equal(cpu->layernorm(cpu, &(be_layernorm_t){
		.y = xn, .x = xn, .rows = rows, .d = k, .w = t.lw.c, .b = t.lb.c, .eps = 1e-5f,
	}), 0);
	int w0 = 0;
	for (int gi = 0; gi < LNLIN_G; gi++) {
		const be_lnlin_out_t *q = &pc.out[gi];
		int64_t span = (ni - 1) * q->si + (nj - 1) * q->sj + (int64_t)(q->n - 1) * q->sc + 1;
		assert_int_equal(gpu->download(gpu, h, pg.out[gi].y, sizeof *h * (size_t)span), 0);
		for (int64_t r = 0; r < rows; r++)
			for (int f = 0; f < q->n; f++) {
				int64_t off = r / nj * q->si + r % nj * q->sj + f * q->sc;
				double S = 0.0, Sg = 0.0, P = 0.0, bound;
				for (int c = 0; c < k; c++) {
					S += fabs((double)t.w.c[(int64_t)(w0 + f) * k + c] * xn[r * k + c]);
					if (q->kind == BE_LNLIN_GATE) {
						Sg += fabs((double)t.w.c[(int64_t)(w0 + q->n + f) * k + c] * xn[r * k + c]);
						P += (double)t.w.c[(int64_t)(w0 + f) * k + c] * xn[r * k + c];
					}
				}
				bound = q->kind == BE_LNLIN_GATE ? u * S + fabs(P + q->bias[f]) * u * Sg / 4.0 : u * S;
				bound += 1e-6 * (1.0 + fabs(q->y[off]));   /* the residual's and bias's fp32 add */
				double d = fabs((double)h[off] - q->y[off]);
				worst = fmax(worst, d / bound);
				if (!(d <= bound))
					fail_msg("ln_linear bf16 group %d row %lld f %d: gpu %g cpu %g bound %g", gi,
					         (long long)r, f, h[off], q->y[off], bound);
			}
		w0 += q->kind == BE_LNLIN_GATE ? 2 * q->n : q->n;
	}
	printf("  ln_linear bf16 ni%d nj%d k%d%s%s: worst error / bound %.3f\n", ni, nj, k, tr ? " z^T" : "",
	       ln ? " ln" : "", worst);
	gpu->free(gpu, g16);
	free(w16); free(xn); free(h);
	lnlin_free(&t);
}

static void test_ln_linear_bf16(void **state)
{
	assert_int_equal(be_cuda_set_precision(gpu, BE_PREC_BF16), 0);
	lnlin_bf16_case(5, 37, 45, 0, 1);
	lnlin_bf16_case(7, 19, 128, 1, 1);
	lnlin_bf16_case(3, 70, 32, 1, 0);
	lnlin_bf16_case(1, 1, 3, 0, 1);
	lnlin_bf16_case(2, 45, 300, 0, 1);   /* shared memory beyond the default 48 KiB; 2 weight slices */
	lnlin_bf16_case(89, 64, 512, 0, 1);  /* 6 slices of 2 tiles, 2 row tiles per block */
	assert_int_equal(be_cuda_set_precision(gpu, BE_PREC_FP32), 0);
}

/* --- bf16 activations: the triangle products' operands --- */

/* n random bf16 values on the device, their exact widening in *wide
 * (host, freed by the caller) */
static uint16_t *bf16_dev(int64_t n, float **wide)
{
	uint16_t *h = malloc(sizeof *h * (size_t)(n ? n : 1)), *d;

	*wide = malloc(sizeof **wide * (size_t)(n ? n : 1));
	assert_non_null(h); assert_non_null(*wide);
	for (int64_t i = 0; i < n; i++) {
		h[i] = safetensors_f32_to_bf16(xs_unif(&rng));
		(*wide)[i] = safetensors_bf16_to_f32(h[i]);
	}
	assert_int_equal(gpu->alloc(gpu, sizeof *h * (size_t)(n ? n : 1), (void **)&d), 0);
	assert_int_equal(gpu->upload(gpu, d, h, sizeof *h * (size_t)n), 0);
	free(h);
	return d;
}

/* a batched GEMM on two bf16 operands (be_gemm_t.a_bf16 and b_bf16, as
 * the triangle products): leading dimensions ca, cb rounded up to 8
 * (pad, the trunk's layout) or 1 past them, against the CPU on the
 * exactly widened values: the products are exact in fp32 on both sides,
 * only the summation order differs, so fp32's bound */
static void gemm_bf16x2_case(int ta, int tb, int m, int n, int k, int batch, int pad, int bias, float beta)
{
	int ra = ta ? k : m, ca = ta ? m : k, rb = tb ? n : k, cb = tb ? k : n;
	int64_t lda = pad ? (ca + 7) / 8 * 8 : ca + 1, ldb = pad ? (cb + 7) / 8 * 8 : cb + 1, ldc = n + 1;
	int64_t sa = ra * lda, sb = rb * ldb, sc = m * ldc;
	float *wa, *wb;
	uint16_t *da = bf16_dev(sa * batch, &wa), *db = bf16_dev(sb * batch, &wb);
	pair_t C = pair_new(sc * batch), bi = pair_new(n), A, B;
	be_gemm_t g = { .transa = ta, .transb = tb, .m = m, .n = n, .k = k, .alpha = 0.75f, .beta = beta,
	                .lda = lda, .stride_a = sa, .ldb = ldb, .stride_b = sb, .ldc = ldc,
	                .stride_c = sc, .batch = batch };
	char what[128];

	assert_int_equal(cpu->alloc(cpu, sizeof(float) * (size_t)(sa * batch), (void **)&A.c), 0);
	assert_int_equal(cpu->alloc(cpu, sizeof(float) * (size_t)(sb * batch), (void **)&B.c), 0);
	memcpy(A.c, wa, sizeof(float) * (size_t)(sa * batch));
	memcpy(B.c, wb, sizeof(float) * (size_t)(sb * batch));
	g.a = A.c; g.b = B.c; g.c = C.c; g.bias = bias ? bi.c + (bias == 2) : NULL;
	assert_int_equal(cpu->gemm(cpu, &g), 0);
	g.a = (const float *)da; g.b = (const float *)db; g.c = C.g; g.bias = bias ? bi.g : NULL;
	g.a_bf16 = g.b_bf16 = 1;
	assert_int_equal(gpu->gemm(gpu, &g), 0);
	snprintf(what, sizeof what, "gemm bf16 x bf16 %c%c m%d n%d k%d b%d lda%lld ldb%lld%s beta%g",
	         ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, batch, (long long)lda, (long long)ldb,
	         bias ? " bias" : "", beta);
	pair_check(&C, 1e-10, what);
	cpu->free(cpu, A.c); cpu->free(cpu, B.c);
	gpu->free(gpu, da); gpu->free(gpu, db);
	free(wa); free(wb);
	pair_free(&C); pair_free(&bi);
}

/* both operands bf16, batched over "channels" as the triangle products
 * (N T, k = L, rows padded to 8): odd L, L not a multiple of 16, every
 * transpose, bias and beta, unpadded odd leading dimensions; on an fp32
 * device too (nothing to stage) */
static void test_gemm_bf16x2(void **state)
{
	assert_int_equal(be_cuda_set_precision(gpu, BE_PREC_BF16), 0);
	gemm_bf16x2_case(0, 1, 7, 33, 33, 5, 1, 0, 0.0f);     /* the trunk's: m nc, n nr, k L */
	gemm_bf16x2_case(0, 1, 70, 70, 70, 3, 1, 0, 0.0f);
	gemm_bf16x2_case(0, 1, 1, 1, 1, 4, 1, 0, 0.0f);
	gemm_bf16x2_case(0, 1, 129, 45, 301, 2, 1, 0, 0.0f);
	gemm_bf16x2_case(0, 1, 2100, 33, 16, 1, 1, 1, 1.0f);   /* the sequence-to-pair o_proj: bias, residual */
	for (int ta = 0; ta < 2; ta++)
		for (int tb = 0; tb < 2; tb++)
			gemm_bf16x2_case(ta, tb, 37, 53, 29, 3, ta ^ tb, (ta + tb) & 1, ta ? 0.5f : 0.0f);
	assert_int_equal(be_cuda_set_precision(gpu, BE_PREC_FP32), 0);
	gemm_bf16x2_case(0, 1, 9, 17, 31, 2, 0, 1, 1.0f);
}

/* lnlin_bf16_case's per-element bound of feature f of group q (weight
 * rows from w0) on the normed row xr: u S, gate u S_p + |P + b| u S_g / 4 */
static double lnlin_bound(const float *w, const float *xr, int k, const be_lnlin_out_t *q, int w0, int f)
{
	const double u = 0x1p-8;
	double S = 0.0, Sg = 0.0, P = 0.0;

	for (int c = 0; c < k; c++) {
		S += fabs((double)w[(int64_t)(w0 + f) * k + c] * xr[c]);
		if (q->kind == BE_LNLIN_GATE) {
			Sg += fabs((double)w[(int64_t)(w0 + q->n + f) * k + c] * xr[c]);
			P += (double)w[(int64_t)(w0 + f) * k + c] * xr[c];
		}
	}
	return q->kind == BE_LNLIN_GATE ? u * S + fabs(P + (q->bias ? q->bias[f] : 0.0)) * u * Sg / 4.0 : u * S;
}

/* x' (ln_linear's normed rows) on the host: the rows of x gathered by the
 * strides of p (the CPU's descriptor), then layer-normed by the CPU */
static float *lnlin_normed(const be_ln_linear_t *p)
{
	int64_t rows = (int64_t)p->ni * p->nj, k = p->k;
	float *xn = malloc(sizeof *xn * (size_t)(rows * k));

	assert_non_null(xn);
	for (int64_t r = 0; r < rows; r++)
		memcpy(xn + r * k, p->x + r / p->nj * p->x_si + r % p->nj * p->x_sj, sizeof *xn * (size_t)k);
	assert_int_equal(cpu->layernorm(cpu, &(be_layernorm_t){
		.y = xn, .x = xn, .rows = rows, .d = (int)k, .w = p->ln_w, .b = p->ln_b, .eps = p->eps,
	}), 0);
	return xn;
}

/* One ln_linear call as the trunk's triangle projection (x: [ni, nj, k],
 * tr: read as z^T): a gate pair of BF16O_N features channel-major and the
 * output gate's logits, BF16O_M features channel-last fp32 + bias.  Run
 * with the pair in fp32 [n][ni][nj] and again with it in bf16 (.bf16)
 * [n][ni][ld], ld = nj rounded up to 8 (the GEMMs' padded rows); wbf:
 * bf16 weights (the tensor-core kernel), else fp32 (the SIMT kernel).
 * Checked: every bf16 value is the same kernel's fp32 value rounded to
 * nearest even, bit for bit, on the GPU and on the CPU; the padding
 * columns nj..ld-1 untouched; the fp32 values against the CPU's (bf16
 * weights: per element within lnlin_bound, so the bf16 ones within it
 * plus their own rounding, 2^-8 |y|; fp32 weights: NMSE 1e-10). */
#define BF16O_N 11
#define BF16O_M 13
typedef struct { pair_t x, w, lw, lb, bp, bg, bm, yf, ym; uint16_t *g16, *yb; } bf16o_t;

static be_ln_linear_t bf16o_desc(const bf16o_t *t, int ni, int nj, int k, int tr, int g, int wbf)
{
#define BP(p) (g ? (p).g : (p).c)
	int64_t rows = (int64_t)ni * nj;
	be_ln_linear_t p = {
		.ni = ni, .nj = nj, .k = k, .x = BP(t->x), .x_si = tr ? k : nj * k, .x_sj = tr ? ni * k : k,
		.ln_w = BP(t->lw), .ln_b = BP(t->lb), .eps = 1e-5f,
		.w = g && wbf ? (const float *)t->g16 : BP(t->w), .w_bf16 = g && wbf, .ngroups = 2,
	};
	p.out[0] = (be_lnlin_out_t){ .n = BF16O_N, .kind = BE_LNLIN_GATE, .y = BP(t->yf), .si = nj, .sj = 1,
	                             .sc = rows, .bias = BP(t->bp), .bias_g = BP(t->bg) };
	p.out[1] = (be_lnlin_out_t){ .n = BF16O_M, .y = BP(t->ym), .si = nj * BF16O_M, .sj = BF16O_M, .sc = 1,
	                             .bias = BP(t->bm) };
#undef BP
	return p;
}

/* the bf16 output of desc p's group 0 into yb: [n][ni][ld] */
static be_ln_linear_t bf16o_to(be_ln_linear_t p, uint16_t *yb, int64_t ld)
{
	p.out[0].y = (float *)yb;
	p.out[0].si = ld;
	p.out[0].sc = (int64_t)p.ni * ld;
	p.out[0].bf16 = 1;
	return p;
}

/* the checks of lnlin_bf16out_case on its outputs: hf, hb the GPU's fp32
 * and bf16 pair, cb the CPU's bf16 pair, hm the GPU's fp32 logits */
static void bf16o_check(const bf16o_t *t, const be_ln_linear_t *pc, const float *hf, const uint16_t *hb,
                        const uint16_t *cb, const float *hm, int64_t ld, int wbf, const char *what)
{
	int ni = pc->ni, nj = pc->nj, k = pc->k;
	int64_t rows = (int64_t)ni * nj;
	float *xn = wbf ? lnlin_normed(pc) : NULL;
	double worst = 0.0;

	for (int f = 0; f < BF16O_N; f++)
		for (int i = 0; i < ni; i++)
			for (int j = 0; j < (int)ld; j++) {
				int64_t ob = (int64_t)f * ni * ld + (int64_t)i * ld + j, of = (int64_t)f * rows + (int64_t)i * nj + j;
				if (j >= nj) {   /* padding: never written */
					if (hb[ob] != 0xffff || cb[ob] != 0xffff)
						fail_msg("%s: padding f %d i %d j %d written (%04x, cpu %04x)", what, f, i, j, hb[ob], cb[ob]);
					continue;
				}
				if (hb[ob] != safetensors_f32_to_bf16(hf[of]) || cb[ob] != safetensors_f32_to_bf16(t->yf.c[of]))
					fail_msg("%s: f %d i %d j %d: bf16 %04x (cpu %04x) is not its fp32 %g (cpu %g) rounded",
					         what, f, i, j, hb[ob], cb[ob], hf[of], t->yf.c[of]);
				if (!wbf) continue;
				double y = t->yf.c[of], d0 = lnlin_bound(t->w.c, xn + (int64_t)(i * nj + j) * k, k, &pc->out[0], 0, f);
				double bound = (d0 + 1e-6 * (1.0 + fabs(y))) * (1.0 + 0x1p-8) + 0x1p-8 * fabs(y);
				double d = fabs((double)safetensors_bf16_to_f32(hb[ob]) - y);
				worst = fmax(worst, d / bound);
				if (!(d <= bound)) fail_msg("%s: f %d i %d j %d: gpu %g cpu %g bound %g", what, f, i, j,
				                            safetensors_bf16_to_f32(hb[ob]), y, bound);
			}
	for (int64_t r = 0; wbf && r < rows; r++)   /* the fp32 logits beside it */
		for (int f = 0; f < BF16O_M; f++) {
			double y = t->ym.c[r * BF16O_M + f];
			double bound = lnlin_bound(t->w.c, xn + r * k, k, &pc->out[1], 2 * BF16O_N, f) + 1e-6 * (1.0 + fabs(y));
			if (!(fabs(hm[r * BF16O_M + f] - y) <= bound))
				fail_msg("%s: logits row %lld f %d: gpu %g cpu %g", what, (long long)r, f, hm[r * BF16O_M + f], y);
		}
	if (wbf) printf("  %-56s worst error / bound %.3f\n", what, worst);
	free(xn);
}

static void lnlin_bf16out_case(int ni, int nj, int k, int tr, int wbf)
{
	int64_t rows = (int64_t)ni * nj, ld = (nj + 7) / 8 * 8, nb = (int64_t)BF16O_N * ni * ld;
	int64_t nw = (int64_t)(2 * BF16O_N + BF16O_M) * k;
	bf16o_t t = { .x = pair_new(rows * k), .w = pair_new(nw), .lw = pair_new(k), .lb = pair_new(k),
	              .bp = pair_new(BF16O_N), .bg = pair_new(BF16O_N), .bm = pair_new(BF16O_M),
	              .yf = pair_new(BF16O_N * rows), .ym = pair_new(BF16O_M * rows) };
	uint16_t *w16 = malloc(sizeof *w16 * (size_t)nw), *cb = malloc(sizeof *cb * (size_t)nb);
	uint16_t *hb = malloc(sizeof *hb * (size_t)nb);
	float *hf = malloc(sizeof *hf * (size_t)(BF16O_N * rows)), *hm = malloc(sizeof *hm * (size_t)(BF16O_M * rows));
	char what[96];

	assert_non_null(w16); assert_non_null(cb); assert_non_null(hb); assert_non_null(hf); assert_non_null(hm);
	for (int64_t i = 0; i < nw; i++) {   /* bf16 weight values on both sides */
		w16[i] = safetensors_f32_to_bf16(t.w.c[i]);
		if (wbf) t.w.c[i] = safetensors_bf16_to_f32(w16[i]);
	}
	assert_int_equal(gpu->alloc(gpu, sizeof *w16 * (size_t)nw, (void **)&t.g16), 0);
	assert_int_equal(gpu->upload(gpu, t.g16, w16, sizeof *w16 * (size_t)nw), 0);
	assert_int_equal(gpu->alloc(gpu, sizeof *hb * (size_t)nb, (void **)&t.yb), 0);
	memset(cb, 0xff, sizeof *cb * (size_t)nb);   /* bf16 NaN: the padding must keep it */
	assert_int_equal(gpu->upload(gpu, t.yb, cb, sizeof *cb * (size_t)nb), 0);
	be_ln_linear_t pc = bf16o_desc(&t, ni, nj, k, tr, 0, wbf), pg = bf16o_desc(&t, ni, nj, k, tr, 1, wbf);
	be_ln_linear_t pcb = bf16o_to(pc, cb, ld), pgb = bf16o_to(pg, t.yb, ld);
	assert_int_equal(cpu->ln_linear(cpu, &pc), 0);
	assert_int_equal(cpu->ln_linear(cpu, &pcb), 0);
	assert_int_equal(gpu->ln_linear(gpu, &pg), 0);
	assert_int_equal(gpu->ln_linear(gpu, &pgb), 0);
	assert_int_equal(gpu->sync(gpu), 0);
	assert_int_equal(gpu->download(gpu, hf, t.yf.g, sizeof *hf * (size_t)(BF16O_N * rows)), 0);
	assert_int_equal(gpu->download(gpu, hb, t.yb, sizeof *hb * (size_t)nb), 0);
	assert_int_equal(gpu->download(gpu, hm, t.ym.g, sizeof *hm * (size_t)(BF16O_M * rows)), 0);
	snprintf(what, sizeof what, "ln_linear bf16 out ni%d nj%d k%d ld%lld%s, %s weights", ni, nj, k,
	         (long long)ld, tr ? " z^T" : "", wbf ? "bf16" : "fp32");
	bf16o_check(&t, &pc, hf, hb, cb, hm, ld, wbf, what);
	if (!wbf) {
		pair_check(&t.yf, 1e-10, what);
		pair_check(&t.ym, 1e-10, what);
	}
	pgb.out[0].beta = 1.0f;   /* bf16 output with beta: refused */
	assert_int_equal(gpu->ln_linear(gpu, &pgb), -EINVAL);
	gpu->free(gpu, t.g16); gpu->free(gpu, t.yb);
	free(w16); free(cb); free(hb); free(hf); free(hm);
	pair_free(&t.x); pair_free(&t.w); pair_free(&t.lw); pair_free(&t.lb); pair_free(&t.bp);
	pair_free(&t.bg); pair_free(&t.bm); pair_free(&t.yf); pair_free(&t.ym);
}

/* odd row lengths (the padding columns), lengths not multiples of 16, k
 * not one of 16, z^T strides, both kernels */
static void test_ln_linear_bf16_out(void **state)
{
	static const int cs[][5] = {   /* ni, nj, k, tr, bf16 weights */
		{ 7, 33, 32, 0, 1 }, { 5, 70, 45, 1, 1 }, { 1, 1, 16, 0, 1 }, { 3, 129, 128, 1, 1 },
		{ 7, 33, 32, 1, 0 }, { 2, 45, 45, 0, 0 },
	};
	for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) {
		assert_int_equal(be_cuda_set_precision(gpu, cs[i][4] ? BE_PREC_BF16 : BE_PREC_FP32), 0);
		lnlin_bf16out_case(cs[i][0], cs[i][1], cs[i][2], cs[i][3], cs[i][4]);
	}
}

/* relpos (the pair rows' relative-position embedding, bins from residue
 * indices on the device) against the CPU's and, on the CPU, against the
 * host-built index list it replaces (gather, then add): awkward lengths,
 * chunks not dividing them, chain gaps beyond the clamp on either side */
static void test_relpos(void **state)
{
	static const int cs[][4] = { { 1, 1, 16, 3 }, { 7, 3, 5, 2 }, { 33, 8, 128, 32 }, { 130, 60, 9, 32 } };
	char what[96];

	for (size_t t = 0; t < sizeof cs / sizeof *cs; t++) {
		int L = cs[t][0], n = cs[t][1], c = cs[t][2], bins = cs[t][3];
		pair_t z = pair_new((int64_t)L * L * c), tab = pair_new((int64_t)(2 * bins + 2) * c);
		pair_t ri = pair_new(L), ref = pair_new((int64_t)L * L * c), e = pair_new((int64_t)n * L * c);
		int32_t *idx = malloc(sizeof *idx * (size_t)n * L);
		assert_non_null(idx);
		for (int i = 0; i < L; i++)   /* a second chain 512 on, as a multimer's linker numbering */
			ri.c[i] = (float)(i + (i >= L / 2 ? 512 : 0) + 3);
		assert_int_equal(gpu->upload(gpu, ri.g, ri.c, sizeof(float) * L), 0);
		memcpy(ref.c, z.c, sizeof(float) * (size_t)z.n);
		for (int i0 = 0; i0 < L; i0 += n) {
			int nc = L - i0 < n ? L - i0 : n;
			int64_t off = (int64_t)i0 * L * c;
			assert_int_equal(cpu->relpos(cpu, &(be_relpos_t){
				.z = z.c + off, .table = tab.c, .residx = ri.c, .i0 = i0, .ni = nc,
				.L = L, .c = c, .bins = bins,
			}), 0);
			assert_int_equal(gpu->relpos(gpu, &(be_relpos_t){
				.z = z.g + off, .table = tab.g, .residx = ri.g, .i0 = i0, .ni = nc,
				.L = L, .c = c, .bins = bins,
			}), 0);
			for (int i = 0; i < nc; i++)
				for (int j = 0; j < L; j++) {
					int d = (int)ri.c[j] - (int)ri.c[i0 + i];
					d = d < -bins ? -bins : d > bins ? bins : d;
					idx[i * L + j] = d + bins + 1;
				}
			assert_int_equal(cpu->gather(cpu, &(be_gather_t){
				.y = e.c, .table = tab.c, .idx = idx, .rows = (int64_t)nc * L,
				.d = c, .scale = 1.0f,
			}), 0);
			assert_int_equal(cpu->binary(cpu, &(be_binary_t){
				.y = ref.c + off, .a = ref.c + off, .b = e.c,
				.n = (int64_t)nc * L * c, .kind = BE_ADD,
			}), 0);
		}
		assert_memory_equal(z.c, ref.c, sizeof(float) * (size_t)z.n);
		snprintf(what, sizeof what, "relpos L%d rows of %d, c%d, bins %d", L, n, c, bins);
		pair_check(&z, 0.0, what);
		free(idx);
		pair_free(&z); pair_free(&tab); pair_free(&ri); pair_free(&ref); pair_free(&e);
	}
}

/* an allocation the device cannot satisfy is a status, and the backend
 * still works afterwards */
static void test_oom(void **state)
{
	void *p = (void *)1;
	assert_true(gpu->alloc(gpu, (size_t)1 << 50, &p) < 0);
	assert_null(p);
	pair_t x = pair_new(1000);
	assert_int_equal(cpu->fill(cpu, &(be_fill_t){ .x = x.c, .n = x.n, .value = 3.0f }), 0);
	assert_int_equal(gpu->fill(gpu, &(be_fill_t){ .x = x.g, .n = x.n, .value = 3.0f }), 0);
	pair_check(&x, 0.0, "fill after a refused allocation");
	pair_free(&x);
}

/* --- the triangle multiplication's strided layer norm and output side --- */

/* rows i0..i0+nc-1 of z: [L, L, d] (tr 0) or of z^T (tr 1), from *off */
static be_rows_t trimul_rows(int L, int d, int i0, int nc, int tr, int64_t *off)
{
	*off = tr ? (int64_t)i0 * d : (int64_t)i0 * L * d;
	return tr ? (be_rows_t){ nc, L, d, (int64_t)L * d } : (be_rows_t){ nc, L, (int64_t)L * d, d };
}

/* One trimul_out on both backends: z: [L, L, c], rows i0..+nc of z or z^T
 * (tr), x channel-major (cm) or channel-last.  fp32: NMSE 1e-10 against the
 * CPU.  bf16 (the tensor-core kernel, W held as bf16): the CPU runs on the
 * same bf16-rounded W in fp32, so the one other rounding is that of the
 * normalised x, t_k -> t_k (1 + d_k), |d_k| <= 2^-9; the GPU's sum then
 * differs by at most 2^-9 sum_k |t_k W_ok| (+ fp32 noise) and the gate,
 * in (0, 1), only shrinks it: each element is checked against that bound
 * (taken twice), every element outside the rows must be untouched, and the
 * result must differ measurably from the fp32 one (the rounding ran). */
static void trimul_out_case(int L, int c, int i0, int nc, int tr, int cm, int bf16)
{
	int64_t off, rows = (int64_t)nc * L, nz = (int64_t)L * L * c;
	be_rows_t r = trimul_rows(L, c, i0, nc, tr, &off);
	pair_t z = pair_new(nz), x = pair_new(rows * c), gv = pair_new(rows * c), w = pair_new((int64_t)c * c);
	pair_t b = pair_new(c), lw = pair_new(c), lb = pair_new(c);
	uint16_t *w16 = malloc(sizeof *w16 * (size_t)c * c), *w16g = NULL;
	float *h = malloc(sizeof *h * (size_t)nz), *z0 = malloc(sizeof *z0 * (size_t)nz);
	char what[128];

	assert_non_null(w16); assert_non_null(h); assert_non_null(z0);
	for (int64_t i = 0; i < x.n; i++) x.c[i] = 3.0f * x.c[i] + 0.5f;
	for (int64_t i = 0; i < gv.n; i++) gv.c[i] *= 4.0f;
	for (int64_t i = 0; i < w.n; i++) {
		w16[i] = safetensors_f32_to_bf16(w.c[i] / sqrtf((float)c));
		w.c[i] = safetensors_bf16_to_f32(w16[i]);
	}
	for (int64_t i = 0; i < nz; i++) z0[i] = z.c[i];
	assert_int_equal(gpu->upload(gpu, x.g, x.c, sizeof(float) * x.n), 0);
	assert_int_equal(gpu->upload(gpu, gv.g, gv.c, sizeof(float) * gv.n), 0);
	assert_int_equal(gpu->upload(gpu, w.g, w.c, sizeof(float) * w.n), 0);
	assert_int_equal(gpu->alloc(gpu, sizeof *w16 * (size_t)c * c, (void **)&w16g), 0);
	assert_int_equal(gpu->upload(gpu, w16g, w16, sizeof *w16 * (size_t)c * c), 0);
	be_trimul_out_t t = {
		.c = c, .z = z.c + off, .zr = r, .x = x.c, .x_rs = cm ? 1 : c, .x_cs = cm ? rows : 1, .gv = gv.c,
		.ln_w = lw.c, .ln_b = lb.c, .eps = 1e-5f, .w = w.c, .b = b.c,
	};
	assert_int_equal(cpu->trimul_out(cpu, &t), 0);
	t.z = z.g + off; t.x = x.g; t.gv = gv.g; t.ln_w = lw.g; t.ln_b = lb.g; t.b = b.g;
	t.w = bf16 ? (const float *)w16g : w.g;
	t.w_bf16 = bf16;
	if (bf16) assert_int_equal(be_cuda_set_precision(gpu, BE_PREC_BF16), 0);
	assert_int_equal(gpu->trimul_out(gpu, &t), 0);
	snprintf(what, sizeof what, "trimul_out%s L%d c%d rows %d..+%d%s, x %s", bf16 ? " bf16" : "", L, c, i0, nc,
	         tr ? " of z^T" : "", cm ? "channel-major" : "channel-last");
	if (!bf16) {
		pair_check(&z, 1e-10, what);
	} else {
		double worst = 0.0, nmse = 0.0, den = 0.0;
		float *bound = calloc((size_t)nz, sizeof *bound);
		assert_non_null(bound);
		assert_int_equal(gpu->sync(gpu), 0);
		assert_int_equal(gpu->download(gpu, h, z.g, sizeof *h * (size_t)nz), 0);
		for (int64_t i = 0; i < rows; i++) {
			double mean = 0.0, var = 0.0, tk[256];
			for (int k = 0; k < c; k++) mean += x.c[i * t.x_rs + k * t.x_cs];
			mean /= c;
			for (int k = 0; k < c; k++) { double d = x.c[i * t.x_rs + k * t.x_cs] - mean; var += d * d; }
			for (int k = 0; k < c; k++)
				tk[k] = (x.c[i * t.x_rs + k * t.x_cs] - mean) / sqrt(var / c + 1e-5) * lw.c[k] + lb.c[k];
			int64_t zo = off + i / r.n2 * r.s1 + i % r.n2 * r.s2;
			for (int o = 0; o < c; o++) {
				double s = 0.0;
				for (int k = 0; k < c; k++) s += fabs(tk[k] * w.c[(int64_t)o * c + k]);
				bound[zo + o] = (float)(2.0 * (s / 512.0 + 1e-5 * (1.0 + fabs(z.c[zo + o]))));
			}
		}
		for (int64_t i = 0; i < nz; i++) {
			double e = fabs((double)h[i] - z.c[i]);
			if (bound[i] == 0.0f) assert_true(h[i] == z0[i]);   /* outside the rows */
			else worst = fmax(worst, e / bound[i]);
			nmse += e * e;
			den += (double)z.c[i] * z.c[i];
		}
		nmse /= den;
		printf("  %-56s largest error / bound %.3g, nmse %.3g\n", what, worst, nmse);
		assert_true(worst <= 1.0);   /* false for NaN too */
		assert_true(nmse > 1e-12);   /* the bf16 rounding ran */
		free(bound);
		assert_int_equal(be_cuda_set_precision(gpu, BE_PREC_FP32), 0);
	}
	gpu->free(gpu, w16g);
	free(w16); free(h); free(z0);
	pair_free(&z); pair_free(&x); pair_free(&gv); pair_free(&w); pair_free(&b); pair_free(&lw); pair_free(&lb);
}

static void test_trimul_out(void **state)
{
	for (int bf16 = 0; bf16 < 2; bf16++) {
		trimul_out_case(37, 45, 13, 11, 1, 1, bf16);
		trimul_out_case(37, 45, 13, 11, 0, 0, bf16);
		trimul_out_case(23, 72, 17, 5, 1, 0, bf16);
		trimul_out_case(19, 128, 0, 19, 0, 1, bf16);
		trimul_out_case(5, 3, 4, 1, 1, 1, bf16);
		trimul_out_case(7, 200, 2, 3, 1, 1, bf16);
		/* x channel-major on 4 floats (16-byte copies), a short last tile */
		trimul_out_case(40, 64, 30, 10, 1, 1, bf16);
		trimul_out_case(48, 128, 0, 12, 0, 1, bf16);
		/* more tiles than persistent blocks (TO_GRID), odd L */
		trimul_out_case(163, 24, 0, 163, 1, 1, bf16);
		trimul_out_case(6, 256, 1, 4, 0, 1, bf16);   /* CU_TRIMUL_OUT_CMAX */
	}
}

/* --- be_supports --- */

/* be_supports answers from the op list: the CPU has every op and no
 * mem_info or worker; a card has every op but the direct triangle
 * product (the trunk batches GEMMs), and mem_info, worker and graphs, and so
 * has each of its workers; nothing answers for no backend or for a name
 * past the list */
static void test_supports(void **state)
{
	be_t *w = gpu->worker(gpu);
	int nops = 0;

	assert_non_null(w);
#define SUPPORTS_CASE(OP, slot, params)                                                  \
	assert_int_equal(be_supports(cpu, BE_OP_##OP), 1);                               \
	assert_int_equal(be_supports(gpu, BE_OP_##OP), BE_OP_##OP != BE_OP_TRIMUL);      \
	assert_int_equal(be_supports(w, BE_OP_##OP), be_supports(gpu, BE_OP_##OP));      \
	assert_int_equal(be_supports(NULL, BE_OP_##OP), 0);                              \
	nops++;
	BE_OPS(SUPPORTS_CASE)
#undef SUPPORTS_CASE
	assert_int_equal(nops, BE_OP_MEM_INFO);   /* the enum is the list, in order */
	assert_int_equal(be_supports(cpu, BE_OP_MEM_INFO), 0);
	assert_int_equal(be_supports(cpu, BE_OP_WORKER), 0);
	assert_int_equal(be_supports(gpu, BE_OP_MEM_INFO), 1);
	assert_int_equal(be_supports(gpu, BE_OP_WORKER), 1);
	assert_int_equal(be_supports(w, BE_OP_MEM_INFO), 1);
	assert_int_equal(be_supports(cpu, BE_OP_GRAPH), 0);
	assert_int_equal(be_supports(gpu, BE_OP_GRAPH), getenv("ESMBATCH_CUDA_GRAPHS") == NULL);
	assert_int_equal(be_supports(w, BE_OP_GRAPH), be_supports(gpu, BE_OP_GRAPH));
	assert_int_equal(be_supports(cpu, BE_OP_COUNT), 0);
	assert_int_equal(be_supports(gpu, BE_OP_COUNT), 0);
	be_free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_supports),
		cmocka_unit_test(test_gemm),
		cmocka_unit_test(test_gemm_relu),
		cmocka_unit_test(test_gemm_lowp),
		cmocka_unit_test(test_gemm_prec),
		cmocka_unit_test(test_gemm_bf16_weight),
		cmocka_unit_test(test_attn),
		cmocka_unit_test(test_attn_bf16),
		cmocka_unit_test(test_attn_gate),
		cmocka_unit_test(test_attn_rope),
		cmocka_unit_test(test_layernorm),
		cmocka_unit_test(test_softmax),
		cmocka_unit_test(test_act_binary),
		cmocka_unit_test(test_axpby_fill),
		cmocka_unit_test(test_gather),
		cmocka_unit_test(test_gather_long),
		cmocka_unit_test(test_transpose),
		cmocka_unit_test(test_outer),
		cmocka_unit_test(test_ipa),
		cmocka_unit_test(test_transition),
		cmocka_unit_test(test_seq_transition),
		cmocka_unit_test(test_ln_linear),
		cmocka_unit_test(test_ln_linear_bf16),
		cmocka_unit_test(test_ln_linear_bf16_out),
		cmocka_unit_test(test_gemm_bf16x2),
		cmocka_unit_test(test_relpos),
		cmocka_unit_test(test_oom),
		cmocka_unit_test(test_trimul_out),
	};
	const char *only = getenv("TEST_CUDA_OPS_ONLY");
	int rc;

	if (only) cmocka_set_test_filter(only);   /* the tests whose name matches it */
	if (!(gpu = be_cuda_init(0))) {
		fprintf(stderr, "test_cuda_ops: no CUDA device, skipped\n");
		return 77;
	}
	if (!(cpu = be_cpu_init(0))) {
		be_free(gpu);
		return 1;
	}
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	be_free(cpu);
	be_free(gpu);
	return rc;
}
