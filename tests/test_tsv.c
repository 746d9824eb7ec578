/* test_tsv.c - tsv_column and tsv_field: columns by header name, empty
 * fields, lines ending at '\n', truncation, absent columns; tsv_put's
 * escaping rule and tsv_decode, which undoes it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* tsv_put(cell) as a new string */
static char *put(const char *cell)
{
	char *out = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&out, &n);
	assert_non_null(f);
	assert_int_equal(tsv_put(f, cell), 0);
	assert_int_equal(fclose(f), 0);
	return out;
}

static void escaped(const char *cell, const char *want)
{
	char *got = put(cell);
	assert_string_equal(got, want);
	assert_string_equal(tsv_decode(got, 0), cell);   /* and back */
	free(got);
}

static void test_put(void **state)
{
	(void)state;
	escaped("P12345_x.1", "P12345_x.1");                  /* as it is */
	escaped("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82");   /* UTF-8 kept */
	escaped("a\tb\nc\rd\\e", "a\\tb\\nc\\rd\\\\e");
	escaped("\x01\x1f\x7f", "\\x01\\x1f\\x7f");
	escaped("\xff\xc3(\x80", "\\xff\\xc3(\\x80");            /* not UTF-8 */
	escaped("\xc0\xaf\xed\xa0\x80\xf4\x90\x80\x80", "\\xc0\\xaf\\xed\\xa0\\x80\\xf4\\x90\\x80\\x80");   /* overlong, surrogate, past U+10FFFF */
	escaped("\xe2\x82", "\\xe2\\x82");                          /* cut short */
	escaped("\"q\"", "\\x22q\"");                             /* no CSV quote */
	escaped("=1+2", "\\x3d1+2");
	escaped("+x", "\\x2bx");
	escaped("@SUM(A1)", "\\x40SUM(A1)");
	escaped("-cmd", "\\x2dcmd");
	escaped("-1+cmd", "\\x2d1+cmd");
	escaped("-", "-");                                       /* none */
	escaped("-1", "-1");                                     /* numbers */
	escaped("0.2275", "0.2275");
	escaped("-3.50", "-3.50");
	escaped("a=b", "a=b");                                   /* only leading */
	escaped("", "");
}

static void test_decode(void **state)
{
	(void)state;
	char a[] = "x\\qy\\", b[] = "\\x00\\xg1\\x4", c[] = "\\xff\\x3d\\x01\\t\\x41";
	assert_string_equal(tsv_decode(a, 0), "x\\qy\\");             /* kept */
	assert_string_equal(tsv_decode(b, 0), "\\x00\\xg1\\x4");
	/* as text: bytes that are not ASCII text become U+FFFD */
	assert_string_equal(tsv_decode(c, TSV_TEXT), "\xef\xbf\xbd=\xef\xbf\xbd\tA");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_column),
		cmocka_unit_test(test_field),
		cmocka_unit_test(test_put),
		cmocka_unit_test(test_decode),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
