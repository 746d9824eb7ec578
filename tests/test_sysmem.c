/* test_sysmem.c - the cgroup memory limit in a fake cgroup tree (a temporary
 * directory standing for /sys/fs/cgroup, a file for /proc/self/cgroup):
 * cgroup v2 and v1, a limit set on a parent (Slurm's job level), the
 * tighter of two levels, no limit, usage over the limit, the inactive file
 * cache counted as free, and no cgroup file at all. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "util/sysmem.h"
#include "tmpdir.h"

#define GIB (1LL << 30)
#define MIB (1LL << 20)

static char root[64];
static char self[96];

/* root/rel/file := text, making rel's directories */
static void put(const char *rel, const char *file, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", root, rel);
	for (char *p = path + strlen(root) + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			mkdir(path, 0700);
			*p = '/';
		}
	mkdir(path, 0700);
	snprintf(path, sizeof path, "%s/%s/%s", root, rel, file);
	assert_non_null(f = fopen(path, "w"));
	fputs(text, f);
	fclose(f);
}

static void put_self(const char *text)
{
	FILE *f = fopen(self, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int setup(void **state)
{
	(void)state;
	if (!tmpdir_template(root, sizeof root, "sysmem") || !mkdtemp(root)) return -1;
	snprintf(self, sizeof self, "%s/self.cgroup", root);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];
	(void)state;
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
	return system(cmd) == 0 ? 0 : -1;
}

/* Slurm on cgroup v2: --mem=8G on the job, "max" on the step and task */
static void v2_job_limit(void **state)
{
	(void)state;
	put_self("0::/system.slice/slurmstepd.scope/job_7/step_0/user/task_0\n");
	put("system.slice/slurmstepd.scope/job_7", "memory.max", "8589934592\n");
	put("system.slice/slurmstepd.scope/job_7", "memory.current", "1073741824\n");
	put("system.slice/slurmstepd.scope/job_7/step_0", "memory.max", "max\n");
	put("system.slice/slurmstepd.scope/job_7/step_0/user/task_0", "memory.max", "max\n");
	put("system.slice/slurmstepd.scope/job_7/step_0/user/task_0", "memory.current", "4096\n");
	assert_int_equal(sysmem_cgroup_available(root, self), 7 * GIB);
	/* the page cache it may reclaim counts as free */
	put("system.slice/slurmstepd.scope/job_7", "memory.stat",
	    "anon 536870912\nfile 536870912\ninactive_file 268435456\nactive_file 1\n");
	assert_int_equal(sysmem_cgroup_available(root, self), 7 * GIB + 256 * MIB);
}

/* the tighter of a container's limit (the mount root) and the job's */
static void v2_tighter_level(void **state)
{
	(void)state;
	put_self("0::/job\n");
	put(".", "memory.max", "2147483648\n");
	put(".", "memory.current", "1610612736\n");
	put("job", "memory.max", "4294967296\n");
	put("job", "memory.current", "0\n");
	assert_int_equal(sysmem_cgroup_available(root, self), 512 * MIB);
}

static void v2_no_limit(void **state)
{
	(void)state;
	put_self("0::/user.slice/session-1.scope\n");
	put("user.slice/session-1.scope", "memory.max", "max\n");
	put("user.slice/session-1.scope", "memory.current", "123456\n");
	assert_int_equal(sysmem_cgroup_available(root, self), -1);
}

static void v2_over_limit(void **state)
{
	(void)state;
	put_self("0::/a\n");
	put("a", "memory.max", "1048576\n");
	put("a", "memory.current", "2097152\n");
	assert_int_equal(sysmem_cgroup_available(root, self), 0);
}

/* cgroup v1 (hybrid: the v2 line is there too; the memory controller's wins) */
static void v1_limit(void **state)
{
	(void)state;
	put_self("12:pids:/slurm/uid_1/job_3\n4:cpu,memory:/slurm/uid_1/job_3/step_batch\n0::/\n");
	put("memory/slurm/uid_1/job_3", "memory.limit_in_bytes", "17179869184\n");
	put("memory/slurm/uid_1/job_3", "memory.usage_in_bytes", "5368709120\n");
	put("memory/slurm/uid_1/job_3", "memory.stat", "cache 10\ninactive_file 9\ntotal_inactive_file 1073741824\n");
	/* v1's "no limit": INT64_MAX rounded down to a page */
	put("memory/slurm/uid_1/job_3/step_batch", "memory.limit_in_bytes", "9223372036854771712\n");
	put("memory/slurm/uid_1/job_3/step_batch", "memory.usage_in_bytes", "5368709120\n");
	put(".", "memory.max", "1\n");   /* a v2 file the v1 reading ignores */
	assert_int_equal(sysmem_cgroup_available(root, self), 12 * GIB);
}

static void v1_no_limit(void **state)
{
	(void)state;
	put_self("4:memory:/process\n");
	put("memory/process", "memory.limit_in_bytes", "9223372036854771712\n");
	put("memory", "memory.limit_in_bytes", "9223372036854771712\n");
	assert_int_equal(sysmem_cgroup_available(root, self), -1);
}

/* a path /proc/self/cgroup names that the mount does not show (no cgroup
 * namespace): the levels that are there still count */
static void missing_levels(void **state)
{
	(void)state;
	put_self("0::/not/mounted/here\n");
	put(".", "memory.max", "3221225472\n");
	put(".", "memory.current", "1073741824\n");
	assert_int_equal(sysmem_cgroup_available(root, self), 2 * GIB);
}

static void no_cgroup(void **state)
{
	char none[128];
	(void)state;
	snprintf(none, sizeof none, "%s/absent", root);
	assert_int_equal(sysmem_cgroup_available(root, none), -1);
	put_self("garbage\n");
	assert_int_equal(sysmem_cgroup_available(root, self), -1);
	/* the real machine: a size, or -1 where nothing is known */
	assert_true(sysmem_available() == -1 || sysmem_available() > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(v2_job_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(v2_tighter_level, setup, teardown),
		cmocka_unit_test_setup_teardown(v2_no_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(v2_over_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(v1_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(v1_no_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(missing_levels, setup, teardown),
		cmocka_unit_test_setup_teardown(no_cgroup, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
