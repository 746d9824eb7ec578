/* cpu_ln_linear.c - be_ln_linear_t on the CPU (see cpu_ln_linear.h).
 *
 * Tiles of CPU_LNLIN_ROWS rows, one per task: the tile's rows of x are
 * gathered by their strides into the thread's scratch, layer-normed there
 * in place by the backend's own layernorm (so the numbers are those of
 * layernorm then linear), multiplied by all the groups' weights at once
 * (one single-threaded product: [rows, k] x [k, N] into scratch) and the
 * epilogue writes each group's features through its strides, all in one
 * parallel region.  The product is the own AVX-512 kernel where the
 * backend runs it (cpu_own_gemm(): the weights packed once per call, by
 * all the threads, and shared by every tile), else CBLAS.  bf16
 * weights (a sim: card at bf16, devices.c) are computed as the card's
 * tensor cores do: the normed rows rounded to bf16, the weights widened
 * (once per call), fp32 accumulation.
 */
#include "config.h"

#include "backend/cpu_ln_linear.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "backend/cpu_avx512.h"
#include "io/safetensors.h"

#define CPU_LNLIN_ROWS 64   /* rows per task */

/* group q's values of the tile's nr rows, in place in a: [nr] rows of
 * stride N (q's columns; a gate's logits follow them): bias added (if any), then
 * a gate's sigmoid (the logits' bias added in place), by avx512_gate on
 * the own kernels' CPU as the backend's BE_GATE computes it */
static void cpu_lnlin_values(const be_lnlin_out_t *q, float *a, int N, int nr)
{
	const float *restrict bias = q->bias, *restrict bias_g = q->bias_g;
	int n = q->n, gate = q->kind == BE_LNLIN_GATE, own = cpu_own_gemm();

	for (int r = 0; r < nr; r++, a += N) {
		float *restrict v = a, *restrict lg = a + n;
		if (bias)
			#pragma omp simd
			for (int f = 0; f < n; f++) v[f] += bias[f];
		if (!gate) continue;
		if (bias_g)
			#pragma omp simd
			for (int f = 0; f < n; f++) lg[f] += bias_g[f];
		if (own) avx512_gate(v, v, lg, n);
		else for (int f = 0; f < n; f++) v[f] /= 1.0f + expf(-lg[f]);
	}
}

/* rows r0..r0+nr-1 of the product o: [nr, N] (all groups' features), each
 * group's bias and gate applied in place (cpu_lnlin_values), then written
 * through its strides with beta: row by row where a row's features are
 * contiguous (sc 1), else feature by feature, so that the tile's
 * consecutive rows fill consecutive elements of each feature's plane */
static void cpu_lnlin_store(const be_ln_linear_t *p, float *o, int N, int64_t r0, int nr)
{
	int64_t ri[CPU_LNLIN_ROWS], rj[CPU_LNLIN_ROWS], off[CPU_LNLIN_ROWS];
	int c0 = 0;

	for (int r = 0; r < nr; r++) {
		ri[r] = (r0 + r) / p->nj;
		rj[r] = (r0 + r) % p->nj;
	}
	for (int g = 0; g < p->ngroups; g++) {
		const be_lnlin_out_t *q = &p->out[g];
		float *a = o + c0;
		int64_t sc = q->sc;
		float beta = q->beta;
		cpu_lnlin_values(q, a, N, nr);
		for (int r = 0; r < nr; r++) off[r] = ri[r] * q->si + rj[r] * q->sj;
		if (q->bf16) {   /* off counts uint16_t; beta 0 */
			uint16_t *y = (uint16_t *)q->y;
			for (int f = 0; f < q->n; f++)
				for (int r = 0; r < nr; r++)
					y[off[r] + f * sc] = safetensors_f32_to_bf16(a[(int64_t)r * N + f]);
		} else if (sc == 1) {
			for (int r = 0; r < nr; r++) {
				float *y = q->y + off[r];
				const float *v = a + (int64_t)r * N;
				if (beta != 0.0f) for (int f = 0; f < q->n; f++) y[f] = v[f] + beta * y[f];
				else              memcpy(y, v, sizeof *y * (size_t)q->n);
			}
		} else {
			for (int f = 0; f < q->n; f++)
				for (int r = 0; r < nr; r++) {
					float *y = q->y + off[r] + f * sc;
					float v = a[(int64_t)r * N + f];
					*y = beta != 0.0f ? v + beta * *y : v;
				}
		}
		c0 += q->kind == BE_LNLIN_GATE ? 2 * q->n : q->n;
	}
}

/* o: [nr, N] = t: [nr, k] w^T (w: [N, k]); packed: w packed whole for
 * avx512_block (the own kernel), or NULL: CBLAS */
static void cpu_lnlin_product(const float *t, int nr, int k, const float *w, int N, const float *packed,
                              float *o)
{
	if (!packed) {
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, N, k, 1.0f, t, k, w, k, 0.0f, o, N);
		return;
	}
	be_gemm_t g = {
		.transb = 1, .m = nr, .n = N, .k = k, .alpha = 1.0f, .a = t, .lda = k, .b = w, .ldb = k,
		.c = o, .ldc = N, .batch = 1,
	};
	for (int j0 = 0; j0 < N; j0 += AVX512_NB)
		avx512_block(&g, 0, 0, nr, j0, N - j0 < AVX512_NB ? N - j0 : AVX512_NB,
		             packed + (int64_t)j0 * k, NULL, 0);
}

/* rows r0 .. r0+nr-1 into t: [nr, k], normed: where a row's successive j
 * are contiguous (x_sj == k) by runs of rows, each normed from x straight
 * into t; else gathered row by row and normed in place.  Then multiplied
 * into o: [nr, N] and stored; w: [N, k] fp32 (bf16 weights widened) */
static int cpu_lnlin_tile(be_t *be, const be_ln_linear_t *p, const float *w, int bf16,
                          const float *packed, int64_t r0, int nr, float *t, float *o)
{
	int N = be_lnlin_rows(p), k = p->k, runs = p->x_sj == k;
	be_layernorm_t ln = { .d = k, .w = p->ln_w, .b = p->ln_b, .eps = p->eps };

	for (int r = 0, n; r < nr; r += n) {
		int64_t i = (r0 + r) / p->nj, j = (r0 + r) % p->nj;
		n = runs ? (int)(nr - r < p->nj - j ? nr - r : p->nj - j) : 1;
		ln.x = p->x + i * p->x_si + j * p->x_sj;
		ln.y = t + (int64_t)r * k;
		ln.rows = n;
		if (runs && p->ln_w) {
			if (be->layernorm(be, &ln) < 0) return -1;
		} else {
			memcpy(ln.y, ln.x, sizeof *t * (size_t)n * k);
		}
	}
	ln.x = ln.y = t;
	ln.rows = nr;
	if (!runs && p->ln_w && be->layernorm(be, &ln) < 0) return -1;
	for (int64_t e = 0; bf16 && e < (int64_t)nr * k; e++)
		t[e] = safetensors_bf16_to_f32(safetensors_f32_to_bf16(t[e]));
	cpu_lnlin_product(t, nr, k, w, N, packed, o);
	cpu_lnlin_store(p, o, N, r0, nr);
	return 0;
}

int cpu_ln_linear(be_t *be, const be_ln_linear_t *p)
{
	int64_t rows = (int64_t)p->ni * p->nj;
	int N = be_lnlin_rows(p), k = p->k, fail = 0;
	const float *w = p->w;
	float *wide = NULL, *packed = NULL;
	void *pk = NULL;

	if (k <= 0) return -EINVAL;
	if (p->w_bf16) {   /* widened once, for every tile */
		const uint16_t *h = (const uint16_t *)p->w;
		if (!(wide = malloc(sizeof *wide * (size_t)N * k))) return -ENOMEM;
		for (int64_t i = 0; i < (int64_t)N * k; i++) wide[i] = safetensors_bf16_to_f32(h[i]);
		w = wide;
	}
	if (cpu_own_gemm()) {   /* w packed once, 64-byte aligned as avx512_block reads it */
		if (posix_memalign(&pk, 64, sizeof(float) * (size_t)AVX512_PACKED(k, N)) != 0) {
			free(wide);
			return -ENOMEM;
		}
		packed = pk;
	}
	be_gemm_t gw = { .transb = 1, .n = N, .k = k, .b = w, .ldb = k, .batch = 1 };
	#pragma omp parallel reduction(|:fail) if (rows * (k + N) > 65536)
	{
		if (packed) {
			#pragma omp for schedule(static)
			for (int q = 0; q < AVX512_PANELS(N); q++) avx512_pack_b(&gw, 0, q, packed);
		}
		#pragma omp for schedule(dynamic)
		for (int64_t r0 = 0; r0 < rows; r0 += CPU_LNLIN_ROWS) {
			int nr = rows - r0 < CPU_LNLIN_ROWS ? (int)(rows - r0) : CPU_LNLIN_ROWS;
			float *t = cpu_scratch((size_t)CPU_LNLIN_ROWS * (k + N));
			if (!t || cpu_lnlin_tile(be, p, w, wide != NULL, packed, r0, nr, t,
			                         t + (size_t)CPU_LNLIN_ROWS * k) < 0) fail = 1;
		}
	}
	free(pk);
	free(wide);
	return fail ? -1 : 0;
}
