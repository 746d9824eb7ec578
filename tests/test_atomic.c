/* test_atomic.c - atomic files: the temporary name is PATH.tmp.PID, so
 * two processes writing the same PATH never share a temporary, and a
 * temporary of another process (or of the old PATH.tmp form) is left
 * alone; a write given up leaves neither PATH nor its temporary. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "io/atomic_file.h"

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = calloc(1, 256);

	if (!f || !buf) {
		if (f) fclose(f);
		free(buf);
		return NULL;
	}
	if (fread(buf, 1, 255, f) == 0) buf[0] = 0;
	fclose(f);
	return buf;
}

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static void test_tmp_per_process(void **state)
{
	char dir[] = "/tmp/test_atomic.XXXXXX", path[256], old[300], other[300], mine[300];
	atomic_file_t a;
	char *back;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/out.txt", dir);
	snprintf(old, sizeof old, "%s.tmp", path);
	snprintf(other, sizeof other, "%s.tmp.%ld", path, (long)getpid() + 1);
	snprintf(mine, sizeof mine, "%s.tmp.%ld", path, (long)getpid());
	put(old, "another writer's\n");
	put(other, "another process's\n");

	assert_non_null(atomic_file_open(&a, path));
	assert_string_equal(a.tmp, mine);
	assert_int_equal(access(mine, F_OK), 0);
	fputs("mine\n", a.f);
	assert_int_equal(atomic_file_close(&a, 1), 0);
	assert_int_equal(access(mine, F_OK), -1);
	assert_non_null(back = slurp(path));
	assert_string_equal(back, "mine\n");
	free(back);
	/* the others' temporaries are untouched */
	assert_non_null(back = slurp(old));
	assert_string_equal(back, "another writer's\n");
	free(back);
	assert_non_null(back = slurp(other));
	assert_string_equal(back, "another process's\n");
	free(back);

	/* given up: no file, no temporary; the old file stays */
	assert_non_null(atomic_file_open(&a, path));
	fputs("half", a.f);
	assert_true(atomic_file_close(&a, 0) < 0);
	assert_int_equal(access(mine, F_OK), -1);
	assert_non_null(back = slurp(path));
	assert_string_equal(back, "mine\n");
	free(back);

	unlink(path);
	unlink(old);
	unlink(other);
	assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tmp_per_process),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
