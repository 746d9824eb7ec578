/* test_widen.c - binary16 and bfloat16 widened to float32 (io/widen.h): all
 * 65,536 bit patterns of each on every path this CPU runs (the scalar loop
 * on every host, F16C and AVX-512 where present) bit for bit against the
 * scalar conversions, from a source at an odd byte address and with a
 * ragged tail; safetensors_to_f32_part on a slice; $ESMBATCH_WIDEN=scalar;
 * the 2 MiB pieces a tensor is split into across threads (widen_piece,
 * of float32 and of binary16), and widen_tensor and widen_copy_f16 of a
 * multi-piece tensor into a huge-page buffer at an unaligned address:
 * every element, nothing outside, the first bad one. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util/hugemem.h"
#include "io/safetensors.h"
#include "io/widen.h"

#define NPAT 65536

/* every pattern h = 0..65535, little-endian, starting at byte 1 of buf */
static unsigned char *patterns(void)
{
	unsigned char *buf = malloc(2 * NPAT + 1);
	assert_non_null(buf);
	for (int h = 0; h < NPAT; h++) {
		buf[1 + 2 * h] = (unsigned char)(h & 0xff);
		buf[2 + 2 * h] = (unsigned char)(h >> 8);
	}
	return buf;
}

/* widen n patterns from pattern lo on path p; every output's bits equal
 * the scalar conversion's */
static void check_path(widen_path_t p, int bf16, const unsigned char *src, int lo, int n)
{
	float *dst = malloc(sizeof *dst * n);
	int bad = 0;

	assert_non_null(dst);
	(bf16 ? widen_bf16 : widen_f16)(dst, src + 1 + 2 * lo, n, p);
	for (int i = 0; i < n; i++) {
		uint16_t h = (uint16_t)(lo + i);
		float want = bf16 ? safetensors_bf16_to_f32(h) : safetensors_f16_to_f32(h);
		if (memcmp(&want, &dst[i], 4) != 0 && bad++ < 4) {
			uint32_t a, b;
			memcpy(&a, &want, 4);
			memcpy(&b, &dst[i], 4);
			print_message("%s %s 0x%04x: 0x%08x, want 0x%08x\n", widen_path_name(p),
			              bf16 ? "bf16" : "f16", h, b, a);
		}
	}
	free(dst);
	assert_int_equal(bad, 0);
}

static void test_all_patterns(void **state)
{
	static const widen_path_t paths[] = { WIDEN_SCALAR, WIDEN_F16C, WIDEN_AVX512 };
	unsigned char *src = patterns();

	(void)state;
	for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
		if (!widen_usable(paths[i])) {
			print_message("path %s: not on this CPU, skipped\n", widen_path_name(paths[i]));
			continue;
		}
		print_message("path %s: all %d patterns of f16 and bf16\n", widen_path_name(paths[i]), NPAT);
		for (int bf16 = 0; bf16 < 2; bf16++) {
			check_path(paths[i], bf16, src, 0, NPAT);
			check_path(paths[i], bf16, src, 3, NPAT - 3 - 5);   /* ragged head and tail */
		}
	}
	assert_true(widen_usable(WIDEN_SCALAR));
	free(src);
}

/* elements [lo, lo + n) of an F16 tensor, as the loaders take a chunk */
static void test_part(void **state)
{
	unsigned char *src = patterns();
	safetensors_tensor_t t = { .name = "x", .dtype = SAFETENSORS_F16, .nd = 1, .shape = { NPAT },
	                           .numel = NPAT, .nbytes = 2 * NPAT, .data = src + 1 };
	float dst[100];

	(void)state;
	safetensors_to_f32_part(&t, 0x3c00 - 50, 100, dst, widen_best());
	for (int i = 0; i < 100; i++) {
		float want = safetensors_f16_to_f32((uint16_t)(0x3c00 - 50 + i));
		assert_memory_equal(&want, &dst[i], 4);
	}
	assert_true(dst[50] == 1.0f);
	free(src);
}

static void test_env_forces_scalar(void **state)
{
	(void)state;
	setenv("ESMBATCH_WIDEN", "scalar", 1);
	assert_int_equal(widen_best(), WIDEN_SCALAR);
	unsetenv("ESMBATCH_WIDEN");
	assert_true(widen_usable(widen_best()));
	print_message("best path here: %s\n", widen_path_name(widen_best()));
}

#define PER (WIDEN_PIECE / 4)   /* floats in a whole piece */

/* the pieces of n elements of esize bytes at dst cover [0, n) in order,
 * once, each at most a piece long, every one but the first starting on a
 * 2 MiB boundary */
static void check_pieces(uintptr_t dst, int64_t n, int esize)
{
	int64_t np = widen_pieces(dst, n, esize), next = 0, per = WIDEN_PIECE / esize;

	for (int64_t c = 0; c < np; c++) {
		int64_t lo = -1, len = -1;
		widen_piece(dst, n, esize, c, &lo, &len);
		if (lo != next || len <= 0 || len > per || (c > 0 && (dst + (uintptr_t)(esize * lo)) % WIDEN_PIECE))
			print_message("dst %% 2 MiB %llu, n %lld, esize %d: piece %lld of %lld is [%lld, +%lld), "
			              "want it at %lld\n", (unsigned long long)(dst % WIDEN_PIECE), (long long)n, esize,
			              (long long)c, (long long)np, (long long)lo, (long long)len, (long long)next);
		assert_int_equal(lo, next);
		assert_true(len > 0 && len <= per);
		if (c > 0) assert_int_equal((dst + (uintptr_t)(esize * lo)) % WIDEN_PIECE, 0);
		next = lo + len;
	}
	assert_int_equal(next, n);
}

static void test_pieces(void **state)
{
	static const uintptr_t at[] = { 0, 4, 64, WIDEN_PIECE - 4, WIDEN_PIECE - 64, 4 * 12345, 7 * WIDEN_PIECE + 40 };
	static const int64_t n[] = { 0, 1, 7, PER - 1, PER, PER + 1, 2 * PER, 3 * PER + 17 };

	(void)state;
	for (size_t i = 0; i < sizeof at / sizeof *at; i++)
		for (size_t j = 0; j < sizeof n / sizeof *n; j++)
			for (int esize = 2; esize <= 4; esize += 2)
				check_pieces((uintptr_t)1 << 32 | at[i], n[j], esize);
	assert_int_equal(widen_pieces(0, PER, 4), 1);
	assert_int_equal(widen_pieces(0, PER + 1, 4), 2);
	assert_int_equal(widen_pieces(4, PER, 4), 2);     /* head PER - 1, then 1 */
	assert_int_equal(widen_pieces(WIDEN_PIECE - 4, 2, 4), 2);
	assert_int_equal(widen_pieces(0, 2 * PER, 2), 1);   /* binary16: twice as many a piece */
	assert_int_equal(widen_pieces(WIDEN_PIECE - 2, 2, 2), 2);
}

/* an F16 tensor of 3 pieces and a ragged tail widened on all threads into
 * a huge-page buffer 3 floats past a 2 MiB boundary */
static void test_tensor(void **state)
{
	const int64_t n = 3 * PER + 1001, off = 3;
	uint16_t *h = malloc(sizeof *h * n);
	float *buf = NULL;

	(void)state;
	assert_non_null(h);
	for (int64_t i = 0; i < n; i++)   /* finite values, both signs */
		h[i] = (uint16_t)((i * 7919) % 0x7c00 | (i & 1) << 15);
	safetensors_tensor_t t = { .name = "x", .dtype = SAFETENSORS_F16, .nd = 1, .shape = { n },
	                           .numel = n, .nbytes = 2 * (size_t)n, .data = h };
	assert_int_equal(hugemem_alloc(sizeof *buf * (n + off + 8), (void **)&buf), 0);
	for (int64_t i = 0; i < n + off + 8; i++) buf[i] = -7.0f;
	float *dst = buf + off;
	assert_true(widen_pieces((uintptr_t)dst, n, 4) >= 4);
	assert_int_equal(widen_tensor(&t, dst, 1, widen_best()), -1);
	int64_t bad = 0;
	for (int64_t i = 0; i < n; i++) {
		float want = safetensors_f16_to_f32(h[i]);
		if (memcmp(&want, &dst[i], 4) && bad++ < 4)
			print_message("element %lld: %g, want %g\n", (long long)i, dst[i], want);
	}
	assert_int_equal(bad, 0);
	for (int64_t i = 0; i < off; i++) assert_true(buf[i] == -7.0f);
	for (int64_t i = 0; i < 8; i++) assert_true(dst[n + i] == -7.0f);
	/* the first infinity or NaN, wherever the pieces fall */
	h[2 * PER + 5] = 0x7e00;
	h[PER + 9] = 0xfc00;
	assert_int_equal(widen_tensor(&t, dst, 1, widen_best()), PER + 9);
	assert_true(isinf(dst[PER + 9]) && isnan(dst[2 * PER + 5]));
	/* float32 data only scanned (convert 0) */
	safetensors_tensor_t f = { .name = "y", .dtype = SAFETENSORS_F32, .nd = 1, .shape = { n },
	                           .numel = n, .nbytes = 4 * (size_t)n, .data = dst };
	assert_int_equal(widen_tensor(&f, dst, 0, widen_best()), PER + 9);
	dst[PER + 9] = 0;
	dst[2 * PER + 5] = 0;
	dst[n - 1] = INFINITY;
	assert_int_equal(widen_tensor(&f, dst, 0, widen_best()), n - 1);
	hugemem_free(buf);
	free(h);
}

/* binary16 data copied as it is (widen_copy_f16) over 3 pieces and a
 * ragged tail, 1 element past a 2 MiB boundary; the first infinity or NaN
 * found wherever the pieces fall */
static void test_copy_f16(void **state)
{
	const int64_t n = 6 * PER + 333;
	uint16_t *h = malloc(sizeof *h * n), *buf = NULL;

	(void)state;
	assert_non_null(h);
	for (int64_t i = 0; i < n; i++) h[i] = (uint16_t)((i * 7919) % 0x7c00 | (i & 1) << 15);
	safetensors_tensor_t t = { .name = "x", .dtype = SAFETENSORS_F16, .nd = 1, .shape = { n },
	                           .numel = n, .nbytes = 2 * (size_t)n, .data = h };
	assert_int_equal(hugemem_alloc(sizeof *buf * (n + 9), (void **)&buf), 0);
	uint16_t *dst = buf + 1;
	buf[0] = dst[n] = 0xabcd;
	assert_true(widen_pieces((uintptr_t)dst, n, 2) >= 4);
	assert_int_equal(widen_copy_f16(&t, dst), -1);
	assert_memory_equal(dst, h, sizeof *h * n);
	assert_true(buf[0] == 0xabcd && dst[n] == 0xabcd);
	h[5 * PER + 3] = 0x7c01;   /* a signalling NaN */
	h[2 * PER + 11] = 0xfc00;  /* -inf */
	assert_int_equal(widen_copy_f16(&t, dst), 2 * PER + 11);
	h[2 * PER + 11] = 0x7bff;  /* the largest finite value */
	assert_int_equal(widen_copy_f16(&t, dst), 5 * PER + 3);
	hugemem_free(buf);
	free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_all_patterns),
		cmocka_unit_test(test_part),
		cmocka_unit_test(test_env_forces_scalar),
		cmocka_unit_test(test_pieces),
		cmocka_unit_test(test_copy_f16),
		cmocka_unit_test(test_tensor),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
