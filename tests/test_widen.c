/* test_widen.c - binary16 and bfloat16 widened to float32 (io/widen.h): all
 * 65,536 bit patterns of each on every path this CPU runs (the scalar loop
 * on every host, F16C and AVX-512 where present) bit for bit against the
 * scalar conversions, from a source at an odd byte address and with a
 * ragged tail; safetensors_to_f32_part on a slice; $ESMBATCH_WIDEN=scalar. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_all_patterns),
		cmocka_unit_test(test_part),
		cmocka_unit_test(test_env_forces_scalar),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
