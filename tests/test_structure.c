/* test_structure.c - golden test of the structure module and, on its output, the
 * lDDT head: for every fixture sequence with stored trunk outputs s_s and
 * s_z, run trunk2sm_s / trunk2sm_z, the structure module and lddt_head, and
 * compare frames, positions, angles, unnormalized_angles and states (where
 * stored), sidechain_frames, atom37_positions, the atom masks, plddt,
 * plddt_residue and mean_plddt within the fixtures' tolerance rule.  The
 * pass is planned first and then run in exactly the planned arena.  And
 * the structure module's copies to and from the backend: three, whatever
 * its block count. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "golden_json.h"
#include "xorshift.h"
#include "model/heads.h"
#include "protein/residue.h"
#include "model/structure.h"
#include "io/safetensors.h"
#include "model/weights.h"

typedef struct {
	const hparams_t *c;
	const structure_t  *sm;
	const heads_t *hd;
	lin_t t2s, t2z;          /* trunk.trunk2sm_s, trunk.trunk2sm_z */
	int L;
	const float *s_s, *s_z;  /* host inputs [L, c_s], [L, L, c_z] */
	const int *aatype;
	structure_out_t *out;
	float *plddt, *plddt_res;
} pass_t;

/* one planning or executing pass; returns the arena high-water mark */
static size_t run_pass(fwd_t *fx, const pass_t *p)
{
	const hparams_t *c = p->c;
	int L = p->L;

	tensor_t s_s = fwd_new2(fx, L, c->c_s), s_z = fwd_new3(fx, L, L, c->c_z);
	tensor_t s = fwd_new2(fx, L, c->sm_c_s), z = fwd_new3(fx, L, L, c->sm_c_z);
	fwd_set(fx, s_s, p->s_s);
	fwd_set(fx, s_z, p->s_z);
	op_linear(fx, s, s_s, &p->t2s, 0.0f);
	op_linear(fx, z, s_z, &p->t2z, 0.0f);
	structure_forward(fx, p->sm, c, s, z, p->aatype, p->out);
	heads_plddt(fx, p->hd, s, p->plddt, p->plddt_res);
	fwd_drop(fx, &z);
	fwd_drop(fx, &s);
	fwd_drop(fx, &s_z);
	fwd_drop(fx, &s_s);
	if (fx->err) fprintf(stderr, "pass: %s\n", fx->errmsg);
	return fx->place.high;
}

static void run_fixture(const char *fixture)
{
	char path[1024];
	be_t *be = be_cpu_init(1);
	weights_t *w;
	structure_t sm;
	heads_t hd;
	safetensors_t *exp;
	json_t *ej, *sj;
	size_t i;
	int failures = 0, nseq = 0;

	assert_non_null(be);
	snprintf(path, sizeof path, "%s/%s/weights.safetensors", TEST_DATA, fixture);
	assert_non_null(w = weights_open(path));
	const hparams_t *c = weights_cfg(w);
	assert_int_equal(structure_load(&sm, c, w, NULL), 0);   /* names and shapes only */
	structure_free(&sm);
	assert_int_equal(structure_load(&sm, c, w, be), 0);
	assert_int_equal(heads_load(&hd, c, w, be), 0);
	pass_t p = { .c = c, .sm = &sm, .hd = &hd };
	assert_int_equal(weights_lin(w, be, &p.t2s, c->sm_c_s, c->c_s, 1, "trunk.trunk2sm_s"), 0);
	assert_int_equal(weights_lin(w, be, &p.t2z, c->sm_c_z, c->c_z, 1, "trunk.trunk2sm_z"), 0);
	assert_int_equal(golden_open(fixture, &exp, &ej), 0);

	json_array_foreach(json_object_get(ej, "sequences"), i, sj) {
		const char *name = json_string_value(json_object_get(sj, "name"));
		int64_t ns, nz, L;
		float *s_s = golden_f32(exp, name, "s_s", &ns), *s_z = golden_f32(exp, name, "s_z", &nz);
		float *aa = golden_f32(exp, name, "aatype", &L);
		structure_out_t out;
		fwd_t fx;

		if (!s_s || !s_z) {   /* s_z is stored for L <= 40 only */
			free(s_s), free(s_z), free(aa);
			continue;
		}
		assert_non_null(aa);
		assert_true(ns == L * c->c_s && nz == L * L * c->c_z);
		int aatype[L];
		for (int k = 0; k < L; k++) aatype[k] = (int)aa[k];
		float *plddt = malloc(sizeof(float) * L * RESIDUE_NUM_ATOM37), *plddt_res = malloc(sizeof(float) * L);
		assert_true(plddt && plddt_res);
		assert_int_equal(structure_out_alloc(&out, c, (int)L), 0);
		p.L = (int)L, p.s_s = s_s, p.s_z = s_z, p.aatype = aatype, p.out = &out;
		p.plddt = plddt, p.plddt_res = plddt_res;

		fwd_plan_begin(&fx, be);
		size_t arena = run_pass(&fx, &p);
		assert_int_equal(fx.err, 0);
		fwd_end(&fx);
		assert_int_equal(fwd_exec_begin(&fx, be, arena), 0);
		run_pass(&fx, &p);
		assert_int_equal(fx.err, 0);
		fwd_end(&fx);

		int B = c->sm_blocks, A = c->sm_angles;
		failures += !golden_check(exp, sj, name, "frames", out.frames, (int64_t)B * L * 7);
		failures += !golden_check(exp, sj, name, "positions", out.positions,
		                          (int64_t)B * L * RESIDUE_NUM_ATOM14 * 3);
		failures += !golden_check(exp, sj, name, "angles", out.angles, (int64_t)B * L * A * 2);
		char key[256];
		snprintf(key, sizeof key, "%s/states", name);
		if (safetensors_find(exp, key)) {   /* the recycle-detail sequence only */
			failures += !golden_check(exp, sj, name, "unnormalized_angles", out.unnorm_angles,
			                          (int64_t)B * L * A * 2);
			failures += !golden_check(exp, sj, name, "states", out.states,
			                          (int64_t)B * L * c->sm_c_s);
		}
		failures += !golden_check(exp, sj, name, "sidechain_frames", out.sidechain,
		                          L * RESIDUE_NUM_GROUPS * 16);
		failures += !golden_check(exp, sj, name, "atom37_positions", out.atom37, L * RESIDUE_NUM_ATOM37 * 3);
		failures += !golden_check(exp, sj, name, "atom14_mask", out.atom14_mask, L * RESIDUE_NUM_ATOM14);
		failures += !golden_check(exp, sj, name, "atom37_mask", out.atom37_mask, L * RESIDUE_NUM_ATOM37);
		failures += !golden_check(exp, sj, name, "plddt", plddt, L * RESIDUE_NUM_ATOM37);
		failures += !golden_check(exp, sj, name, "plddt_residue", plddt_res, L);
		/* none of these sequences has a ':' linker, so atom37_mask is unmasked */
		float mean = (float)heads_mean_plddt((int)L, plddt, out.atom37_mask);
		failures += !golden_check(exp, sj, name, "mean_plddt", &mean, 1);
		nseq++;
		structure_out_free(&out);
		free(plddt), free(plddt_res);
		free(s_s), free(s_z), free(aa);
	}
	assert_true(nseq >= 3);
	assert_int_equal(failures, 0);
	json_decref(ej);
	safetensors_close(exp);
	structure_free(&sm);
	weights_close(w);
	be_free(be);
}

/* the CPU backend with its host<->backend copies and synchronisations
 * counted (the op layer's only way to the host) */
static be_t *counted_cpu;
static long n_upload, n_download, n_sync;

static int counted_upload(be_t *be, void *dst, const void *src, size_t n)
{
	n_upload++;
	return counted_cpu->upload(counted_cpu, dst, src, n);
}

static int counted_download(be_t *be, void *dst, const void *src, size_t n)
{
	n_download++;
	return counted_cpu->download(counted_cpu, dst, src, n);
}

static int counted_sync(be_t *be)
{
	n_sync++;
	return counted_cpu->sync(counted_cpu);
}

/* No host round-trips inside the structure module: a pass of 1, 2 and 8
 * blocks (tiny_a's weights, L 9, random inputs) makes no upload and no
 * synchronisation and exactly three downloads (every block's frames,
 * unnormalised angles and states, after the last block), whatever the
 * block count.  The host-side geometry of old took 11 copies per block. */
static void test_sm_transfers(void **state)
{
	char path[1024];
	be_t cb;
	weights_t *w;
	structure_t sm;
	const int L = 9, blocks[] = { 1, 2, 8 };
	int aatype[9];
	uint64_t r = 0x2545f4914f6cdd1dull;

	(void)state;
	assert_non_null(counted_cpu = be_cpu_init(1));
	cb = *counted_cpu;
	cb.upload = counted_upload;
	cb.download = counted_download;
	cb.sync = counted_sync;
	snprintf(path, sizeof path, "%s/tiny_a/weights.safetensors", TEST_DATA);
	assert_non_null(w = weights_open(path));
	hparams_t c = *weights_cfg(w);
	assert_int_equal(structure_load(&sm, &c, w, &cb), 0);
	float *s0 = malloc(sizeof(float) * L * c.sm_c_s), *z0 = malloc(sizeof(float) * L * L * c.sm_c_z);
	assert_true(s0 && z0);
	for (int64_t i = 0; i < (int64_t)L * L * c.sm_c_z; i++) {
		float u = xs_unif(&r);
		z0[i] = u;
		if (i < (int64_t)L * c.sm_c_s) s0[i] = u;
		if (i < L) aatype[i] = (int)(r >> 59) % 20;
	}
	for (size_t b = 0; b < sizeof blocks / sizeof *blocks; b++) {
		structure_out_t out;
		fwd_t fx;
		size_t arena = 0;

		c.sm_blocks = blocks[b];
		assert_int_equal(structure_out_alloc(&out, &c, L), 0);
		for (int exec = 0; exec < 2; exec++) {
			if (exec) assert_int_equal(fwd_exec_begin(&fx, &cb, arena), 0);
			else fwd_plan_begin(&fx, &cb);
			tensor_t s = fwd_new2(&fx, L, c.sm_c_s), z = fwd_new3(&fx, L, L, c.sm_c_z);
			fwd_set(&fx, s, s0);
			fwd_set(&fx, z, z0);
			n_upload = n_download = n_sync = 0;
			structure_forward(&fx, &sm, &c, s, z, aatype, &out);
			assert_int_equal(fx.err, 0);
			if (exec) {
				printf("  %d blocks: %ld uploads, %ld downloads, %ld syncs\n", blocks[b], n_upload,
				       n_download, n_sync);
				assert_int_equal(n_upload, 0);
				assert_int_equal(n_download, 3);
				assert_int_equal(n_sync, 0);
			}
			fwd_drop(&fx, &z);
			fwd_drop(&fx, &s);
			arena = fx.place.high;
			fwd_end(&fx);
		}
		structure_out_free(&out);
	}
	free(s0), free(z0);
	structure_free(&sm);
	weights_close(w);
	be_free(counted_cpu);
}

static void test_sm_tiny_a(void **state) { (void)state; run_fixture("tiny_a"); }
static void test_sm_tiny_b(void **state) { (void)state; run_fixture("tiny_b"); }

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sm_tiny_a),
		cmocka_unit_test(test_sm_tiny_b),
		cmocka_unit_test(test_sm_transfers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
