/* test_ln_linear.c - the fused layer norm and linears (be->ln_linear) on
 * the CPU against their composition, layernorm then one GEMM per group,
 * and weights_lin_group: the matrices of linears that share an input in
 * one allocation, equal to the same tensors loaded one by one. */
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
#include "io/safetensors.h"
#include "model/weights.h"
#include "xorshift.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;

/* NMSE of y against the reference r over n elements */
static double nmse(const float *y, const double *r, int64_t n)
{
	double num = 0.0, den = 0.0;
	for (int64_t i = 0; i < n; i++) {
		num += (y[i] - r[i]) * (y[i] - r[i]);
		den += r[i] * r[i];
	}
	return den > 0.0 ? num / den : num;
}

/* One case: x: [ni, nj, k] (tr: stored [nj, ni, k], read by strides),
 * normed where ln, three groups: channel-last + bias, a gate pair written
 * channel-major with both biases, a residual (beta 1) per-head layout.
 * The reference: the rows gathered, be->layernorm, then be->gemm (an
 * nn.Linear: x' W^T + bias) per weight block, gate and residual on the
 * host.  bf16: the weights passed as bf16 data (a sim: card at bf16), the
 * reference's normed rows rounded to bf16 as the tensor cores take them. */
static void compose_case(be_t *cpu, int ni, int nj, int k, int tr, int ln, int bf16)
{
	enum { NA = 19, NG = 7, NR = 5, N = NA + 2 * NG + NR };
	int64_t rows = (int64_t)ni * nj;
	float *x = xs_vec(&rng, rows * k, 3.0f, 1.0f), *w = xs_vec(&rng, (int64_t)N * k, 0.3f, 0.0f);
	float *lw = xs_vec(&rng, k, 1.0f, 0.0f), *lb = xs_vec(&rng, k, 1.0f, 0.0f);
	float *bias = xs_vec(&rng, 3 * NA, 1.0f, 0.0f);
	float *ya = xs_vec(&rng, rows * NA, 1.0f, 0.0f), *yg = xs_vec(&rng, rows * NG, 1.0f, 0.0f);
	float *yr = xs_vec(&rng, rows * NR, 1.0f, 0.0f), *yr0 = malloc(sizeof *yr0 * (size_t)(rows * NR));
	float *xn = malloc(sizeof *xn * (size_t)(rows * k)), *p = malloc(sizeof *p * (size_t)(rows * N));
	double *ra = malloc(sizeof *ra * (size_t)(rows * NA)), *rg = malloc(sizeof *rg * (size_t)(rows * NG));
	double *rr = malloc(sizeof *rr * (size_t)(rows * NR));
	int64_t si = tr ? k : (int64_t)nj * k, sj = tr ? (int64_t)ni * k : k;

	uint16_t *w16 = malloc(sizeof *w16 * (size_t)N * k);
	assert_true(yr0 && xn && p && ra && rg && rr && w16);
	memcpy(yr0, yr, sizeof *yr0 * (size_t)(rows * NR));
	for (int64_t i = 0; i < (int64_t)N * k; i++) {
		w16[i] = safetensors_f32_to_bf16(w[i]);
		if (bf16) w[i] = safetensors_bf16_to_f32(w16[i]);
	}
	be_ln_linear_t op = {
		.ni = ni, .nj = nj, .k = k, .x = x, .x_si = si, .x_sj = sj,
		.ln_w = ln ? lw : NULL, .ln_b = ln ? lb : NULL, .eps = 1e-5f, .w = bf16 ? (const float *)w16 : w,
		.w_bf16 = bf16, .ngroups = 3,
	};
	op.out[0] = (be_lnlin_out_t){ .n = NA, .y = ya, .si = (int64_t)nj * NA, .sj = NA, .sc = 1, .bias = bias };
	op.out[1] = (be_lnlin_out_t){ .n = NG, .kind = BE_LNLIN_GATE, .y = yg, .si = nj, .sj = 1, .sc = rows,
	                              .bias = bias + NA, .bias_g = bias + 2 * NA };
	op.out[2] = (be_lnlin_out_t){ .n = NR, .y = yr, .si = nj, .sj = 1, .sc = rows, .beta = 1.0f };
	assert_int_equal(be_lnlin_rows(&op), N);
	assert_int_equal(cpu->ln_linear(cpu, &op), 0);

	for (int64_t r = 0; r < rows; r++)
		memcpy(xn + r * k, x + r / nj * si + r % nj * sj, sizeof *xn * (size_t)k);
	if (ln) assert_int_equal(cpu->layernorm(cpu, &(be_layernorm_t){
		.y = xn, .x = xn, .rows = rows, .d = k, .w = lw, .b = lb, .eps = 1e-5f,
	}), 0);
	for (int64_t i = 0; bf16 && i < rows * k; i++) xn[i] = safetensors_bf16_to_f32(safetensors_f32_to_bf16(xn[i]));
	be_gemm_t g = { .transb = 1, .m = (int)rows, .n = N, .k = k, .alpha = 1.0f, .a = xn, .lda = k,
	                .b = w, .ldb = k, .c = p, .ldc = N, .batch = 1 };
	assert_int_equal(cpu->gemm(cpu, &g), 0);
	for (int64_t r = 0; r < rows; r++) {
		const float *pr = p + r * N;
		for (int f = 0; f < NA; f++) ra[r * NA + f] = (double)pr[f] + bias[f];
		for (int f = 0; f < NG; f++) {
			double a = (double)pr[NA + f] + bias[NA + f], b = (double)pr[NA + NG + f] + bias[2 * NA + f];
			rg[f * rows + r] = a / (1.0 + exp(-b));
		}
		for (int f = 0; f < NR; f++) rr[f * rows + r] = (double)pr[NA + 2 * NG + f] + yr0[f * rows + r];
	}
	double e[3] = { nmse(ya, ra, rows * NA), nmse(yg, rg, rows * NG), nmse(yr, rr, rows * NR) };
	printf("  ln_linear ni%d nj%d k%d%s%s%s: nmse %.3g %.3g %.3g\n", ni, nj, k, tr ? " z^T" : "", ln ? " ln" : "",
	       bf16 ? " bf16" : "", e[0], e[1], e[2]);
	for (int i = 0; i < 3; i++) assert_true(e[i] <= 1e-12);   /* false for NaN too */
	free(x); free(w); free(lw); free(lb); free(bias); free(ya); free(yg); free(yr); free(yr0);
	free(xn); free(p); free(ra); free(rg); free(rr); free(w16);
}

/* awkward rows (not multiples of the 64-row tile), k, strides; fp32 and
 * bf16 weights */
static void test_compose(void **state)
{
	be_t *cpu = be_cpu_init(2);

	assert_non_null(cpu);
	compose_case(cpu, 5, 37, 45, 0, 1, 0);
	compose_case(cpu, 9, 23, 45, 1, 1, 0);
	compose_case(cpu, 1, 1, 3, 0, 1, 0);
	compose_case(cpu, 3, 70, 128, 1, 0, 0);
	compose_case(cpu, 40, 41, 33, 1, 1, 0);   /* tiles on several threads */
	compose_case(cpu, 5, 37, 45, 1, 1, 1);
	compose_case(cpu, 40, 41, 33, 0, 1, 1);
	be_free(cpu);
}

/* the triangle attention's five linears of tiny_a's first block as one
 * group: views of consecutive rows of one allocation, the same values as
 * each loaded alone (fp32, and bf16 on a backend that holds them so), the
 * same bytes counted, and sizes only without weights */
static void group_case(int bf16)
{
	weights_t *wa = weights_open(TEST_DATA "/tiny_a/weights.safetensors");
	weights_t *wb = weights_open(TEST_DATA "/tiny_a/weights.safetensors");
	be_t *cpu = be_cpu_init(1), be;
	lin_t all, g[5], one;
	const char *names[5] = { "linear", "mha.linear_q", "mha.linear_k", "mha.linear_v", "mha.linear_g" };

	assert_non_null(wa); assert_non_null(wb); assert_non_null(cpu);
	be = *cpu;
	be.weights_bf16 = bf16;   /* the CPU's memory, held as a bf16 device holds it */
	int cz = weights_cfg(wa)->c_z, H = cz / weights_cfg(wa)->pair_head_width;
	const int outs[5] = { H, cz, cz, cz, cz };
	weights_part_t parts[5];
	for (int i = 0; i < 5; i++) parts[i] = (weights_part_t){ &g[i], names[i], outs[i], i == 4 };
	assert_int_equal(weights_lin_group(wa, &be, &all, parts, 5, cz, "trunk.blocks.%d.%s", 0, "tri_att_start"), 0);
	assert_int_equal(all.out, H + 4 * cz);
	assert_int_equal(all.bf16, bf16);
	size_t es = bf16 ? 2 : 4, off = 0;
	for (int i = 0; i < 5; i++) {
		assert_ptr_equal((const char *)g[i].w, (const char *)all.w + off * es * cz);
		assert_int_equal(g[i].out, outs[i]);
		assert_int_equal(g[i].bf16, bf16);
		assert_true(i == 4 ? g[i].b != NULL : g[i].b == NULL);
		assert_int_equal(weights_lin(wb, &be, &one, outs[i], cz, i == 4, "trunk.blocks.0.tri_att_start.%s",
		                             names[i]), 0);
		assert_memory_equal(g[i].w, one.w, es * outs[i] * cz);
		if (i == 4) assert_memory_equal(g[i].b, one.b, sizeof(float) * cz);
		off += outs[i];
	}
	assert_int_equal(weights_bytes(wa, &be), weights_bytes(wb, &be));
	assert_int_equal(weights_lin_group(NULL, NULL, &all, parts, 5, cz, "x"), 0);
	assert_null(all.w);
	assert_int_equal(all.out, H + 4 * cz);
	assert_int_equal(g[1].out, cz);
	weights_close(wa);
	weights_close(wb);
	be_free(cpu);
}

static void test_group(void **state)
{
	group_case(0);
	group_case(1);
}

/* a missing member is one error naming it, and the load fails */
static void test_group_missing(void **state)
{
	weights_t *w = weights_open(TEST_DATA "/tiny_a/weights.safetensors");
	be_t *cpu = be_cpu_init(1);
	lin_t all, a, b;
	int cz;

	assert_non_null(w); assert_non_null(cpu);
	cz = weights_cfg(w)->c_z;
	const weights_part_t parts[2] = { { &a, "mha.linear_q", cz, 0 }, { &b, "mha.linear_nope", cz, 0 } };
	assert_int_equal(weights_lin_group(w, cpu, &all, parts, 2, cz, "trunk.blocks.0.tri_att_start"), -1);
	weights_close(w);
	be_free(cpu);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_compose),
		cmocka_unit_test(test_group),
		cmocka_unit_test(test_group_missing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
