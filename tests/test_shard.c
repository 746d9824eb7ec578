/* test_shard.c - the shard partition (sched/shard.h): a hand-worked LPT
 * case, ties by input order, balance within one record's cost, the same
 * partition twice, K/N and Slurm environment parsing and their errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sched/scheduler.h"
#include "sched/shard.h"

/* worked by hand: sorted 5,3,3,2,2,2 -> s0 5, s1 3, s1 6, s0 7, s1 8, s0 9 */
static void test_lpt_by_hand(void **state)
{
	const int64_t cost[] = { 5, 3, 3, 2, 2, 2 };
	const int want[] = { 0, 1, 1, 0, 1, 0 };
	int of[6];

	(void)state;
	assert_int_equal(shard_assign(cost, 6, 2, of), 0);
	assert_memory_equal(of, want, sizeof want);
}

/* equal costs: input order, round robin from shard 1; zero costs to the
 * least-loaded shard, the lowest on a tie */
static void test_ties(void **state)
{
	const int64_t cost[] = { 7, 7, 7, 7, 7, 0, 0 };
	const int want[] = { 0, 1, 2, 0, 1, 2, 2 };
	int of[7];

	(void)state;
	assert_int_equal(shard_assign(cost, 7, 3, of), 0);
	assert_memory_equal(of, want, sizeof want);
	/* more shards than records: the first ones get one each */
	assert_int_equal(shard_assign(cost, 2, 5, of), 0);
	assert_int_equal(of[0], 0);
	assert_int_equal(of[1], 1);
	assert_int_equal(shard_assign(cost, 0, 4, of), 0);
}

/* lengths 30..1400 in a scrambled order on the planner's cost: every
 * shard's load within the largest single cost of the mean (LPT's
 * guarantee: the last record placed went to the least-loaded shard), and
 * the same partition a second time */
static void test_balance(void **state)
{
	enum { N = 997, S = 7 };
	int64_t cost[N], load[S] = { 0 }, most = 0, total = 0;
	int of[N], again[N], count[S] = { 0 };

	(void)state;
	for (int i = 0; i < N; i++) {
		cost[i] = sched_cost(30 + (int)((i * 7919L) % 1371));
		if (cost[i] > most) most = cost[i];
		total += cost[i];
	}
	assert_int_equal(shard_assign(cost, N, S, of), 0);
	for (int i = 0; i < N; i++) {
		assert_in_range(of[i], 0, S - 1);
		load[of[i]] += cost[i];
		count[of[i]]++;
	}
	for (int k = 0; k < S; k++) {
		assert_true(count[k] > 0);
		assert_true(load[k] <= total / S + most);
		assert_true(load[k] >= total / S - most);
	}
	assert_int_equal(shard_assign(cost, N, S, again), 0);
	assert_memory_equal(of, again, sizeof of);
}

static void test_parse(void **state)
{
	static const char *const bad[] = { "", "3", "0/3", "4/3", "1/0", "-1/3", "1/3x", "a/b",
	                                   "1//3", "/3", "1/", " 1/3", "1/100001", "1/99999999999999999999" };
	shard_t s = { 0, 0 };
	char sfx[32];

	(void)state;
	assert_int_equal(shard_parse("2/3", &s), 0);
	assert_int_equal(s.k, 2);
	assert_int_equal(s.n, 3);
	assert_int_equal(shard_parse("1/1", &s), 0);
	assert_int_equal(s.n, 1);
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) assert_int_equal(shard_parse(bad[i], &s), -1);
	s.k = 12;
	s.n = 40;
	shard_suffix(&s, sfx, sizeof sfx);
	assert_string_equal(sfx, ".12-of-40");
	s.n = 0;
	shard_suffix(&s, sfx, sizeof sfx);
	assert_string_equal(sfx, "");
}

static void slurm_env(const char *id, const char *min, const char *count, const char *max,
                      const char *step)
{
	const char *const name[] = { "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_MIN",
	                             "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MAX",
	                             "SLURM_ARRAY_TASK_STEP" };
	const char *const val[] = { id, min, count, max, step };
	for (int i = 0; i < 5; i++) {
		if (val[i]) setenv(name[i], val[i], 1);
		else unsetenv(name[i]);
	}
}

static void test_auto(void **state)
{
	shard_t s = { 0, 0 };

	(void)state;
	slurm_env("5", "4", "4", "7", "1");   /* --array=4-7: task 5 is shard 2 of 4 */
	assert_int_equal(shard_parse("auto", &s), 0);
	assert_int_equal(s.k, 2);
	assert_int_equal(s.n, 4);
	slurm_env("0", "0", "3", NULL, NULL);
	assert_int_equal(shard_parse("auto", &s), 0);
	assert_int_equal(s.k, 1);
	assert_int_equal(s.n, 3);
	slurm_env(NULL, NULL, NULL, NULL, NULL);   /* not an array task */
	assert_int_equal(shard_parse("auto", &s), -1);
	slurm_env("3", "1", NULL, NULL, NULL);
	assert_int_equal(shard_parse("auto", &s), -1);
	slurm_env("9", "1", "4", NULL, NULL);      /* ID past MIN+COUNT-1 */
	assert_int_equal(shard_parse("auto", &s), -1);
	slurm_env("0", "1", "4", NULL, NULL);      /* ID below MIN */
	assert_int_equal(shard_parse("auto", &s), -1);
	slurm_env("3", "1", "3", "5", "2");        /* --array=1-5:2 */
	assert_int_equal(shard_parse("auto", &s), -1);
	slurm_env("3", "1", "3", "7", "1");        /* --array=1,3,7: gaps */
	assert_int_equal(shard_parse("auto", &s), -1);
	slurm_env("x", "1", "3", NULL, NULL);
	assert_int_equal(shard_parse("auto", &s), -1);
	slurm_env(NULL, NULL, NULL, NULL, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lpt_by_hand), cmocka_unit_test(test_ties),
		cmocka_unit_test(test_balance),     cmocka_unit_test(test_parse),
		cmocka_unit_test(test_auto),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
