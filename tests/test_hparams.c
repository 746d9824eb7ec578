/* test_hparams.c - config.json ranges: the published esmfold_v1 config and
 * the fixtures' configs are accepted; a value outside its key's range
 * (zero heads or head width, 2^31, 10^9 layers / blocks / recycles, a
 * negative count, an epsilon of 0, an inf beyond float) is refused with
 * one error line naming the key, and nothing wraps or divides by zero. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "model/hparams.h"

#define MANIFEST TEST_DATA "/manifest_esmfold_v1.json"

/* the "config" object of the published model's manifest (owned by caller) */
static json_t *published(void)
{
	json_error_t err;
	json_t *m = json_load_file(MANIFEST, 0, &err), *c;

	assert_non_null(m);
	c = json_deep_copy(json_object_get(m, "config"));
	json_decref(m);
	assert_non_null(c);
	return c;
}

/* hparams_parse of root with stderr captured into log (NUL-terminated) */
static int parse_logged(hparams_t *c, json_t *root, char *log, size_t n)
{
	char *text = json_dumps(root, 0);
	FILE *tmp = tmpfile();
	int saved = dup(2), rc;
	size_t got;

	assert_non_null(text);
	assert_non_null(tmp);
	fflush(stderr);
	dup2(fileno(tmp), 2);
	rc = hparams_parse(c, text, "cfg.json");
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	got = fread(log, 1, n - 1, tmp);
	log[got] = 0;
	fclose(tmp);
	free(text);
	return rc;
}

static int count_lines(const char *s)
{
	int n = 0;
	for (; *s; s++) n += *s == '\n';
	return n;
}

/* set the value at a dotted path below root (the path exists) */
static void set_at(json_t *root, const char *path, json_t *val)
{
	char key[128];
	json_t *v = root;

	for (;;) {
		size_t n = strcspn(path, ".");
		assert_true(n < sizeof key);
		memcpy(key, path, n);
		key[n] = 0;
		if (!path[n]) break;
		v = json_object_get(v, key);
		assert_non_null(v);
		path += n + 1;
	}
	assert_non_null(json_object_get(v, key));
	assert_int_equal(json_object_set_new(v, key, val), 0);
}

static void test_published_accepted(void **state)
{
	(void)state;
	json_t *root = published();
	char log[4096];
	hparams_t c;

	assert_int_equal(parse_logged(&c, root, log, sizeof log), 0);
	assert_string_equal(log, "");
	assert_int_equal(c.lm_layers, 36);
	assert_int_equal(c.max_recycles, 4);
	assert_int_equal(c.sm_heads, 12);
	json_decref(root);

	const char *files[] = { TEST_DATA "/tiny_a/config.json", TEST_DATA "/tiny_b/config.json",
	                        TEST_DATA "/../../data/demo/config.json" };
	for (size_t i = 0; i < sizeof files / sizeof *files; i++)
		assert_int_equal(hparams_load(&c, files[i]), 0);
}

#define T "esmfold_config.trunk."
#define SM "esmfold_config.trunk.structure_module."

static const struct { const char *key; long long v; } bad_int[] = {
	{ "num_attention_heads", 0 },           /* SIGFPE before */
	{ T "sequence_head_width", 0 },
	{ T "pairwise_head_width", 0 },
	{ SM "num_heads_ipa", 0 },
	{ "hidden_size", 2147483648ll },         /* wrapped to a negative int before */
	{ "intermediate_size", 4294967296ll + 10240 },   /* wrapped to 10240 before */
	{ T "max_recycles", 1000000000 },        /* ran forever before */
	{ T "num_blocks", 1000000000 },
	{ SM "num_blocks", 1000000000 },
	{ "num_hidden_layers", 1000000000 },
	{ "num_hidden_layers", -1 },
	{ "num_hidden_layers", 0 },
	{ "vocab_size", 65 },
	{ "mask_token_id", -1 },
	{ T "position_bins", -3 },
	{ SM "num_angles", 8 },
	{ SM "num_resnet_blocks", -1 },
	{ SM "num_qk_points", 0 },
};

static const struct { const char *key; double v; } bad_real[] = {
	{ "layer_norm_eps", 0.0 },
	{ "layer_norm_eps", -1e-5 },
	{ SM "epsilon", 0.0 },
	{ SM "inf", 1e300 },                     /* beyond float */
	{ SM "trans_scale_factor", -10.0 },
};

/* one error line, and it names the key */
static void refused(json_t *root, const char *key)
{
	char log[4096];
	hparams_t c;

	assert_int_equal(parse_logged(&c, root, log, sizeof log), -1);
	if (count_lines(log) != 1 || !strstr(log, key) || !strstr(log, "cfg.json"))
		fail_msg("for %s: log \"%s\"", key, log);
}

static void test_out_of_range_refused(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof bad_int / sizeof *bad_int; i++) {
		json_t *root = published();
		set_at(root, bad_int[i].key, json_integer(bad_int[i].v));
		refused(root, bad_int[i].key);
		json_decref(root);
	}
	for (size_t i = 0; i < sizeof bad_real / sizeof *bad_real; i++) {
		json_t *root = published();
		set_at(root, bad_real[i].key, json_real(bad_real[i].v));
		refused(root, bad_real[i].key);
		json_decref(root);
	}
}

/* sizes in range that do not divide name the keys; a token id beyond the
 * vocabulary names its key */
static void test_inconsistent_refused(void **state)
{
	(void)state;
	json_t *root = published();
	set_at(root, "num_attention_heads", json_integer(3));   /* 2560 / 3 */
	refused(root, "num_attention_heads");
	json_decref(root);

	root = published();
	set_at(root, T "sequence_head_width", json_integer(48)); /* 1024 / 48 */
	refused(root, "sequence_head_width");
	json_decref(root);

	root = published();
	set_at(root, "pad_token_id", json_integer(40));          /* vocab 33 */
	refused(root, "pad_token_id");
	json_decref(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_published_accepted),
		cmocka_unit_test(test_out_of_range_refused),
		cmocka_unit_test(test_inconsistent_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
