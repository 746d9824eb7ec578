/* test_names.c - file-safe, unique output names (job_safe_name,
 * job_names_assign): nothing can escape the output directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "io/job.h"
#include "util/log.h"

static void assert_safe(const char *s)
{
	assert_non_null(s);
	assert_true(strlen(s) > 0);
	assert_true(strlen(s) <= JOB_NAME_MAX);
	assert_true(s[0] != '.' && s[0] != '-');
	for (const char *p = s; *p; p++)
		assert_non_null(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		                       "0123456789._-", *p));
}

static void test_safe_name(void **state)
{
	static const struct { const char *in, *out; } cases[] = {
		{ "P12345", "P12345" },
		{ "sp|P12345|../../etc", "sp_P12345_.._.._etc" },
		{ "../../etc/passwd", "_.._etc_passwd" },
		{ "/abs/path", "_abs_path" },
		{ ".hidden", "hidden" },
		{ "...", "" },
		{ "-rf", "rf" },
		{ "a b\tc", "a_b_c" },
		{ "x\\y:z*?\"<>", "x_y_z_____" },
		{ "caf\xc3\xa9", "caf__" },
		{ "name.v2_final-1", "name.v2_final-1" },
		{ "", "" },
	};
	char out[JOB_NAME_MAX + 1];
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		size_t n = job_safe_name(cases[i].in, out, sizeof out);
		assert_string_equal(out, cases[i].out);
		assert_int_equal(n, strlen(cases[i].out));
	}
	assert_int_equal(job_safe_name(NULL, out, sizeof out), 0);
	assert_string_equal(out, "");
}

static void test_length_bound(void **state)
{
	char in[400], out[JOB_NAME_MAX + 50], small[8];
	memset(in, 'A', sizeof in - 1);
	in[sizeof in - 1] = '\0';
	assert_int_equal(job_safe_name(in, out, sizeof out), JOB_NAME_MAX);
	assert_int_equal(strlen(out), JOB_NAME_MAX);
	assert_int_equal(job_safe_name(in, small, sizeof small), 7);
}

static void test_unique(void **state)
{
	job_names_t *n = job_names_init();
	char *s;
	assert_non_null(n);

	assert_int_equal(job_names_assign(n, "abc", 1, &s), 0);
	assert_string_equal(s, "abc"); free(s);
	assert_int_equal(job_names_assign(n, "abc", 2, &s), 1);
	assert_string_equal(s, "abc_2"); free(s);
	/* case-blind: ABC would clash with abc on a case-insensitive disk */
	assert_int_equal(job_names_assign(n, "ABC", 3, &s), 1);
	assert_string_equal(s, "ABC_3"); free(s);
	/* an input name equal to a generated one */
	assert_int_equal(job_names_assign(n, "abc_2", 4, &s), 1);
	assert_string_equal(s, "abc_2_2"); free(s);
	/* sanitised names collide too */
	assert_int_equal(job_names_assign(n, "a|b", 5, &s), 0);
	assert_string_equal(s, "a_b"); free(s);
	assert_int_equal(job_names_assign(n, "a/b", 6, &s), 1);
	assert_string_equal(s, "a_b_2"); free(s);
	/* nothing left after sanitising: record number */
	assert_int_equal(job_names_assign(n, "..", 7, &s), 0);
	assert_string_equal(s, "record_7"); free(s);
	assert_int_equal(job_names_assign(n, "", 8, &s), 0);
	assert_string_equal(s, "record_8"); free(s);
	assert_int_equal(job_names_assign(n, NULL, 7, &s), 1);
	assert_string_equal(s, "record_7_2"); free(s);
	job_names_free(n);
}

static void test_unique_long(void **state)
{
	job_names_t *n = job_names_init();
	char in[300], *s;
	memset(in, 'q', sizeof in - 1);
	in[sizeof in - 1] = '\0';
	for (int k = 1; k <= 12; k++) {
		assert_true(job_names_assign(n, in, k, &s) >= 0);
		assert_safe(s);
		assert_int_equal(strlen(s), JOB_NAME_MAX);
		if (k == 12)
			assert_string_equal(s + JOB_NAME_MAX - 3, "_12");
		free(s);
	}
	job_names_free(n);
}

/* fragment names (NAME.partIofN, NAME.fragA-B) are no record's name */
static void test_reserved(void **state)
{
	static const char *const yes[] = { "a.part1of2", "a.PART12OF32", "x.y.part3of4",
	                                   "a.frag1-20", "A.FRAG21-40", ".part1of2" };
	static const char *const no[] = { "a.part1of", "a.partof2", "a.part1of2x", "a.part1f2",
	                                  "apart1of2", "a.frag1-", "a.frag-2", "a.frag1_2",
	                                  "a.part1of2_2", "a.frag1-20.b", "part1of2" };
	job_names_t *n = job_names_init();
	char *s;

	for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
		assert_true(job_name_reserved(yes[i]));
	for (size_t i = 0; i < sizeof no / sizeof *no; i++)
		assert_false(job_name_reserved(no[i]));
	assert_non_null(n);
	assert_int_equal(job_names_assign(n, "r", 1, &s), 0);
	assert_string_equal(s, "r"); free(s);
	assert_int_equal(job_names_assign(n, "r.part1of2", 2, &s), 1);
	assert_string_equal(s, "r.part1of2_2"); free(s);
	assert_int_equal(job_names_assign(n, "r.frag1-20", 3, &s), 1);
	assert_string_equal(s, "r.frag1-20_2"); free(s);
	assert_int_equal(job_names_assign(n, "R.Part1Of2", 4, &s), 1);
	assert_string_equal(s, "R.Part1Of2_3"); free(s);   /* _2 is taken, case-blind */
	job_names_free(n);
	(void)state;
}

static void test_deterministic(void **state)
{
	const char *in[] = { "x", "x", "X", "x_2", "..", "" };
	char *a[6], *b[6];
	for (int run = 0; run < 2; run++) {
		job_names_t *n = job_names_init();
		for (int i = 0; i < 6; i++) {
			char **dst = run ? &b[i] : &a[i];
			assert_true(job_names_assign(n, in[i], i + 1, dst) >= 0);
			assert_safe(*dst);
		}
		job_names_free(n);
	}
	for (int i = 0; i < 6; i++) {
		assert_string_equal(a[i], b[i]);
		for (int k = 0; k < i; k++)
			assert_string_not_equal(a[i], a[k]);
	}
	for (int i = 0; i < 6; i++) {
		free(a[i]);
		free(b[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_safe_name),
		cmocka_unit_test(test_length_bound),
		cmocka_unit_test(test_unique),
		cmocka_unit_test(test_unique_long),
		cmocka_unit_test(test_reserved),
		cmocka_unit_test(test_deterministic),
	};
	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
