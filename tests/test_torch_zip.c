/* test_torch_zip.c - the PyTorch zip checkpoint reader: the fixtures written by
 * tools/mk_torch_fixtures.py give tensors bit-identical to the safetensors
 * fixtures (after the same fp16 rounding where the checkpoint holds fp16), in
 * both naming schemes; the legacy format and every file of the hostile
 * catalogue (tests/data/hostile) are refused, no crash; a compressed storage
 * (archives written here with libzip) is inflated once for all the tensors
 * viewing it, and refused when it inflates past what they reach. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <zip.h>

#include "io/safetensors.h"
#include "io/torch_zip.h"
#include "xorshift.h"
#include "tmpdir.h"

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
		char p[200];
		unsigned char b[16] = { 0x80, 0x02 };
		int fd = mkstemp(tmpdir_template(p, sizeof p, "esmbatch-sniff"));
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

/* --- archives written here: pickles assembled opcode by opcode ---------- */

typedef struct {
	char  *p;
	size_t n;
} pk_buf_t;

static void pk_put(pk_buf_t *b, const void *p, size_t n)
{
	assert_non_null(b->p = realloc(b->p, b->n + n));
	memcpy(b->p + b->n, p, n);
	b->n += n;
}

static void pk_str(pk_buf_t *b, const char *s)   /* BINUNICODE */
{
	uint32_t n = (uint32_t)strlen(s);
	pk_put(b, "X", 1);
	pk_put(b, &n, 4);
	pk_put(b, s, n);
}

static void pk_global(pk_buf_t *b, const char *mod, const char *name)
{
	pk_put(b, "c", 1);
	pk_put(b, mod, strlen(mod));
	pk_put(b, "\n", 1);
	pk_put(b, name, strlen(name));
	pk_put(b, "\n", 1);
}

static void pk_i64(pk_buf_t *b, int64_t v)   /* LONG1 of 8 bytes */
{
	pk_put(b, "\x8a\x08", 2);
	pk_put(b, &v, 8);
}

/* key: _rebuild_tensor_v2(storage "0" of numel floats, offset, (size,), (1,), False, OrderedDict()) */
static void pk_tensor(pk_buf_t *b, const char *key, int64_t numel, int64_t offset, int64_t size)
{
	pk_str(b, key);
	pk_global(b, "torch._utils", "_rebuild_tensor_v2");
	pk_put(b, "((", 2);
	pk_str(b, "storage");
	pk_global(b, "torch", "FloatStorage");
	pk_str(b, "0");
	pk_str(b, "cpu");
	pk_i64(b, numel);
	pk_put(b, "tQ", 2);
	pk_i64(b, offset);
	pk_put(b, "(", 1);
	pk_i64(b, size);
	pk_put(b, "t(", 2);
	pk_i64(b, 1);
	pk_put(b, "t\x89", 2);
	pk_global(b, "collections", "OrderedDict");
	pk_put(b, ")RtR", 4);
}

/* path: a checkpoint of n tensors "wI" of size each, tensor I at offset
 * I x step of one storage of numel random 32-bit words (into *data,
 * malloc'ed) held deflated */
static void write_shared(const char *path, int n, int64_t size, int64_t step, int64_t numel, float **data)
{
	uint64_t seed = 20261202;
	pk_buf_t pk = { NULL, 0 };
	zip_t *za;
	zip_source_t *src;
	zip_int64_t idx;
	char key[16];
	int err;

	pk_put(&pk, "\x80\x02", 2);
	pk_global(&pk, "collections", "OrderedDict");
	pk_put(&pk, ")R(", 3);
	for (int i = 0; i < n; i++) {
		snprintf(key, sizeof key, "w%d", i);
		pk_tensor(&pk, key, numel, i * step, size);
	}
	pk_put(&pk, "u.", 2);
	/* random bits: incompressible, so the file holds more than the storage */
	assert_non_null(*data = malloc((size_t)numel * 4));
	for (int64_t k = 0; k < numel; k++) ((uint32_t *)*data)[k] = (uint32_t)(xs_next(&seed) >> 32);
	assert_non_null(za = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &err));
	assert_non_null(src = zip_source_buffer(za, pk.p, pk.n, 0));
	assert_true(zip_file_add(za, "archive/data.pkl", src, 0) >= 0);
	assert_non_null(src = zip_source_buffer(za, "little", 6, 0));
	assert_true(zip_file_add(za, "archive/byteorder", src, 0) >= 0);
	assert_non_null(src = zip_source_buffer(za, *data, (zip_uint64_t)numel * 4, 0));
	assert_true((idx = zip_file_add(za, "archive/data/0", src, 0)) >= 0);
	assert_int_equal(zip_set_file_compression(za, (zip_uint64_t)idx, ZIP_CM_DEFLATE, 9), 0);
	assert_int_equal(zip_close(za), 0);
	free(pk.p);
}

static void test_compressed_shared(void **state)
{
	(void)state;
	char path[200];
	int fd = mkstemp(tmpdir_template(path, sizeof path, "esmbatch-tzshared"));
	torch_zip_t *tz;
	float *data;

	assert_true(fd >= 0);
	close(fd);
	/* 64 tensors viewing the whole of one 16 KiB storage: one buffer */
	write_shared(path, 64, 4096, 0, 4096, &data);
	assert_non_null(tz = torch_zip_open(path));
	assert_int_equal(torch_zip_count(tz), 64);
	assert_memory_equal(torch_zip_at(tz, 0)->data, data, 4096 * 4);
	for (int i = 1; i < 64; i++)
		if (torch_zip_at(tz, i)->data != torch_zip_at(tz, 0)->data)
			fail_msg("tensor %d: the shared storage was inflated again", i);
	torch_zip_close(tz);
	free(data);
	/* two halves of one storage: one buffer, the second half 2048 floats in */
	write_shared(path, 2, 2048, 2048, 4096, &data);
	assert_non_null(tz = torch_zip_open(path));
	assert_ptr_equal(torch_zip_at(tz, 1)->data, (const float *)torch_zip_at(tz, 0)->data + 2048);
	assert_memory_equal(torch_zip_at(tz, 1)->data, data + 2048, 2048 * 4);
	torch_zip_close(tz);
	free(data);
	/* a storage inflating to more than its tensors reach: refused */
	write_shared(path, 2, 4, 4, 4096, &data);
	assert_null(torch_zip_open(path));
	free(data);
	unlink(path);
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
		cmocka_unit_test(test_compressed_shared),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
