/* test_tsv.c - tsv_column and tsv_field: columns by header name, empty
 * fields, lines ending at '\n', truncation, absent columns. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "util/tsv.h"

static void test_column(void **state)
{
	(void)state;
	const char *h = "index\tname\tstatus\treason\n";
	assert_int_equal(tsv_column(h, "index"), 0);
	assert_int_equal(tsv_column(h, "status"), 2);
	assert_int_equal(tsv_column(h, "reason"), 3);   /* the last, before '\n' */
	assert_int_equal(tsv_column(h, "stat"), -1);    /* a prefix is not a name */
	assert_int_equal(tsv_column(h, "statuses"), -1);
	assert_int_equal(tsv_column(h, ""), -1);
	assert_int_equal(tsv_column("a\t\tb", ""), 1);   /* an empty header cell */
	assert_int_equal(tsv_column("", "a"), -1);
}

static void test_field(void **state)
{
	(void)state;
	const char *row = "7\tP1\t\tfailed\tout of memory\n";
	char buf[8];
	assert_string_equal(tsv_field(row, 0, buf, sizeof buf), "7");
	assert_string_equal(tsv_field(row, 2, buf, sizeof buf), "");          /* empty, kept */
	assert_string_equal(tsv_field(row, 3, buf, sizeof buf), "failed");
	assert_string_equal(tsv_field(row, 4, buf, sizeof buf), "out of ");   /* truncated */
	assert_string_equal(tsv_field(row, 5, buf, sizeof buf), "-");         /* no column 5 */
	assert_string_equal(tsv_field(row, -1, buf, sizeof buf), "-");
	assert_string_equal(tsv_field("a\tb", 1, buf, sizeof buf), "b");       /* ends at NUL */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_column),
		cmocka_unit_test(test_field),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
