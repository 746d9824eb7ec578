/* test_grow.c - grow_array: nothing done when the room is there (need 0
 * included), doubling from 8 with the contents kept, and a size that
 * overflows size_t refused with the array and its capacity untouched. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "util/grow.h"

static void test_zero(void **state)
{
	int *a = NULL;
	size_t cap = 0;

	(void)state;
	assert_int_equal(grow_array(&a, &cap, 0, sizeof *a), 0);
	assert_null(a);
	assert_int_equal(cap, 0);
}

static void test_growth(void **state)
{
	int *a = NULL, *before;
	size_t cap = 0;

	(void)state;
	assert_int_equal(grow_array(&a, &cap, 1, sizeof *a), 0);
	assert_non_null(a);
	assert_int_equal(cap, 8);
	before = a;
	assert_int_equal(grow_array(&a, &cap, 8, sizeof *a), 0);   /* room already there */
	assert_ptr_equal(a, before);
	assert_int_equal(cap, 8);
	for (int i = 0; i < 1000; i++) {
		assert_int_equal(grow_array(&a, &cap, (size_t)i + 1, sizeof *a), 0);
		assert_true(cap >= (size_t)i + 1);
		a[i] = 3 * i;
	}
	assert_int_equal(cap, 1024);   /* 8 doubled, never more than needed */
	for (int i = 0; i < 1000; i++) assert_int_equal(a[i], 3 * i);
	assert_int_equal(grow_array(&a, &cap, 5000, sizeof *a), 0);   /* doubled until it holds need */
	assert_int_equal(cap, 8192);
	for (int i = 0; i < 1000; i++) assert_int_equal(a[i], 3 * i);
	free(a);
}

static void test_overflow(void **state)
{
	double *a = NULL, *before;
	size_t cap = 0;

	(void)state;
	assert_int_equal(grow_array(&a, &cap, SIZE_MAX / sizeof *a + 1, sizeof *a), -1);
	assert_null(a);
	assert_int_equal(cap, 0);
	assert_int_equal(grow_array(&a, &cap, SIZE_MAX, 1), -1);   /* the doubling itself overflows */
	assert_int_equal(cap, 0);
	assert_int_equal(grow_array(&a, &cap, 4, sizeof *a), 0);
	before = a;
	a[3] = 1.5;
	assert_int_equal(grow_array(&a, &cap, SIZE_MAX / 2 + 2, 1), -1);
	assert_ptr_equal(a, before);
	assert_int_equal(cap, 8);
	assert_true(a[3] == 1.5);
	free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_zero),
		cmocka_unit_test(test_growth),
		cmocka_unit_test(test_overflow),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
