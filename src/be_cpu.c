/* be_cpu.c - the CPU backend: float32, OpenMP across rows, CBLAS for GEMMs.
 *
 * Host memory is backend memory, so upload/download are memcpy.  Attention
 * streams over key tiles with an online softmax: the only scores held are
 * one [BE_CPU_TQ, BE_CPU_TK] tile per thread.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#else
static int omp_get_max_threads(void) { return 1; }
#endif

#include "be.h"
#include "log.h"

#define BE_CPU_TQ 64    /* queries per attention tile */
#define BE_CPU_TK 256   /* keys per attention tile */

static int cpu_alloc(be_t *be, size_t n, void **p)
{
	*p = NULL;
	if (posix_memalign(p, 64, n ? n : 64) != 0) { *p = NULL; return -1; }
	return 0;
}

static void cpu_free(be_t *be, void *p) { free(p); }

static int cpu_copy(be_t *be, void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
	return 0;
}

static int cpu_sync(be_t *be) { return 0; }

/* C: [m, n] = beta * C + bias, rows of stride ldc */
static void cpu_prescale(float *c, int64_t ldc, int m, int n, float beta, const float *bias)
{
	for (int i = 0; i < m; i++) {
		float *r = c + (int64_t)i * ldc;
		for (int j = 0; j < n; j++)
			r[j] = (beta == 0.0f ? 0.0f : beta * r[j]) + (bias ? bias[j] : 0.0f);
	}
}

/* rows i0..i0+ni-1, columns j0..j0+nj-1 of C[b]: one single-threaded sgemm
 * on the matching rows of op(A[b]) and columns of op(B[b]) */
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
}

/* The work is split into tasks (batch entries, and within one entry row or
 * column blocks) run by the OpenMP threads, each task one single-threaded
 * BLAS call: one thread pool, every thread busy, no false sharing (blocks of
 * C are whole rows or 16-column multiples). */
static int cpu_gemm(be_t *be, const be_gemm_t *g)
{
	int T = omp_get_max_threads();
	double flops = 2.0 * g->m * g->n * g->k * g->batch;
	/* pieces per batch entry: enough tasks for every thread */
	int p = flops < 4e6 || g->batch >= 2 * T ? 1 : (2 * T + g->batch - 1) / g->batch;
	int by_rows = g->m >= g->n;
	int len = by_rows ? g->m : g->n;
	int blk = (len + p - 1) / p;

	blk = by_rows ? blk : (blk + 15) / 16 * 16;
	p = blk ? (len + blk - 1) / blk : 1;
	#pragma omp parallel for schedule(dynamic) if (flops >= 4e6 && (int64_t)g->batch * p > 1)
	for (int64_t t = 0; t < (int64_t)g->batch * p; t++) {
		int64_t b = t / p;
		int o = (int)(t % p) * blk, n = len - o < blk ? len - o : blk;
		if (by_rows) cpu_gemm_block(g, b, o, n, 0, g->n);
		else         cpu_gemm_block(g, b, 0, g->m, o, n);
	}
	return 0;
}

/* One (batch, head, query tile): streaming softmax over key tiles.
 * s: [tq, TK] scores, acc: [tq, D] unnormalised output, m, l: [tq]. */
static void cpu_attn_tile(const be_attn_t *a, int b, int h, int i0, int tq,
                          float *s, float *acc, float *m, float *l)
{
	const float *q = a->q + b * a->q_sb + (int64_t)i0 * a->q_sl + h * a->q_sh;
	const float *mask = a->mask ? a->mask + b * a->mask_sb : NULL;
	int D = a->D;

	for (int i = 0; i < tq; i++) { m[i] = -INFINITY; l[i] = 0.0f; }
	memset(acc, 0, sizeof *acc * tq * D);
	for (int j0 = 0; j0 < a->Lk; j0 += BE_CPU_TK) {
		int tk = a->Lk - j0 < BE_CPU_TK ? a->Lk - j0 : BE_CPU_TK;
		const float *k = a->k + b * a->k_sb + (int64_t)j0 * a->k_sl + h * a->k_sh;
		const float *v = a->v + b * a->v_sb + (int64_t)j0 * a->v_sl + h * a->v_sh;

		/* s[i, j] = scale * q_i . k_j */
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, tq, tk, D, a->scale,
		            q, (int)a->q_sl, k, (int)a->k_sl, 0.0f, s, BE_CPU_TK);
		for (int i = 0; i < tq; i++) {
			float *si = s + (int64_t)i * BE_CPU_TK, mx = m[i];
			if (a->bias) {
				const float *bi = a->bias + b * a->bias_sb + h * a->bias_sh +
				                  (int64_t)(i0 + i) * a->bias_sq + j0;
				for (int j = 0; j < tk; j++) si[j] += bi[j];
			}
			if (mask)
				for (int j = 0; j < tk; j++)
					if (mask[j0 + j] == 0.0f) si[j] = -INFINITY;
			for (int j = 0; j < tk; j++) if (si[j] > mx) mx = si[j];
			if (mx == -INFINITY) {   /* every key so far masked */
				for (int j = 0; j < tk; j++) si[j] = 0.0f;
				continue;
			}
			float corr = m[i] == -INFINITY ? 0.0f : expf(m[i] - mx), sum = 0.0f;
			for (int j = 0; j < tk; j++) { si[j] = expf(si[j] - mx); sum += si[j]; }
			l[i] = l[i] * corr + sum;
			m[i] = mx;
			float *ai = acc + (int64_t)i * D;
			for (int d = 0; d < D; d++) ai[d] *= corr;
		}
		/* acc += p v */
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, tq, D, tk, 1.0f,
		            s, BE_CPU_TK, v, (int)a->v_sl, 1.0f, acc, D);
	}
	for (int i = 0; i < tq; i++) {
		float *o = a->o + b * a->o_sb + (int64_t)(i0 + i) * a->o_sl + h * a->o_sh;
		float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
		for (int d = 0; d < D; d++) o[d] = acc[(int64_t)i * D + d] * inv;
	}
}

static int cpu_attn(be_t *be, const be_attn_t *a)
{
	int nqt = (a->Lq + BE_CPU_TQ - 1) / BE_CPU_TQ;
	int64_t ntask = (int64_t)a->B * a->H * nqt;
	int fail = 0;

	#pragma omp parallel reduction(|:fail)
	{
		float *s = malloc(sizeof(float) * BE_CPU_TQ * BE_CPU_TK);
		float *acc = malloc(sizeof(float) * BE_CPU_TQ * a->D);
		float *m = malloc(sizeof(float) * BE_CPU_TQ), *l = malloc(sizeof(float) * BE_CPU_TQ);
		/* every thread must reach the worksharing loop, even one whose
		 * buffers failed: it then only records the failure */
		#pragma omp for schedule(dynamic)
		for (int64_t t = 0; t < ntask; t++) {
			int qt = (int)(t % nqt), h = (int)(t / nqt % a->H), b = (int)(t / nqt / a->H);
			int i0 = qt * BE_CPU_TQ;
			int tq = a->Lq - i0 < BE_CPU_TQ ? a->Lq - i0 : BE_CPU_TQ;
			if (!s || !acc || !m || !l) { fail = 1; continue; }
			cpu_attn_tile(a, b, h, i0, tq, s, acc, m, l);
		}
		free(s); free(acc); free(m); free(l);
	}
	return fail ? -1 : 0;
}

static int cpu_layernorm(be_t *be, float *y, const float *x, int64_t rows, int d,
                         const float *w, const float *bias, float eps)
{
	#pragma omp parallel for if (rows * d > 16384)
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * d;
		float *yr = y + r * d;
		double mean = 0.0, var = 0.0;
		for (int i = 0; i < d; i++) mean += xr[i];
		mean /= d;
		for (int i = 0; i < d; i++) { double t = xr[i] - mean; var += t * t; }
		var /= d;
		float inv = (float)(1.0 / sqrt(var + eps)), mu = (float)mean;
		for (int i = 0; i < d; i++) yr[i] = (xr[i] - mu) * inv * w[i] + bias[i];
	}
	return 0;
}

static int cpu_softmax(be_t *be, float *x, int64_t rows, int d)
{
	#pragma omp parallel for if (rows * d > 16384)
	for (int64_t r = 0; r < rows; r++) {
		float *xr = x + r * d, mx = -INFINITY;
		double sum = 0.0;
		for (int i = 0; i < d; i++) if (xr[i] > mx) mx = xr[i];
		for (int i = 0; i < d; i++) { xr[i] = expf(xr[i] - mx); sum += xr[i]; }
		float inv = (float)(1.0 / sum);
		for (int i = 0; i < d; i++) xr[i] *= inv;
	}
	return 0;
}

static int cpu_act(be_t *be, float *x, int64_t n, be_act_t kind)
{
	switch (kind) {
	case BE_RELU:
		#pragma omp parallel for simd if (n > 65536)
		for (int64_t i = 0; i < n; i++) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
		break;
	case BE_GELU:
		#pragma omp parallel for if (n > 65536)
		for (int64_t i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * (float)M_SQRT1_2));
		break;
	case BE_SIGMOID:
		#pragma omp parallel for if (n > 65536)
		for (int64_t i = 0; i < n; i++) x[i] = 1.0f / (1.0f + expf(-x[i]));
		break;
	}
	return 0;
}

static int cpu_binary(be_t *be, float *y, const float *a, const float *b, int64_t n, be_bin_t kind)
{
	switch (kind) {
	case BE_ADD:
		#pragma omp parallel for simd if (n > 65536)
		for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
		break;
	case BE_MUL:
		#pragma omp parallel for simd if (n > 65536)
		for (int64_t i = 0; i < n; i++) y[i] = a[i] * b[i];
		break;
	case BE_GATE:
		#pragma omp parallel for if (n > 65536)
		for (int64_t i = 0; i < n; i++) y[i] = a[i] / (1.0f + expf(-b[i]));
		break;
	}
	return 0;
}

static int cpu_axpby(be_t *be, float *y, const float *x, int64_t n, float alpha, float beta)
{
	#pragma omp parallel for simd if (n > 65536)
	for (int64_t i = 0; i < n; i++) y[i] = alpha * x[i] + (beta == 0.0f ? 0.0f : beta * y[i]);
	return 0;
}

static int cpu_fill(be_t *be, float *x, int64_t n, float value)
{
	#pragma omp parallel for simd if (n > 65536)
	for (int64_t i = 0; i < n; i++) x[i] = value;
	return 0;
}

static int cpu_gather(be_t *be, float *y, const float *table, const int32_t *idx,
                      int64_t rows, int d, float scale)
{
	#pragma omp parallel for if (rows * d > 65536)
	for (int64_t r = 0; r < rows; r++)
		for (int i = 0; i < d; i++) y[r * d + i] = scale * table[(int64_t)idx[r] * d + i];
	return 0;
}

static int cpu_transpose(be_t *be, float *y, const float *x, int64_t A, int64_t B, int64_t C)
{
	const int64_t T = 32;
	#pragma omp parallel for collapse(2) if (A * B * C > 65536)
	for (int64_t a0 = 0; a0 < A; a0 += T)
		for (int64_t b0 = 0; b0 < B; b0 += T)
			for (int64_t a = a0; a < a0 + T && a < A; a++)
				for (int64_t b = b0; b < b0 + T && b < B; b++)
					memcpy(y + (b * A + a) * C, x + (a * B + b) * C, C * sizeof *x);
	return 0;
}

/* each pair a < b swapped once: tile pairs (ta <= tb), above the diagonal */
static int cpu_transpose_inplace(be_t *be, float *x, int64_t A, int64_t C)
{
	const int64_t T = 32, nt = (A + T - 1) / T;
	#pragma omp parallel for schedule(dynamic) if (A * A * C > 65536)
	for (int64_t ta = 0; ta < nt; ta++)
		for (int64_t tb = ta; tb < nt; tb++)
			for (int64_t a = ta * T; a < ta * T + T && a < A; a++)
				for (int64_t b = ta == tb ? a + 1 : tb * T; b < tb * T + T && b < A; b++) {
					float *p = x + (a * A + b) * C, *q = x + (b * A + a) * C;
					for (int64_t c = 0; c < C; c++) { float t = p[c]; p[c] = q[c]; q[c] = t; }
				}
	return 0;
}

static int cpu_rotary(be_t *be, float *x, int T, int H, int D, const float *inv_freq)
{
	int half = D / 2;
	#pragma omp parallel for if ((int64_t)T * H * D > 65536)
	for (int t = 0; t < T; t++)
		for (int i = 0; i < half; i++) {
			double ang = (double)t * inv_freq[i];
			float c = (float)cos(ang), s = (float)sin(ang);
			for (int h = 0; h < H; h++) {
				float *xh = x + ((int64_t)t * H + h) * D;
				float x1 = xh[i], x2 = xh[i + half];
				xh[i] = x1 * c - x2 * s;
				xh[i + half] = x2 * c + x1 * s;
			}
		}
	return 0;
}

static int cpu_outer(be_t *be, float *y, const float *q, const float *k, int i0, int ni, int L, int c)
{
	#pragma omp parallel for collapse(2) if ((int64_t)ni * L * c > 65536)
	for (int i = 0; i < ni; i++)
		for (int j = 0; j < L; j++) {
			const float *qj = q + (int64_t)j * c, *ki = k + (int64_t)(i0 + i) * c;
			float *yij = y + ((int64_t)i * L + j) * 2 * c;
			for (int t = 0; t < c; t++) {
				yij[t] = qj[t] * ki[t];
				yij[c + t] = qj[t] - ki[t];
			}
		}
	return 0;
}

static void cpu_destroy(be_t *be) { free(be); }

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
	*be = (be_t){
		.name = "cpu", .precision = "fp32", .destroy = cpu_destroy,
		.alloc = cpu_alloc, .free = cpu_free, .upload = cpu_copy, .download = cpu_copy,
		.sync = cpu_sync, .gemm = cpu_gemm, .attn = cpu_attn, .layernorm = cpu_layernorm,
		.softmax = cpu_softmax, .act = cpu_act, .binary = cpu_binary, .axpby = cpu_axpby,
		.fill = cpu_fill, .gather = cpu_gather, .transpose = cpu_transpose,
		.transpose_inplace = cpu_transpose_inplace,
		.rotary = cpu_rotary, .outer = cpu_outer,
	};
	return be;
}

void be_free(be_t *be)
{
	if (be) be->destroy(be);
}
