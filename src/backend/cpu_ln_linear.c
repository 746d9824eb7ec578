/* cpu_ln_linear.c - be_ln_linear_t on the CPU (see cpu_ln_linear.h).
 *
 * Tiles of CPU_LNLIN_ROWS rows, one per task: the tile's rows of x are
 * gathered by their strides into the thread's scratch, layer-normed there
 * in place by the backend's own layernorm (so the numbers are those of
 * layernorm then linear), multiplied by all the groups' weights at once
 * (one single-threaded CBLAS product: [rows, k] x [k, N] into scratch) and
 * the epilogue writes each group's features through its strides.  bf16
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

#include "io/safetensors.h"

#define CPU_LNLIN_ROWS 64   /* rows per task */

/* rows r0..r0+nr-1 of the product o: [nr, N] (all groups' features), each
 * group's bias, gate and beta applied as it is written */
static void cpu_lnlin_store(const be_ln_linear_t *p, const float *o, int N, int64_t r0, int nr)
{
	int c0 = 0;

	for (int g = 0; g < p->ngroups; g++) {
		const be_lnlin_out_t *q = &p->out[g];
		int gate = q->kind == BE_LNLIN_GATE;
		for (int r = 0; r < nr; r++) {
			int64_t i = (r0 + r) / p->nj, j = (r0 + r) % p->nj;
			const float *a = o + (int64_t)r * N + c0;
			int64_t y0 = i * q->si + j * q->sj;
			float *y = q->bf16 ? NULL : q->y + y0;   /* bf16: y0 counts uint16_t */
			for (int f = 0; f < q->n; f++) {
				float v = a[f] + (q->bias ? q->bias[f] : 0.0f);
				if (gate) v /= 1.0f + expf(-(a[q->n + f] + (q->bias_g ? q->bias_g[f] : 0.0f)));
				if (q->bf16) ((uint16_t *)q->y)[y0 + f * q->sc] = safetensors_f32_to_bf16(v);
				else y[f * q->sc] = q->beta != 0.0f ? v + q->beta * y[f * q->sc] : v;
			}
		}
		c0 += gate ? 2 * q->n : q->n;
	}
}

int cpu_ln_linear(be_t *be, const be_ln_linear_t *p)
{
	int64_t rows = (int64_t)p->ni * p->nj;
	int N = be_lnlin_rows(p), k = p->k, fail = 0;
	const float *w = p->w;
	float *wide = NULL;

	if (k <= 0) return -EINVAL;
	if (p->w_bf16) {   /* widened once, for every tile */
		const uint16_t *h = (const uint16_t *)p->w;
		if (!(wide = malloc(sizeof *wide * (size_t)N * k))) return -ENOMEM;
		for (int64_t i = 0; i < (int64_t)N * k; i++) wide[i] = safetensors_bf16_to_f32(h[i]);
		w = wide;
	}
	#pragma omp parallel for schedule(dynamic) reduction(|:fail) if (rows * (k + N) > 65536)
	for (int64_t r0 = 0; r0 < rows; r0 += CPU_LNLIN_ROWS) {
		int nr = rows - r0 < CPU_LNLIN_ROWS ? (int)(rows - r0) : CPU_LNLIN_ROWS;
		float *t = cpu_scratch((size_t)CPU_LNLIN_ROWS * (k + N)), *o;
		if (!t) { fail = 1; continue; }
		o = t + (size_t)CPU_LNLIN_ROWS * k;
		for (int r = 0; r < nr; r++) {
			int64_t i = (r0 + r) / p->nj, j = (r0 + r) % p->nj;
			memcpy(t + (int64_t)r * k, p->x + i * p->x_si + j * p->x_sj, sizeof *t * (size_t)k);
		}
		if (p->ln_w && be->layernorm(be, &(be_layernorm_t){
			.y = t, .x = t, .rows = nr, .d = k, .w = p->ln_w, .b = p->ln_b,
			.eps = p->eps,
		}) < 0) { fail = 1; continue; }
		for (int64_t e = 0; wide && e < (int64_t)nr * k; e++)
			t[e] = safetensors_bf16_to_f32(safetensors_f32_to_bf16(t[e]));
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, N, k, 1.0f, t, k, w, k, 0.0f, o, N);
		cpu_lnlin_store(p, o, N, r0, nr);
	}
	free(wide);
	return fail ? -1 : 0;
}
