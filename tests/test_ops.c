/* test_ops.c - every entry of the CPU backend (backend.h) against a scalar
 * double-precision reference written here, on random inputs (fixed seeds)
 * of random shapes including 1, odd sizes and sizes past the attention and
 * transpose tiles of cpu.c; then the op layer's (ops.h) shape checks,
 * sticky errors and planning mode.
 *
 * Error bounds (float32 unit roundoff u = 2^-24 ~ 6e-8):
 *  - elementwise ops (act, binary, axpby, gather, outer): max
 *    relative error <= 1e-5.  Each output is a handful of float roundings
 *    plus at most one libm call (expf, erff: a few ulp), i.e. <~ 10 u = 6e-7;
 *    1e-5 keeps a 15x margin while any wrong formula or index is >= 1e-3.
 *    Where the exact result cancels (a + b, a - b, alpha x + beta y, the
 *    0.5 x (1 + erf)), float32 can only promise an error relative
 *    to the operands, so the error is divided by max(|ref|, operand scale).
 *  - reductions (gemm, attention, layernorm, softmax, linear): NMSE =
 *    sum (got - ref)^2 / sum ref^2 < 1e-10.  A float32 sum of k products
 *    with random signs errs by ~ sqrt(k) u relative to its terms, so for
 *    k <= ~600 NMSE stays around 1e-13 .. 1e-12; a wrong element, stride or
 *    softmax rescale gives NMSE ~ 1e-2 .. 1.
 *  - relu, fill, transpose: exact (bit-identical).
 *  - gemm on a binary16 weight (b_f16): bit-identical to the same GEMM on
 *    the weight's float32 copy (the widening is exact, the sums alike).
 * The worst error seen per op is printed at the end of the run. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend/backend.h"
#include "compute/forward.h"
#include "compute/ops.h"

#define ELEM_TOL   1e-5
#define NMSE_BOUND 1e-10
#define TRIALS     40

/* ---- worst errors per op ------------------------------------------------- */

enum { E_GEMM, E_ATTN, E_LN, E_SOFTMAX, E_GELU, E_SIGMOID, E_ADD, E_MUL, E_GATE,
       E_AXPBY, E_GATHER, E_OUTER, E_TRIMUL, E_LINEAR, E_N };

static struct { const char *name, *metric; double bound, worst; } errs[E_N] = {
	[E_GEMM] = { "gemm", "nmse", NMSE_BOUND, 0 },
	[E_ATTN] = { "attn", "nmse", NMSE_BOUND, 0 },
	[E_LN] = { "layernorm", "nmse", NMSE_BOUND, 0 },
	[E_SOFTMAX] = { "softmax", "nmse", NMSE_BOUND, 0 },
	[E_GELU] = { "gelu", "rel", ELEM_TOL, 0 },
	[E_SIGMOID] = { "sigmoid", "rel", ELEM_TOL, 0 },
	[E_ADD] = { "add", "rel", ELEM_TOL, 0 },
	[E_MUL] = { "mul", "rel", ELEM_TOL, 0 },
	[E_GATE] = { "gate", "rel", ELEM_TOL, 0 },
	[E_AXPBY] = { "axpby", "rel", ELEM_TOL, 0 },
	[E_GATHER] = { "gather", "rel", ELEM_TOL, 0 },
	[E_OUTER] = { "outer", "rel", ELEM_TOL, 0 },
	[E_TRIMUL] = { "trimul", "nmse", NMSE_BOUND, 0 },
	[E_LINEAR] = { "op_linear", "nmse", NMSE_BOUND, 0 },
};

/* records err for op e and asserts it is within the op's bound (NaN fails) */
static void expect_err(int e, double err)
{
	if (!(err <= errs[e].worst)) errs[e].worst = isnan(err) ? INFINITY : err;
	if (!(err <= errs[e].bound))
		print_error("%s: %s %.3g over the bound %.0e\n", errs[e].name, errs[e].metric,
		            err, errs[e].bound);
	assert_true(err <= errs[e].bound);
}

static int print_worst(void **state)
{
	(void)state;
	for (int e = 0; e < E_N; e++)
		print_message("%-10s %-4s bound %.0e  worst %.3g\n", errs[e].name, errs[e].metric,
		              errs[e].bound, errs[e].worst);
	return 0;
}

/* ---- random numbers (xorshift64*: the same on every libc) ---------------- */

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s >> 12; *s ^= *s << 25; *s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

static int rng_below(uint64_t *s, int n) { return (int)(rng_next(s) % (uint64_t)n); }

/* uniform in [-amp, amp) */
static float rng_unif(uint64_t *s, float amp)
{
	return amp * ((float)(rng_next(s) >> 40) / (float)(1 << 24) * 2.0f - 1.0f);
}

/* a dimension in [1, max], 1 a quarter of the time */
static int rng_dim(uint64_t *s, int max) { return rng_below(s, 4) == 0 ? 1 : 1 + rng_below(s, max); }

/* ---- per-trial scratch memory, released at once by tmp_reset ------------- */

static void *tmp_list[64];
static int tmp_n;

static void *tmp(size_t bytes)
{
	assert_true(tmp_n < (int)(sizeof tmp_list / sizeof *tmp_list));
	void *p = malloc(bytes ? bytes : 1);
	assert_non_null(p);
	return tmp_list[tmp_n++] = p;
}

static void tmp_reset(void)
{
	while (tmp_n) free(tmp_list[--tmp_n]);
}

static float *frand(uint64_t *s, size_t n, float amp)
{
	float *x = tmp(n * sizeof *x);
	for (size_t i = 0; i < n; i++) x[i] = rng_unif(s, amp);
	return x;
}

static float *fcopy(const float *x, size_t n) { return memcpy(tmp(n * sizeof *x), x, n * sizeof *x); }

/* a reference array, NaN everywhere: "the op must not write here" */
static double *dref(size_t n)
{
	double *r = tmp(n * sizeof *r);
	for (size_t i = 0; i < n; i++) r[i] = NAN;
	return r;
}

/* ---- comparisons --------------------------------------------------------- */

/* NMSE over the entries the reference wrote; every entry it left NaN must
 * still be bit-identical to `before` (the op stayed inside its output). */
static double cmp_nmse(const float *got, const float *before, const double *ref, size_t n)
{
	double num = 0.0, den = 0.0;
	for (size_t i = 0; i < n; i++) {
		if (isnan(ref[i])) {
			assert_memory_equal(&got[i], &before[i], sizeof *got);
			continue;
		}
		double d = got[i] - ref[i];
		num += d * d;
		den += ref[i] * ref[i];
	}
	if (den > 0.0) return num / den;
	return num == 0.0 ? 0.0 : INFINITY;
}

/* max |got - ref| / max(|ref|, scl) (scl NULL: 0); a zero reference demands
 * an exact result */
static double cmp_rel(const float *got, const double *ref, const double *scl, size_t n)
{
	double worst = 0.0;
	for (size_t i = 0; i < n; i++) {
		double den = fmax(fabs(ref[i]), scl ? scl[i] : 0.0);
		double e = den > 0.0 ? fabs(got[i] - ref[i]) / den : (got[i] == ref[i] ? 0.0 : INFINITY);
		if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
	}
	return worst;
}

/* ---- fixture: one CPU backend, one thread -------------------------------- */

static int setup(void **state)
{
	be_t *be = be_cpu_init(1);
	*state = be;
	return be ? 0 : -1;
}

static int teardown(void **state)
{
	be_free(*state);
	tmp_reset();
	return 0;
}

/* ---- gemm ---------------------------------------------------------------- */

/* One strided-batched GEMM with padded leading dimensions and gaps between
 * batches.  beta = 0 starts from NaN in C (it must not leak through); the
 * padding of C must be left alone. */
static void gemm_trial_t(be_t *be, uint64_t *s, int m, int n, int k, int batch, int ta, int tb)
{
	int ra = ta ? k : m, ca = ta ? m : k, rb = tb ? n : k, cb = tb ? k : n;
	int64_t lda = ca + rng_below(s, 3), ldb = cb + rng_below(s, 3), ldc = n + rng_below(s, 3);
	int64_t sa = ra * lda + rng_below(s, 4), sb = rb * ldb + rng_below(s, 4);
	int64_t sc = m * ldc + rng_below(s, 4);
	int bc = rng_below(s, 3);
	float alpha = rng_unif(s, 2.0f), beta = bc == 0 ? 0.0f : bc == 1 ? 1.0f : rng_unif(s, 2.0f);
	float *a = frand(s, batch * sa, 1.0f), *b = frand(s, batch * sb, 1.0f);
	float *c = frand(s, batch * sc, 1.0f);
	float *bias = rng_below(s, 2) ? frand(s, n, 1.0f) : NULL;

	if (beta == 0.0f)
		for (int64_t i = 0; i < batch * sc; i++) c[i] = NAN;
	float *before = fcopy(c, batch * sc);
	double *ref = dref(batch * sc);
	for (int bt = 0; bt < batch; bt++)
		for (int i = 0; i < m; i++)
			for (int j = 0; j < n; j++) {
				double acc = 0.0;
				for (int p = 0; p < k; p++)
					acc += (double)a[bt * sa + (ta ? p * lda + i : i * lda + p)] *
					       b[bt * sb + (tb ? j * ldb + p : p * ldb + j)];
				int64_t at = bt * sc + i * ldc + j;
				ref[at] = alpha * acc + (beta == 0.0f ? 0.0 : (double)beta * c[at]) +
				          (bias ? bias[j] : 0.0);
			}
	be_gemm_t g = {
		.transa = ta, .transb = tb, .m = m, .n = n, .k = k, .alpha = alpha, .beta = beta,
		.a = a, .lda = lda, .stride_a = sa, .b = b, .ldb = ldb, .stride_b = sb,
		.c = c, .ldc = ldc, .stride_c = sc, .batch = batch, .bias = bias,
	};
	assert_int_equal(be->gemm(be, &g), 0);
	expect_err(E_GEMM, cmp_nmse(c, before, ref, batch * sc));
	tmp_reset();
}

/* one GEMM with the ReLU epilogue (beta 0) against the same GEMM without
 * it, clamped on the host: equal bit for bit (the clamp is exact); ldc
 * padding left as it was */
static void gemm_relu_trial(be_t *be, uint64_t *s, int m, int n, int k, int batch, int ta, int tb, int bias)
{
	int ra = ta ? k : m, ca = ta ? m : k, rb = tb ? n : k, cb = tb ? k : n;
	int64_t lda = ca + 1, ldb = cb + 2, ldc = n + 3, sa = ra * lda + 1, sb = rb * ldb, sc = m * ldc + 2;
	float *a = frand(s, batch * sa, 1.0f), *b = frand(s, batch * sb, 1.0f);
	float *c = frand(s, batch * sc, 1.0f), *want = fcopy(c, batch * sc);
	be_gemm_t g = {
		.transa = ta, .transb = tb, .m = m, .n = n, .k = k, .alpha = 0.75f, .beta = 0.0f,
		.a = a, .lda = lda, .stride_a = sa, .b = b, .ldb = ldb, .stride_b = sb,
		.c = want, .ldc = ldc, .stride_c = sc, .batch = batch, .bias = bias ? frand(s, n, 1.0f) : NULL,
	};
	int neg = 0;

	assert_int_equal(be->gemm(be, &g), 0);
	for (int bt = 0; bt < batch; bt++)
		for (int i = 0; i < m; i++)
			for (int j = 0; j < n; j++) {
				float *w = want + bt * sc + i * ldc + j;
				neg += *w < 0.0f;
				*w = *w > 0.0f ? *w : 0.0f;
			}
	g.c = c;
	g.relu = 1;
	assert_int_equal(be->gemm(be, &g), 0);
	assert_true(neg > 0 || m * n == 1);   /* the clamp was exercised */
	assert_memory_equal(c, want, sizeof *c * batch * sc);
	tmp_reset();
}

/* gemm with the ReLU epilogue: the CPU's three paths (own kernel, an
 * nn.Linear on few rows run transposed, CBLAS for A transposed), batched,
 * with and without bias, awkward sizes */
static void test_gemm_relu(void **state)
{
	be_t *be = *state;
	uint64_t s = 71;

	gemm_relu_trial(be, &s, 301, 70, 33, 1, 0, 1, 1);    /* own kernel */
	gemm_relu_trial(be, &s, 60, 517, 45, 1, 0, 1, 1);    /* few rows, transposed */
	gemm_relu_trial(be, &s, 37, 53, 29, 3, 1, 0, 0);     /* CBLAS, batched */
	gemm_relu_trial(be, &s, 130, 300, 17, 2, 0, 0, 1);   /* own kernel, batched */
	gemm_relu_trial(be, &s, 1, 1, 1, 1, 0, 1, 1);
}

/* binary16 bits to float, by the format's definition (not by the F16C
 * instruction the backend uses): finite values only */
static float half_value(uint16_t h)
{
	int e = h >> 10 & 31, f = h & 1023;
	float v = e ? ldexpf((float)(1024 + f), e - 25) : ldexpf((float)f, -24);
	return h & 0x8000 ? -v : v;
}

/* One nn.Linear GEMM (A [m, k] fp32, W [n, k] binary16 with padded ldb,
 * bias or none, beta 0 over NaN or 1) with be_gemm_t.b_f16 against the same
 * GEMM on W's float32 copy: equal bit for bit, as backend.h promises.
 * W's bits are random with exponents up to 15 (|w| < 2), subnormals
 * included, so every widening case is met. */
static void gemm_f16_trial(be_t *be, uint64_t *s, int m, int n, int k, int beta1, int bias)
{
	int64_t lda = k + 3, ldb = k + 5, ldc = n + 1;
	float *a = frand(s, (size_t)m * lda, 1.0f), *c = frand(s, (size_t)m * ldc, 1.0f);
	uint16_t *w16 = tmp(sizeof *w16 * n * ldb);
	float *w32 = tmp(sizeof *w32 * n * ldb);

	for (int64_t i = 0; i < n * ldb; i++) {
		uint64_t r = rng_next(s);
		w16[i] = (uint16_t)((r >> 20 & 0x8000) | (r >> 30) % 16 << 10 | (r >> 40 & 1023));
		w32[i] = half_value(w16[i]);
	}
	if (!beta1)
		for (int64_t i = 0; i < m * ldc; i++) c[i] = NAN;
	float *want = fcopy(c, (size_t)m * ldc);
	be_gemm_t g = {
		.transa = 0, .transb = 1, .m = m, .n = n, .k = k, .alpha = 0.5f, .beta = beta1 ? 1.0f : 0.0f,
		.a = a, .lda = lda, .b = w32, .ldb = ldb, .c = want, .ldc = ldc, .batch = 1,
		.bias = bias ? frand(s, n, 1.0f) : NULL,
	};
	assert_int_equal(be->gemm(be, &g), 0);
	g.b = (const float *)w16;
	g.b_f16 = 1;
	g.c = c;
	assert_int_equal(be->gemm(be, &g), 0);
	assert_memory_equal(c, want, sizeof *c * m * ldc);
	tmp_reset();
}

/* gemm on a binary16 weight (be->weights_f16: the own AVX-512 kernel):
 * one row, rows that cpu_gemm_few takes for the float32 copy (its
 * transposed form against the binary16 path's plain one), many rows over
 * two threads; k and n off the kernel's 16 and 32; with
 * ESMBATCH_CPU_BLAS (weights_f16 0) and for the forms it does not take
 * (A transposed, batched) such a GEMM is an error, not a wrong product */
static void test_gemm_f16(void **state)
{
	be_t *be = be_cpu_init(2);
	uint64_t s = 83;
	uint16_t w[4] = { 0 };
	float x[4] = { 0 }, y[4];
	be_gemm_t bad = {
		.transa = 0, .transb = 1, .m = 1, .n = 1, .k = 4, .alpha = 1.0f,
		.a = x, .lda = 4, .b = (const float *)w, .ldb = 4, .c = y, .ldc = 1, .batch = 1, .b_f16 = 1,
	};

	(void)state;
	assert_non_null(be);
	if (be->weights_f16) {
		gemm_f16_trial(be, &s, 1, 70, 37, 0, 1);
		gemm_f16_trial(be, &s, 60, 300, 64, 1, 0);     /* fp32 copy: cpu_gemm_few */
		gemm_f16_trial(be, &s, 90, 2560, 100, 0, 1);   /* fp32 copy: cpu_gemm_few */
		gemm_f16_trial(be, &s, 50, 2560, 37, 1, 1);    /* the LM's 50 rows at L = 48 */
		gemm_f16_trial(be, &s, 300, 130, 37, 1, 1);
		gemm_f16_trial(be, &s, 31, 33, 15, 0, 0);
		gemm_f16_trial(be, &s, 1, 1, 1, 1, 1);
		assert_int_equal(be->gemm(be, &bad), 0);
		bad.transa = 1;
		assert_int_equal(be->gemm(be, &bad), -1);
		bad.transa = 0;
		bad.batch = 2;
	}
	assert_int_equal(be->gemm(be, &bad), -1);
	be_free(be);
}

static void gemm_trial(be_t *be, uint64_t *s, int m, int n, int k, int batch)
{
	int ta = rng_below(s, 2), tb = rng_below(s, 2);
	gemm_trial_t(be, s, m, n, k, batch, ta, tb);
}

/* gemm: all four transpositions, alpha, beta in {0 over NaN, 1, random},
 * with and without bias, 1..3 strided batches, random shapes and a few
 * larger than the blocking of the kernels (k and column blocks of 256,
 * 12-row tiles, parallel tasks) and batched like the triangle products;
 * nn.Linear shapes on few rows (run transposed on the CPU) and pair-bias
 * shapes on fewer. */
static void test_gemm(void **state)
{
	uint64_t s = 1;
	for (int t = 0; t < 4 * TRIALS; t++)
		gemm_trial(*state, &s, rng_dim(&s, 70), rng_dim(&s, 70), rng_dim(&s, 70), 1 + rng_below(&s, 3));
	gemm_trial(*state, &s, 130, 67, 301, 2);
	gemm_trial(*state, &s, 1, 513, 257, 1);
	for (int t = 0; t < 4; t++) {
		gemm_trial(*state, &s, 700, 290, 530, 1);
		gemm_trial(*state, &s, 2003, 128, 128, 1);
		gemm_trial(*state, &s, 37, 45, 128, 64);
		gemm_trial_t(*state, &s, 64, 300, 530, 1, 0, 1);
		gemm_trial_t(*state, &s, 30, 100, 70, 3, 0, 1);
		gemm_trial_t(*state, &s, 90, 1100, 40, 1, 0, 1);
		gemm_trial_t(*state, &s, 4, 2100, 128, 1, 0, 1);
		gemm_trial_t(*state, &s, 13, 300, 37, 2, 0, 1);
		gemm_trial_t(*state, &s, 16, 256, 300, 1, 0, 1);
	}
}

/* ---- attention ----------------------------------------------------------- */

enum { LAY_BLHD, LAY_BHLD, LAY_QKV };      /* [B,L,H,D], [B,H,L,D], [B,L,H,3D] */
enum { BIAS_NONE, BIAS_SHARED, BIAS_BATCH };
enum { MASK_NONE, MASK_MIXED };

typedef struct { int B, H, Lq, Lk, D, lay, olay, bias, mask; } attn_case_t;
typedef struct { int64_t sb, sl, sh; } lay_t;

/* strides of a layout (padding between heads / batches where it has room);
 * returns the element count of a buffer holding B batches */
static int64_t lay_make(lay_t *l, int kind, int B, int L, int H, int D, uint64_t *s)
{
	int pad = rng_below(s, 3);
	switch (kind) {
	case LAY_BLHD: l->sh = D + pad; l->sl = H * l->sh; l->sb = L * l->sl + pad; break;
	case LAY_BHLD: l->sl = D + pad; l->sh = L * l->sl; l->sb = H * l->sh + pad; break;
	default:       l->sh = 3 * D; l->sl = H * l->sh; l->sb = L * l->sl; break;
	}
	return B * l->sb;
}

/* The MIXED key mask, per batch: the last of several batches drops every
 * key (a fully masked row); even batches drop a prefix of up to 290 keys
 * (so with Lk > 256 the whole first key tile) then some at random; odd
 * batches drop 30% at random.  Kept keys are 1 or 2: any non-zero keeps. */
static float *make_mask(uint64_t *s, int B, int Lk, int64_t sb)
{
	float *mask = frand(s, B * sb, 1.0f);
	for (int b = 0; b < B; b++) {
		int prefix = b % 2 == 0 ? (Lk - 1 < 290 ? Lk - 1 : 290) : 0;
		for (int j = 0; j < Lk; j++) {
			int drop = (B > 1 && b == B - 1) || j < prefix || rng_below(s, 10) < 3;
			mask[b * sb + j] = drop ? 0.0f : (float)(1 + rng_below(s, 2));
		}
		if (!(B > 1 && b == B - 1)) mask[b * sb + Lk - 1] = 1.0f;
	}
	return mask;
}

/* reference attention of one (b, h, i) query row into ref at o_at */
static void attn_ref_row(const be_attn_t *a, int b, int h, int i, double *ref, int64_t o_at,
                         double *sc)
{
	const float *q = a->q + b * a->q_sb + i * a->q_sl + h * a->q_sh;
	double mx = -INFINITY, sum = 0.0;

	for (int j = 0; j < a->Lk; j++) {
		sc[j] = -INFINITY;
		if (a->mask && a->mask[b * a->mask_sb + j] == 0.0f) continue;
		const float *k = a->k + b * a->k_sb + j * a->k_sl + h * a->k_sh;
		double dot = 0.0;
		for (int d = 0; d < a->D; d++) dot += (double)q[d] * k[d];
		sc[j] = a->scale * dot;
		if (a->bias) sc[j] += a->bias[b * a->bias_sb + h * a->bias_sh + i * a->bias_sq + j];
		if (sc[j] > mx) mx = sc[j];
	}
	for (int d = 0; d < a->D; d++) ref[o_at + d] = 0.0;
	if (mx == -INFINITY) return;   /* every key masked: the output is 0 */
	for (int j = 0; j < a->Lk; j++) {
		if (sc[j] == -INFINITY) continue;
		double p = exp(sc[j] - mx);
		const float *v = a->v + b * a->v_sb + j * a->v_sl + h * a->v_sh;
		sum += p;
		for (int d = 0; d < a->D; d++) ref[o_at + d] += p * v[d];
	}
	for (int d = 0; d < a->D; d++) ref[o_at + d] /= sum;
}

/* rope: [P, D/2, 2] = (cos, sin) of ESM-2's rotary angles p 10000^(-2d/D),
 * evaluated in double (be_attn_t.rope) */
static float *rope_table(int P, int D)
{
	float *rope = tmp(sizeof *rope * (size_t)P * D);
	for (int p = 0; p < P; p++)
		for (int d = 0; d < D / 2; d++) {
			double ang = p * pow(10000.0, -2.0 * d / D);
			rope[((int64_t)p * (D / 2) + d) * 2] = (float)cos(ang);
			rope[((int64_t)p * (D / 2) + d) * 2 + 1] = (float)sin(ang);
		}
	return rope;
}

/* x: [B, L, H, D] at strides sb, sl, sh: each row (b, i, h) rotated in
 * place by rope at position i (rotate-half), the rotary pass written out */
static void rope_rows(float *x, int B, int L, int H, int D, int64_t sb, int64_t sl, int64_t sh,
                      const float *rope)
{
	int half = D / 2;
	for (int b = 0; b < B; b++)
		for (int i = 0; i < L; i++)
			for (int h = 0; h < H; h++) {
				float *r = x + b * sb + i * sl + h * sh;
				for (int d = 0; d < half; d++) {
					float cs = rope[((int64_t)i * half + d) * 2], sn = rope[((int64_t)i * half + d) * 2 + 1];
					float x1 = r[d], x2 = r[d + half];
					r[d] = x1 * cs - x2 * sn;
					r[d + half] = x2 * cs + x1 * sn;
				}
			}
}

/* Attention a (o: on floats with the layout lo, `before` its old bytes;
 * q and k in buffers of nq and nk floats, one shared buffer where qkv)
 * with a rope table must be attention without it on q and k rotated
 * first (rope_rows), bit for bit, and within the reference's bound on
 * the rotated tensors. */
static void attn_rope_check(be_t *be, be_attn_t a, const float *before, int64_t on, lay_t lo,
                            int64_t nq, int64_t nk, int qkv, int threads)
{
	int P = a.Lq > a.Lk ? a.Lq : a.Lk;
	const float *rope = rope_table(P, a.D);
	float *rq = fcopy(a.q, nq), *rk = qkv ? rq + a.D : fcopy(a.k, nk);
	float *got = fcopy(before, on), *want = fcopy(before, on);
	double *ref = dref(on), *sc = tmp(a.Lk * sizeof *sc);
	be_attn_t r = a;

	rope_rows(rq, a.B, a.Lq, a.H, a.D, a.q_sb, a.q_sl, a.q_sh, rope);
	rope_rows(rk, a.B, a.Lk, a.H, a.D, a.k_sb, a.k_sl, a.k_sh, rope);
	r.q = rq; r.k = rk; r.o = want;
	if (qkv) r.v = rq + 2 * a.D;
	a.o = got;
	a.rope = rope;
#ifdef _OPENMP
	omp_set_num_threads(threads);
#endif
	assert_int_equal(be->attn(be, &r), 0);
	assert_int_equal(be->attn(be, &a), 0);
#ifdef _OPENMP
	omp_set_num_threads(1);
#endif
	for (int64_t i = 0; i < on; i++)
		if (memcmp(got + i, want + i, sizeof *got))
			fail_msg("attn with rope: o[%lld] = %.9g, not %.9g (rotated first)", (long long)i,
			         got[i], want[i]);
	for (int b = 0; b < a.B; b++)
		for (int h = 0; h < a.H; h++)
			for (int i = 0; i < a.Lq; i++)
				attn_ref_row(&r, b, h, i, ref, b * lo.sb + i * lo.sl + h * lo.sh, sc);
	expect_err(E_ATTN, cmp_nmse(got, before, ref, on));
}

/* One attention call on case c (under `threads` OpenMP threads) against the
 * reference; o's padding must be untouched and a fully masked row gives
 * exactly 0; then, where D is even, with the rotary table
 * (attn_rope_check). */
static void attn_trial(be_t *be, uint64_t *s, const attn_case_t *c, int threads)
{
	lay_t lq, lk, lv, lo;
	int64_t nq, nk;
	be_attn_t a = { .B = c->B, .H = c->H, .Lq = c->Lq, .Lk = c->Lk, .D = c->D,
	                .scale = 1.0f / sqrtf((float)c->D) };
	const float amp = 1.5f;

	if (c->lay == LAY_QKV) {   /* one buffer [B, L, H, q|k|v] */
		nq = nk = lay_make(&lq, LAY_QKV, c->B, c->Lq, c->H, c->D, s);
		float *qkv = frand(s, nq, amp);
		lk = lv = lq;
		a.q = qkv; a.k = qkv + c->D; a.v = qkv + 2 * c->D;
	} else {
		a.q = frand(s, nq = lay_make(&lq, c->lay, c->B, c->Lq, c->H, c->D, s), amp);
		a.k = frand(s, nk = lay_make(&lk, c->lay, c->B, c->Lk, c->H, c->D, s), amp);
		a.v = frand(s, lay_make(&lv, c->lay, c->B, c->Lk, c->H, c->D, s), amp);
	}
	int64_t on = lay_make(&lo, c->olay, c->B, c->Lq, c->H, c->D, s);
	a.o = frand(s, on, 9.0f);
	a.q_sb = lq.sb; a.q_sl = lq.sl; a.q_sh = lq.sh;
	a.k_sb = lk.sb; a.k_sl = lk.sl; a.k_sh = lk.sh;
	a.v_sb = lv.sb; a.v_sl = lv.sl; a.v_sh = lv.sh;
	a.o_sb = lo.sb; a.o_sl = lo.sl; a.o_sh = lo.sh;
	if (c->bias != BIAS_NONE) {
		a.bias_sq = c->Lk + rng_below(s, 3);
		a.bias_sh = c->Lq * a.bias_sq + rng_below(s, 3);
		a.bias_sb = c->bias == BIAS_SHARED ? 0 : c->H * a.bias_sh;
		a.bias = frand(s, (c->bias == BIAS_SHARED ? 1 : c->B) * c->H * a.bias_sh, 3.0f);
	}
	if (c->mask == MASK_MIXED) {
		a.mask_sb = c->Lk + rng_below(s, 3);
		a.mask = make_mask(s, c->B, c->Lk, a.mask_sb);
	}

	float *before = fcopy(a.o, on);
	double *ref = dref(on), *sc = tmp(c->Lk * sizeof *sc);
	for (int b = 0; b < c->B; b++)
		for (int h = 0; h < c->H; h++)
			for (int i = 0; i < c->Lq; i++)
				attn_ref_row(&a, b, h, i, ref, b * lo.sb + i * lo.sl + h * lo.sh, sc);
#ifdef _OPENMP
	omp_set_num_threads(threads);
#endif
	assert_int_equal(be->attn(be, &a), 0);
#ifdef _OPENMP
	omp_set_num_threads(1);
#endif
	expect_err(E_ATTN, cmp_nmse(a.o, before, ref, on));
	if (c->mask == MASK_MIXED && c->B > 1)   /* the fully masked batch */
		for (int h = 0; h < c->H; h++)
			for (int i = 0; i < c->Lq; i++)
				for (int d = 0; d < c->D; d++)
					assert_true(a.o[(c->B - 1) * lo.sb + i * lo.sl + h * lo.sh + d] == 0.0f);

	/* with the gate g (o's layout): the ungated result gated by the binary
	 * op (BE_GATE) afterwards, bit for bit; o's padding untouched */
	float *g = frand(s, on, 6.0f), *want = fcopy(a.o, on);
	assert_int_equal(be->binary(be, &(be_binary_t){
		.y = want, .a = want, .b = g, .n = on, .kind = BE_GATE,
	}), 0);
	memcpy(a.o, before, on * sizeof *a.o);
	a.g = g;
#ifdef _OPENMP
	omp_set_num_threads(threads);
#endif
	assert_int_equal(be->attn(be, &a), 0);
#ifdef _OPENMP
	omp_set_num_threads(1);
#endif
	for (int64_t i = 0; i < on; i++)
		if (memcmp(a.o + i, isnan(ref[i]) ? before + i : want + i, sizeof *a.o))
			fail_msg("gated attn: o[%lld] = %.9g, not %.9g", (long long)i, a.o[i],
			         isnan(ref[i]) ? before[i] : want[i]);
	if (c->D % 2 == 0) {
		a.g = NULL;
		attn_rope_check(be, a, before, on, lo, nq, nk, c->lay == LAY_QKV, threads);
	}
	tmp_reset();
}

/* attn: sizes of 1, odd sizes, Lq past the 64-query tile and Lk past the
 * 256-key tile (the online-softmax rescale between key tiles, a first key
 * tile wholly masked), [B,L,H,D], [B,H,L,D] and interleaved q|k|v layouts,
 * no / shared (bias_sb = 0) / per-batch bias, key masks with a fully masked
 * row; the listed cases under 1 and 3 threads, then random cases; each
 * also with the gate. */
static void test_attn(void **state)
{
	static const attn_case_t cases[] = {
		/* B  H  Lq   Lk  D  layout    o layout  bias         mask */
		{ 1, 1, 1, 1, 1, LAY_BLHD, LAY_BLHD, BIAS_NONE, MASK_NONE },
		{ 2, 3, 5, 7, 3, LAY_BLHD, LAY_BHLD, BIAS_SHARED, MASK_MIXED },
		{ 1, 2, 65, 257, 8, LAY_BHLD, LAY_BLHD, BIAS_BATCH, MASK_NONE },
		{ 2, 2, 130, 130, 5, LAY_QKV, LAY_BLHD, BIAS_SHARED, MASK_MIXED },
		{ 3, 2, 17, 300, 4, LAY_BLHD, LAY_BLHD, BIAS_BATCH, MASK_MIXED },
		{ 2, 1, 1, 513, 7, LAY_BHLD, LAY_BHLD, BIAS_NONE, MASK_MIXED },
		{ 1, 4, 64, 256, 16, LAY_BLHD, LAY_BLHD, BIAS_SHARED, MASK_NONE },
		{ 2, 3, 129, 600, 33, LAY_QKV, LAY_BHLD, BIAS_BATCH, MASK_MIXED },
		{ 4, 1, 3, 1, 2, LAY_BLHD, LAY_BLHD, BIAS_BATCH, MASK_MIXED },
	};
	uint64_t s = 2;
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		attn_case_t c = cases[i];
		if (c.lay == LAY_QKV) c.Lk = c.Lq;
		attn_trial(*state, &s, &c, 1);
		attn_trial(*state, &s, &c, 3);
	}
	for (int t = 0; t < TRIALS; t++) {
		attn_case_t c = {
			.B = 1 + rng_below(&s, 3), .H = 1 + rng_below(&s, 4), .Lq = rng_dim(&s, 150),
			.Lk = rng_dim(&s, 400), .D = rng_dim(&s, 40), .lay = rng_below(&s, 3),
			.olay = rng_below(&s, 2), .bias = rng_below(&s, 3), .mask = rng_below(&s, 2),
		};
		if (c.lay == LAY_QKV) c.Lk = c.Lq;
		attn_trial(*state, &s, &c, 1);
	}
}

/* attn with the rotary table (be_attn_t.rope) in ESM-2's shape (one batch
 * row, Lq = Lk = T) and others: T of 1, 17, 70, 130 and past the 256-key
 * tile, head widths 16, 32, 64, masks, under 1 and 3 threads (each case
 * also without the table, as attn_trial runs it) */
static void test_attn_rope(void **state)
{
	static const attn_case_t cases[] = {
		/* B  H  Lq   Lk  D  layout    o layout  bias         mask */
		{ 1, 1, 1, 1, 16, LAY_BLHD, LAY_BLHD, BIAS_NONE, MASK_NONE },
		{ 1, 3, 17, 17, 32, LAY_BLHD, LAY_BLHD, BIAS_NONE, MASK_MIXED },
		{ 1, 5, 70, 70, 64, LAY_BLHD, LAY_BLHD, BIAS_NONE, MASK_NONE },
		{ 1, 2, 130, 130, 16, LAY_QKV, LAY_BLHD, BIAS_NONE, MASK_MIXED },
		{ 2, 2, 130, 130, 64, LAY_BHLD, LAY_BHLD, BIAS_BATCH, MASK_MIXED },
		{ 1, 2, 300, 300, 32, LAY_BLHD, LAY_BLHD, BIAS_NONE, MASK_MIXED },
		{ 2, 3, 17, 70, 32, LAY_BLHD, LAY_BHLD, BIAS_SHARED, MASK_MIXED },
		{ 1, 2, 70, 17, 64, LAY_BHLD, LAY_BLHD, BIAS_NONE, MASK_NONE },
	};
	uint64_t s = 5;
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		attn_trial(*state, &s, &cases[i], 1);
		attn_trial(*state, &s, &cases[i], 3);
	}
}

/* ---- row-wise reductions --------------------------------------------------- */

/* layernorm: rows with a large random mean (the mean must really be
 * removed), d from 1 (output = bias) to 300, in and out of place. */
static void test_layernorm(void **state)
{
	be_t *be = *state;
	uint64_t s = 3;
	for (int t = 0; t < TRIALS; t++) {
		int rows = rng_dim(&s, 40), d = t == 0 ? 1 : rng_dim(&s, 300), inplace = t % 2;
		int64_t n = (int64_t)rows * d;
		float *x = frand(&s, n, 2.0f), *w = frand(&s, d, 1.5f), *b = frand(&s, d, 1.0f);
		float *y = inplace ? x : frand(&s, n, 1.0f), eps = 1e-5f;
		double *ref = dref(n);
		for (int r = 0; r < rows; r++) {
			float shift = rng_unif(&s, 20.0f);
			double mean = 0.0, var = 0.0;
			for (int i = 0; i < d; i++) {
				x[r * d + i] += shift;
				mean += x[r * d + i];
			}
			mean /= d;
			for (int i = 0; i < d; i++) var += (x[r * d + i] - mean) * (x[r * d + i] - mean);
			var /= d;
			for (int i = 0; i < d; i++)
				ref[r * d + i] = (x[r * d + i] - mean) / sqrt(var + eps) * w[i] + b[i];
		}
		assert_int_equal(be->layernorm(be, &(be_layernorm_t){
			.y = y, .x = x, .rows = rows, .d = d, .w = w, .b = b, .eps = eps,
		}), 0);
		expect_err(E_LN, cmp_nmse(y, y, ref, n));
		tmp_reset();
	}
}

/* softmax over the last dimension, in place, logits spread over [-12, 12]
 * (the max must be subtracted), d from 1 to 300. */
static void test_softmax(void **state)
{
	be_t *be = *state;
	uint64_t s = 4;
	for (int t = 0; t < TRIALS; t++) {
		int rows = rng_dim(&s, 40), d = rng_dim(&s, 300);
		int64_t n = (int64_t)rows * d;
		float *x = frand(&s, n, 12.0f);
		double *ref = dref(n);
		for (int r = 0; r < rows; r++) {
			double mx = -INFINITY, sum = 0.0;
			for (int i = 0; i < d; i++) mx = fmax(mx, x[r * d + i]);
			for (int i = 0; i < d; i++) sum += ref[r * d + i] = exp(x[r * d + i] - mx);
			for (int i = 0; i < d; i++) ref[r * d + i] /= sum;
		}
		assert_int_equal(be->softmax(be, &(be_softmax_t){ .x = x, .rows = rows, .d = d }), 0);
		expect_err(E_SOFTMAX, cmp_nmse(x, x, ref, n));
		tmp_reset();
	}
}

/* ---- elementwise --------------------------------------------------------- */

/* act: relu exactly, gelu in its erf form, sigmoid, over [-8, 8]. */
static void test_act(void **state)
{
	be_t *be = *state;
	uint64_t s = 5;
	for (int t = 0; t < TRIALS; t++) {
		int n = rng_dim(&s, 5000);
		float *x = frand(&s, n, 8.0f), *y = fcopy(x, n);
		double *ref = dref(n), *scl = dref(n);

		for (int i = 0; i < n; i++) ref[i] = x[i] > 0.0f ? x[i] : 0.0;
		assert_int_equal(be->act(be, &(be_unary_t){ .x = y, .n = n, .kind = BE_RELU }), 0);
		assert_true(cmp_rel(y, ref, NULL, n) == 0.0);

		/* gelu's error is relative to |x|: 1 + erf cancels for x < 0 */
		memcpy(y, x, n * sizeof *y);
		for (int i = 0; i < n; i++) {
			ref[i] = 0.5 * x[i] * (1.0 + erf(x[i] / sqrt(2.0)));
			scl[i] = fabs(x[i]);
		}
		assert_int_equal(be->act(be, &(be_unary_t){ .x = y, .n = n, .kind = BE_GELU }), 0);
		expect_err(E_GELU, cmp_rel(y, ref, scl, n));

		memcpy(y, x, n * sizeof *y);
		for (int i = 0; i < n; i++) ref[i] = 1.0 / (1.0 + exp(-(double)x[i]));
		assert_int_equal(be->act(be, &(be_unary_t){ .x = y, .n = n, .kind = BE_SIGMOID }), 0);
		expect_err(E_SIGMOID, cmp_rel(y, ref, NULL, n));
		tmp_reset();
	}
}

/* gate logits saturated at the start of g[0..n): sigmoid's exp clamped or
 * overflowing */
static void gate_saturate(float *g, int64_t n)
{
	static const float sat[] = { -INFINITY, INFINITY, -80.0f, 80.0f, 100.0f, -30.0f };
	for (size_t i = 0; i < sizeof sat / sizeof *sat && (int64_t)i < n; i++) g[i] = sat[i];
}

/* binary: add, mul and gate = a * sigmoid(b), into a separate y and in
 * place over a and over b. */
static void test_binary(void **state)
{
	be_t *be = *state;
	static const struct { be_bin_t kind; int e; } ops[] = {
		{ BE_ADD, E_ADD }, { BE_MUL, E_MUL }, { BE_GATE, E_GATE },
	};
	uint64_t s = 6;
	for (int t = 0; t < TRIALS; t++)
		for (size_t o = 0; o < sizeof ops / sizeof *ops; o++) {
			int n = rng_dim(&s, 5000), alias = t % 3;
			float *a = frand(&s, n, 4.0f), *b = frand(&s, n, 8.0f);
			float *y = alias == 1 ? a : alias == 2 ? b : frand(&s, n, 1.0f);
			double *ref = dref(n), *scl = dref(n);
			if (t == 1 && ops[o].kind == BE_GATE) gate_saturate(b, n);
			for (int i = 0; i < n; i++) {
				double x = a[i], z = b[i];
				ref[i] = ops[o].kind == BE_ADD ? x + z : ops[o].kind == BE_MUL ? x * z
				         : x / (1.0 + exp(-z));
				scl[i] = ops[o].kind == BE_ADD ? fabs(x) + fabs(z) : 0.0;
			}
			assert_int_equal(be->binary(be, &(be_binary_t){
				.y = y, .a = a, .b = b, .n = n, .kind = ops[o].kind,
			}), 0);
			expect_err(ops[o].e, cmp_rel(y, ref, scl, n));
			tmp_reset();
		}
}

/* axpby: y = alpha x + beta y; beta = 0 must ignore NaN already in y. */
static void test_axpby(void **state)
{
	be_t *be = *state;
	uint64_t s = 7;
	for (int t = 0; t < TRIALS; t++) {
		int n = rng_dim(&s, 5000);
		float alpha = rng_unif(&s, 2.0f), beta = t % 3 == 0 ? 0.0f : rng_unif(&s, 2.0f);
		float *x = frand(&s, n, 3.0f), *y = frand(&s, n, 3.0f);
		double *ref = dref(n), *scl = dref(n);
		if (beta == 0.0f)
			for (int i = 0; i < n; i++) y[i] = NAN;
		for (int i = 0; i < n; i++) {
			double by = beta == 0.0f ? 0.0 : (double)beta * y[i];
			ref[i] = (double)alpha * x[i] + by;
			scl[i] = fabs((double)alpha * x[i]) + fabs(by);
		}
		assert_int_equal(be->axpby(be, &(be_axpby_t){
			.y = y, .x = x, .n = n, .alpha = alpha, .beta = beta,
		}), 0);
		expect_err(E_AXPBY, cmp_rel(y, ref, scl, n));
		tmp_reset();
	}
}

/* fill: exactly n elements get the value, the neighbours stay. */
static void test_fill(void **state)
{
	be_t *be = *state;
	uint64_t s = 8;
	for (int t = 0; t < TRIALS; t++) {
		int n = rng_dim(&s, 5000);
		float v = rng_unif(&s, 100.0f), *x = frand(&s, n + 2, 1.0f), *before = fcopy(x, n + 2);
		assert_int_equal(be->fill(be, &(be_fill_t){ .x = x + 1, .n = n, .value = v }), 0);
		for (int i = 0; i < n; i++) assert_true(x[1 + i] == v);
		assert_memory_equal(&x[0], &before[0], sizeof *x);
		assert_memory_equal(&x[n + 1], &before[n + 1], sizeof *x);
		tmp_reset();
	}
}

/* gather: y[r] = scale * table[idx[r]], with repeated and extreme indices. */
static void test_gather(void **state)
{
	be_t *be = *state;
	uint64_t s = 9;
	for (int t = 0; t < TRIALS; t++) {
		int V = rng_dim(&s, 50), d = rng_dim(&s, 130), rows = rng_dim(&s, 60);
		float scale = t == 0 ? 1.0f : rng_unif(&s, 4.0f);
		float *table = frand(&s, (size_t)V * d, 2.0f), *y = frand(&s, (size_t)rows * d, 1.0f);
		int32_t *idx = tmp(rows * sizeof *idx);
		double *ref = dref((size_t)rows * d);
		for (int r = 0; r < rows; r++) {
			idx[r] = r == 0 ? V - 1 : r == 1 ? 0 : rng_below(&s, V);
			for (int i = 0; i < d; i++) ref[r * d + i] = (double)scale * table[idx[r] * d + i];
		}
		assert_int_equal(be->gather(be, &(be_gather_t){
			.y = y, .table = table, .idx = idx, .rows = rows, .d = d, .scale = scale,
		}), 0);
		expect_err(E_GATHER, cmp_rel(y, ref, NULL, (size_t)rows * d));
		tmp_reset();
	}
}

/* transpose [A, B, C] -> [B, A, C], bit-exact, with C = 1 and A, B around
 * and past the 32 tile. */
static void test_transpose(void **state)
{
	be_t *be = *state;
	static const int dims[] = { 1, 2, 31, 32, 33, 65, 70 };
	const int nd = sizeof dims / sizeof *dims;
	uint64_t s = 10;
	for (int t = 0; t < 2 * TRIALS; t++) {
		int64_t A = dims[rng_below(&s, nd)], B = dims[rng_below(&s, nd)];
		int64_t C = t % 2 ? 1 : rng_dim(&s, 9), n = A * B * C;
		float *x = frand(&s, n, 1.0f), *y = frand(&s, n, 1.0f), *want = tmp(n * sizeof *want);
		for (int64_t a = 0; a < A; a++)
			for (int64_t b = 0; b < B; b++)
				for (int64_t c = 0; c < C; c++)
					want[(b * A + a) * C + c] = x[(a * B + b) * C + c];
		assert_int_equal(be->transpose(be, &(be_transpose_t){
			.y = y, .x = x, .A = A, .B = B, .C = C,
		}), 0);
		assert_memory_equal(y, want, n * sizeof *y);
		tmp_reset();
	}
}

/* outer: y[i, j] = (q[j] * k[i0 + i], q[j] - k[i0 + i]) for rows i0.. of
 * the chunk; exactly ni * L * 2c floats written. */
static void test_outer(void **state)
{
	be_t *be = *state;
	uint64_t s = 12;
	for (int t = 0; t < TRIALS; t++) {
		int L = rng_dim(&s, 40), c = rng_dim(&s, 20), i0 = rng_below(&s, L);
		int ni = 1 + rng_below(&s, L - i0);
		int64_t n = (int64_t)ni * L * 2 * c;
		float *q = frand(&s, (size_t)L * c, 2.0f), *k = frand(&s, (size_t)L * c, 2.0f);
		float *y = frand(&s, n + 1, 1.0f), tail = y[n];
		double *ref = dref(n), *scl = dref(n);
		for (int i = 0; i < ni; i++)
			for (int j = 0; j < L; j++)
				for (int u = 0; u < c; u++) {
					double qv = q[j * c + u], kv = k[(i0 + i) * c + u];
					int64_t at = ((int64_t)i * L + j) * 2 * c + u;
					ref[at] = qv * kv;
					scl[at] = 0.0;
					ref[at + c] = qv - kv;
					scl[at + c] = fabs(qv) + fabs(kv);
				}
		assert_int_equal(be->outer(be, &(be_outer_t){
			.y = y, .q = q, .k = k, .i0 = i0, .ni = ni, .L = L, .c = c,
		}), 0);
		expect_err(E_OUTER, cmp_rel(y, ref, scl, n));
		assert_memory_equal(&y[n], &tail, sizeof tail);
		tmp_reset();
	}
}

/* trimul: x[i, j, :] = sum_k a[i, k, :] b[j, k, :]; channel counts that
 * are multiples of 16 (the vector kernel, tiles of 4 x 5 with every kind
 * of edge) and others (the plain loop); x is fully overwritten (NaN
 * before) and nothing past it is touched. */
static void test_trimul(void **state)
{
	be_t *be = *state;
	uint64_t s = 14;
	const int cs[] = { 16, 128, 48, 8, 20, 1 };
	assert_non_null(be->trimul);
	for (int t = 0; t < TRIALS; t++) {
		int ni = rng_dim(&s, 13), nj = rng_dim(&s, 23), nk = rng_dim(&s, 40);
		int c = cs[t % 6];
		int64_t n = (int64_t)ni * nj * c;
		float *a = frand(&s, (size_t)ni * nk * c, 1.0f), *b = frand(&s, (size_t)nj * nk * c, 1.0f);
		float *x = frand(&s, n + 1, 1.0f), tail = x[n];
		float *before;
		double *ref = dref(n);
		for (int64_t u = 0; u < n; u++) x[u] = NAN;
		before = fcopy(x, n);
		for (int i = 0; i < ni; i++)
			for (int j = 0; j < nj; j++)
				for (int q = 0; q < c; q++) {
					double acc = 0.0;
					for (int k = 0; k < nk; k++)
						acc += (double)a[((int64_t)i * nk + k) * c + q] * b[((int64_t)j * nk + k) * c + q];
					ref[((int64_t)i * nj + j) * c + q] = acc;
				}
		assert_int_equal(be->trimul(be, &(be_trimul_t){
			.x = x, .a = a, .b = b, .ni = ni, .nj = nj, .nk = nk, .c = c,
		}), 0);
		expect_err(E_TRIMUL, cmp_nmse(x, before, ref, n));
		assert_memory_equal(&x[n], &tail, sizeof tail);
		tmp_reset();
	}
}

/* ---- the op layer ---------------------------------------------------------- */

/* op_linear: y [2, 3, out] = x [2, 3, in] W^T + b + beta y, with the
 * checkpoint's [out, in] weight layout, beta 0 over NaN, and no bias. */
static void test_op_linear(void **state)
{
	be_t *be = *state;
	uint64_t s = 13;
	for (int t = 0; t < TRIALS; t++) {
		int in = rng_dim(&s, 70), out = rng_dim(&s, 70), m = 6;
		float beta = t % 2 ? 0.0f : rng_unif(&s, 1.0f);
		float *w = frand(&s, (size_t)out * in, 1.0f), *b = t % 3 ? frand(&s, out, 1.0f) : NULL;
		float *xh = frand(&s, (size_t)m * in, 1.0f), *yh = frand(&s, (size_t)m * out, 1.0f);
		double *ref = dref((size_t)m * out);
		lin_t l = { .w = w, .b = b, .out = out, .in = in };
		fwd_t fx;

		if (beta == 0.0f)
			for (int i = 0; i < m * out; i++) yh[i] = NAN;
		for (int r = 0; r < m; r++)
			for (int o = 0; o < out; o++) {
				double acc = b ? b[o] : 0.0;
				for (int i = 0; i < in; i++) acc += (double)xh[r * in + i] * w[o * in + i];
				ref[r * out + o] = acc + (beta == 0.0f ? 0.0 : (double)beta * yh[r * out + o]);
			}
		assert_int_equal(fwd_exec_begin(&fx, be, 1 << 20), 0);
		tensor_t x = fwd_new3(&fx, 2, 3, in), y = fwd_new2(&fx, m, out);
		fwd_set(&fx, x, xh);
		fwd_set(&fx, y, yh);
		op_linear(&fx, y, x, &l, beta);
		fwd_get(&fx, y, yh);
		assert_int_equal(fx.err, 0);
		expect_err(E_LINEAR, cmp_nmse(yh, yh, ref, (size_t)m * out));
		fwd_end(&fx);
		tmp_reset();
	}
}

/* A wrong call of one op; `name` must appear in the error message. */
typedef struct { const char *name; void (*call)(fwd_t *fx); } bad_call_t;

static const float zeros[64];

static void bad_linear_in(fwd_t *fx)
{
	lin_t l = { .w = zeros, .out = 3, .in = 6 };
	op_linear(fx, fwd_new2(fx, 4, 3), fwd_new2(fx, 4, 5), &l, 0.0f);
}

static void bad_linear_out(fwd_t *fx)
{
	lin_t l = { .w = zeros, .out = 4, .in = 5 };
	op_linear(fx, fwd_new2(fx, 4, 3), fwd_new2(fx, 4, 5), &l, 0.0f);
}

static void bad_linear_rows(fwd_t *fx)
{
	lin_t l = { .w = zeros, .out = 3, .in = 5 };
	op_linear(fx, fwd_new2(fx, 3, 3), fwd_new2(fx, 4, 5), &l, 0.0f);
}

static void bad_layernorm(fwd_t *fx)
{
	ln_t ln = { zeros, zeros, 6, 1e-5f };
	op_layernorm(fx, fwd_new2(fx, 4, 5), fwd_new2(fx, 4, 5), &ln);
}

static void bad_binary(fwd_t *fx) { op_binary(fx, fwd_new2(fx, 4, 5), fwd_new2(fx, 4, 5), fwd_new2(fx, 5, 5), BE_ADD); }
static void bad_axpby(fwd_t *fx) { op_axpby(fx, fwd_new1(fx, 20), fwd_new1(fx, 21), 1.0f, 1.0f); }
static void bad_transpose(fwd_t *fx) { op_transpose(fx, fwd_new3(fx, 4, 3, 6), fwd_new3(fx, 3, 4, 5)); }
static void bad_attn_rope(fwd_t *fx)   /* a rope table, D odd */
{
	tensor_t x = fwd_new2(fx, 5, 7), o = fwd_new2(fx, 5, 7);
	op_attn(fx, &(be_attn_t){ .B = 1, .H = 1, .Lq = 5, .Lk = 5, .D = 7, .scale = 1.0f,
	                          .q = x.d, .q_sl = 7, .k = x.d, .k_sl = 7, .v = x.d, .v_sl = 7,
	                          .o = o.d, .o_sl = 7, .rope = zeros });
}
static void bad_gather(fwd_t *fx) { op_gather(fx, fwd_new1(fx, 8), zeros, (const int32_t[]){ 0 }, 1.0f); }
static void bad_outer(fwd_t *fx)
{
	tensor_t q = fwd_new2(fx, 6, 4), k = fwd_new2(fx, 6, 4);
	op_outer(fx, fwd_new3(fx, 3, 6, 8), q, k, 4, 0);   /* rows 4..6 of 6 */
}

static void bad_trimul(fwd_t *fx)
{
	op_trimul(fx, fwd_new3(fx, 3, 5, 16), fwd_new3(fx, 3, 7, 16), fwd_new3(fx, 5, 6, 16));   /* nk 7 vs 6 */
}

static const bad_call_t bad_calls[] = {
	{ "linear", bad_linear_in }, { "linear", bad_linear_out }, { "linear", bad_linear_rows },
	{ "layernorm", bad_layernorm },
	{ "binary", bad_binary }, { "axpby", bad_axpby }, { "transpose", bad_transpose },
	{ "attention", bad_attn_rope }, { "gather", bad_gather }, { "outer", bad_outer },
	{ "trimul", bad_trimul },
};

/* Each shape mismatch sets fx->err with a message naming the op, while
 * executing and while planning; once failed, a later op is skipped (its
 * output keeps its bytes), a later mismatch does not overwrite the first
 * message, and fwd_new hands out empty tensors. */
static void test_op_shape_errors(void **state)
{
	be_t *be = *state;
	const size_t nb = sizeof bad_calls / sizeof *bad_calls;
	for (size_t i = 0; i < nb; i++) {
		fwd_t fx;
		char first[sizeof fx.errmsg];

		fwd_plan_begin(&fx, be);
		bad_calls[i].call(&fx);
		assert_int_equal(fx.err, -1);
		assert_non_null(strstr(fx.errmsg, bad_calls[i].name));
		fwd_end(&fx);

		assert_int_equal(fwd_exec_begin(&fx, be, 1 << 16), 0);
		tensor_t z = fwd_new1(&fx, 16);
		op_fill(&fx, z, 3.0f);
		bad_calls[i].call(&fx);
		assert_int_equal(fx.err, -1);
		assert_non_null(strstr(fx.errmsg, bad_calls[i].name));
		assert_non_null(strstr(fx.errmsg, "shape mismatch"));
		strcpy(first, fx.errmsg);
		op_fill(&fx, z, 7.0f);                    /* skipped */
		for (int j = 0; j < 16; j++) assert_true(z.d[j] == 3.0f);
		bad_calls[(i + 1) % nb].call(&fx);        /* first error wins */
		assert_int_equal(fwd_fail(&fx, -5, "a later failure"), -5);
		assert_string_equal(fx.errmsg, first);
		assert_int_equal(fx.err, -1);
		assert_null(fwd_new2(&fx, 2, 2).d);
		fwd_end(&fx);
	}
}

/* a spy backend: every op entry only counts its calls */
static int spy_calls;
static int spy(void) { spy_calls++; return 0; }
static int spy_gemm(be_t *be, const be_gemm_t *g) { return spy(); }
static int spy_attn(be_t *be, const be_attn_t *a) { return spy(); }
static int spy_ln(be_t *be, const be_layernorm_t *p) { return spy(); }
static int spy_softmax(be_t *be, const be_softmax_t *p) { return spy(); }
static int spy_act(be_t *be, const be_unary_t *p) { return spy(); }
static int spy_binary(be_t *be, const be_binary_t *p) { return spy(); }
static int spy_axpby(be_t *be, const be_axpby_t *p) { return spy(); }
static int spy_fill(be_t *be, const be_fill_t *p) { return spy(); }
static int spy_gather(be_t *be, const be_gather_t *p) { return spy(); }
static int spy_transpose(be_t *be, const be_transpose_t *p) { return spy(); }
static int spy_outer(be_t *be, const be_outer_t *p) { return spy(); }

static be_t spy_backend(const be_t *cpu)
{
	be_t be = *cpu;
	be.gemm = spy_gemm; be.attn = spy_attn; be.layernorm = spy_ln; be.softmax = spy_softmax;
	be.act = spy_act; be.binary = spy_binary;
	be.axpby = spy_axpby; be.fill = spy_fill;
	be.gather = spy_gather; be.transpose = spy_transpose; be.outer = spy_outer;
	return be;
}

#define ALL_OPS 12

/* one valid call of every op (ALL_OPS of them) on tensors of fx */
static void all_ops(fwd_t *fx)
{
	static float w[8 * 8];
	lin_t l = { .w = w, .b = w, .out = 8, .in = 8 };
	ln_t ln = { w, w, 8, 1e-5f };
	tensor_t x = fwd_new2(fx, 5, 8), y = fwd_new2(fx, 5, 8), r = fwd_new3(fx, 5, 1, 8);
	tensor_t p = fwd_new3(fx, 2, 5, 16), t = fwd_new2(fx, 8, 5);

	op_fill(fx, x, 0.5f);
	op_linear(fx, y, x, &l, 0.0f);
	op_layernorm(fx, y, y, &ln);
	op_act(fx, y, BE_GELU);
	op_binary(fx, y, y, x, BE_GATE);
	op_axpby(fx, y, x, 1.0f, 1.0f);
	op_softmax(fx, y);
	op_gather(fx, r, w, (const int32_t[]){ 0, 1, 2, 3, 4 }, 1.0f);
	op_transpose(fx, t, x);
	op_outer(fx, p, x, y, 3, 0);
	op_gemm(fx, &(be_gemm_t){ .m = 5, .n = 8, .k = 8, .alpha = 1.0f, .a = x.d, .lda = 8,
	                          .b = w, .ldb = 8, .c = y.d, .ldc = 8, .batch = 1 });
	op_attn(fx, &(be_attn_t){ .B = 1, .H = 1, .Lq = 5, .Lk = 5, .D = 8, .scale = 1.0f,
	                          .q = x.d, .q_sl = 8, .k = x.d, .k_sl = 8, .v = y.d, .v_sl = 8,
	                          .o = r.d, .o_sl = 8, .rope = w });
	fwd_drop(fx, &t); fwd_drop(fx, &p); fwd_drop(fx, &r); fwd_drop(fx, &y); fwd_drop(fx, &x);
}

/* Planning never reaches the backend's ops (so never touches data: the
 * planning tensors point at an unmapped fake range), while executing the
 * same calls reaches each op once; both run without error on the real CPU
 * backend too. */
static void test_op_planning_no_touch(void **state)
{
	be_t *cpu = *state, spy_be = spy_backend(cpu);
	fwd_t fx;

	spy_calls = 0;
	fwd_plan_begin(&fx, &spy_be);
	all_ops(&fx);
	assert_int_equal(fx.err, 0);
	assert_int_equal(spy_calls, 0);
	size_t high = fx.place.high;
	assert_true(high > 0);
	fwd_end(&fx);

	assert_int_equal(fwd_exec_begin(&fx, &spy_be, high), 0);
	all_ops(&fx);
	assert_int_equal(fx.err, 0);
	assert_int_equal(spy_calls, ALL_OPS);
	fwd_end(&fx);

	fwd_plan_begin(&fx, cpu);
	all_ops(&fx);
	assert_int_equal(fx.err, 0);
	assert_int_equal(fx.place.high, high);
	fwd_end(&fx);
	assert_int_equal(fwd_exec_begin(&fx, cpu, high), 0);
	all_ops(&fx);
	assert_int_equal(fx.err, 0);
	fwd_end(&fx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_gemm, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gemm_relu, setup, teardown),
		cmocka_unit_test(test_gemm_f16),
		cmocka_unit_test_setup_teardown(test_attn, setup, teardown),
		cmocka_unit_test_setup_teardown(test_layernorm, setup, teardown),
		cmocka_unit_test_setup_teardown(test_softmax, setup, teardown),
		cmocka_unit_test_setup_teardown(test_act, setup, teardown),
		cmocka_unit_test_setup_teardown(test_binary, setup, teardown),
		cmocka_unit_test_setup_teardown(test_axpby, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fill, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gather, setup, teardown),
		cmocka_unit_test_setup_teardown(test_transpose, setup, teardown),
		cmocka_unit_test_setup_teardown(test_attn_rope, setup, teardown),
		cmocka_unit_test_setup_teardown(test_outer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_trimul, setup, teardown),
		cmocka_unit_test_setup_teardown(test_op_linear, setup, teardown),
		cmocka_unit_test_setup_teardown(test_op_shape_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_op_planning_no_touch, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, print_worst);
}
