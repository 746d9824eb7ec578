/* cpu_trimul_out.c - the CPU's fused output side of the triangle
 * multiplication (see cpu_trimul_out.h).
 *
 * It is built from the backend's own entries (be->layernorm, be->gemm,
 * be->binary), called through the be_t they are given, so that a
 * backend that wraps the CPU's (a sim: card with bf16 weights) keeps its
 * GEMM.  The output side works on tiles of CPU_TO_ROWS rows, shared out
 * over the OpenMP threads in one parallel region: each thread gathers its
 * tile of x into its own buffers, normalises, multiplies, gates (BE_GATE,
 * in place) and adds it to z's rows while the tile is in cache (a loop of
 * its own: a c-float BE_ADD per row cost more in its call than in its
 * adds), the entries single-threaded inside the region; x, gv and z are each read
 * once, z written once.  Every element is computed as the entries apart
 * compute it (a layer norm is a row's, the product sums the whole of k per
 * element), so the result does not depend on the number of threads.
 */
#include "backend/cpu_trimul_out.h"

#include <errno.h>
#include <stdlib.h>

#define CPU_TO_ROWS 128   /* rows per tile of the output side */

/* offset of row r of rows at xr's strides */
static int64_t cpu_row_at(be_rows_t xr, int64_t r)
{
	return r / xr.n2 * xr.s1 + r % xr.n2 * xr.s2;
}

/* rows r0 .. r0+nr-1 of the output side; xt, u: [nr, c] scratch */
static int cpu_trimul_out_tile(be_t *be, const be_trimul_out_t *t, int64_t r0, int nr, float *xt, float *u)
{
	int64_t c = t->c;
	int rc;

	/* xt: [nr, c] = the tile of x, channel-last, then its layer norm */
	for (int64_t r = 0; r < nr; r++)
		for (int64_t ch = 0; ch < c; ch++) xt[r * c + ch] = t->x[(r0 + r) * t->x_rs + ch * t->x_cs];
	rc = be->layernorm(be, &(be_layernorm_t){
		.y = xt, .x = xt, .rows = nr, .d = (int)c, .w = t->ln_w, .b = t->ln_b, .eps = t->eps,
	});
	/* u: [nr, c] = xt W^T + b */
	be_gemm_t g = {
		.transa = 0, .transb = 1, .m = nr, .n = (int)c, .k = (int)c, .alpha = 1.0f, .beta = 0.0f,
		.a = xt, .lda = c, .b = t->w, .ldb = c, .c = u, .ldc = c, .batch = 1,
		.bias = t->b, .b_bf16 = t->w_bf16,
	};
	if (!rc) rc = be->gemm(be, &g);
	/* u = u * sigmoid(gv), then z's rows += u */
	if (!rc) rc = be->binary(be, &(be_binary_t){
		.y = u, .a = u, .b = t->gv + r0 * c, .n = (int64_t)nr * c, .kind = BE_GATE,
	});
	for (int r = 0; r < nr && !rc; r++) {
		float *restrict zr = t->z + cpu_row_at(t->zr, r0 + r);
		const float *restrict ur = u + (int64_t)r * c;
		#pragma omp simd
		for (int64_t ch = 0; ch < c; ch++) zr[ch] += ur[ch];
	}
	return rc;
}

int cpu_trimul_out(be_t *be, const be_trimul_out_t *t)
{
	int64_t rows = t->zr.n1 * t->zr.n2, c = t->c, ntiles = (rows + CPU_TO_ROWS - 1) / CPU_TO_ROWS;
	int fail = 0, nomem = 0;

	#pragma omp parallel reduction(|:fail, nomem) if (ntiles > 1)
	{
		float *xt = malloc(sizeof *xt * CPU_TO_ROWS * 2 * (size_t)c);
		if (!xt) nomem = 1;
		#pragma omp for schedule(dynamic)
		for (int64_t i = 0; i < ntiles; i++) {
			int64_t r0 = i * CPU_TO_ROWS;
			int nr = rows - r0 < CPU_TO_ROWS ? (int)(rows - r0) : CPU_TO_ROWS;
			if (xt && cpu_trimul_out_tile(be, t, r0, nr, xt, xt + CPU_TO_ROWS * c) < 0) fail = 1;
		}
		free(xt);
	}
	return nomem ? -ENOMEM : fail ? -1 : 0;
}
