/* test_torch_zip.c - the PyTorch zip checkpoint reader: the fixtures written by
 * tools/mk_torch_fixtures.py give tensors bit-identical to the safetensors
 * fixtures (after the same fp16 rounding where the checkpoint holds fp16), in
 * both naming schemes; the legacy format and every file of the hostile
 * catalogue (tests/data/hostile) are refused, no crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "io/safetensors.h"
#include "io/torch_zip.h"

/* every tensor of the checkpoint equals the safetensors tensor of the same
 * name (with prefix prepended): same dtype and bytes, or, where the
 * checkpoint holds fp16, the fp16 rounding of the fp32 value */
static int compare(const char *tiny, const char *file, const char *prefix, int expect_f16)
{
	char sp[512], tp[512], name[512];
	safetensors_t *st;
	torch_zip_t *tz;
	int nf16 = 0;

	snprintf(sp, sizeof sp, "%s/%s/weights.safetensors", TEST_DATA, tiny);
	snprintf(tp, sizeof tp, "%s/%s/%s", TEST_DATA, tiny, file);
	assert_non_null(st = safetensors_open(sp));
	assert_non_null(tz = torch_zip_open(tp));
	assert_true(torch_zip_count(tz) > 0);
	for (int i = 0; i < torch_zip_count(tz); i++) {
		const safetensors_tensor_t *t = torch_zip_at(tz, i), *r;
		snprintf(name, sizeof name, "%s%s", prefix, t->name);
		r = safetensors_find(st, name);
		if (!r) fail_msg("%s: '%s' not in the safetensors fixture", file, name);
		assert_ptr_equal(torch_zip_find(tz, t->name), t);
		assert_int_equal(t->nd, r->nd);
		for (int d = 0; d < t->nd; d++) assert_int_equal(t->shape[d], r->shape[d]);
		assert_int_equal(t->numel, r->numel);
		if (t->dtype == r->dtype) {
			assert_int_equal(t->nbytes, r->nbytes);
			assert_memory_equal(t->data, r->data, t->nbytes);
		} else {
			const float *rf = r->data;
			const uint16_t *h = t->data;
			assert_int_equal(r->dtype, SAFETENSORS_F32);
			assert_int_equal(t->dtype, SAFETENSORS_F16);
			for (int64_t k = 0; k < t->numel; k++) assert_int_equal(h[k], safetensors_f32_to_f16(rf[k]));
			nf16++;
		}
	}
	assert_true(expect_f16 ? nf16 > 0 : nf16 == 0);
	torch_zip_close(tz);
	safetensors_close(st);
	return 0;
}

static void test_hf_fp32(void **state)
{
	(void)state;
	char sp[512];
	safetensors_t *st;
	torch_zip_t *tz;

	compare("tiny_a", "pytorch_model.bin", "", 0);
	/* all of it: as many tensors as the safetensors file */
	snprintf(sp, sizeof sp, "%s/tiny_a/weights.safetensors", TEST_DATA);
	assert_non_null(st = safetensors_open(sp));
	assert_non_null(tz = torch_zip_open(TEST_DATA "/tiny_a/pytorch_model.bin"));
	assert_int_equal(torch_zip_count(tz), safetensors_count(st));
	assert_null(torch_zip_find(tz, "no.such.tensor"));
	assert_null(torch_zip_cfg_json(tz));
	torch_zip_close(tz);
	safetensors_close(st);
}

static void test_hf_fp16(void **state)
{
	(void)state;
	compare("tiny_a", "pytorch_model_fp16.bin", "", 1);
	compare("tiny_b", "pytorch_model_fp16.bin", "", 1);
}

/* fair-esm's folding file: HF names but no esm.*, and its cfg */
static void test_fair_esm_fold(void **state)
{
	(void)state;
	torch_zip_t *tz;

	compare("tiny_a", "esmfold.pt", "", 0);
	compare("tiny_b", "esmfold.pt", "", 0);
	assert_non_null(tz = torch_zip_open(TEST_DATA "/tiny_a/esmfold.pt"));
	assert_null(torch_zip_find(tz, "esm.embeddings.word_embeddings.weight"));
	assert_non_null(torch_zip_cfg_json(tz));
	assert_non_null(strstr(torch_zip_cfg_json(tz), "\"sequence_state_dim\":64"));
	torch_zip_close(tz);
}

/* fair-esm's language model file: its own names (the mapping is weights.c's) */
static void test_fair_esm_lm(void **state)
{
	(void)state;
	torch_zip_t *tz;
	const safetensors_tensor_t *t;

	assert_non_null(tz = torch_zip_open(TEST_DATA "/tiny_a/esm2.pt"));
	assert_non_null(t = torch_zip_find(tz, "encoder.sentence_encoder.layers.0.self_attn.q_proj.weight"));
	assert_int_equal(t->dtype, SAFETENSORS_F32);
	torch_zip_close(tz);
	assert_non_null(tz = torch_zip_open(TEST_DATA "/tiny_b/esm2.pt"));
	assert_non_null(t = torch_zip_find(tz, "layers.1.fc1.weight"));
	assert_int_equal(t->dtype, SAFETENSORS_F16);
	torch_zip_close(tz);
}

static void test_sniff(void **state)
{
	(void)state;
	assert_int_equal(torch_zip_sniff(TEST_DATA "/tiny_a/pytorch_model.bin"), 1);
	assert_int_equal(torch_zip_sniff(TEST_DATA "/legacy.pt"), 1);
	assert_int_equal(torch_zip_sniff(TEST_DATA "/tiny_a/weights.safetensors"), 0);
	assert_int_equal(torch_zip_sniff(TEST_DATA "/no/such/file"), 0);
	/* a safetensors header of 640 bytes starts 0x80 0x02 too: not a torch file */
	{
		char p[] = "/tmp/esmbatch-sniff.XXXXXX";
		unsigned char b[16] = { 0x80, 0x02 };
		int fd = mkstemp(p);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, b, sizeof b), (int)sizeof b);
		close(fd);
		assert_int_equal(torch_zip_sniff(p), 0);
		unlink(p);
	}
}

static void test_refused(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"legacy.pt", "hostile/truncated.pt", "hostile/offset_past.pt", "hostile/os_system.pt",
		"hostile/other_class.pt", "hostile/huge_size.pt", "hostile/deep.pt", "hostile/bomb.pt",
		"tiny_a/weights.safetensors", "tiny_a/config.json",
	};
	char p[512];
	torch_zip_t *tz;

	assert_non_null(tz = torch_zip_open(TEST_DATA "/hostile/good.pt"));
	assert_int_equal(torch_zip_count(tz), 1);
	torch_zip_close(tz);
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		snprintf(p, sizeof p, "%s/%s", TEST_DATA, bad[i]);
		if (torch_zip_open(p)) fail_msg("%s was accepted", bad[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hf_fp32),
		cmocka_unit_test(test_hf_fp16),
		cmocka_unit_test(test_fair_esm_fold),
		cmocka_unit_test(test_fair_esm_lm),
		cmocka_unit_test(test_sniff),
		cmocka_unit_test(test_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
