/* test_cuda_ops.c - every op of the CUDA backend against the CPU backend on
 * random inputs of awkward shapes, within a normalised-mean-square-error
 * bound per op (float32 unless a case says otherwise).  Exits 77 (skip)
 * when there is no CUDA device, so `make check` skips it on such hosts. */
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

static be_t *cpu, *gpu;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

/* uniform in [-1, 1) */
static float urand(void)
{
	rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
	return (float)((rng >> 40) * (2.0 / 16777216.0) - 1.0);
}

/* one tensor on both backends, same contents */
typedef struct { float *c, *g; int64_t n; } pair_t;

static pair_t pair_new(int64_t n)
{
	pair_t p = { .n = n };
	size_t nb = sizeof(float) * (size_t)(n ? n : 1);
	assert_int_equal(cpu->alloc(cpu, nb, (void **)&p.c), 0);
	assert_int_equal(gpu->alloc(gpu, nb, (void **)&p.g), 0);
	for (int64_t i = 0; i < n; i++) p.c[i] = urand();
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

	g.a = A.c; g.b = B.c; g.c = C.c; g.bias = bias ? bi.c : NULL;
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
 * bf16 and accumulates in fp32, so only the summation order differs */
static void gemm_bf16_case(int wa, int ta, int tb, int m, int n, int k, int bias, float beta)
{
	int ra = ta ? k : m, ca = ta ? m : k, rb = tb ? n : k, cb = tb ? k : n;
	int64_t lda = ca + 3, ldb = cb + 1, ldc = n + 2, nw = wa ? ra * lda : rb * ldb;
	pair_t A = pair_new(ra * lda), B = pair_new(rb * ldb), C = pair_new(m * ldc), bi = pair_new(n);
	pair_t *W = wa ? &A : &B, *X = wa ? &B : &A;
	uint16_t *w16 = malloc(sizeof *w16 * (size_t)nw), *g16;
	be_gemm_t g = { .transa = ta, .transb = tb, .m = m, .n = n, .k = k, .alpha = 0.75f,
	                .beta = beta, .lda = lda, .ldb = ldb, .ldc = ldc, .batch = 1 };
	char what[128];

	assert_non_null(w16);
	for (int64_t i = 0; i < nw; i++) {
		w16[i] = safetensors_f32_to_bf16(W->c[i]);
		W->c[i] = safetensors_bf16_to_f32(w16[i]);
	}
	assert_int_equal(gpu->alloc(gpu, sizeof *g16 * (size_t)nw, (void **)&g16), 0);
	assert_int_equal(gpu->upload(gpu, g16, w16, sizeof *g16 * (size_t)nw), 0);
	for (int64_t i = 0; i < X->n; i++) X->c[i] = bf16_round(X->c[i]);   /* the GPU keeps fp32 */
	g.a = A.c; g.b = B.c; g.c = C.c; g.bias = bias ? bi.c : NULL;
	assert_int_equal(cpu->gemm(cpu, &g), 0);
	g.a = wa ? (const float *)g16 : A.g; g.b = wa ? B.g : (const float *)g16;
	g.a_bf16 = wa; g.b_bf16 = !wa; g.c = C.g; g.bias = bias ? bi.g : NULL;
	assert_int_equal(gpu->gemm(gpu, &g), 0);
	snprintf(what, sizeof what, "gemm bf16 %s %c%c m%d n%d k%d%s beta%g", wa ? "A" : "B",
	         ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, bias ? " bias" : "", beta);
	pair_check(&C, 1e-10, what);
	gpu->free(gpu, g16);
	free(w16);
	pair_free(&A); pair_free(&B); pair_free(&C); pair_free(&bi);
}

/* bf16 weights (be->weights_bf16, at bf16): a weight as A or B, every
 * transpose, bias and beta, and a product larger than the bf16 stage
 * (sliced); refused with batch > 1 and on an fp32 device (no stage) */
static void test_gemm_bf16_weight(void **state)
{
	assert_int_equal(be_cuda_set_precision(gpu, BE_PREC_BF16), 0);
	assert_true(gpu->weights_bf16);
	for (int wa = 0; wa < 2; wa++)
		for (int ta = 0; ta < 2; ta++)
			for (int tb = 0; tb < 2; tb++)
				gemm_bf16_case(wa, ta, tb, 37, 53, 29, (ta + tb) & 1, ta ? 0.5f : 0.0f);
	gemm_bf16_case(0, 0, 1, 2100, 9, 4096, 1, 0.0f);   /* 2100 x 4096 > the 8 Mi stage */
	gemm_bf16_case(1, 0, 1, 9, 2100, 4096, 0, 1.0f);

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
	a->bias_sq = Lk + 1;
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
 *    sums of the output, the running sum and the rescaling.
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
	return (eta + u * (1.0 + eta) + (2.0 * a->Lk + 64.0) * 0x1p-24) * V;
}

static void attn_bf16_case(int B, int H, int Lq, int Lk, int D, int lay, int bias, int mask,
                           float bias_scale)
{
	attn_t t;
	char what[160];
	const be_attn_t *a = &t.a;
	double worst = 0.0, num = 0.0, den = 0.0;

	attn_new(&t, B, H, Lq, Lk, D, lay, bias, mask, bias_scale);
	attn_run(&t, cpu);
	snprintf(what, sizeof what, "attn B%d H%d Lq%d Lk%d D%d lay%d bias%d*%g mask%d",
	         B, H, Lq, Lk, D, lay, bias, bias_scale, mask);
	attn_run(&t, gpu);
	double nmse32 = pair_check(&t.o, 1e-9, what);
	assert_int_equal(be_cuda_set_precision(gpu, BE_PREC_BF16), 0);
	attn_run(&t, gpu);
	assert_int_equal(be_cuda_set_precision(gpu, BE_PREC_FP32), 0);

	float *h = malloc(sizeof *h * (size_t)t.o.n);
	assert_non_null(h);
	assert_int_equal(gpu->sync(gpu), 0);
	assert_int_equal(gpu->download(gpu, h, t.o.g, sizeof *h * (size_t)t.o.n), 0);
	for (int b = 0; b < B; b++)
		for (int i = 0; i < Lq; i++)
			for (int hd = 0; hd < H; hd++)
				for (int d = 0; d < D; d++) {
					int64_t at = b * a->o_sb + i * a->o_sl + hd * a->o_sh + d;
					double err = fabs((double)h[at] - t.o.c[at]);
					double bound = attn_bf16_bound(&t, b, i, hd, d);
					num += err * err;
					den += (double)t.o.c[at] * t.o.c[at];
					double ratio = err <= 0.0 ? 0.0 : err / bound;   /* NaN: NaN */
					if (!(ratio <= worst)) worst = isnan(ratio) ? INFINITY : ratio;
				}
	free(h);
	double nmse = den > 0.0 ? num / den : num;
	printf("  %-56s bf16: largest error / bound %.3g, nmse %.3g\n", what, worst, nmse);
	assert_true(worst <= 1.0);
	assert_true(nmse > 100.0 * nmse32);
	attn_free(&t);
}

/* the shapes of triangle attention (D 32, 4 heads, one bias for all rows),
 * sequence attention and ESM-2 (one batch row), the fixtures' widths (8,
 * 16), lengths off the 16-query and 32-key tiles, large biases, dropped
 * keys; a head over CU_FLASH_DMAX stays on the exact fp32 kernel */
static void test_attn_bf16(void **state)
{
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
 * write it: the gated result must be the ungated one of the same kernel
 * divided by 1 + expf(-g), bit for bit (the BE_GATE formula), and at fp32
 * match the CPU backend's gated attention. */
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
	for (int b = 0; b < B; b++)
		for (int i = 0; i < Lq; i++)
			for (int hd = 0; hd < H; hd++)
				for (int d = 0; d < D; d++) {
					int64_t at = b * a->o_sb + i * a->o_sl + hd * a->o_sh + d;
					if (gated[at] != plain[at] / (1.0f + expf(-g.c[at])))
						fail_msg("%s: o at %lld is %.9g, not the ungated %.9g gated", what,
						         (long long)at, gated[at], plain[at]);
				}
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
		assert_int_equal(cpu->layernorm(cpu, y.c, x.c, rows, d, w.c, b.c, 1e-5f), 0);
		assert_int_equal(gpu->layernorm(gpu, y.g, x.g, rows, d, w.g, b.g, 1e-5f), 0);
		snprintf(what, sizeof what, "layernorm rows%lld d%d", (long long)rows, d);
		pair_check(&y, 1e-10, what);
		/* in place */
		assert_int_equal(cpu->layernorm(cpu, x.c, x.c, rows, d, w.c, b.c, 1e-5f), 0);
		assert_int_equal(gpu->layernorm(gpu, x.g, x.g, rows, d, w.g, b.g, 1e-5f), 0);
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
		assert_int_equal(cpu->softmax(cpu, x.c, rows, d), 0);
		assert_int_equal(gpu->softmax(gpu, x.g, rows, d), 0);
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
		assert_int_equal(cpu->act(cpu, x.c, n, (be_act_t)kind), 0);
		assert_int_equal(gpu->act(gpu, x.g, n, (be_act_t)kind), 0);
		snprintf(what, sizeof what, "act %s n%lld", an[kind], (long long)n);
		pair_check(&x, 1e-10, what);
		pair_free(&x);
	}
	for (int kind = 0; kind < 3; kind++) {
		pair_t a = pair_new(n), b = pair_new(n), y = pair_new(n);
		assert_int_equal(cpu->binary(cpu, y.c, a.c, b.c, n, (be_bin_t)kind), 0);
		assert_int_equal(gpu->binary(gpu, y.g, a.g, b.g, n, (be_bin_t)kind), 0);
		snprintf(what, sizeof what, "binary %s n%lld", bn[kind], (long long)n);
		pair_check(&y, 1e-10, what);
		/* y aliasing b */
		assert_int_equal(cpu->binary(cpu, b.c, a.c, b.c, n, (be_bin_t)kind), 0);
		assert_int_equal(gpu->binary(gpu, b.g, a.g, b.g, n, (be_bin_t)kind), 0);
		snprintf(what, sizeof what, "binary %s in place", bn[kind]);
		pair_check(&b, 1e-10, what);
		pair_free(&a); pair_free(&b); pair_free(&y);
	}
}

/* gate_add (y += a * sigmoid(b)) against the CPU's, and against the CUDA
 * backend's own unfused composition (binary gate, then add): an odd
 * length over several blocks of the grid-stride loop */
static void test_gate_add(void **state)
{
	const int64_t n = 100003;
	pair_t a = pair_new(n), b = pair_new(n), y = pair_new(n), g = pair_new(n), y2 = pair_new(n);

	for (int64_t j = 0; j < n; j++) b.c[j] *= 6.0f;
	assert_int_equal(gpu->upload(gpu, b.g, b.c, sizeof(float) * n), 0);
	assert_int_equal(gpu->upload(gpu, y2.g, y.c, sizeof(float) * n), 0);
	memcpy(y2.c, y.c, sizeof(float) * n);
	assert_int_equal(cpu->gate_add(cpu, y.c, a.c, b.c, n), 0);
	assert_int_equal(gpu->gate_add(gpu, y.g, a.g, b.g, n), 0);
	pair_check(&y, 1e-10, "gate_add n100003");
	assert_int_equal(gpu->binary(gpu, g.g, a.g, b.g, n, BE_GATE), 0);
	assert_int_equal(gpu->binary(gpu, y2.g, y2.g, g.g, n, BE_ADD), 0);
	assert_int_equal(gpu->sync(gpu), 0);
	assert_int_equal(gpu->download(gpu, y2.c, y2.g, sizeof(float) * n), 0);
	assert_int_equal(gpu->download(gpu, g.c, y.g, sizeof(float) * n), 0);
	assert_memory_equal(g.c, y2.c, sizeof(float) * n);
	pair_free(&a); pair_free(&b); pair_free(&y); pair_free(&g); pair_free(&y2);
}

/* gate_rows ((y + by[r]) * sigmoid(g + bg[r])) against the CPU's: rows of
 * an odd width, with both biases and with none */
static void test_gate_rows(void **state)
{
	const int64_t rows = 37, cols = 2711;
	for (int nb = 0; nb < 2; nb++) {
		pair_t y = pair_new(rows * cols), g = pair_new(rows * cols), by = pair_new(rows), bg = pair_new(rows);
		for (int64_t j = 0; j < rows * cols; j++) g.c[j] *= 6.0f;
		assert_int_equal(gpu->upload(gpu, g.g, g.c, sizeof(float) * rows * cols), 0);
		assert_int_equal(cpu->gate_rows(cpu, y.c, g.c, nb ? NULL : by.c, nb ? NULL : bg.c, rows, cols), 0);
		assert_int_equal(gpu->gate_rows(gpu, y.g, g.g, nb ? NULL : by.g, nb ? NULL : bg.g, rows, cols), 0);
		pair_check(&y, 1e-10, nb ? "gate_rows 37 x 2711, no biases" : "gate_rows 37 x 2711");
		pair_free(&y); pair_free(&g); pair_free(&by); pair_free(&bg);
	}
}

/* layernorm_cm (channel-major x [d, rows] -> y [rows, d]) against the
 * CPU's: odd row counts around the block size, the pair width and others */
static void test_layernorm_cm(void **state)
{
	static const int cs[][2] = { { 257, 128 }, { 1000, 7 }, { 5, 33 } };
	char what[64];

	for (size_t t = 0; t < sizeof cs / sizeof *cs; t++) {
		int64_t rows = cs[t][0];
		int d = cs[t][1];
		pair_t x = pair_new(rows * d), y = pair_new(rows * d), w = pair_new(d), b = pair_new(d);
		assert_int_equal(cpu->layernorm_cm(cpu, y.c, x.c, rows, d, w.c, b.c, 1e-5f), 0);
		assert_int_equal(gpu->layernorm_cm(gpu, y.g, x.g, rows, d, w.g, b.g, 1e-5f), 0);
		snprintf(what, sizeof what, "layernorm_cm rows%lld d%d", (long long)rows, d);
		pair_check(&y, 1e-10, what);
		pair_free(&x); pair_free(&y); pair_free(&w); pair_free(&b);
	}
}

static void test_axpby_fill(void **state)
{
	const int64_t n = 70001;
	pair_t x = pair_new(n), y = pair_new(n);

	assert_int_equal(cpu->axpby(cpu, y.c, x.c, n, 0.3f, -1.7f), 0);
	assert_int_equal(gpu->axpby(gpu, y.g, x.g, n, 0.3f, -1.7f), 0);
	pair_check(&y, 1e-12, "axpby beta -1.7");
	assert_int_equal(cpu->fill(cpu, y.c, n, NAN), 0);
	assert_int_equal(gpu->fill(gpu, y.g, n, NAN), 0);
	assert_int_equal(cpu->axpby(cpu, y.c, x.c, n, 2.0f, 0.0f), 0);
	assert_int_equal(gpu->axpby(gpu, y.g, x.g, n, 2.0f, 0.0f), 0);
	pair_check(&y, 0.0, "axpby beta 0 over NaN");
	assert_int_equal(cpu->fill(cpu, x.c, n - 1, 0.625f), 0);
	assert_int_equal(gpu->fill(gpu, x.g, n - 1, 0.625f), 0);
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
	for (int64_t r = 0; r < rows; r++) idx[r] = (int32_t)((urand() + 1.0f) * 0.5f * ntab) % ntab;
	assert_int_equal(cpu->gather(cpu, y.c, t.c, idx, rows, d, 1.5f), 0);
	assert_int_equal(gpu->gather(gpu, y.g, t.g, idx, rows, d, 1.5f), 0);
	pair_check(&y, 0.0, "gather rows1001 d37");
	/* fewer rows */
	assert_int_equal(cpu->gather(cpu, y.c, t.c, idx + 5, 3, d, -1.0f), 0);
	assert_int_equal(gpu->gather(gpu, y.g, t.g, idx + 5, 3, d, -1.0f), 0);
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
	assert_int_equal(cpu->gather(cpu, y.c, t.c, idx, rows, d, 0.5f), 0);
	assert_int_equal(gpu->gather(gpu, y.g, t.g, idx, rows, d, 0.5f), 0);
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
		assert_int_equal(cpu->transpose(cpu, y.c, x.c, A, B, C), 0);
		assert_int_equal(gpu->transpose(gpu, y.g, x.g, A, B, C), 0);
		snprintf(what, sizeof what, "transpose A%lld B%lld C%lld",
		         (long long)A, (long long)B, (long long)C);
		pair_check(&y, 0.0, what);
		pair_free(&x); pair_free(&y);
	}
}

static void test_transpose_inplace(void **state)
{
	static const int64_t s[][2] = { { 37, 1 }, { 33, 5 }, { 70, 128 }, { 1, 3 }, { 2, 1 } };
	for (size_t i = 0; i < sizeof s / sizeof *s; i++) {
		int64_t A = s[i][0], C = s[i][1];
		pair_t x = pair_new(A * A * C);
		char what[64];
		assert_int_equal(cpu->transpose_inplace(cpu, x.c, A, C), 0);
		assert_int_equal(gpu->transpose_inplace(gpu, x.g, A, C), 0);
		snprintf(what, sizeof what, "transpose in place A%lld C%lld", (long long)A, (long long)C);
		pair_check(&x, 0.0, what);
		pair_free(&x);
	}
}

static void test_rotary(void **state)
{
	static const int s[][3] = { { 37, 3, 10 }, { 300, 2, 64 }, { 1, 1, 2 }, { 1100, 20, 128 } };
	for (size_t i = 0; i < sizeof s / sizeof *s; i++) {
		int T = s[i][0], H = s[i][1], D = s[i][2];
		pair_t x = pair_new((int64_t)T * H * D), f = pair_new(D / 2);
		char what[64];
		for (int j = 0; j < D / 2; j++) f.c[j] = powf(10000.0f, -2.0f * j / D);
		assert_int_equal(gpu->upload(gpu, f.g, f.c, sizeof(float) * f.n), 0);
		assert_int_equal(cpu->rotary(cpu, x.c, T, H, D, f.c), 0);
		assert_int_equal(gpu->rotary(gpu, x.g, T, H, D, f.g), 0);
		snprintf(what, sizeof what, "rotary T%d H%d D%d", T, H, D);
		pair_check(&x, 1e-10, what);
		pair_free(&x); pair_free(&f);
	}
}

static void test_outer(void **state)
{
	static const int s[][4] = { { 37, 5, 3, 11 }, { 64, 32, 0, 64 }, { 1, 1, 0, 1 }, { 130, 33, 129, 1 } };
	for (size_t i = 0; i < sizeof s / sizeof *s; i++) {
		int L = s[i][0], c = s[i][1], i0 = s[i][2], ni = s[i][3];
		pair_t q = pair_new((int64_t)L * c), k = pair_new((int64_t)L * c),
		       y = pair_new((int64_t)ni * L * 2 * c);
		char what[64];
		assert_int_equal(cpu->outer(cpu, y.c, q.c, k.c, i0, ni, L, c), 0);
		assert_int_equal(gpu->outer(gpu, y.g, q.g, k.g, i0, ni, L, c), 0);
		snprintf(what, sizeof what, "outer L%d c%d i0 %d ni%d", L, c, i0, ni);
		pair_check(&y, 0.0, what);
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
		assert_int_equal(cpu->ipa_in(cpu, qa.c, ka.c, vp.c, rig.c, st.c, qp.c, kvp.c, hw.c, bb.c, L, H, Pq, Pv), 0);
		assert_int_equal(gpu->ipa_in(gpu, qa.g, ka.g, vp.g, rig.g, st.g, qp.g, kvp.g, hw.g, bb.g, L, H, Pq, Pv), 0);
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
		assert_int_equal(cpu->ipa_out(cpu, cat.c + c0, ldc, op.c, rig.c, L, n, 1e-8f), 0);
		assert_int_equal(gpu->ipa_out(gpu, cat.g + c0, ldc, op.g, rig.g, L, n, 1e-8f), 0);
		snprintf(what, sizeof what, "ipa_out L%d, %d points, ldc %lld", L, n, (long long)ldc);
		pair_check(&cat, bound, what);
		/* eight backbone updates from the identity, each frame checked */
		assert_int_equal(cpu->ipa_rigid(cpu, st.c, NULL, NULL, L, 0.0f), 0);
		assert_int_equal(gpu->ipa_rigid(gpu, st.g, NULL, NULL, L, 0.0f), 0);
		pair_check(&st, 0.0, "ipa_rigid identity");
		for (int blk = 0; blk < 8; blk++) {
			for (int64_t i = 0; i < upd.n; i++) upd.c[i] = urand() * (i % 6 < 3 ? 0.5f : 4.0f);
			assert_int_equal(gpu->upload(gpu, upd.g, upd.c, sizeof(float) * upd.n), 0);
			assert_int_equal(cpu->ipa_rigid(cpu, st.c, fr.c, upd.c, L, 10.0f), 0);
			assert_int_equal(gpu->ipa_rigid(gpu, st.g, fr.g, upd.g, L, 10.0f), 0);
			snprintf(what, sizeof what, "ipa_rigid L%d block %d: frame", L, blk);
			pair_check(&fr, bound, what);
		}
		pair_check(&st, bound, "ipa_rigid: state after 8 blocks");
		pair_free(&st); pair_free(&qp); pair_free(&kvp); pair_free(&hw); pair_free(&bb);
		pair_free(&qa); pair_free(&ka); pair_free(&vp); pair_free(&rig); pair_free(&op);
		pair_free(&cat); pair_free(&upd); pair_free(&fr);
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
			assert_int_equal(cpu->relpos(cpu, z.c + off, tab.c, ri.c, i0, nc, L, c, bins), 0);
			assert_int_equal(gpu->relpos(gpu, z.g + off, tab.g, ri.g, i0, nc, L, c, bins), 0);
			for (int i = 0; i < nc; i++)
				for (int j = 0; j < L; j++) {
					int d = (int)ri.c[j] - (int)ri.c[i0 + i];
					d = d < -bins ? -bins : d > bins ? bins : d;
					idx[i * L + j] = d + bins + 1;
				}
			assert_int_equal(cpu->gather(cpu, e.c, tab.c, idx, (int64_t)nc * L, c, 1.0f), 0);
			assert_int_equal(cpu->binary(cpu, ref.c + off, ref.c + off, e.c, (int64_t)nc * L * c, BE_ADD), 0);
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
	assert_int_equal(cpu->fill(cpu, x.c, x.n, 3.0f), 0);
	assert_int_equal(gpu->fill(gpu, x.g, x.n, 3.0f), 0);
	pair_check(&x, 0.0, "fill after a refused allocation");
	pair_free(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gemm),
		cmocka_unit_test(test_gemm_relu),
		cmocka_unit_test(test_gemm_lowp),
		cmocka_unit_test(test_gemm_prec),
		cmocka_unit_test(test_gemm_bf16_weight),
		cmocka_unit_test(test_attn),
		cmocka_unit_test(test_attn_bf16),
		cmocka_unit_test(test_attn_gate),
		cmocka_unit_test(test_layernorm),
		cmocka_unit_test(test_layernorm_cm),
		cmocka_unit_test(test_softmax),
		cmocka_unit_test(test_act_binary),
		cmocka_unit_test(test_gate_add),
		cmocka_unit_test(test_gate_rows),
		cmocka_unit_test(test_axpby_fill),
		cmocka_unit_test(test_gather),
		cmocka_unit_test(test_gather_long),
		cmocka_unit_test(test_transpose),
		cmocka_unit_test(test_transpose_inplace),
		cmocka_unit_test(test_rotary),
		cmocka_unit_test(test_outer),
		cmocka_unit_test(test_ipa),
		cmocka_unit_test(test_relpos),
		cmocka_unit_test(test_oom),
	};
	int rc;

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
