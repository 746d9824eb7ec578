/* test_devmem.c - the whole model on memory the host cannot touch.
 *
 * Every sequence of both public fixtures is folded on the debug backend
 * (be_dbg.h: the CPU backend's arithmetic on a PROT_NONE region that only
 * its own entries open), unchunked with --dump-tensors' intermediates and
 * chunked by 16 (no divisor of the longer lengths), and on the plain CPU
 * backend.  Any host dereference of backend memory by the model code is a
 * SIGSEGV here; any host array handed to an op as backend memory, backend
 * memory handed over as a host buffer, or overlapping output is a refused
 * op.  The folds must make no such mistake, equal the CPU folds bit for
 * bit, and meet the fixtures' tolerance.  Two more tests show that the
 * backend does catch both kinds.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "be_dbg.h"
#include "golden_json.h"
#include "model/model.h"
#include "compute/ops.h"
#include "io/safetensors.h"
#include "model/tokenizer.h"
#include "model/weights.h"

#define DBG_REGION ((size_t)4 << 30)   /* address space; pages committed when used */

/* a fold's host outputs are the same bits */
static int same_out(const char *what, const model_out_t *a, const model_out_t *b)
{
	size_t L = (size_t)a->L;
	int ok = a->L == b->L &&
	         !memcmp(a->atom37, b->atom37, sizeof(float) * L * 37 * 3) &&
	         !memcmp(a->atom37_mask, b->atom37_mask, sizeof(float) * L * 37) &&
	         !memcmp(a->plddt, b->plddt, sizeof(float) * L * 37) &&
	         !memcmp(a->pae, b->pae, sizeof(float) * L * L) &&
	         a->ptm == b->ptm && a->mean_plddt == b->mean_plddt && a->max_pae == b->max_pae;
	if (!ok) fprintf(stderr, "%s: the debug backend's fold differs from the CPU's\n", what);
	return ok;
}

static int fold(const model_t *m, const tok_t *t, int chunk, safetensors_writer_t *dump, const char *name,
                model_out_t *out)
{
	model_dump_t d = { .w = dump, .name = name };
	model_run_t r = { .chunk = chunk, .emit = dump ? model_dump_emit : NULL, .emit_ctx = &d };
	char err[256] = "";
	int rc = model_fold(m, t, &r, NULL, out, err, sizeof err);
	if (rc < 0) fprintf(stderr, "%s on %s (chunk %d): %s\n", name, m->be->name, chunk, err);
	return rc;
}

static void run_fixture(const char *fixture)
{
	char path[1024];
	be_t *cpu = be_cpu_init(1), *dbg = be_dbg_init(1, DBG_REGION);
	model_t mc, md;
	weights_t *w;
	safetensors_t *exp;
	json_t *ej, *sj;
	size_t i;
	int failures = 0, nseq = 0;

	assert_non_null(cpu);
	assert_non_null(dbg);
	snprintf(path, sizeof path, "%s/%s/weights.safetensors", TEST_DATA, fixture);
	assert_non_null(w = weights_open(path));
	assert_int_equal(model_load(&mc, w, cpu, 0), 0);
	assert_int_equal(model_load(&md, w, dbg, 0), 0);
	assert_int_equal(golden_open(fixture, &exp, &ej), 0);

	json_array_foreach(json_object_get(ej, "sequences"), i, sj) {
		const char *name = json_string_value(json_object_get(sj, "name"));
		char *seq = golden_sequence(json_string_value(json_object_get(sj, "sequence")));
		safetensors_writer_t *dump = safetensors_writer_init();
		tok_t t;

		assert_non_null(dump);
		assert_int_equal(tok_encode(&t, seq, mc.cfg), 0);
		int64_t L = t.L;
		for (int chunk = 0; chunk <= 16; chunk += 16) {
			model_out_t oc, od;
			assert_int_equal(fold(&mc, &t, chunk, NULL, name, &oc), 0);
			assert_int_equal(fold(&md, &t, chunk, chunk ? NULL : dump, name, &od), 0);
			failures += !same_out(name, &oc, &od);
			if (chunk == 0) {
				failures += !golden_check(exp, sj, name, "atom37_positions", od.atom37, L * 37 * 3);
				failures += !golden_check(exp, sj, name, "plddt", od.plddt, L * 37);
				failures += !golden_check(exp, sj, name, "predicted_aligned_error", od.pae, L * L);
				failures += !golden_check(exp, sj, name, "ptm", &od.ptm, 1);
				failures += !golden_check(exp, sj, name, "mean_plddt", &od.mean_plddt, 1);
			}
			model_out_free(&oc);
			model_out_free(&od);
		}
		safetensors_writer_free(dump);
		tok_free(&t);
		free(seq);
		nseq++;
	}
	assert_true(nseq >= 5);
	assert_int_equal(failures, 0);
	assert_int_equal(be_dbg_violations(dbg), 0);
	json_decref(ej);
	safetensors_close(exp);
	model_free(&md);
	model_free(&mc);
	weights_close(w);
	be_free(dbg);
	be_free(cpu);
}

static void test_devmem_tiny_a(void **state) { (void)state; run_fixture("tiny_a"); }
static void test_devmem_tiny_b(void **state) { (void)state; run_fixture("tiny_b"); }

/* a host read of backend memory outside the backend's entries is a SIGSEGV */
static void test_devmem_host_read_faults(void **state)
{
	be_t *dbg = be_dbg_init(1, (size_t)1 << 20);
	float one = 1.0f, *p;
	pid_t pid;
	int st;

	(void)state;
	assert_non_null(dbg);
	assert_int_equal(dbg->alloc(dbg, sizeof one, (void **)&p), 0);
	assert_int_equal(dbg->upload(dbg, p, &one, sizeof one), 0);
	assert_true((pid = fork()) >= 0);
	if (pid == 0) {
		signal(SIGSEGV, SIG_DFL);   /* not cmocka's handler */
		volatile float x = *p;   /* the mistake the backend exists to catch */
		_exit(x == 1.0f ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
	dbg->free(dbg, p);
	be_free(dbg);
}

/* host arrays as weights, backend memory as gather's indices, a freed
 * tensor and an overlapping output are refused, each counted */
static void test_devmem_contract(void **state)
{
	be_t *dbg = be_dbg_init(1, (size_t)1 << 20);
	float host_w[4 * 4] = { 0 }, *dev, *stale;
	int32_t idx[2] = { 0, 1 };
	fwd_t fx;

	(void)state;
	assert_non_null(dbg);
	assert_int_equal(fwd_exec_begin(&fx, dbg, 1024), 0);
	tensor_t x = fwd_new2(&fx, 2, 4), y = fwd_new2(&fx, 2, 4);
	op_fill(&fx, x, 1.0f);
	op_linear(&fx, y, x, &(lin_t){ .w = host_w, .out = 4, .in = 4 }, 0.0f);
	assert_int_equal(fx.err, -EFAULT);
	assert_int_equal(be_dbg_violations(dbg), 1);
	fwd_end(&fx);

	assert_int_equal(dbg->alloc(dbg, sizeof idx, (void **)&dev), 0);
	assert_int_equal(dbg->alloc(dbg, 8 * sizeof(float), (void **)&stale), 0);
	assert_int_equal(dbg->gather(dbg, &(be_gather_t){
		.y = stale, .table = dev, .idx = (const int32_t *)dev, .rows = 2, .d = 4,
		.scale = 1.0f,
	}), -EFAULT);
	assert_int_equal(dbg->transpose(dbg, &(be_transpose_t){
		.y = stale + 1, .x = stale, .A = 1, .B = 1, .C = 4,
	}), -EFAULT);
	dbg->free(dbg, stale);
	assert_int_equal(dbg->fill(dbg, &(be_fill_t){ .x = stale, .n = 8, .value = 0.0f }), -EFAULT);
	assert_int_equal(dbg->gather(dbg, &(be_gather_t){
		.y = dev, .table = dev, .idx = idx, .rows = 2, .d = 1, .scale = 1.0f,
	}), -EFAULT);
	assert_int_equal(be_dbg_violations(dbg), 5);
	dbg->free(dbg, dev);
	be_free(dbg);
}

/* every op of the list (BE_OPS) that the CPU has, the debug backend has
 * too, as a checking wrapper of its own, not the CPU's entry; be_supports
 * answers the same for both (the debug backend is built from the list, so
 * an op without a check does not compile) */
static void test_devmem_wraps_every_op(void **state)
{
	be_t *cpu = be_cpu_init(1), *dbg = be_dbg_init(1, (size_t)1 << 20);

	(void)state;
	assert_non_null(cpu);
	assert_non_null(dbg);
#define WRAPS_CASE(OP, slot, params)                                         \
	assert_int_equal(be_supports(dbg, BE_OP_##OP), be_supports(cpu, BE_OP_##OP)); \
	assert_int_equal(be_supports(cpu, BE_OP_##OP), 1);                   \
	assert_true(dbg->slot != cpu->slot);
	BE_OPS(WRAPS_CASE)
#undef WRAPS_CASE
	assert_int_equal(be_supports(dbg, BE_OP_MEM_INFO), 0);
	assert_int_equal(be_supports(dbg, BE_OP_WORKER), 0);
	be_free(dbg);
	be_free(cpu);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_devmem_host_read_faults),
		cmocka_unit_test(test_devmem_contract),
		cmocka_unit_test(test_devmem_tiny_a),
		cmocka_unit_test(test_devmem_tiny_b),
		cmocka_unit_test(test_devmem_wraps_every_op),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
