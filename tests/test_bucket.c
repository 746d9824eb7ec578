/* test_bucket.c - length buckets: bounds, labels, custom sets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "sched/bucket.h"

static void test_default_bounds(void **state)
{
	static const struct { int64_t len; int b; } cases[] = {
		{ -5, -1 }, { 0, -1 }, { 1, 0 }, { 512, 0 }, { 513, 1 },
		{ 768, 1 }, { 769, 2 }, { 1024, 2 }, { 1025, 3 }, { 1344, 3 },
		{ 1345, 4 }, { 100000, 4 },
	};
	bucket_set_t s;
	bucket_set_default(&s);
	assert_int_equal(s.n, 4);
	assert_int_equal(bucket_over(NULL), 4);
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		assert_int_equal(bucket_of(NULL, cases[i].len), cases[i].b);
		assert_int_equal(bucket_of(&s, cases[i].len), cases[i].b);
	}
	assert_int_equal(bucket_bound(NULL, 0), 512);
	assert_int_equal(bucket_bound(NULL, 3), 1344);
	assert_int_equal(bucket_bound(NULL, 4), -1);
	assert_int_equal(bucket_bound(NULL, -1), -1);
}

static void test_labels(void **state)
{
	char buf[16];
	assert_string_equal(bucket_label(NULL, 0, buf, sizeof buf), "512");
	assert_string_equal(bucket_label(NULL, 3, buf, sizeof buf), "1344");
	assert_string_equal(bucket_label(NULL, 4, buf, sizeof buf), "over");
	assert_string_equal(bucket_label(NULL, 5, buf, sizeof buf), "?");
	assert_string_equal(bucket_label(NULL, -1, buf, sizeof buf), "?");
	assert_int_equal(bucket_parse(NULL, "512"), 0);
	assert_int_equal(bucket_parse(NULL, "1024"), 2);
	assert_int_equal(bucket_parse(NULL, "over"), 4);
	assert_int_equal(bucket_parse(NULL, "513"), -1);
	assert_int_equal(bucket_parse(NULL, "+512"), -1);
	assert_int_equal(bucket_parse(NULL, "512x"), -1);
	assert_int_equal(bucket_parse(NULL, ""), -1);
	assert_int_equal(bucket_parse(NULL, NULL), -1);
}

static void test_custom_sets(void **state)
{
	bucket_set_t s;
	const int64_t ok[] = { 100, 200 };
	const int64_t unsorted[] = { 200, 100 };
	const int64_t dup[] = { 100, 100 };
	const int64_t zero[] = { 0, 100 };

	assert_int_equal(bucket_set_init(&s, ok, 2), 0);
	assert_int_equal(bucket_of(&s, 100), 0);
	assert_int_equal(bucket_of(&s, 150), 1);
	assert_int_equal(bucket_of(&s, 201), 2);
	assert_int_equal(bucket_over(&s), 2);
	assert_int_equal(bucket_set_init(&s, unsorted, 2), -1);
	assert_int_equal(bucket_set_init(&s, dup, 2), -1);
	assert_int_equal(bucket_set_init(&s, zero, 2), -1);
	assert_int_equal(bucket_set_init(&s, ok, BUCKET_MAX + 1), -1);
	/* no bounds: everything is over */
	assert_int_equal(bucket_set_init(&s, NULL, 0), 0);
	assert_int_equal(bucket_of(&s, 1), 0);
	assert_int_equal(bucket_over(&s), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_default_bounds),
		cmocka_unit_test(test_labels),
		cmocka_unit_test(test_custom_sets),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
