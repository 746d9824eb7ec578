/* cpu.c - the CPU backend: float32, OpenMP across rows; matrix
 * products, the triangle product, the attention's softmax step, layer
 * norms and gates on the own AVX-512 kernels (cpu_avx512.c) where the CPU
 * has AVX-512F, else (or with ESMBATCH_CPU_BLAS=1) on CBLAS and the
 * portable loops below.
 *
 * Host memory is backend memory, so upload/download are memcpy.  One thread
 * pool: OpenMP threads split the work, and every BLAS call inside them is
 * single-threaded (OpenBLAS is set to one thread at init).  Attention streams
 * over key tiles with an online softmax: the only scores held are one
 * [BE_CPU_TQ, BE_CPU_TK] tile per thread, in per-thread scratch kept from
 * call to call (no allocation per call).
 *
 * Portable inner loops are `omp simd` kernels over contiguous ranges; on
 * x86-64 (GCC 12 and later) each is built for AVX-512, AVX2 and the
 * baseline and the best one is picked at load time (target_clones).  exp
 * is cpu_exp below, vectorisable and within 1e-7 (relative) of expf.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#else
static int omp_get_max_threads(void) { return 1; }
#endif

#include "backend/backend.h"
#include "backend/cpu_avx512.h"
#include "backend/cpu_dnnl.h"
#include "backend/cpu_ipa.h"
#include "backend/cpu_transition.h"
#include "backend/cpu_ln_linear.h"
#include "backend/cpu_trimul_out.h"
#include "backend/cpu_relpos.h"
#include "io/safetensors.h"
#include "util/hugemem.h"
#include "util/log.h"
#include "util/status.h"

#define BE_CPU_TQ 64       /* queries per attention tile */
#define BE_CPU_TK 256      /* keys per attention tile */
#define BE_CPU_GRAIN 16384 /* elements per task of the elementwise ops */
#define BE_CPU_LANES 16    /* floats in the widest vector (AVX-512) */

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(__clang__) && \
    __GNUC__ >= 12
#define BE_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define BE_CPU_CLONES
#endif

/* Per-thread scratch (attention tiles): one block per thread, kept for the
 * thread's life and grown when a call needs more; freed when the thread
 * exits.  Safe with any number of callers (workers) at once. */
typedef struct {
	size_t cap;        /* floats at data */
	char   pad[56];
	float  data[];     /* 64-byte aligned */
} cpu_scratch_t;

static pthread_once_t cpu_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t  cpu_key;
static int            cpu_key_ok;
static int            cpu_has_cg;   /* the own GEMM kernel runs here (set at init) */

/* 64-byte aligned; 2 MiB and more on huge pages where the kernel grants
 * them (util/hugemem.h): a weight's first touch faults 2 MiB at a time */
static int cpu_alloc(be_t *be, size_t n, void **p) { return hugemem_alloc(n, p); }

static void cpu_free(be_t *be, void *p) { hugemem_free(p); }

static int cpu_copy(be_t *be, void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
	return 0;
}

static int cpu_sync(be_t *be) { return 0; }

int cpu_own_gemm(void) { return cpu_has_cg; }

static void cpu_key_make(void) { cpu_key_ok = pthread_key_create(&cpu_key, free) == 0; }

/* this thread's scratch of at least n floats, or NULL (cpu_ln_linear.h) */
float *cpu_scratch(size_t n)
{
	cpu_scratch_t *sc;
	void *p = NULL;

	if (pthread_once(&cpu_key_once, cpu_key_make) != 0 || !cpu_key_ok) return NULL;
	sc = pthread_getspecific(cpu_key);
	if (sc && sc->cap >= n) return sc->data;
	if (posix_memalign(&p, 64, sizeof *sc + n * sizeof(float)) != 0) return NULL;
	if (pthread_setspecific(cpu_key, p) != 0) {
		free(p);
		return NULL;
	}
	free(sc);
	sc = p;
	sc->cap = n;
	return sc->data;
}

/* e^x for float x, branch-free so that loops over it vectorise: x is clamped
 * to [-88, 89] (so -inf gives 0, +inf and NaN +inf); x = n ln2 + r with
 * |r| <= ln2 / 2, e^r by the Cephes expf polynomial, 2^n by the exponent
 * bits (below 2^-126 the result is 0, above 2^127 +inf).  Relative error
 * under 1e-7. */
static inline float cpu_exp(float x)
{
	const int32_t lo = (int32_t)(0xc2b00000u ^ 0x7fffffffu), hi = 0x42b20000;  /* -88, 89 */
	int32_t b, key, e;
	float n, r, p, s;

	/* clamp on the bits, ordered like the floats: no compare of floats that
	 * the compiler would have to keep as a branch */
	memcpy(&b, &x, sizeof b);
	key = b ^ ((b >> 31) & 0x7fffffff);
	key = key < lo ? lo : key;
	key = key > hi ? hi : key;
	b = key ^ ((key >> 31) & 0x7fffffff);
	memcpy(&x, &b, sizeof x);
	n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;     /* round(x / ln2) */
	r = x - n * 0.693359375f + n * 2.12194440e-4f;         /* x - n ln2 */
	p = 1.9875691500e-4f;
	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	p = p * r * r + r + 1.0f;
	e = (int32_t)n + 127;
	e = e < 0 ? 0 : e;
	e = (int32_t)((uint32_t)e << 23);
	memcpy(&s, &e, sizeof s);
	return p * s;
}

/* C: [m, n] = beta * C + bias, rows of stride ldc */
BE_CPU_CLONES
static void cpu_prescale(float *c, int64_t ldc, int m, int n, float beta, const float *bias)
{
	for (int i = 0; i < m; i++) {
		float *r = c + (int64_t)i * ldc;
		if (beta == 0.0f) {
			#pragma omp simd
			for (int j = 0; j < n; j++) r[j] = bias[j];
		} else {
			#pragma omp simd
			for (int j = 0; j < n; j++) r[j] = beta * r[j] + bias[j];
		}
	}
}

/* C: [m, n] = max(C, 0), rows of stride ldc: the GEMM's ReLU epilogue on
 * the block a task has just written, while it is in cache */
BE_CPU_CLONES
static void cpu_relu_block(float *c, int64_t ldc, int m, int n)
{
	for (int i = 0; i < m; i++) {
		float *r = c + (int64_t)i * ldc;
		#pragma omp simd
		for (int j = 0; j < n; j++) r[j] = r[j] > 0.0f ? r[j] : 0.0f;
	}
}

/* rows i0..i0+ni-1, columns j0..j0+nj-1 of C[b]: one single-threaded sgemm
 * on the matching rows of op(A[b]) and columns of op(B[b]), then the ReLU
 * epilogue where g->relu */
static void cpu_gemm_block(const be_gemm_t *g, int64_t b, int i0, int ni, int j0, int nj)
{
	const float *a = g->a + b * g->stride_a + (g->transa ? i0 : i0 * g->lda);
	const float *bm = g->b + b * g->stride_b + (g->transb ? j0 * g->ldb : j0);
	float *c = g->c + b * g->stride_c + i0 * g->ldc + j0;
	float beta = g->beta;

	if (g->bias) {
		cpu_prescale(c, g->ldc, ni, nj, beta, g->bias + j0);
		beta = 1.0f;
	}
	cblas_sgemm(CblasRowMajor, g->transa ? CblasTrans : CblasNoTrans,
	            g->transb ? CblasTrans : CblasNoTrans, ni, nj, g->k, g->alpha,
	            a, (int)g->lda, bm, (int)g->ldb, beta, c, (int)g->ldc);
	if (g->relu) cpu_relu_block(c, g->ldc, ni, nj);
}

/* CBLAS: the work is split into tasks run by the OpenMP threads, each one
 * single-threaded BLAS call: batch entries, and within an entry blocks of
 * rows (or of 16-column multiples when C is wide and short) small enough
 * that a block of C (256 KiB at most) stays in cache between the bias pass
 * and the product.  No false sharing: tasks write disjoint blocks. */
static int cpu_gemm_blas(const be_gemm_t *g, double flops)
{
	int T = omp_get_max_threads();
	int by_rows = g->m >= g->n;
	int len = by_rows ? g->m : g->n, other = by_rows ? g->n : g->m;
	/* pieces per batch entry: enough tasks for every thread, blocks <= 64 Ki floats */
	int p = flops < 4e6 || g->batch >= 2 * T ? 1 : (2 * T + g->batch - 1) / g->batch;
	int blk = (len + p - 1) / p, cap = 65536 / (other ? other : 1);

	if (flops >= 4e6 && blk > cap) blk = cap < 32 ? 32 : cap;
	if (!by_rows) blk = (blk + 15) / 16 * 16;
	p = (len + blk - 1) / blk;
	#pragma omp parallel for schedule(dynamic) if (flops >= 4e6 && (int64_t)g->batch * p > 1)
	for (int64_t t = 0; t < (int64_t)g->batch * p; t++) {
		int64_t b = t / p;
		int o = (int)(t % p) * blk, n = len - o < blk ? len - o : blk;
		if (by_rows) cpu_gemm_block(g, b, o, n, 0, g->n);
		else         cpu_gemm_block(g, b, 0, g->m, o, n);
	}
	return 0;
}

/* The own kernel (cpu_avx512.c): tasks of about CPU_GEMM_MB rows (whole
 * 12-row tiles, shared out evenly) by AVX512_NB columns of one batch entry,
 * their number a multiple of the thread count so that no thread idles at
 * the end.  Where several tasks share columns of a single entry, op(B) is
 * packed once, by all the threads, into the calling thread's scratch and
 * shared (up to CPU_GEMM_SHARED floats); otherwise (few rows, as in an
 * nn.Linear on the sequence: each column block is used once) each task
 * packs its columns, one k block at a time, into its own thread's scratch,
 * and multiplies them while they are in cache. */
#define CPU_GEMM_MB 240
#define CPU_GEMM_SHARED (1 << 22)
static int cpu_gemm_own(const be_gemm_t *g, double flops, int ct)
{
	int T = flops < 4e6 ? 1 : omp_get_max_threads();
	int nj = (g->n + AVX512_NB - 1) / AVX512_NB, tiles = (g->m + 11) / 12;
	int pm = (tiles + CPU_GEMM_MB / 12 - 1) / (CPU_GEMM_MB / 12);
	int64_t per = (int64_t)g->batch * nj, ntask;
	float *packed = NULL;
	int fail = 0;

	while (pm < tiles && (per * pm) % T) pm++;
	if (g->batch == 1 && pm > 1 && AVX512_PACKED(g->k, g->n) <= CPU_GEMM_SHARED)
		packed = cpu_scratch((size_t)AVX512_PACKED(g->k, g->n));
	ntask = per * pm;
	#pragma omp parallel reduction(|:fail) if (T > 1 && ntask > 1)
	{
		if (packed) {   /* by panels of 32 columns: every thread takes part */
			#pragma omp for schedule(static)
			for (int p = 0; p < AVX512_PANELS(g->n); p++) avx512_pack_b(g, 0, p, packed);
		}
		#pragma omp for schedule(dynamic)
		for (int64_t t = 0; t < ntask; t++) {
			int64_t b = t / ((int64_t)pm * nj);
			int ti = (int)(t / nj % pm), j0 = (int)(t % nj) * AVX512_NB;
			int i0 = (int)((int64_t)ti * tiles / pm) * 12;
			int i1 = (int)((int64_t)(ti + 1) * tiles / pm) * 12;
			float *P = packed ? NULL : cpu_scratch((size_t)AVX512_KB * AVX512_NB);
			if (i1 > g->m) i1 = g->m;
			if (i0 >= i1) continue;
			if (!packed && !P) { fail = 1; continue; }
			int nb = g->n - j0 < AVX512_NB ? g->n - j0 : AVX512_NB;
			avx512_block(g, b, i0, i1 - i0, j0, nb, packed ? packed + (int64_t)j0 * g->k : NULL, P, ct);
			/* ct: this block of C^T is columns i0.. of rows j0.. of C */
			float *cb = g->c + b * g->stride_c;
			if (g->relu && ct) cpu_relu_block(cb + (int64_t)j0 * g->ldc + i0, g->ldc, nb, i1 - i0);
			else if (g->relu)  cpu_relu_block(cb + (int64_t)i0 * g->ldc + j0, g->ldc, i1 - i0, nb);
		}
	}
	return fail ? -1 : 0;
}

/* An nn.Linear on few rows (X [m, k] W^T with m of 24 .. CPU_GEMM_FEW
 * and W: [n, k] wider) is run as C^T = W X^T, stored transposed: W, read
 * once, is then the operand read in place, row after row, and only the
 * few rows of X are packed, as panels of 32 columns (so m should nearly
 * fill them: at most an eighth of their width left empty). */
#define CPU_GEMM_FEW 96
static int cpu_gemm_few(const be_gemm_t *g)
{
	int pad = (g->m + 31) / 32 * 32 - g->m;
	return !g->transa && g->transb && g->m >= 24 && g->m <= CPU_GEMM_FEW && g->n > g->m &&
	       8 * pad <= g->m;
}

/* A bf16 weight times an fp32 activation (b_bf16, an nn.Linear's form)
 * that oneDNN does not take, on the own kernel: A rounded to bf16 into a
 * copy, as cpu_dnnl_widened rounds it, and W widened as the kernel packs
 * it, so that no fp32 copy of W is made (on this host a fresh one per
 * GEMM cost more than the product).  The same rounded operands summed
 * alike: cpu_dnnl_widened's bits. */
static int cpu_gemm_bf16w(const be_gemm_t *g, double flops)
{
	be_gemm_t r = *g;
	float *a = cpu_dnnl_round(g->a, (int64_t)(g->m - 1) * g->lda + g->k, 0);   /* A: [m, k] at lda */

	if (!a) return STATUS_OOM;
	r.a = a;
	int rc = cpu_gemm_own(&r, flops, 0);
	free(a);
	return rc;
}

/* g is an nn.Linear (X W^T, one entry, X fp32) that the own kernel can
 * run with W widened as it packs it (be_gemm_t.b_f16 / b_bf16) */
static int cpu_gemm_packs_w(const be_gemm_t *g)
{
	return cpu_has_cg && !g->transa && g->transb && g->batch == 1 && !g->a_bf16;
}

/* At bf16 (be->weights_bf16: --precision bf16) a GEMM of the backend's
 * precision or with a bf16 weight goes to cpu_dnnl.c; every other one in
 * fp32, whatever g->prec asks for.  A binary16 weight (b_f16, only where
 * the own kernel runs: be->weights_f16) is widened as the kernel packs it,
 * so it takes the plain form (W packed), not cpu_gemm_few's; the two sum
 * alike (each C element over k in order, one fused multiply-add a term),
 * so the results are those of its float32 copy either way. */
static int cpu_gemm(be_t *be, const be_gemm_t *g)
{
	double flops = 2.0 * g->m * g->n * g->k * g->batch;

	if (g->b_f16) {
		if (!be->weights_f16 || !cpu_gemm_packs_w(g)) {
			log_error("device %s: a GEMM on a binary16 weight this backend cannot take", be->name);
			return -1;
		}
		return g->k > 0 ? cpu_gemm_own(g, flops, 0) : cpu_gemm_blas(g, flops);
	}
	if (g->b_bf16 && cpu_gemm_packs_w(g) && g->k > 0 && !cpu_dnnl_takes(g))
		return cpu_gemm_bf16w(g, flops);
	if (g->a_bf16 || g->b_bf16 || (be->weights_bf16 && g->prec != BE_PREC_FP32))
		return cpu_dnnl_gemm(be, g);
	if (g->k > 0 && cpu_has_cg && cpu_gemm_few(g)) {
		be_gemm_t t = *g;
		t.m = g->n;
		t.n = g->m;
		t.a = g->b; t.lda = g->ldb; t.stride_a = g->stride_b;
		t.b = g->a; t.ldb = g->lda; t.stride_b = g->stride_a;
		return cpu_gemm_own(&t, flops, 1);
	}
	if (!g->transa && g->k > 0 && cpu_has_cg)
		return cpu_gemm_own(g, flops, 0);
	return cpu_gemm_blas(g, flops);
}

/* Softmax step of one score tile row: s[0..tk) += bias, masked keys to
 * -inf, then the online-softmax update of (m, l) and s = exp(s - m).
 * Returns the factor the row's accumulator is to be scaled by. */
static inline __attribute__((always_inline))
float cpu_attn_row(float *s, int tk, const float *bias, const float *mask, float *m, float *l)
{
	float mx = *m, sum = 0.0f, corr;

	if (bias) {
		#pragma omp simd
		for (int j = 0; j < tk; j++) s[j] += bias[j];
	}
	if (mask) {
		#pragma omp simd
		for (int j = 0; j < tk; j++) s[j] = mask[j] == 0.0f ? -INFINITY : s[j];
	}
	/* max and sum over BE_CPU_LANES partial results (one vector): 20%
	 * faster on 64-key tiles than `omp simd reduction`, which GCC
	 * finished with scalar loops */
	float part[BE_CPU_LANES];
	int j0 = tk / BE_CPU_LANES * BE_CPU_LANES;

	for (int q = 0; q < BE_CPU_LANES; q++) part[q] = mx;
	for (int j = 0; j < j0; j += BE_CPU_LANES)
		for (int q = 0; q < BE_CPU_LANES; q++) part[q] = s[j + q] > part[q] ? s[j + q] : part[q];
	for (int j = j0; j < tk; j++) mx = s[j] > mx ? s[j] : mx;
	for (int q = 0; q < BE_CPU_LANES; q++) mx = part[q] > mx ? part[q] : mx;
	if (mx == -INFINITY) {   /* every key so far masked */
		memset(s, 0, sizeof *s * tk);
		return 1.0f;
	}
	corr = *m == -INFINITY ? 0.0f : cpu_exp(*m - mx);
	for (int q = 0; q < BE_CPU_LANES; q++) part[q] = 0.0f;
	for (int j = 0; j < j0; j += BE_CPU_LANES)
		for (int q = 0; q < BE_CPU_LANES; q++) {
			s[j + q] = cpu_exp(s[j + q] - mx);
			part[q] += s[j + q];
		}
	for (int j = j0; j < tk; j++) {
		s[j] = cpu_exp(s[j] - mx);
		sum += s[j];
	}
	for (int q = 0; q < BE_CPU_LANES; q++) sum += part[q];
	*l = *l * corr + sum;
	*m = mx;
	return corr;
}

/* The softmax step of every row of a score tile s: [tq, TK] (tk keys),
 * bias row i at bias + i bias_sq (or NULL), and each row's accumulator
 * acc: [tq, D] rescaled (none before the first keys: it is still 0). */
BE_CPU_CLONES
static void cpu_attn_rows(float *s, int tq, int tk, const float *bias, int64_t bias_sq,
                          const float *mask, float *m, float *l, float *acc, int D)
{
	for (int i = 0; i < tq; i++) {
		int fresh = m[i] == -INFINITY;
		float corr = cpu_attn_row(s + (int64_t)i * BE_CPU_TK, tk, bias ? bias + i * bias_sq : NULL,
		                          mask, m + i, l + i);
		if (corr != 1.0f && !fresh) {
			float *ai = acc + (int64_t)i * D;
			#pragma omp simd
			for (int d = 0; d < D; d++) ai[d] *= corr;
		}
	}
}

/* o row i (rows of stride o_sl) = acc row i / l[i] (0 where l is 0) */
BE_CPU_CLONES
static void cpu_attn_out(float *o, int64_t o_sl, const float *acc, const float *l, int tq, int D)
{
	for (int i = 0; i < tq; i++) {
		float r = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
		#pragma omp simd
		for (int d = 0; d < D; d++) o[i * o_sl + d] = acc[(int64_t)i * D + d] * r;
	}
}

/* y: [n] = a * x */
BE_CPU_CLONES
static void cpu_scale(float *y, const float *x, int64_t n, float a)
{
	#pragma omp simd
	for (int64_t i = 0; i < n; i++) y[i] = a * x[i];
}

static void cpu_attn_gate(const be_attn_t *a, int b, int h, int i0, int tq);

/* y: [n, D] rows of stride ldy = x: [n, D] rows of stride ldx with ESM-2's
 * rotary embedding of positions p0..p0+n-1 from the table rope (be_attn_t.rope):
 * the rotary pass's arithmetic, so attention on y is attention on the
 * rotated tensor bit for bit */
static void cpu_rope_rows(float *y, int64_t ldy, const float *x, int64_t ldx, int n, int p0, int D,
                          const float *rope)
{
	int half = D / 2;
	for (int r = 0; r < n; r++) {
		const float *xr = x + r * ldx, *cs = rope + (int64_t)(p0 + r) * D;
		float *yr = y + r * ldy;
		for (int d = 0; d < half; d++) {
			float c = cs[2 * d], sn = cs[2 * d + 1], x1 = xr[d], x2 = xr[d + half];
			yr[d] = x1 * c - x2 * sn;
			yr[d + half] = x2 * c + x1 * sn;
		}
	}
}

/* One (batch, head, query tile): streaming softmax over key tiles.
 * s: [tq, TK] scores, acc: [tq, D] unnormalised output, m, l: [tq].
 * kp, vp: this (batch, head)'s K^T and V packed for the own kernel
 * (cpu_attn_pack), or NULL: CBLAS on K and V in place.  With the own
 * kernel and all keys in one tile, s becomes the softmax itself and its
 * product with v is stored straight into o (no accumulator).  With a rope
 * table the tile's queries are rotated into qr: [TQ, D] and, on CBLAS,
 * each key tile into kr: [TK, D] (the own kernel's kp is packed rotated). */
static void cpu_attn_tile(const be_attn_t *a, int b, int h, int i0, int tq, const float *kp,
                          const float *vp, float *s, float *acc, float *m, float *l, float *qr,
                          float *kr)
{
	const float *q = a->q + b * a->q_sb + (int64_t)i0 * a->q_sl + h * a->q_sh;
	const float *mask = a->mask ? a->mask + b * a->mask_sb : NULL;
	const float *bias = a->bias ? a->bias + b * a->bias_sb + h * a->bias_sh + (int64_t)i0 * a->bias_sq
	                            : NULL;   /* the tile's first row, key 0 */
	int D = a->D;
	int64_t ldq = a->q_sl;

	if (a->rope) {
		cpu_rope_rows(qr, D, q, a->q_sl, tq, i0, D, a->rope);
		q = qr;
		ldq = D;
	}
	for (int i = 0; i < tq; i++) { m[i] = -INFINITY; l[i] = 0.0f; }
	if (kp && a->Lk <= BE_CPU_TK) {   /* one key tile: o = softmax(s) v, no accumulator */
		be_gemm_t gs = { .transb = 1, .m = tq, .n = a->Lk, .k = D, .alpha = a->scale,
		                 .a = q, .lda = ldq, .c = s, .ldc = BE_CPU_TK, .batch = 1 };
		be_gemm_t go = { .m = tq, .n = D, .k = a->Lk, .alpha = 1.0f, .a = s, .lda = BE_CPU_TK,
		                 .c = a->o + b * a->o_sb + (int64_t)i0 * a->o_sl + h * a->o_sh,
		                 .ldc = a->o_sl, .batch = 1 };
		avx512_block(&gs, 0, 0, tq, 0, a->Lk, kp, NULL, 0);
		avx512_attn_rows(s, BE_CPU_TK, tq, a->Lk, bias, a->bias_sq, mask, m, l, NULL, D);
		avx512_block(&go, 0, 0, tq, 0, D, vp, NULL, 0);
		cpu_attn_gate(a, b, h, i0, tq);
		return;
	}
	memset(acc, 0, sizeof *acc * tq * D);
	for (int j0 = 0; j0 < a->Lk; j0 += BE_CPU_TK) {
		int tk = a->Lk - j0 < BE_CPU_TK ? a->Lk - j0 : BE_CPU_TK;
		const float *k = a->k + b * a->k_sb + (int64_t)j0 * a->k_sl + h * a->k_sh;
		const float *v = a->v + b * a->v_sb + (int64_t)j0 * a->v_sl + h * a->v_sh;
		int64_t ldk = a->k_sl;

		/* s[i, j] = scale * q_i . k_j */
		if (kp) {
			be_gemm_t g = { .transb = 1, .m = tq, .n = tk, .k = D, .alpha = a->scale,
			                .a = q, .lda = ldq, .c = s, .ldc = BE_CPU_TK, .batch = 1 };
			avx512_block(&g, 0, 0, tq, 0, tk, kp + (int64_t)j0 * D, NULL, 0);
		} else {
			if (a->rope) {
				cpu_rope_rows(kr, D, k, a->k_sl, tk, j0, D, a->rope);
				k = kr;
				ldk = D;
			}
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, tq, tk, D, a->scale,
			            q, (int)ldq, k, (int)ldk, 0.0f, s, BE_CPU_TK);
		}
		const float *bj = bias ? bias + j0 : NULL, *mj = mask ? mask + j0 : NULL;
		if (kp) avx512_attn_rows(s, BE_CPU_TK, tq, tk, bj, a->bias_sq, mj, m, l, acc, D);
		else    cpu_attn_rows(s, tq, tk, bj, a->bias_sq, mj, m, l, acc, D);
		/* acc += p v */
		if (vp) {
			be_gemm_t g = { .m = tq, .n = D, .k = tk, .alpha = 1.0f, .beta = 1.0f,
			                .a = s, .lda = BE_CPU_TK, .c = acc, .ldc = D, .batch = 1 };
			avx512_block(&g, 0, 0, tq, 0, D, vp + AVX512_PACKED(j0, D), NULL, 0);
		} else {
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, tq, D, tk, 1.0f,
			            s, BE_CPU_TK, v, (int)a->v_sl, 1.0f, acc, D);
		}
	}
	cpu_attn_out(a->o + b * a->o_sb + (int64_t)i0 * a->o_sl + h * a->o_sh, a->o_sl, acc, l, tq, D);
	cpu_attn_gate(a, b, h, i0, tq);
}

/* kp: [AVX512_PACKED(D, Lk)] = K^T of (batch b, head h), packed whole for
 * avx512_block (the key block from j0 at kp + j0 D); vp: [AVX512_PACKED(Lk, D)] = V
 * likewise, one column block of D, so that the keys from j0 (a multiple
 * of AVX512_KB) start at vp + AVX512_PACKED(j0, D).  With a rope table,
 * K is rotated into kr: [Lk, D] first and packed from there. */
static void cpu_attn_pack(const be_attn_t *a, int b, int h, float *kp, float *vp, float *kr)
{
	be_gemm_t gk = { .transb = 1, .n = a->Lk, .k = a->D,
	                 .b = a->k + b * a->k_sb + h * a->k_sh, .ldb = a->k_sl };
	be_gemm_t gv = { .n = a->D, .k = a->Lk, .b = a->v + b * a->v_sb + h * a->v_sh, .ldb = a->v_sl };

	if (a->rope) {
		cpu_rope_rows(kr, a->D, gk.b, a->k_sl, a->Lk, 0, a->D, a->rope);
		gk.b = kr;
		gk.ldb = a->D;
	}

	for (int p = 0; p < AVX512_PANELS(a->Lk); p++) avx512_pack_b(&gk, 0, p, kp);
	for (int p = 0; p < AVX512_PANELS(a->D); p++) avx512_pack_b(&gv, 0, p, vp);
}

/* With the own kernel (key tiles of AVX512_KB, D <= AVX512_NB): one task per
 * (batch, head), which packs K^T and V once for all its query tiles;
 * otherwise one task per (batch, head, query tile) on CBLAS. */
static int cpu_attn(be_t *be, const be_attn_t *a)
{
	int nqt = (a->Lq + BE_CPU_TQ - 1) / BE_CPU_TQ;
	int own = cpu_has_cg && BE_CPU_TK == AVX512_KB && a->D <= AVX512_NB;
	int64_t ntask = (int64_t)a->B * a->H * (own ? 1 : nqt);
	size_t pk = own ? (size_t)AVX512_PACKED(a->D, a->Lk) + (size_t)AVX512_PACKED(a->Lk, a->D) : 0;
	/* the rotated queries of a tile and keys of (b, h) (own) or of a key tile */
	size_t rq = a->rope ? (size_t)BE_CPU_TQ * a->D : 0;
	size_t rk = a->rope ? (size_t)(own ? a->Lk : BE_CPU_TK) * a->D : 0;
	size_t need = (size_t)BE_CPU_TQ * BE_CPU_TK + (size_t)BE_CPU_TQ * a->D + 2 * BE_CPU_TQ + pk + rq + rk;
	int fail = 0;

	#pragma omp parallel reduction(|:fail)
	{
		float *s = cpu_scratch(need), *acc = NULL, *m = NULL, *l = NULL, *kp = NULL, *vp = NULL;
		float *qr = NULL, *kr = NULL;
		if (s) {
			/* the packed operands first: 64-byte aligned, as avx512_block reads them */
			if (own) {
				kp = s;
				vp = kp + AVX512_PACKED(a->D, a->Lk);
				s = vp + AVX512_PACKED(a->Lk, a->D);
			}
			acc = s + (size_t)BE_CPU_TQ * BE_CPU_TK;
			m = acc + (size_t)BE_CPU_TQ * a->D;
			l = m + BE_CPU_TQ;
			qr = l + BE_CPU_TQ;
			kr = qr + rq;
		}
		/* every thread must reach the worksharing loop, even one whose
		 * scratch failed: it then only records the failure */
		#pragma omp for schedule(dynamic)
		for (int64_t t = 0; t < ntask; t++) {
			if (!s) { fail = 1; continue; }
			if (own) {
				int h = (int)(t % a->H), b = (int)(t / a->H);
				cpu_attn_pack(a, b, h, kp, vp, kr);
				for (int i0 = 0; i0 < a->Lq; i0 += BE_CPU_TQ)
					cpu_attn_tile(a, b, h, i0, a->Lq - i0 < BE_CPU_TQ ? a->Lq - i0 : BE_CPU_TQ,
					              kp, vp, s, acc, m, l, qr, kr);
				continue;
			}
			int qt = (int)(t % nqt), h = (int)(t / nqt % a->H), b = (int)(t / nqt / a->H);
			int i0 = qt * BE_CPU_TQ;
			cpu_attn_tile(a, b, h, i0, a->Lq - i0 < BE_CPU_TQ ? a->Lq - i0 : BE_CPU_TQ,
			              NULL, NULL, s, acc, m, l, qr, kr);
		}
	}
	return fail ? -1 : 0;
}

/* y: [d] = LayerNorm(x: [d]); two passes (mean, then the variance of the
 * centred values), so a large mean costs no precision */
BE_CPU_CLONES
static void cpu_ln_row(float *y, const float *x, int d, const float *w, const float *bias, float eps)
{
	float mean = 0.0f, var = 0.0f, inv;

	#pragma omp simd reduction(+:mean)
	for (int i = 0; i < d; i++) mean += x[i];
	mean /= (float)d;
	#pragma omp simd reduction(+:var)
	for (int i = 0; i < d; i++) { float t = x[i] - mean; var += t * t; }
	inv = 1.0f / sqrtf(var / (float)d + eps);
	#pragma omp simd
	for (int i = 0; i < d; i++) y[i] = (x[i] - mean) * inv * w[i] + bias[i];
}

static int cpu_layernorm(be_t *be, const be_layernorm_t *p)
{
	float *y = p->y;
	const float *x = p->x, *w = p->w, *bias = p->b;
	int64_t rows = p->rows;
	int d = p->d;
	float eps = p->eps;

	if (cpu_has_cg) {   /* blocks of 32 rows, taken as the threads come free */
		#pragma omp parallel for schedule(guided) if (rows * d > 16384)
		for (int64_t r = 0; r < rows; r += 32)
			avx512_layernorm(y + r * d, x + r * d, rows - r < 32 ? rows - r : 32, d, w, bias, eps);
		return 0;
	}
	#pragma omp parallel for if (rows * d > 16384)
	for (int64_t r = 0; r < rows; r++)
		cpu_ln_row(y + r * d, x + r * d, d, w, bias, eps);
	return 0;
}

/* x: [d] softmax in place */
static void cpu_softmax_row(float *x, int d)
{
	float mx = -INFINITY;
	double sum = 0.0;

	#pragma omp simd reduction(max:mx)
	for (int i = 0; i < d; i++) mx = x[i] > mx ? x[i] : mx;
	#pragma omp simd reduction(+:sum)
	for (int i = 0; i < d; i++) { x[i] = cpu_exp(x[i] - mx); sum += x[i]; }
	cpu_scale(x, x, d, (float)(1.0 / sum));
}

static int cpu_softmax(be_t *be, const be_softmax_t *p)
{
	int64_t rows = p->rows;
	int d = p->d;

	#pragma omp parallel for if (rows * d > 16384)
	for (int64_t r = 0; r < rows; r++) cpu_softmax_row(p->x + r * d, d);
	return 0;
}

/* The elementwise ops: kernels over one contiguous range [n], run on
 * BE_CPU_GRAIN-element pieces by the threads, each taking the next piece
 * when it is free (on a shared host one thread may run slower).  y may
 * alias a, b or x. */
BE_CPU_CLONES
static void cpu_act_k(float *x, int64_t n, be_act_t kind)
{
	switch (kind) {
	case BE_RELU:
		#pragma omp simd
		for (int64_t i = 0; i < n; i++) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
		break;
	case BE_GELU:
		for (int64_t i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * (float)M_SQRT1_2));
		break;
	case BE_SIGMOID:
		#pragma omp simd
		for (int64_t i = 0; i < n; i++) x[i] = 1.0f / (1.0f + cpu_exp(-x[i]));
		break;
	}
}

BE_CPU_CLONES
static void cpu_binary_k(float *y, const float *a, const float *b, int64_t n, be_bin_t kind)
{
	switch (kind) {
	case BE_ADD:
		#pragma omp simd
		for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
		break;
	case BE_MUL:
		#pragma omp simd
		for (int64_t i = 0; i < n; i++) y[i] = a[i] * b[i];
		break;
	case BE_GATE:
		#pragma omp simd
		for (int64_t i = 0; i < n; i++) y[i] = a[i] / (1.0f + cpu_exp(-b[i]));
		break;
	}
}

/* o: the tq rows of (batch b, head h) from query i0 = o / (1 + exp(-g)),
 * the gate of be_attn_t.g (nothing when NULL), with the binary op's own
 * code per row, so that the result is the separate BE_GATE pass's bit for bit */
static void cpu_attn_gate(const be_attn_t *a, int b, int h, int i0, int tq)
{
	if (!a->g) return;
	for (int i = 0; i < tq; i++) {
		int64_t off = b * a->o_sb + (int64_t)(i0 + i) * a->o_sl + h * a->o_sh;
		if (cpu_has_cg) avx512_gate(a->o + off, a->o + off, a->g + off, a->D);
		else            cpu_binary_k(a->o + off, a->o + off, a->g + off, a->D, BE_GATE);
	}
}

BE_CPU_CLONES
static void cpu_axpby_k(float *y, const float *x, int64_t n, float alpha, float beta)
{
	if (beta == 0.0f) {
		cpu_scale(y, x, n, alpha);
		return;
	}
	#pragma omp simd
	for (int64_t i = 0; i < n; i++) y[i] = alpha * x[i] + beta * y[i];
}

static int64_t cpu_pieces(int64_t n) { return (n + BE_CPU_GRAIN - 1) / BE_CPU_GRAIN; }
static int64_t cpu_piece_len(int64_t n, int64_t p)
{
	return n - p * BE_CPU_GRAIN < BE_CPU_GRAIN ? n - p * BE_CPU_GRAIN : BE_CPU_GRAIN;
}

static int cpu_act(be_t *be, const be_unary_t *u)
{
	int64_t n = u->n;

	#pragma omp parallel for schedule(dynamic) if (n > 4 * BE_CPU_GRAIN)
	for (int64_t p = 0; p < cpu_pieces(n); p++)
		cpu_act_k(u->x + p * BE_CPU_GRAIN, cpu_piece_len(n, p), u->kind);
	return 0;
}

static int cpu_binary(be_t *be, const be_binary_t *q)
{
	float *y = q->y;
	const float *a = q->a, *b = q->b;
	int64_t n = q->n;
	be_bin_t kind = q->kind;

	#pragma omp parallel for schedule(dynamic) if (n > 4 * BE_CPU_GRAIN)
	for (int64_t p = 0; p < cpu_pieces(n); p++) {
		int64_t o = p * BE_CPU_GRAIN;
		if (kind == BE_GATE && cpu_has_cg) avx512_gate(y + o, a + o, b + o, cpu_piece_len(n, p));
		else                                cpu_binary_k(y + o, a + o, b + o, cpu_piece_len(n, p), kind);
	}
	return 0;
}

static int cpu_axpby(be_t *be, const be_axpby_t *q)
{
	int64_t n = q->n;

	#pragma omp parallel for if (n > 4 * BE_CPU_GRAIN)
	for (int64_t p = 0; p < cpu_pieces(n); p++) {
		int64_t o = p * BE_CPU_GRAIN;
		cpu_axpby_k(q->y + o, q->x + o, cpu_piece_len(n, p), q->alpha, q->beta);
	}
	return 0;
}

static int cpu_fill(be_t *be, const be_fill_t *p)
{
	float *x = p->x, value = p->value;
	int64_t n = p->n;

	#pragma omp parallel for simd if (n > 4 * BE_CPU_GRAIN)
	for (int64_t i = 0; i < n; i++) x[i] = value;
	return 0;
}

static int cpu_gather(be_t *be, const be_gather_t *p)
{
	float *y = p->y, scale = p->scale;
	const float *table = p->table;
	const int32_t *idx = p->idx;
	int64_t rows = p->rows;
	int d = p->d;

	#pragma omp parallel for if (rows * d > 65536)
	for (int64_t r = 0; r < rows; r++)
		for (int i = 0; i < d; i++) y[r * d + i] = scale * table[(int64_t)idx[r] * d + i];
	return 0;
}

/* y: [TB, TA] block of the transpose of x: [TA, TB], rows of strides ldy, ldx */
BE_CPU_CLONES
static void cpu_transpose_tile(float *y, int64_t ldy, const float *x, int64_t ldx, int ta, int tb)
{
	for (int a = 0; a < ta; a++)
		for (int b = 0; b < tb; b++) y[b * ldy + a] = x[a * ldx + b];
}

static int cpu_transpose(be_t *be, const be_transpose_t *p)
{
	float *y = p->y;
	const float *x = p->x;
	int64_t A = p->A, B = p->B, C = p->C;
	const int64_t T = 32, na = (A + T - 1) / T, nb = (B + T - 1) / T;
	#pragma omp parallel for schedule(static) if (A * B * C > 65536)
	for (int64_t t = 0; t < na * nb; t++) {
		int64_t a0 = t / nb * T, b0 = t % nb * T;
		int64_t ta = A - a0 < T ? A - a0 : T, tb = B - b0 < T ? B - b0 : T;
		if (C == 1) {
			cpu_transpose_tile(y + b0 * A + a0, A, x + a0 * B + b0, B, (int)ta, (int)tb);
			continue;
		}
		for (int64_t a = a0; a < a0 + ta; a++)
			for (int64_t b = b0; b < b0 + tb; b++)
				memcpy(y + (b * A + a) * C, x + (a * B + b) * C, C * sizeof *x);
	}
	return 0;
}

static int cpu_outer(be_t *be, const be_outer_t *p)
{
	float *y = p->y;
	const float *q = p->q, *k = p->k;
	int i0 = p->i0, ni = p->ni, L = p->L, c = p->c;

	#pragma omp parallel for collapse(2) if ((int64_t)ni * L * c > 65536)
	for (int i = 0; i < ni; i++)
		for (int j = 0; j < L; j++) {
			const float *qj = q + (int64_t)j * c, *ki = k + (int64_t)(i0 + i) * c;
			int64_t o = ((int64_t)i * L + j) * 2 * c;
			for (int t = 0; t < c; t++) {
				float a = qj[t] * ki[t], d = qj[t] - ki[t];
				if (p->bf16) {
					((uint16_t *)y)[o + t] = safetensors_f32_to_bf16(a);
					((uint16_t *)y)[o + c + t] = safetensors_f32_to_bf16(d);
				} else {
					y[o + t] = a;
					y[o + c + t] = d;
				}
			}
		}
	return 0;
}

/* x: [nj, c] = sum_k a: [nk, c] (one row i) * b[j]: [nk, c] for every j */
BE_CPU_CLONES
static void cpu_trimul_row(float *x, const float *a, const float *b, int nj, int nk, int c)
{
	for (int j = 0; j < nj; j++) {
		float *xj = x + (int64_t)j * c;
		const float *bj = b + (int64_t)j * nk * c;
		memset(xj, 0, sizeof *xj * c);
		for (int k = 0; k < nk; k++) {
			#pragma omp simd
			for (int q = 0; q < c; q++) xj[q] += a[(int64_t)k * c + q] * bj[(int64_t)k * c + q];
		}
	}
}

/* The own kernel over tasks of 16 channels by CPU_TRI_JB columns j (every
 * row i), so that a task's columns of b stay in cache while all of a's
 * rows pass, each with a's channels copied together in its thread's
 * scratch; without it (or c not a multiple of 16), rows i in parallel. */
#define CPU_TRI_JB 80
static int cpu_trimul(be_t *be, const be_trimul_t *p)
{
	float *x = p->x;
	const float *a = p->a, *b = p->b;
	int ni = p->ni, nj = p->nj, nk = p->nk, c = p->c;
	double flops = 2.0 * ni * nj * nk * c;

	if (cpu_has_cg && c % 16 == 0) {
		int nb = (nj + CPU_TRI_JB - 1) / CPU_TRI_JB;
		int64_t ntask = (int64_t)(c / 16) * nb;
		int fail = 0;
		#pragma omp parallel for schedule(dynamic) reduction(|:fail) if (flops >= 4e6)
		for (int64_t t = 0; t < ntask; t++) {
			int j0 = (int)(t % nb) * CPU_TRI_JB, c0 = (int)(t / nb) * 16;
			float *ap = cpu_scratch((size_t)ni * AVX512_TRI_KB * 16);
			if (!ap) { fail = 1; continue; }
			avx512_trimul_block(x, a, b, ni, nj, nk, c, c0, j0,
			                nj - j0 < CPU_TRI_JB ? nj : j0 + CPU_TRI_JB, ap);
		}
		return fail ? -1 : 0;
	}
	#pragma omp parallel for schedule(static) if (flops >= 4e6)
	for (int i = 0; i < ni; i++)
		cpu_trimul_row(x + (int64_t)i * nj * c, a + (int64_t)i * nk * c, b, nj, nk, c);
	return 0;
}

static void cpu_destroy(be_t *be) { free(be); }

/* be->numerics: the kernels (the own AVX-512 ones or CBLAS, their
 * revision BE_KERNELS_REV) and the BLAS
 * library with the core it chose; the thread count is not in it, for
 * every op's sums run in the same order however many threads share the
 * rows (tests/test_cache.sh compares 1 and 2 threads byte for byte) */
static const char *cpu_numerics(void)
{
	static char s[256];

#ifdef HAVE_OPENBLAS_GET_CONFIG
	snprintf(s, sizeof s, "cpu %s r%d, BLAS %s", cpu_has_cg ? "avx512" : "cblas", BE_KERNELS_REV,
	         openblas_get_config());
#else
	snprintf(s, sizeof s, "cpu %s r%d, BLAS CBLAS", cpu_has_cg ? "avx512" : "cblas", BE_KERNELS_REV);
#endif
	return s;
}

/* be->numerics at bf16: the fp32 kernels' and which of oneDNN's paths the
 * GEMMs take (its ISA; its own matmul or the operands widened), for the
 * two sum in different orders */
static const char *cpu_numerics_bf16(const char *isa, int native)
{
	static char s[320];

	snprintf(s, sizeof s, "%s, oneDNN %s %s", cpu_numerics(), isa, native ? "matmul" : "widened");
	return s;
}

int be_cpu_set_precision(be_t *be, be_prec_t prec)
{
	const char *isa;
	int native;

	if (!be || be->destroy != cpu_destroy) return -ENODEV;
	if (prec == BE_PREC_AUTO || prec == BE_PREC_FP32) {
		be->weights_bf16 = 0;
		be->weights_f16 = cpu_has_cg;
		be->precision = "fp32";
		be->numerics = cpu_numerics();
		return 0;
	}
	if (prec != BE_PREC_BF16 || (native = cpu_dnnl_probe(&isa)) < 0) return -EINVAL;
	be->weights_bf16 = 1;
	be->weights_f16 = 0;
	be->precision = "bf16";
	be->numerics = cpu_numerics_bf16(isa, native);
	log_info("device %s: oneDNN's ISA %s: bf16 GEMMs %s", be->name, isa,
	         native ? "on oneDNN's bf16 matmul where it is the faster, else widened to fp32" :
	         "widened to fp32 (oneDNN has no bf16 matmul here that beats the own kernels)");
	return 0;
}

be_t *be_cpu_init(int threads)
{
	be_t *be = calloc(1, sizeof *be);

	if (!be) { log_error("cpu backend: out of memory"); return NULL; }
#ifdef _OPENMP
	if (threads > 0) omp_set_num_threads(threads);
#endif
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
	openblas_set_num_threads(1);
#endif
	cpu_has_cg = cpu_has_avx512() && !getenv("ESMBATCH_CPU_BLAS");
	log_debug("cpu backend: %s; OpenMP wait policy %s", cpu_numerics(),
	          getenv("OMP_WAIT_POLICY") ? getenv("OMP_WAIT_POLICY") : "libgomp's default (spin)");
	*be = (be_t){
		.name = "cpu", .precision = "fp32", .numerics = cpu_numerics(), .host_mem = 1,
		.weights_f16 = cpu_has_cg,
		.destroy = cpu_destroy,
		.alloc = cpu_alloc, .free = cpu_free, .upload = cpu_copy, .download = cpu_copy,
		.sync = cpu_sync,
		/* every op of the list, cpu_<slot> each */
#define CPU_OP_SLOT(OP, slot, params) .slot = cpu_##slot,
		BE_OPS(CPU_OP_SLOT)
#undef CPU_OP_SLOT
	};
	return be;
}

void be_free(be_t *be)
{
	if (be) be->destroy(be);
}
