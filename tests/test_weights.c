/* test_weights.c - the loaders' table of tensors against the published
 * model: every name and shape of esmfold_v1 (tests/data/manifest_esmfold_v1.json,
 * 4535 tensors) is what the model asks for, nothing the model needs is
 * missing, nothing in the file is left unused but the ESM-2 contact head;
 * a wrong shape or a missing tensor is refused; and the full-size model can
 * be planned from the manifest alone; the checkpoint fixtures give the
 * safetensors fixtures' tensors under the same model names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "model/model.h"
#include "model/tokenizer.h"
#include "model/weights.h"

#define MANIFEST TEST_DATA "/manifest_esmfold_v1.json"

static const char *const contact_head[] = { "esm.contact_head.", "af2_to_esm", NULL };

static void test_manifest_accepted(void **state)
{
	(void)state;
	weights_t *w = weights_open_manifest(MANIFEST);
	model_t m;

	assert_non_null(w);
	const cfg_t *c = weights_cfg(w);
	assert_int_equal(c->lm_layers, 36);
	assert_int_equal(c->lm_dim, 2560);
	assert_int_equal(c->lm_heads, 40);
	assert_int_equal(c->trunk_blocks, 48);
	assert_int_equal(c->c_s, 1024);
	assert_int_equal(c->c_z, 128);
	assert_int_equal(c->sm_c_s, 384);
	assert_int_equal(c->sm_blocks, 8);
	assert_int_equal(model_load(&m, w, NULL), 0);
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
	static char path[] = "/tmp/esmbatch-manifest.XXXXXX";
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
	strcpy(path, "/tmp/esmbatch-manifest.XXXXXX");
	assert_true((fd = mkstemp(path)) >= 0);
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
	assert_true(model_load(&m, w, NULL) < 0);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_manifest_accepted),
		cmocka_unit_test(test_wrong_shape_refused),
		cmocka_unit_test(test_missing_refused),
		cmocka_unit_test(test_checkpoint_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
