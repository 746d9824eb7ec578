/* test_weights.c - the loaders' table of tensors against the published
 * model: every name and shape of esmfold_v1 (tests/data/manifest_esmfold_v1.json,
 * 4535 tensors) is what the model asks for, nothing the model needs is
 * missing, nothing in the file is left unused but the ESM-2 contact head;
 * a wrong shape or a missing tensor is refused; and the full-size model can
 * be planned from the manifest alone; the checkpoint fixtures give the
 * safetensors fixtures' tensors under the same model names; a NaN or an
 * infinity in any tensor refuses the load with one line naming it. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "backend/backend.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "model/weights.h"
#include "tmpdir.h"

#define MANIFEST TEST_DATA "/manifest_esmfold_v1.json"

static const char *const contact_head[] = { "esm.contact_head.", "af2_to_esm", NULL };

static void test_manifest_accepted(void **state)
{
	(void)state;
	weights_t *w = weights_open_manifest(MANIFEST);
	model_t m;

	assert_non_null(w);
	const hparams_t *c = weights_cfg(w);
	assert_int_equal(c->lm_layers, 36);
	assert_int_equal(c->lm_dim, 2560);
	assert_int_equal(c->lm_heads, 40);
	assert_int_equal(c->trunk_blocks, 48);
	assert_int_equal(c->c_s, 1024);
	assert_int_equal(c->c_z, 128);
	assert_int_equal(c->sm_c_s, 384);
	assert_int_equal(c->sm_blocks, 8);
	assert_int_equal(model_load(&m, w, NULL, 0), 0);
	assert_int_equal(weights_unused(w, contact_head), 0);

	/* planning needs shapes only: the full model at L = 256, chunk 64 */
	tok_t t;
	char seq[257];
	memset(seq, 'A', 256);
	seq[256] = 0;
	assert_int_equal(tok_encode(&t, seq, c), 0);
	model_run_t run = { .chunk = 64 };
	model_plan_t p;
	assert_int_equal(model_plan(&m, &t, &run, &p), 0);
	/* at least z [L, L, c_z] and its structure-module copy, at most 8 GiB */
	assert_true(p.arena >= 2 * (size_t)256 * 256 * 128 * 4);
	assert_true(p.arena < ((size_t)8 << 30));
	assert_true(p.peak_live <= p.arena);
	tok_free(&t);
	model_free(&m);
	weights_close(w);
}

/* a copy of the manifest with one tensor's shape changed, or removed */
static char *edited_manifest(const char *name, int remove)
{
	static char path[200];
	json_error_t err;
	json_t *root = json_load_file(MANIFEST, 0, &err), *e;
	size_t i;
	int fd;

	assert_non_null(root);
	json_t *list = json_object_get(root, "tensors");
	json_array_foreach(list, i, e) {
		if (strcmp(json_string_value(json_object_get(e, "name")), name)) continue;
		if (remove) {
			json_array_remove(list, i);
		} else {
			json_t *shape = json_object_get(e, "shape");
			json_array_set_new(shape, 0, json_integer(json_integer_value(json_array_get(shape, 0)) + 1));
		}
		break;
	}
	assert_true((fd = mkstemp(tmpdir_template(path, sizeof path, "esmbatch-manifest"))) >= 0);
	close(fd);
	assert_int_equal(json_dump_file(root, path, 0), 0);
	json_decref(root);
	return path;
}

static void refused(const char *name, int remove)
{
	char *path = edited_manifest(name, remove);
	weights_t *w = weights_open_manifest(path);
	model_t m;

	assert_non_null(w);
	assert_true(model_load(&m, w, NULL, 0) < 0);
	weights_close(w);
	unlink(path);
}

static void test_wrong_shape_refused(void **state)
{
	(void)state;
	refused("trunk.blocks.47.tri_att_end.mha.linear_q.weight", 0);
	refused("esm.encoder.layer.35.output.dense.weight", 0);
	refused("trunk.structure_module.ipa.linear_out.weight", 0);
}

static void test_missing_refused(void **state)
{
	(void)state;
	refused("lddt_head.3.bias", 1);
	refused("esm_s_combine", 1);
}

/* the same tensors under the same model names, from safetensors, from HF's
 * pytorch_model.bin and from fair-esm's pair (whose names the table in
 * weights.c maps; fair-esm's masked-LM head is the one extra) */
static void test_checkpoint_names(void **state)
{
	(void)state;
	static const char *const files[] = {
		TEST_DATA "/tiny_a/pytorch_model.bin",
		TEST_DATA "/tiny_a/esmfold.pt," TEST_DATA "/tiny_a/esm2.pt",
		TEST_DATA "/tiny_b/esmfold.pt," TEST_DATA "/tiny_b/esm2.pt",
	};
	for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
		const char *tiny = strstr(files[f], "tiny_a") ? "tiny_a" : "tiny_b";
		char sp[512];
		weights_t *ws, *wc;
		int j = 0, lm_half = strstr(files[f], "tiny_b") != NULL;

		snprintf(sp, sizeof sp, "%s/%s/weights.safetensors", TEST_DATA, tiny);
		assert_non_null(ws = weights_open(sp));
		assert_non_null(wc = weights_open(files[f]));
		assert_int_equal(weights_cfg(wc)->lm_layers, weights_cfg(ws)->lm_layers);
		assert_int_equal(weights_cfg(wc)->c_z, weights_cfg(ws)->c_z);
		for (int i = 0; i < weights_tensor_count(ws); i++) {
			const char *n, *m;
			const safetensors_tensor_t *a = weights_tensor(ws, i, &n), *b;
			b = weights_tensor(wc, j++, &m);
			if (!strcmp(m, "esm.lm_head.bias")) b = weights_tensor(wc, j++, &m);
			assert_string_equal(n, m);
			assert_int_equal(a->nd, b->nd);
			assert_int_equal(a->numel, b->numel);
			if (a->dtype == b->dtype) {
				assert_memory_equal(a->data, b->data, a->nbytes);
			} else {
				/* tiny_b's fair-esm language model is stored in fp16 */
				assert_true(lm_half && !strncmp(n, "esm.", 4) && b->dtype == SAFETENSORS_F16);
				for (int64_t k = 0; k < a->numel; k++)
					assert_int_equal(((const uint16_t *)b->data)[k],
					                 safetensors_f32_to_f16(((const float *)a->data)[k]));
			}
		}
		if (j < weights_tensor_count(wc)) {
			const char *m;
			weights_tensor(wc, j, &m);
			assert_string_equal(m, "esm.lm_head.bias");
			j++;
		}
		assert_int_equal(j, weights_tensor_count(wc));
		weights_close(wc);
		weights_close(ws);
	}
}

/* DIR/weights.safetensors: tiny_a's with element 0 of tensor NAME set to v,
 * and its config.json beside it; DIR is made here (removed by the caller) */
static void poisoned_copy(char *dir, const char *name, float v)
{
	char path[512];
	FILE *in = fopen(TEST_DATA "/tiny_a/weights.safetensors", "rb"), *out;
	unsigned char len8[8];
	uint64_t hlen = 0;
	long size;
	char *buf;

	assert_non_null(mkdtemp(dir));
	assert_non_null(in);
	assert_int_equal(fseek(in, 0, SEEK_END), 0);
	size = ftell(in);
	rewind(in);
	assert_non_null(buf = malloc(size));
	assert_int_equal(fread(buf, 1, size, in), (size_t)size);
	fclose(in);
	memcpy(len8, buf, 8);
	for (int i = 7; i >= 0; i--) hlen = hlen << 8 | len8[i];
	json_t *h = json_loadb(buf + 8, hlen, 0, NULL), *off;
	assert_non_null(h);
	assert_non_null(off = json_object_get(json_object_get(h, name), "data_offsets"));
	assert_string_equal(json_string_value(json_object_get(json_object_get(h, name), "dtype")), "F32");
	memcpy(buf + 8 + hlen + json_integer_value(json_array_get(off, 0)), &v, sizeof v);
	json_decref(h);
	snprintf(path, sizeof path, "%s/weights.safetensors", dir);
	assert_non_null(out = fopen(path, "wb"));
	assert_int_equal(fwrite(buf, 1, size, out), (size_t)size);
	assert_int_equal(fclose(out), 0);
	free(buf);
	snprintf(path, sizeof path, "cp %s/tiny_a/config.json %s/", TEST_DATA, dir);
	assert_int_equal(system(path), 0);
}

/* loading DIR/weights.safetensors into the CPU backend fails, and what it
 * logs is one line naming the tensor */
static void load_refused(const char *dir, const char *name, const char *what)
{
	char path[512], log[512] = "", want[256];
	FILE *cap = tmpfile();
	int saved = dup(2);
	weights_t *w;
	be_t *be = be_cpu_init(1);
	model_t m;

	assert_non_null(cap);
	assert_non_null(be);
	snprintf(path, sizeof path, "%s/weights.safetensors", dir);
	assert_non_null(w = weights_open(path));
	fflush(stderr);
	dup2(fileno(cap), 2);
	int rc = model_load(&m, w, be, 0);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(cap);
	size_t n = fread(log, 1, sizeof log - 1, cap);
	log[n] = 0;
	fclose(cap);
	assert_true(rc < 0);
	snprintf(want, sizeof want, "tensor '%s' holds %s at element 0", name, what);
	assert_non_null(strstr(log, want));
	assert_ptr_equal(strchr(log, '\n'), log + n - 1);   /* one line */
	weights_close(w);
	be_free(be);
	snprintf(path, sizeof path, "rm -r %s", dir);
	assert_int_equal(system(path), 0);
}

static void test_nonfinite_refused(void **state)
{
	(void)state;
	char a[200], b[200];

	assert_non_null(tmpdir_template(a, sizeof a, "esmbatch-nan"));
	assert_non_null(tmpdir_template(b, sizeof b, "esmbatch-inf"));

	poisoned_copy(a, "ptm_head.weight", NAN);
	load_refused(a, "ptm_head.weight", "NaN");
	poisoned_copy(b, "esm.encoder.layer.0.intermediate.dense.bias", INFINITY);
	load_refused(b, "esm.encoder.layer.0.intermediate.dense.bias", "an infinity");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_manifest_accepted),
		cmocka_unit_test(test_wrong_shape_refused),
		cmocka_unit_test(test_missing_refused),
		cmocka_unit_test(test_checkpoint_names),
		cmocka_unit_test(test_nonfinite_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
