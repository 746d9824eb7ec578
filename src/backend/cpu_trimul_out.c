/* cpu_trimul_out.c - the CPU's fused output side of the triangle
 * multiplication (see cpu_trimul_out.h).
 *
 * It is built from the backend's own entries (be->layernorm, be->gemm,
 * be->binary), called through the be_t they are given, so that a
 * backend that wraps the CPU's (a sim: card with bf16 weights) keeps its
 * GEMM.  The output side works on tiles of CPU_TO_ROWS rows: the tile of
 * x is gathered and normalised, multiplied, gated (BE_GATE, in place) and
 * added to z's rows (BE_ADD), while the tile is in cache; x, gv and z are
 * each read once, z written once.
 */
#include "backend/cpu_trimul_out.h"

#include <errno.h>
#include <stdlib.h>

#define CPU_TO_ROWS 256   /* rows per tile of the output side */

/* offset of row r of rows at xr's strides */
static int64_t cpu_row_at(be_rows_t xr, int64_t r)
{
	return r / xr.n2 * xr.s1 + r % xr.n2 * xr.s2;
}

int cpu_trimul_out(be_t *be, const be_trimul_out_t *t)
{
	int64_t rows = t->zr.n1 * t->zr.n2, c = t->c;
	float *xt = malloc(sizeof *xt * CPU_TO_ROWS * c), *u = malloc(sizeof *u * CPU_TO_ROWS * c);
	int rc = 0;

	if (!xt || !u) {
		rc = -ENOMEM;
		goto done;
	}
	for (int64_t r0 = 0; r0 < rows && !rc; r0 += CPU_TO_ROWS) {
		int nr = rows - r0 < CPU_TO_ROWS ? (int)(rows - r0) : CPU_TO_ROWS;
		int fail = 0;
		/* xt: [nr, c] = the tile of x, channel-last, then its layer norm */
		for (int64_t r = 0; r < nr; r++)
			for (int64_t ch = 0; ch < c; ch++) xt[r * c + ch] = t->x[(r0 + r) * t->x_rs + ch * t->x_cs];
		rc = be->layernorm(be, &(be_layernorm_t){
			.y = xt, .x = xt, .rows = nr, .d = (int)c, .w = t->ln_w, .b = t->ln_b,
			.eps = t->eps,
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
		if (rc) break;
		#pragma omp parallel for schedule(static) reduction(|:fail) if ((int64_t)nr * c > 16384)
		for (int r = 0; r < nr; r++) {
			float *zr = t->z + cpu_row_at(t->zr, r0 + r);
			fail |= be->binary(be, &(be_binary_t){
				.y = zr, .a = zr, .b = u + (int64_t)r * c, .n = c, .kind = BE_ADD,
			}) != 0;
		}
		if (fail) rc = -1;
	}
done:
	free(u);
	free(xt);
	return rc;
}
