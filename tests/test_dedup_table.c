/* test_dedup_table.c - records of the same sequence folded once:
 *  - the table (sched/dedup.h): the first record of a sequence is its
 *    own, every later one gets it back; case is the reader's, but letters
 *    the model has no residue of are all X, and chain breaks count where
 *    they are; thousands of sequences (the table grows) stay apart;
 *  - the fold command: 30 records of 10 distinct sequences (the demo
 *    model) call model_fold 10 times, counted by wrapping it at link time
 *    (-Wl,--wrap=model_fold), and 30 with --no-dedup.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "cli/fold.h"
#include "cli/options.h"
#include "model/model.h"
#include "sched/dedup.h"
#include "util/log.h"
#include "tmpdir.h"

static int n_fold;

int __real_model_fold(const model_t *m, const tok_t *t, const model_run_t *r, const model_plan_t *p,
                      model_out_t *out, char *err, size_t errcap);

int __wrap_model_fold(const model_t *m, const tok_t *t, const model_run_t *r, const model_plan_t *p,
                      model_out_t *out, char *err, size_t errcap)
{
	__atomic_add_fetch(&n_fold, 1, __ATOMIC_RELAXED);
	return __real_model_fold(m, t, r, p, out, err, errcap);
}

static void test_same(void **state)
{
	dedup_t *d = dedup_init();

	(void)state;
	assert_non_null(d);
	assert_int_equal(dedup_add(d, "MKTAYIAK", 0), 0);
	assert_int_equal(dedup_add(d, "MKTAYIAR", 1), 1);   /* one letter off */
	assert_int_equal(dedup_add(d, "MKTAYIAK", 2), 0);
	assert_int_equal(dedup_add(d, "MKTXYIAK", 3), 3);
	assert_int_equal(dedup_add(d, "MKTBYIAK", 4), 3);   /* B, Z, U, O, J: X to the model */
	assert_int_equal(dedup_add(d, "MKTZYIAK", 5), 3);
	assert_int_equal(dedup_add(d, "MKTA:YIAK", 6), 6);  /* a chain break is not nothing */
	assert_int_equal(dedup_add(d, "MKTAY:IAK", 7), 7);  /* nor is it anywhere */
	assert_int_equal(dedup_add(d, "MKTA:YIAK", 8), 6);
	assert_int_equal(dedup_add(d, "MKTAYIA", 9), 9);    /* a prefix */
	assert_int_equal(dedup_count(d), 6);
	dedup_free(d);
	dedup_free(NULL);
}

static void test_many(void **state)
{
	dedup_t *d = dedup_init();
	char s[32];

	(void)state;
	assert_non_null(d);
	for (int i = 0; i < 5000; i++) {
		snprintf(s, sizeof s, "M%dK", i);
		for (char *c = s; *c; c++)
			if (*c >= '0' && *c <= '9') *c = "ACDEFGHIKL"[*c - '0'];
		assert_int_equal(dedup_add(d, s, i), i);
	}
	for (int i = 4999; i >= 0; i--) {
		snprintf(s, sizeof s, "M%dK", i);
		for (char *c = s; *c; c++)
			if (*c >= '0' && *c <= '9') *c = "ACDEFGHIKL"[*c - '0'];
		assert_int_equal(dedup_add(d, s, 5000 + i), i);
	}
	assert_int_equal(dedup_count(d), 5000);
	dedup_free(d);
}

/* fold 30 records of 10 sequences into a fresh directory (extra: one
 * more argument or NULL); model_fold's calls */
static int fold_count(const char *fa, const char *extra)
{
	char dir[256], cmd[300];
	char *argv[] = { "esmbatch", "fold", "-q", "-i", (char *)fa, "-o", dir, "--weights",
		         TEST_DATA "/../../data/demo/esmfold_demo.safetensors", "--devices", "cpu",
		         "--num-recycles", "0", (char *)extra, NULL };
	opt_t o;

	assert_non_null(mkdtemp(tmpdir_template(dir, sizeof dir, "esmbatch-dedup")));
	opt_init(&o);
	assert_int_equal(opt_parse(&o, extra ? 14 : 13, argv), 0);
	assert_int_equal(opt_validate(&o), 0);
	n_fold = 0;
	assert_int_equal(fold_main(&o), EXIT_OK);
	opt_free(&o);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	return n_fold;
}

static void test_fold_once(void **state)
{
	char fa[256];
	int fd = tmpdir_template(fa, sizeof fa - 3, "esmbatch-dedup") ? mkstemps(strcat(fa, ".fa"), 3) : -1;
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;

	(void)state;
	assert_non_null(f);
	/* sequence k of 10 (20 to 39 residues, xorshift), thrice, the second
	 * lower-case; k = 7 a dimer */
	for (int i = 0; i < 30; i++) {
		int k = (i * 7) % 10;
		uint32_t y = 2463534242u + k;
		fprintf(f, ">rec%d\n", i);
		for (int j = 0; j < 20 + 2 * k; j++) {
			y ^= y << 13, y ^= y >> 17, y ^= y << 5;
			char c = "ACDEFGHIKLMNPQRSTVWY"[y % 20];
			if (k == 7 && j == 10) fputc(':', f);
			fputc(i / 10 == 1 ? c - 'A' + 'a' : c, f);
		}
		fputc('\n', f);
	}
	assert_int_equal(fclose(f), 0);
	assert_int_equal(fold_count(fa, NULL), 10);
	assert_int_equal(fold_count(fa, "--no-dedup"), 30);
	unlink(fa);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same),
		cmocka_unit_test(test_many),
		cmocka_unit_test(test_fold_once),
	};
	log_set_level(LOG_WARN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
