/* test_hugemem.c - large buffers on transparent huge pages (util/hugemem.h):
 * sizes either side of HUGEMEM_MIN aligned, writable to the last byte and
 * freed; a large buffer's whole 2 MiB pages advised MADV_HUGEPAGE (the
 * "hg" flag of its mapping in /proc/self/smaps) where the kernel's THP mode
 * grants it, its tail not; none advised with $ESMBATCH_HUGEPAGES=0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util/hugemem.h"

/* 1 when the mapping holding address a carries VmFlags "hg", 0 when it
 * does not, -1 when /proc/self/smaps shows no mapping holding a */
static int advised(const void *a)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	int in = 0, rc = -1;

	if (!f) return -1;
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			in = (uintptr_t)a >= lo && (uintptr_t)a < hi;
		} else if (in && !strncmp(line, "VmFlags:", 8)) {
			rc = strstr(line, " hg") != NULL;
			break;
		}
	}
	fclose(f);
	return rc;
}

static void fill_check(size_t n, size_t align)
{
	unsigned char *p = NULL;

	assert_int_equal(hugemem_alloc(n, (void **)&p), 0);
	assert_non_null(p);
	assert_int_equal((uintptr_t)p % align, 0);
	for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 31 + 7);
	for (size_t i = 0; i < n; i++)
		if (p[i] != (unsigned char)(i * 31 + 7)) fail_msg("byte %zu of %zu", i, n);
	hugemem_free(p);
}

static void test_sizes(void **state)
{
	(void)state;
	fill_check(0, 64);
	fill_check(1, 64);
	fill_check(4096 + 3, 64);
	fill_check(HUGEMEM_MIN - 1, 64);
	fill_check(HUGEMEM_MIN, HUGEMEM_PAGE);
	fill_check(5 * HUGEMEM_PAGE + 12345, HUGEMEM_PAGE);
	hugemem_free(NULL);
}

static void test_advice(void **state)
{
	const size_t n = 3 * HUGEMEM_PAGE + 100;
	char *p = NULL, *s = NULL;

	(void)state;
	print_message("THP mode here: %s\n", hugemem_mode());
	assert_int_equal(hugemem_alloc(n, (void **)&p), 0);
	assert_int_equal(hugemem_alloc(1000, (void **)&s), 0);
	memset(p, 1, n);
	if (!hugemem_on()) {
		assert_int_equal(advised(p), 0);
	} else {
		assert_int_equal(advised(p), 1);
		assert_int_equal(advised(p + 3 * HUGEMEM_PAGE - 1), 1);
		assert_int_equal(advised(p + 3 * HUGEMEM_PAGE), 0);   /* the tail */
	}
	assert_int_equal(advised(p - 1), 0);   /* the head's page */
	hugemem_free(s);
	hugemem_free(p);
}

static void test_off(void **state)
{
	char *p = NULL;

	(void)state;
	setenv("ESMBATCH_HUGEPAGES", "0", 1);
	assert_string_equal(hugemem_mode(), "off");
	assert_int_equal(hugemem_on(), 0);
	assert_int_equal(hugemem_alloc(2 * HUGEMEM_PAGE, (void **)&p), 0);
	assert_int_equal((uintptr_t)p % HUGEMEM_PAGE, 0);
	memset(p, 2, 2 * HUGEMEM_PAGE);
	assert_int_equal(advised(p), 0);
	hugemem_free(p);
	unsetenv("ESMBATCH_HUGEPAGES");
	const char *m = hugemem_mode();
	assert_true(!strcmp(m, "always") || !strcmp(m, "madvise") || !strcmp(m, "never") || !strcmp(m, "absent"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_advice),
		cmocka_unit_test(test_off),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
