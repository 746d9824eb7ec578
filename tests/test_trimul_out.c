/* test_trimul_out.c - the CPU backend's fused triangle-multiplication
 * output side (be->trimul_out) against the ops it replaces, composed by
 * hand on whole gathered tensors: be->layernorm, be->gemm with the bias,
 * be->binary's gate (BE_GATE) and residual add (BE_ADD).  Blocks of z
 * and of z^T (the incoming update's rows, read in place), the product
 * channel-last and channel-major, shapes that fill no tile (the op works
 * on 256 rows at a time). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "xorshift.h"

static be_t *cpu;
static uint64_t rng = 0x2545f4914f6cdd1dull;

/* rows i0..i0+nc-1 of z: [L, L, d] (tr 0) or of z^T (tr 1), from *off */
static be_rows_t rows_of(int L, int d, int i0, int nc, int tr, int64_t *off)
{
	*off = tr ? (int64_t)i0 * d : (int64_t)i0 * L * d;
	return tr ? (be_rows_t){ nc, L, d, (int64_t)L * d } : (be_rows_t){ nc, L, (int64_t)L * d, d };
}

static int64_t row_at(be_rows_t r, int64_t i) { return i / r.n2 * r.s1 + i % r.n2 * r.s2; }

/* largest |a - b| over n */
static double maxdiff(const float *a, const float *b, int64_t n)
{
	double m = 0.0;
	for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
	return m;
}

/* one case of trimul_out against the composition */
static void trimul_out_case(int L, int c, int i0, int nc, int tr, int cm)
{
	int64_t off, rows = (int64_t)nc * L, nz = (int64_t)L * L * c;
	be_rows_t r = rows_of(L, c, i0, nc, tr, &off);
	float *z = xs_vec(&rng, nz, 1.0f, 0.0f), *x = xs_vec(&rng, rows * c, 3.0f, 0.5f);
	float *gv = xs_vec(&rng, rows * c, 4.0f, 0.0f);
	float *w = xs_vec(&rng, (int64_t)c * c, 1.0f / sqrtf((float)c), 0.0f), *b = xs_vec(&rng, c, 1.0f, 0.0f);
	float *lw = xs_vec(&rng, c, 1.0f, 1.0f), *lb = xs_vec(&rng, c, 1.0f, 0.0f);
	float *zr = malloc(sizeof *zr * (size_t)nz), *t = xs_vec(&rng, rows * c, 0.0f, 0.0f);
	float *u = xs_vec(&rng, rows * c, 0.0f, 0.0f);
	float *zg = xs_vec(&rng, rows * c, 0.0f, 0.0f);
	be_trimul_out_t op = {
		.c = c, .z = z + off, .zr = r, .x = x, .x_rs = cm ? 1 : c, .x_cs = cm ? rows : 1, .gv = gv,
		.ln_w = lw, .ln_b = lb, .eps = 1e-5f, .w = w, .b = b,
	};
	be_gemm_t g = {
		.transa = 0, .transb = 1, .m = (int)rows, .n = c, .k = c, .alpha = 1.0f, .a = t, .lda = c,
		.b = w, .ldb = c, .c = u, .ldc = c, .batch = 1, .bias = b,
	};

	assert_non_null(zr);
	for (int64_t i = 0; i < nz; i++) zr[i] = z[i];
	/* the composition: x channel-last, layer norm, linear_z, gate and
	 * add on the rows gathered and scattered back */
	for (int64_t i = 0; i < rows; i++)
		for (int k = 0; k < c; k++) t[i * c + k] = x[i * op.x_rs + k * op.x_cs];
	assert_int_equal(cpu->layernorm(cpu, &(be_layernorm_t){
		.y = t, .x = t, .rows = rows, .d = c, .w = lw, .b = lb, .eps = 1e-5f,
	}), 0);
	assert_int_equal(cpu->gemm(cpu, &g), 0);
	for (int64_t i = 0; i < rows; i++)
		for (int k = 0; k < c; k++) zg[i * c + k] = zr[off + row_at(r, i) + k];
	assert_int_equal(cpu->binary(cpu, &(be_binary_t){
		.y = u, .a = u, .b = gv, .n = rows * c, .kind = BE_GATE,
	}), 0);
	assert_int_equal(cpu->binary(cpu, &(be_binary_t){
		.y = zg, .a = zg, .b = u, .n = rows * c, .kind = BE_ADD,
	}), 0);
	for (int64_t i = 0; i < rows; i++)
		for (int k = 0; k < c; k++) zr[off + row_at(r, i) + k] = zg[i * c + k];

	assert_int_equal(cpu->trimul_out(cpu, &op), 0);
	printf("  trimul_out L%d c%d rows %d..+%d%s, x %s: max diff %.3g\n", L, c, i0, nc, tr ? " of z^T" : "",
	       cm ? "channel-major" : "channel-last", maxdiff(z, zr, nz));
	assert_true(maxdiff(z, zr, nz) <= 1e-5);   /* every other element untouched, exactly */
	for (int64_t i = 0; i < nz; i++) {
		int64_t p = i / c;   /* (row of z, column of z) */
		int64_t a = p / L, bcol = p % L, q = tr ? bcol : a;
		if (q < i0 || q >= i0 + nc) assert_true(z[i] == zr[i]);
	}
	free(z); free(x); free(gv); free(w); free(b); free(lw); free(lb); free(zr); free(t); free(u); free(zg);
}

static void test_trimul_out(void **state)
{
	trimul_out_case(37, 45, 13, 11, 1, 1);
	trimul_out_case(37, 45, 13, 11, 0, 0);
	trimul_out_case(23, 72, 17, 5, 1, 0);
	trimul_out_case(29, 128, 0, 29, 0, 1);   /* 841 rows: tiles of 256 and a rest */
	trimul_out_case(5, 3, 4, 1, 1, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_trimul_out),
	};
	int rc;

	if (!(cpu = be_cpu_init(0))) return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	be_free(cpu);
	return rc;
}
