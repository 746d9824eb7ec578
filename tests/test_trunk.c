/* test_trunk.c - golden tests of the folding trunk: every pass of the
 * recycle-detail sequence of both public fixtures (trunk_s_rK, trunk_z_rK
 * from s_s_0 and the previous pass's stored outputs and recycle bins),
 * chunked against unchunked passes, the planned arena, and the activation
 * peak of one esmfold_v1 block at the lengths the buckets use. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "golden_json.h"
#include "io/safetensors.h"
#include "model/trunk.h"
#include "model/weights.h"

typedef struct {
	be_t       *be;
	weights_t       *w;
	const hparams_t *c;
	trunk_t     t;
	safetensors_t       *exp;
	json_t     *ej;
	json_t     *seqj;       /* the recycle-detail sequence */
	const char *seq;
	int         L;
	int32_t    *residx;     /* [L] */
	float      *s0;         /* s_s_0 [L, c_s] */
} fixture_t;

/* float copy of SEQ/NAME (n elements), or NULL */
static float *load_f32(const fixture_t *f, const char *name, int64_t n)
{
	char key[256];
	snprintf(key, sizeof key, "%s/%s", f->seq, name);
	const safetensors_tensor_t *t = safetensors_find(f->exp, key);
	if (!t || t->numel != n) {
		fprintf(stderr, "%s: missing or of %lld elements\n", key, t ? (long long)t->numel : 0LL);
		return NULL;
	}
	float *p = malloc(sizeof *p * n);
	safetensors_to_f32(t, p);
	return p;
}

/* int32 copy of SEQ/NAME (n elements), or NULL */
static int32_t *load_i32(const fixture_t *f, const char *name, int64_t n)
{
	char key[256];
	snprintf(key, sizeof key, "%s/%s", f->seq, name);
	const safetensors_tensor_t *t = safetensors_find(f->exp, key);
	if (!t || t->numel != n) return NULL;
	double *d = malloc(sizeof *d * n);
	int32_t *p = malloc(sizeof *p * n);
	safetensors_to_f64(t, d);
	for (int64_t i = 0; i < n; i++) p[i] = (int32_t)d[i];
	free(d);
	return p;
}

/* gemm_form: the backend without its direct triangle product, so that the
 * trunk takes the batched-GEMM form (the one CUDA runs) */
static void fixture_open(fixture_t *f, const char *fixture, int gemm_form)
{
	char path[1024];
	size_t i;
	json_t *sj;

	memset(f, 0, sizeof *f);
	assert_non_null(f->be = be_cpu_init(1));
	if (gemm_form) f->be->trimul = NULL;
	snprintf(path, sizeof path, "%s/%s/weights.safetensors", TEST_DATA, fixture);
	assert_non_null(f->w = weights_open(path));
	f->c = weights_cfg(f->w);
	assert_int_equal(trunk_load(&f->t, f->c, f->w, f->be), 0);
	assert_int_equal(golden_open(fixture, &f->exp, &f->ej), 0);
	json_array_foreach(json_object_get(f->ej, "sequences"), i, sj)
		if (json_is_true(json_object_get(sj, "recycle_detail"))) f->seqj = sj;
	assert_non_null(f->seqj);
	f->seq = json_string_value(json_object_get(f->seqj, "name"));
	f->L = (int)json_integer_value(json_object_get(f->seqj, "length"));
	assert_non_null(f->residx = load_i32(f, "residue_index", f->L));
	assert_non_null(f->s0 = load_f32(f, "s_s_0", (int64_t)f->L * f->c->c_s));
}

static void fixture_close(fixture_t *f)
{
	free(f->s0);
	free(f->residx);
	json_decref(f->ej);
	safetensors_close(f->exp);
	trunk_free(&f->t);
	weights_close(f->w);
	be_free(f->be);
}

/* One trunk pass in a planned arena: recycling input from prev_s [L, c_s],
 * prev_z [L, L, c_z] (NULL: zeros) and bins [L * L] (NULL: zeros), then
 * trunk_iter; s_out [L, c_s], z_out [L, L, c_z].  Returns the arena size. */
static size_t run_pass(const fixture_t *f, const float *prev_s, const float *prev_z,
                       const int32_t *bins, int chunk, float *s_out, float *z_out)
{
	int L = f->L, cs = f->c->c_s, cz = f->c->c_z;
	int64_t ns = (int64_t)L * cs, nz = (int64_t)L * L * cz;
	int32_t *zero_bins = calloc((size_t)L * L, sizeof *zero_bins);
	float *zs = calloc(ns, sizeof *zs), *zz = calloc(nz, sizeof *zz);
	size_t high = 0;
	fwd_t fx;

	for (int exec = 0; exec < 2; exec++) {
		if (exec)
			assert_int_equal(fwd_exec_begin(&fx, f->be, high), 0);
		else
			fwd_plan_begin(&fx, f->be);
		tensor_t s0 = fwd_new2(&fx, L, cs), ps = fwd_new2(&fx, L, cs), s = fwd_new2(&fx, L, cs);
		tensor_t z = fwd_new3(&fx, L, L, cz);
		fwd_set(&fx, s0, f->s0);
		fwd_set(&fx, ps, prev_s ? prev_s : zs);
		fwd_set(&fx, z, prev_z ? prev_z : zz);
		/* in place: z is also prev_z */
		trunk_recycle_in(&fx, &f->t, s, z, s0, ps, z, bins ? bins : zero_bins, chunk);
		fwd_drop(&fx, &ps);
		fwd_drop(&fx, &s0);
		trunk_iter(&fx, &f->t, f->c, s, z, f->residx, chunk);
		fwd_get(&fx, s, s_out);
		fwd_get(&fx, z, z_out);
		fwd_drop(&fx, &z);
		fwd_drop(&fx, &s);
		if (fx.err) fprintf(stderr, "%s: %s\n", f->seq, fx.errmsg);
		assert_int_equal(fx.err, 0);
		if (!exec) high = fx.place.high;
		fwd_end(&fx);
	}
	free(zz);
	free(zs);
	free(zero_bins);
	return high;
}

/* every pass K of the recycle-detail sequence against trunk_s_rK,
 * trunk_z_rK, in both forms of the triangle multiplication */
static void golden_form(const char *fixture, int gemm_form)
{
	fixture_t f;
	char sname[32], zname[32], bname[32];
	int failures = 0;

	fixture_open(&f, fixture, gemm_form);
	printf("%s, %s form:\n", fixture, gemm_form ? "batched-GEMM" : "direct");
	int L = f.L, passes = f.c->max_recycles;
	int64_t ns = (int64_t)L * f.c->c_s, nz = (int64_t)L * L * f.c->c_z;
	float *s = malloc(sizeof *s * ns), *z = malloc(sizeof *z * nz);

	for (int k = 0; k < passes; k++) {
		float *ps = NULL, *pz = NULL;
		int32_t *bins = NULL;
		if (k > 0) {
			snprintf(sname, sizeof sname, "trunk_s_r%d", k - 1);
			snprintf(zname, sizeof zname, "trunk_z_r%d", k - 1);
			snprintf(bname, sizeof bname, "recycle_bins_r%d", k - 1);
			assert_non_null(ps = load_f32(&f, sname, ns));
			assert_non_null(pz = load_f32(&f, zname, nz));
			assert_non_null(bins = load_i32(&f, bname, (int64_t)L * L));
		}
		run_pass(&f, ps, pz, bins, 0, s, z);
		snprintf(sname, sizeof sname, "trunk_s_r%d", k);
		snprintf(zname, sizeof zname, "trunk_z_r%d", k);
		failures += !golden_check(f.exp, f.seqj, f.seq, sname, s, ns);
		failures += !golden_check(f.exp, f.seqj, f.seq, zname, z, nz);
		free(bins);
		free(pz);
		free(ps);
	}
	free(z);
	free(s);
	fixture_close(&f);
	assert_int_equal(failures, 0);
}

static void golden_passes(const char *fixture)
{
	golden_form(fixture, 0);
	golden_form(fixture, 1);
}

static void test_golden_tiny_a(void **state) { golden_passes("tiny_a"); }
static void test_golden_tiny_b(void **state) { golden_passes("tiny_b"); }

static double max_abs_diff(const float *a, const float *b, int64_t n)
{
	double m = 0.0;
	for (int64_t i = 0; i < n; i++) {
		double d = a[i] > b[i] ? (double)a[i] - b[i] : (double)b[i] - a[i];
		if (d > m) m = d;
	}
	return m;
}

/* pass 0 with chunk sizes 1, 3 (a non-divisor), 8 and L against the
 * unchunked pass, within the golden tolerance of trunk_s_r0 / trunk_z_r0;
 * also a smaller planned arena for small chunks; both forms */
static void chunk_form(const char *fixture, int gemm_form)
{
	fixture_t f;

	fixture_open(&f, fixture, gemm_form);
	int L = f.L;
	int64_t ns = (int64_t)L * f.c->c_s, nz = (int64_t)L * L * f.c->c_z;
	float *s_ref = malloc(sizeof(float) * ns), *z_ref = malloc(sizeof(float) * nz);
	float *s = malloc(sizeof(float) * ns), *z = malloc(sizeof(float) * nz);
	double tol_s = golden_json_tol(f.seqj, "trunk_s_r0"), tol_z = golden_json_tol(f.seqj, "trunk_z_r0");
	int chunks[] = { 1, 3, 8, L };

	assert_true(tol_s > 0 && tol_z > 0);
	size_t high_ref = run_pass(&f, NULL, NULL, NULL, 0, s_ref, z_ref);
	for (size_t i = 0; i < sizeof chunks / sizeof *chunks; i++) {
		size_t high = run_pass(&f, NULL, NULL, NULL, chunks[i], s, z);
		double ds = max_abs_diff(s, s_ref, ns), dz = max_abs_diff(z, z_ref, nz);
		printf("%s/%s chunk %3d: arena %zu (unchunked %zu), s diff %.3g (%.3f tol), z diff %.3g (%.3f tol)\n",
		       fixture, f.seq, chunks[i], high, high_ref, ds, ds / tol_s, dz, dz / tol_z);
		assert_true(ds <= tol_s);
		assert_true(dz <= tol_z);
		if (chunks[i] < L) assert_true(high < high_ref);
	}
	free(z);
	free(s);
	free(z_ref);
	free(s_ref);
	fixture_close(&f);
}

static void chunk_agreement(const char *fixture)
{
	chunk_form(fixture, 0);
	chunk_form(fixture, 1);
}

static void test_chunks_tiny_a(void **state) { chunk_agreement("tiny_a"); }
static void test_chunks_tiny_b(void **state) { chunk_agreement("tiny_b"); }

/* planning a whole pass gives a positive arena that the executing pass fits */
static void test_plan(void **state)
{
	fixture_t f;

	fixture_open(&f, "tiny_b", 0);
	int64_t ns = (int64_t)f.L * f.c->c_s, nz = (int64_t)f.L * f.L * f.c->c_z;
	float *s = malloc(sizeof(float) * ns), *z = malloc(sizeof(float) * nz);
	size_t high = run_pass(&f, NULL, NULL, NULL, 5, s, z);
	assert_true(high > 0);
	/* the arena holds at least s, z and one [L, L, c_z] projection */
	assert_true(high >= (size_t)(ns + 2 * nz) * sizeof(float));
	free(z);
	free(s);
	fixture_close(&f);
}

/* activation arena of one esmfold_v1 trunk block (s and z included), from
 * the planner, unchunked and chunked; printed as a table in the test's log */
/* Block peaks of the full model's dimensions on the CPU (direct triangle
 * product) and on a backend without it (channel-major GEMMs, as CUDA):
 * chunks never raise the peak, and chunk 64 holds z, one triangle-
 * multiplication projection, the [H, L, L] biases, s-sized tensors and a
 * few [64, L, c_z] slabs. */
static void test_peak_esmfold_v1(void **state)
{
	hparams_t c = { 0 };
	int lens[] = { 256, 512, 1024, 1344 }, chunks[] = { 0, 128, 64, 32 };
	be_t *cpu = be_cpu_init(1), gemm_only;

	assert_non_null(cpu);
	gemm_only = *cpu;
	gemm_only.trimul = NULL;
	c.c_s = 1024;
	c.c_z = 128;
	c.seq_head_width = 32;
	c.pair_head_width = 32;
	c.position_bins = 32;
	c.trunk_blocks = 48;
	for (int v = 0; v < 2; v++) {
		be_t *be = v ? &gemm_only : cpu;
		printf("esmfold_v1 trunk block activation arena (MiB), %s:\n%6s",
		       v ? "batched GEMMs (CUDA)" : "direct triangle product (CPU)", "L");
		for (size_t j = 0; j < sizeof chunks / sizeof *chunks; j++)
			printf(chunks[j] ? "  chunk %4d" : "   unchunked", chunks[j]);
		printf("   z alone\n");
		for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
			int L = lens[i];
			size_t prev = 0;
			printf("%6d", L);
			for (size_t j = 0; j < sizeof chunks / sizeof *chunks; j++) {
				size_t high = trunk_block_peak(&c, be, L, chunks[j]);
				assert_true(high > 0);
				if (j) assert_true(high <= prev);
				prev = high;
				printf("  %10.1f", high / 1048576.0);
			}
			printf("  %8.1f\n", (double)L * L * c.c_z * sizeof(float) / 1048576.0);
			double zb = (double)L * L * c.c_z * sizeof(float), slab = zb * 64 / L;
			printf("        chunk 64: 2 z + %.2f slabs\n", (trunk_block_peak(&c, be, L, 64) - 2 * zb) / slab);
			assert_true(trunk_block_peak(&c, be, L, 64) < 2 * zb + 6 * slab);
		}
	}
	be_free(cpu);
}

/* The block's memory traffic as the op layer counts it (trunk_block_passes)
 * is the table in trunk.c: its pair-part totals plus the per-head biases'
 * 2 (H_s + 2 H_z) / c_z, the sequence track adding under 0.15 at L = 4096;
 * chunks only add passes (layer norms recomputed, f read per chunk). */
#define TRUNK_PASSES_CPU 57.0
#define TRUNK_PASSES_CUDA 57.0
static void test_passes_esmfold_v1(void **state)
{
	hparams_t c = { .c_s = 1024, .c_z = 128, .seq_head_width = 32, .pair_head_width = 32,
	                .position_bins = 32, .trunk_blocks = 48 };
	be_t *cpu = be_cpu_init(1), gemm_only;
	double heads = 2.0 * (1024 / 32 + 2 * (128 / 32)) / 128;

	assert_non_null(cpu);
	gemm_only = *cpu;
	gemm_only.trimul = NULL;
	for (int v = 0; v < 2; v++) {
		be_t *be = v ? &gemm_only : cpu;
		double want = (v ? TRUNK_PASSES_CUDA : TRUNK_PASSES_CPU) + heads;
		double p = trunk_block_passes(&c, be, 4096, 0);
		printf("esmfold_v1 block, %s: %.2f pair passes at L 4096, %.2f at 256 (chunk 64: %.2f)\n",
		       v ? "batched GEMMs (CUDA)" : "direct triangle product (CPU)", p,
		       trunk_block_passes(&c, be, 256, 0), trunk_block_passes(&c, be, 256, 64));
		assert_true(p >= want && p < want + 0.15);
		assert_true(trunk_block_passes(&c, be, 256, 64) > trunk_block_passes(&c, be, 256, 0));
	}
	be_free(cpu);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_golden_tiny_a),
		cmocka_unit_test(test_golden_tiny_b),
		cmocka_unit_test(test_chunks_tiny_a),
		cmocka_unit_test(test_chunks_tiny_b),
		cmocka_unit_test(test_plan),
		cmocka_unit_test(test_peak_esmfold_v1),
		cmocka_unit_test(test_passes_esmfold_v1),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
