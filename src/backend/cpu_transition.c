/* cpu_transition.c - the CPU backend's transition (see cpu_transition.h).
 *
 * x: [rows, d] += relu(LN(x) w1^T + b1) w2^T + b2, in tiles of rows shared
 * out over the OpenMP threads: CPU_TR_FLOATS / h rows (16 to 128; a
 * hidden tile of 256 KiB at most), by the shape alone, so that the result
 * does not depend on the number of threads (or workers).  Each thread norms
 * its tile into its own scratch t: [nr, d], writes the hidden tile
 * h: [nr, h] = relu(t w1^T + b1) there too, and adds h w2^T + b2 into its
 * rows of x, while they are in cache.  The arithmetic is the backend's own
 * layernorm and gemm entries on the tile (single-threaded inside the
 * parallel region), so each element is what the three ops apart
 * (layernorm, linear with ReLU, linear with beta 1 over all rows) give up
 * to the summation order of the products: the norm is one row function,
 * but OpenBLAS may sum a row's products in another order when it is given
 * other rows with it (tests/test_transition bounds the difference).
 * Scratch: tr (d + h) floats per thread (tr rows a tile), taken for the
 * call. */
#include "backend/cpu_transition.h"

#include <stdlib.h>

#include "util/log.h"

#define CPU_TR_FLOATS 65536   /* hidden floats per tile */
#define CPU_TR_MIN 16          /* rows per tile, least and most */
#define CPU_TR_MAX 128

/* rows r0..r0+nr-1 of x through the transition; tn: [nr, d], hb: [nr, h] scratch */
static int cpu_transition_tile(be_t *be, const be_transition_t *t, int64_t r0, int nr, float *tn, float *hb)
{
	float *x = t->x + r0 * t->d;
	be_gemm_t g1 = {
		.transb = 1, .m = nr, .n = t->h, .k = t->d, .alpha = 1.0f,
		.a = tn, .lda = t->d, .b = t->w1, .ldb = t->d, .c = hb, .ldc = t->h,
		.batch = 1, .bias = t->b1, .b_bf16 = t->bf16, .relu = 1,
	};
	be_gemm_t g2 = {
		.transb = 1, .m = nr, .n = t->d, .k = t->h, .alpha = 1.0f, .beta = 1.0f,
		.a = hb, .lda = t->h, .b = t->w2, .ldb = t->h, .c = x, .ldc = t->d,
		.batch = 1, .bias = t->b2, .b_bf16 = t->bf16,
	};
	int rc = be->layernorm(be, &(be_layernorm_t){
		.y = tn, .x = x, .rows = nr, .d = t->d, .w = t->ln_w, .b = t->ln_b, .eps = t->eps,
	});

	if (!rc) rc = be->gemm(be, &g1);
	if (!rc) rc = be->gemm(be, &g2);
	return rc;
}

int cpu_transition(be_t *be, const be_transition_t *t)
{
	int64_t tr = CPU_TR_FLOATS / (t->h > 0 ? t->h : 1), ntiles;
	int fail = 0;

	if (t->rows <= 0) return 0;
	tr = tr < CPU_TR_MIN ? CPU_TR_MIN : tr > CPU_TR_MAX ? CPU_TR_MAX : tr;
	ntiles = (t->rows + tr - 1) / tr;
	#pragma omp parallel reduction(|:fail) if (ntiles > 1)
	{
		float *tn = malloc(sizeof *tn * (size_t)tr * ((size_t)t->d + (size_t)t->h));
		if (!tn) fail = 1;
		#pragma omp for schedule(dynamic)
		for (int64_t i = 0; i < ntiles; i++) {
			int64_t r0 = i * tr;
			int nr = (int)(t->rows - r0 < tr ? t->rows - r0 : tr);
			if (tn && cpu_transition_tile(be, t, r0, nr, tn, tn + (size_t)tr * t->d) < 0) fail = 1;
		}
		free(tn);
	}
	if (fail) log_error("cpu backend: transition: out of memory or a product failed");
	return fail ? -1 : 0;
}
