/* test_fingerprint.c - the weights fingerprint covers every byte of the
 * file and the effective config: a byte changed deep in a tensor, or
 * another max_recycles, gives another fingerprint (the resume journal
 * keeps only results of the same weights); the same file gives the same
 * one, from the cache (keyed by device, inode, size, mtime, ctime) the
 * second time; a file rewritten in place with its mtime set back is hashed
 * again; plan's open (weights_open_shapes) hashes nothing. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "io/safetensors.h"
#include "model/weights.h"
#include "tmpdir.h"

static char dir[200];
static char cache[300];

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	long n;
	char *buf;

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc(n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, n, f), (size_t)n);
	buf[n] = 0;
	fclose(f);
	return buf;
}

/* NAME in dir: tensor "a" of 1000 floats i (one changed at index `poke`
 * unless negative), the demo config with max_recycles `recycles` */
static const char *write_weights(const char *name, int poke, int recycles)
{
	static char path[300];
	float a[1000];
	char *cfg = slurp(TEST_DATA "/../../data/demo/config.json"), *at;
	safetensors_writer_t *w = safetensors_writer_init();

	for (int i = 0; i < 1000; i++) a[i] = (float)i;
	if (poke >= 0) a[poke] += 0.5f;
	at = strstr(cfg, "\"max_recycles\": 4");
	assert_non_null(at);
	at[16] = (char)('0' + recycles);
	assert_non_null(w);
	assert_int_equal(safetensors_writer_add(w, "a", SAFETENSORS_F32, 1, (int64_t[]){ 1000 }, a), 0);
	assert_int_equal(safetensors_writer_add_meta(w, "config", cfg), 0);
	snprintf(path, sizeof path, "%s/%s", dir, name);
	assert_int_equal(safetensors_writer_save(w, path), 0);
	safetensors_writer_free(w);
	free(cfg);
	return path;
}

/* the fingerprint of path into fp[17] */
static void fingerprint(const char *path, char *fp)
{
	weights_t *w = weights_open(path);
	assert_non_null(w);
	strcpy(fp, weights_fingerprint(w));
	assert_int_equal(strlen(fp), 16);
	weights_close(w);
}

static int cache_lines(void)
{
	FILE *f = fopen(cache, "r");
	int n = 0, c;
	if (!f) return 0;
	while ((c = fgetc(f)) != EOF) n += c == '\n';
	fclose(f);
	return n;
}

static void test_every_byte_and_config(void **state)
{
	(void)state;
	char base[17], deep[17], cfg[17], again[17];

	fingerprint(write_weights("base.safetensors", -1, 4), base);
	/* float 900 lies 3600 bytes into the data, far past its first 64 */
	fingerprint(write_weights("deep.safetensors", 900, 4), deep);
	fingerprint(write_weights("cfg.safetensors", -1, 3), cfg);
	fingerprint(write_weights("same.safetensors", -1, 4), again);
	assert_string_not_equal(base, deep);
	assert_string_not_equal(base, cfg);
	assert_string_equal(base, again);   /* another file, the same bytes */
}

static void test_cache(void **state)
{
	(void)state;
	char first[17], second[17], third[17];
	const char *path = write_weights("cached.safetensors", -1, 4);
	int before = cache_lines();
	struct stat sb;

	fingerprint(path, first);
	assert_int_equal(cache_lines(), before + 1);
	fingerprint(path, second);
	assert_int_equal(cache_lines(), before + 1);   /* a hit: nothing appended */
	assert_string_equal(first, second);

	/* the same size, the last data byte changed in place, mtime set back */
	assert_int_equal(stat(path, &sb), 0);
	int fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "\x7f", 1, sb.st_size - 1), 1);
	close(fd);
	struct timespec t[2] = { sb.st_atim, sb.st_mtim };
	assert_int_equal(utimensat(AT_FDCWD, path, t, 0), 0);
	fingerprint(path, third);
	assert_string_not_equal(first, third);
	assert_int_equal(cache_lines(), before + 2);

	/* plan's open: shapes and config, no hashing, nothing cached */
	path = write_weights("shapes.safetensors", 10, 4);
	weights_t *w = weights_open_shapes(path);
	assert_non_null(w);
	assert_string_equal(weights_fingerprint(w), "-");
	assert_int_equal(weights_cfg(w)->max_recycles, 4);
	weights_close(w);
	assert_int_equal(cache_lines(), before + 2);
}

static int setup(void **state)
{
	(void)state;
	if (!tmpdir_template(dir, sizeof dir, "esmbatch-fp") || !mkdtemp(dir)) return -1;
	snprintf(cache, sizeof cache, "%s/fingerprints", dir);
	return setenv("ESMBATCH_FP_CACHE", cache, 1);
}

static int teardown(void **state)
{
	(void)state;
	const char *names[] = { "base", "deep", "cfg", "same", "cached", "shapes" };
	char p[400];
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		snprintf(p, sizeof p, "%s/%s.safetensors", dir, names[i]);
		unlink(p);
	}
	unlink(cache);
	rmdir(dir);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_byte_and_config),
		cmocka_unit_test(test_cache),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
