/* test_safetensors.c - the safetensors reader and writer: a round trip of every
 * dtype, the half-precision conversions, and every malformed file the
 * reader must refuse with one error (truncated data, offsets past the end,
 * overlapping tensors, dtype x shape != byte length, a huge header length,
 * malformed JSON, bad entries); a copied tensor's pages dropped from the
 * page cache (safetensors_drop_cache: mincore), its neighbours' kept. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <fcntl.h>

#include <cmocka.h>

#include "io/safetensors.h"
#include "tmpdir.h"

static char tmpdir[200];

/* a file of: u64 hlen (or hlen_override when non-zero), the header text,
 * then ndata bytes of data 0, 1, 2, ... */
static const char *write_raw(const char *name, const char *header, size_t ndata,
                             uint64_t hlen_override)
{
	static char path[256];
	uint64_t hlen = hlen_override ? hlen_override : strlen(header);
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", tmpdir, name);
	assert_non_null(f = fopen(path, "wb"));
	fwrite(&hlen, 8, 1, f);
	fwrite(header, 1, strlen(header), f);
	for (size_t i = 0; i < ndata; i++) fputc((int)(i & 0xff), f);
	fclose(f);
	return path;
}

static void assert_refused(const char *name, const char *header, size_t ndata, uint64_t hlen)
{
	safetensors_t *st = safetensors_open(write_raw(name, header, ndata, hlen));
	if (st) fail_msg("%s: accepted a malformed file", name);
}

static void test_roundtrip(void **state)
{
	(void)state;
	char path[256];
	float f32[6] = { 1.0f, -2.5f, 3.25f, 0.0f, 1e-3f, -7.0f };
	double f64[3] = { 1.0 / 3.0, -2.0, 1e300 };
	int64_t i64[4] = { 0, -1, 1LL << 40, 7 };
	uint16_t f16[4] = { 0x3c00, 0xc100, 0x0001, 0x7c00 };  /* 1, -2.5, 2^-24, +inf */
	uint16_t bf16[3] = { 0x3f80, 0xc020, 0x0000 };          /* 1, -2.5, 0 */
	safetensors_writer_t *w = safetensors_writer_init();

	assert_non_null(w);
	assert_int_equal(safetensors_writer_add(w, "a/f32", SAFETENSORS_F32, 2, (int64_t[]){ 2, 3 }, f32), 0);
	assert_int_equal(safetensors_writer_add(w, "f64", SAFETENSORS_F64, 1, (int64_t[]){ 3 }, f64), 0);
	assert_int_equal(safetensors_writer_add(w, "i64", SAFETENSORS_I64, 1, (int64_t[]){ 4 }, i64), 0);
	assert_int_equal(safetensors_writer_add(w, "f16", SAFETENSORS_F16, 1, (int64_t[]){ 4 }, f16), 0);
	assert_int_equal(safetensors_writer_add(w, "bf16", SAFETENSORS_BF16, 1, (int64_t[]){ 3 }, bf16), 0);
	assert_int_equal(safetensors_writer_add(w, "scalar", SAFETENSORS_F32, 0, NULL, &f32[1]), 0);
	assert_int_equal(safetensors_writer_add_meta(w, "config", "{\"x\": 1}"), 0);
	snprintf(path, sizeof path, "%s/ok.safetensors", tmpdir);
	assert_int_equal(safetensors_writer_save(w, path), 0);
	safetensors_writer_free(w);
	assert_int_equal(access(path, F_OK), 0);

	safetensors_t *st = safetensors_open(path);
	assert_non_null(st);
	assert_int_equal(safetensors_count(st), 6);
	assert_string_equal(safetensors_meta(st, "config"), "{\"x\": 1}");
	assert_null(safetensors_meta(st, "absent"));
	assert_null(safetensors_find(st, "nope"));

	const safetensors_tensor_t *t = safetensors_find(st, "a/f32");
	assert_non_null(t);
	assert_int_equal(t->dtype, SAFETENSORS_F32);
	assert_int_equal(t->nd, 2);
	assert_int_equal(t->shape[0], 2);
	assert_int_equal(t->shape[1], 3);
	float got[6];
	safetensors_to_f32(t, got);
	assert_memory_equal(got, f32, sizeof f32);

	double d[4];
	safetensors_to_f64(safetensors_find(st, "f64"), d);
	assert_memory_equal(d, f64, sizeof f64);
	safetensors_to_f64(safetensors_find(st, "i64"), d);
	for (int i = 0; i < 4; i++) assert_true(d[i] == (double)i64[i]);

	safetensors_to_f32(safetensors_find(st, "f16"), got);
	assert_true(got[0] == 1.0f && got[1] == -2.5f && got[2] == ldexpf(1.0f, -24) && isinf(got[3]));
	safetensors_to_f32(safetensors_find(st, "bf16"), got);
	assert_true(got[0] == 1.0f && got[1] == -2.5f && got[2] == 0.0f);

	t = safetensors_find(st, "scalar");
	assert_int_equal(t->nd, 0);
	assert_int_equal(t->numel, 1);
	safetensors_close(st);
}

static void test_half_conversions(void **state)
{
	(void)state;
	/* every finite f16 value converts exactly (f32 holds all of them) */
	for (uint32_t h = 0; h < 0x10000; h++) {
		float f = safetensors_f16_to_f32((uint16_t)h);
		int e = (h >> 10) & 0x1f, m = h & 0x3ff;
		double want = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
		if (h & 0x8000) want = -want;
		if (e == 31) continue;
		assert_true((double)f == want);
	}
	assert_true(isnan(safetensors_f16_to_f32(0x7e00)));
	assert_true(safetensors_bf16_to_f32(0x4049) == 3.140625f);
}

static void test_malformed(void **state)
{
	(void)state;
	const char *ok = "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";

	/* the reference file is fine: the checks below fail for their reason */
	safetensors_t *st = safetensors_open(write_raw("fine", ok, 8, 0));
	assert_non_null(st);
	safetensors_close(st);

	assert_refused("truncated", ok, 7, 0);
	assert_refused("past_end",
	               "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 8, 0);
	assert_refused("overlap",
	               "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
	               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 16, 0);
	assert_refused("overlap_nested",
	               "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
	               "\"b\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
	               "\"c\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 16, 0);
	assert_refused("dtype_size",
	               "{\"t\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]}}", 12, 0);
	assert_refused("huge_header", ok, 8, UINT64_MAX / 2);
	assert_refused("header_past_file", ok, 8, 4096);
	assert_refused("bad_json", "{\"t\":{\"dtype\":\"F32\",", 8, 0);
	assert_refused("not_object", "[1, 2, 3]", 8, 0);
	assert_refused("bad_dtype",
	               "{\"t\":{\"dtype\":\"Q7\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, 0);
	assert_refused("no_offsets", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, 0);
	assert_refused("negative_dim",
	               "{\"t\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, 0);
	assert_refused("reversed_offsets",
	               "{\"t\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", 8, 0);
	/* elements x size wraps to 0 bytes mod 2^64: 2^61 F64, 2^62 F32 */
	assert_refused("numel_wrap_f64",
	               "{\"t\":{\"dtype\":\"F64\",\"shape\":[1099511627776,2097152],"
	               "\"data_offsets\":[0,0]}}", 8, 0);
	assert_refused("numel_wrap_f32",
	               "{\"t\":{\"dtype\":\"F32\",\"shape\":[1099511627776,4194304],"
	               "\"data_offsets\":[0,0]}}", 8, 0);
	assert_refused("duplicate_name",
	               "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
	               "\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, 0);

	/* shorter than the length field, and absent */
	char path[256];
	snprintf(path, sizeof path, "%s/tiny", tmpdir);
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	fputs("abc", f);
	fclose(f);
	assert_null(safetensors_open(path));
	snprintf(path, sizeof path, "%s/absent", tmpdir);
	assert_null(safetensors_open(path));
}

static int setup(void **state)
{
	(void)state;
	return tmpdir_template(tmpdir, sizeof tmpdir, "esmbatch-st") && mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[300];
	(void)state;
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

/* pages of [p, p + n) in the page cache (mincore), and how many pages */
static long cached(const void *p, size_t n, long *pages)
{
	long pg = sysconf(_SC_PAGESIZE), in = 0;
	uintptr_t lo = (uintptr_t)p / pg * pg, hi = ((uintptr_t)p + n + pg - 1) / pg * pg;
	unsigned char *v = malloc((hi - lo) / pg);

	assert_non_null(v);
	assert_int_equal(mincore((void *)lo, hi - lo, v), 0);
	for (uintptr_t i = 0; i < (hi - lo) / pg; i++) in += v[i] & 1;
	*pages = (long)((hi - lo) / pg);
	free(v);
	return in;
}

static void test_drop_cache(void **state)
{
	enum { N = 1 << 18 };   /* 1 MiB of float32 */
	char path[256];
	float *big = malloc(sizeof *big * N), small[3] = { 1, 2, 3 };
	safetensors_writer_t *w = safetensors_writer_init();
	long pages, sum = 0;

	(void)state;
	assert_non_null(big);
	for (int i = 0; i < N; i++) big[i] = (float)(i % 1000);
	assert_int_equal(safetensors_writer_add(w, "a", SAFETENSORS_F32, 1, (int64_t[]){ 3 }, small), 0);
	assert_int_equal(safetensors_writer_add(w, "big", SAFETENSORS_F32, 1, (int64_t[]){ N }, big), 0);
	assert_int_equal(safetensors_writer_add(w, "z", SAFETENSORS_F32, 1, (int64_t[]){ N }, big), 0);
	snprintf(path, sizeof path, "%s/drop.safetensors", tmpdir);
	assert_int_equal(safetensors_writer_save(w, path), 0);
	safetensors_writer_free(w);
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(fsync(fd), 0);   /* clean pages: DONTNEED drops only those */
	close(fd);

	safetensors_t *st = safetensors_open(path);
	assert_non_null(st);
	const safetensors_tensor_t *t = safetensors_find(st, "big"), *z = safetensors_find(st, "z");
	for (int i = 0; i < N; i++) sum += (long)((const float *)t->data)[i] + (long)((const float *)z->data)[i];
	long in = cached(t->data, t->nbytes, &pages);
	assert_int_equal(in, pages);
	safetensors_release(st, t);
	safetensors_drop_cache(st, t);
	long left = cached(t->data, t->nbytes, &pages);
	print_message("big: %ld of %ld pages still cached (the two it shares at most)\n", left, pages);
	assert_true(pages > 200 && left <= 2);
	in = cached(z->data, z->nbytes, &pages);
	assert_int_equal(in, pages);   /* the neighbour stays */
	assert_memory_equal(t->data, big, sizeof *big * N);            /* readable again, from disk */
	safetensors_close(st);
	free(big);
	assert_true(sum > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_half_conversions),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_drop_cache),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
