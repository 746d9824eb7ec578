/* test_memory.c - memory you know before you run:
 *  - the planning shortcut (fwd_memo_t) changes no figure: the whole fold
 *    planned with and without it, for both fixtures and the full
 *    esmfold_v1 dimensions (manifest), at many lengths and chunk sizes;
 *  - the executing pass reports exactly the planned figures (arena and
 *    peak allocated) on the fixtures;
 *  - random weights (random_weights.h) hold exactly the tensors the loaders ask for,
 *    are reproducible from the seed, carry their config, and fold;
 *  - the half-precision writers round to nearest even. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "sched/scheduler.h"
#include "model/model.h"
#include "io/safetensors.h"
#include "model/tokenizer.h"
#include "model/random_weights.h"
#include "model/weights.h"
#include "tmpdir.h"

#define MANIFEST TEST_DATA "/manifest_esmfold_v1.json"

/* a sequence of length L cycling through the amino acids; malloc'ed */
static char *seq_of(int L)
{
	static const char aa[] = "ACDEFGHIKLMNPQRSTVWY";
	char *s = malloc(L + 1);
	for (int i = 0; i < L; i++) s[i] = aa[(i * 7) % 20];
	s[L] = 0;
	return s;
}

static void plan_both(const model_t *m, int L, int chunk)
{
	char *s = seq_of(L);
	tok_t t;
	model_plan_t p0, p1;

	assert_int_equal(tok_encode(&t, s, m->cfg), 0);
	model_run_t fast = { .chunk = chunk }, slow = { .chunk = chunk, .no_memo = 1 };
	assert_int_equal(model_plan(m, &t, &fast, &p0), 0);
	assert_int_equal(model_plan(m, &t, &slow, &p1), 0);
	if (p0.arena != p1.arena || p0.peak_live != p1.peak_live || p0.host != p1.host)
		fail_msg("L %d chunk %d: memo %zu/%zu, full %zu/%zu", L, chunk, p0.arena, p0.peak_live,
		         p1.arena, p1.peak_live);
	tok_free(&t);
	free(s);
}

static void test_memo_exact(void **state)
{
	static const char *const fixtures[] = { TEST_DATA "/tiny_a/weights.safetensors",
	                                        TEST_DATA "/tiny_b/weights.safetensors" };
	static const int chunks[] = { 0, 1, 3, 7, 64 };
	(void)state;
	for (int f = 0; f < 2; f++) {
		weights_t *w = weights_open(fixtures[f]);
		model_t m;
		assert_non_null(w);
		assert_int_equal(model_load(&m, w, NULL, 0), 0);
		for (int L = 1; L <= 40; L += 3)
			for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++) plan_both(&m, L, chunks[c]);
		model_free(&m);
		weights_close(w);
	}
	weights_t *w = weights_open_manifest(MANIFEST);
	model_t m;
	assert_non_null(w);
	assert_int_equal(model_load(&m, w, NULL, 0), 0);
	static const int lens[] = { 1, 17, 100, 257 };
	for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
		plan_both(&m, lens[i], 0);
		plan_both(&m, lens[i], 32);
	}
	model_free(&m);
	weights_close(w);
}

/* fold tiny_a's weights on the CPU: executing figures == planned ones */
static void test_exec_matches_plan(void **state)
{
	(void)state;
	weights_t *w = weights_open(TEST_DATA "/tiny_a/weights.safetensors");
	be_t *be = be_cpu_init(1);
	model_t m;
	assert_non_null(w);
	assert_non_null(be);
	assert_int_equal(model_load(&m, w, be, 0), 0);
	for (int L = 1; L <= 50; L += 7) {
		for (int chunk = 0; chunk <= 5; chunk += 5) {
			char *s = seq_of(L), err[256];
			tok_t t;
			model_out_t out;
			mem_fig_t fig;
			model_plan_t p;
			model_run_t run = { .chunk = chunk, .passes = 2 };
			assert_int_equal(tok_encode(&t, s, m.cfg), 0);
			assert_int_equal(model_plan(&m, &t, &run, &p), 0);
			size_t arena = p.arena, peak = p.peak_live;
			assert_int_equal(sched_fold(&m, &t, &run, &p, &out, &fig, err, sizeof err), 0);
			assert_int_equal(out.arena, arena);
			assert_int_equal(out.peak_live, peak);
			assert_int_equal(out.exec_arena, arena);
			assert_int_equal(out.exec_peak_live, peak);
			assert_int_equal(fig.predicted, arena);
			assert_int_equal(fig.allocated, peak);
			assert_int_equal(fig.reserved, arena);
			assert_true(fig.device_used > 0);   /* process RSS on the CPU */
			model_out_free(&out);
			tok_free(&t);
			free(s);
		}
	}
	model_free(&m);
	weights_close(w);   /* its buffers are freed through be */
	be_free(be);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *b;
	long n;
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	b = malloc(n + 1);
	assert_int_equal(fread(b, 1, n, f), (size_t)n);
	b[n] = 0;
	fclose(f);
	return b;
}

static void test_random_weights(void **state)
{
	(void)state;
	char dir[100], p1[128], p2[128], p3[128];
	char *cfg = slurp(TEST_DATA "/tiny_b/config.json");
	assert_non_null(mkdtemp(tmpdir_template(dir, sizeof dir, "esmbatch-wr")));
	snprintf(p1, sizeof p1, "%s/a.safetensors", dir);
	snprintf(p2, sizeof p2, "%s/b.safetensors", dir);
	snprintf(p3, sizeof p3, "%s/c.safetensors", dir);
	assert_int_equal(random_weights_write(cfg, "tiny_b", p1, 42, SAFETENSORS_F32), 0);
	assert_int_equal(random_weights_write(cfg, "tiny_b", p2, 42, SAFETENSORS_F32), 0);
	assert_int_equal(random_weights_write(cfg, "tiny_b", p3, 43, SAFETENSORS_F16), 0);

	/* same seed, same bytes; the fixture's tensors (but the contact head) */
	safetensors_t *a = safetensors_open(p1), *b = safetensors_open(p2), *fx = safetensors_open(TEST_DATA "/tiny_b/weights.safetensors");
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(fx);
	assert_int_equal(safetensors_count(a), safetensors_count(b));
	int nfx = 0;
	for (int i = 0; i < safetensors_count(fx); i++) {
		const safetensors_tensor_t *t = safetensors_at(fx, i), *u = safetensors_find(a, t->name);
		if (!strncmp(t->name, "esm.contact_head.", 17) || !strcmp(t->name, "af2_to_esm") ||
		    strstr(t->name, "inv_freq"))
			continue;   /* unused by ESMFold; computed */
		nfx++;
		assert_non_null(u);
		assert_int_equal(u->nd, t->nd);
		for (int d = 0; d < t->nd; d++) assert_int_equal(u->shape[d], t->shape[d]);
	}
	assert_int_equal(nfx, safetensors_count(a));
	for (int i = 0; i < safetensors_count(a); i++) {
		const safetensors_tensor_t *t = safetensors_at(a, i), *u = safetensors_find(b, t->name);
		assert_non_null(u);
		assert_memory_equal(t->data, u->data, t->nbytes);
	}
	assert_string_equal(safetensors_meta(a, "config"), cfg);
	assert_string_equal(safetensors_meta(a, "esmbatch_random_seed"), "42");
	safetensors_close(a);
	safetensors_close(b);
	safetensors_close(fx);

	/* the f16 file loads (config from the metadata) and folds */
	weights_t *w = weights_open(p3);
	be_t *be = be_cpu_init(1);
	model_t m;
	assert_non_null(w);
	assert_int_equal(model_load(&m, w, be, 0), 0);
	assert_int_equal(weights_unused(w, NULL), 0);
	char *s = seq_of(23), err[256];
	tok_t t;
	model_out_t out;
	model_run_t run = { .passes = 2 };
	assert_int_equal(tok_encode(&t, s, m.cfg), 0);
	assert_int_equal(model_fold(&m, &t, &run, NULL, &out, err, sizeof err), 0);
	for (int i = 0; i < 23 * 37 * 3; i++) assert_true(isfinite(out.atom37[i]));
	assert_true(out.mean_plddt > 0.0f && out.mean_plddt < 1.0f);
	model_out_free(&out);
	tok_free(&t);
	free(s);
	model_free(&m);
	weights_close(w);
	be_free(be);
	unlink(p1);
	unlink(p2);
	unlink(p3);
	rmdir(dir);
	free(cfg);
}

static void test_half_rounding(void **state)
{
	(void)state;
	static const float exact[] = { 0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f,
	                               5.9604644775390625e-08f, 0.333251953125f };
	for (size_t i = 0; i < sizeof exact / sizeof *exact; i++) {
		assert_true(safetensors_f16_to_f32(safetensors_f32_to_f16(exact[i])) == exact[i]);
		assert_true(safetensors_bf16_to_f32(safetensors_f32_to_bf16(1.0f + (float)i)) == 1.0f + (float)i);
	}
	assert_int_equal(safetensors_f32_to_f16(1e6f), 0x7c00);          /* overflow: inf */
	assert_int_equal(safetensors_f32_to_f16(1.0f + 1.0f / 2048), 0x3c00);   /* tie to even */
	assert_int_equal(safetensors_f32_to_f16(1.0f + 3.0f / 2048), 0x3c02);
	assert_int_equal(safetensors_f32_to_bf16(1.0f + 1.0f / 256), 0x3f80);   /* tie to even */
	for (int i = 0; i < 10000; i++) {
		float x = (float)((i - 5000) * 0.37), y = safetensors_f16_to_f32(safetensors_f32_to_f16(x));
		assert_true(fabsf(y - x) <= fabsf(x) / 2048 + 1e-7f);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_half_rounding),
		cmocka_unit_test(test_memo_exact),
		cmocka_unit_test(test_exec_matches_plan),
		cmocka_unit_test(test_random_weights),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
