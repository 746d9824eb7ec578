/* test_atomic.c - atomic files: the temporary name is PATH.tmp.PID, so
 * two processes writing the same PATH never share a temporary, and a
 * temporary of another process (or of the old PATH.tmp form) is left
 * alone; a write given up leaves neither PATH nor its temporary.  The
 * output rule: a symlink at a temporary's name is removed, never written
 * through; a symlink, FIFO or directory at PATH is refused and stays;
 * atomic_file_open_fd refuses a symlink and, for writing, a file with
 * another hard link; files sealed together are renamed together or not
 * at all. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "io/atomic_file.h"
#include "tmpdir.h"

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
	char dir[200], path[256], old[300], other[300], mine[300];
	atomic_file_t a;
	char *back;

	(void)state;
	assert_non_null(mkdtemp(tmpdir_template(dir, sizeof dir, "test_atomic")));
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

static void test_rule(void **state)
{
	char dir[200], path[256], out[300], tmp[300], lnk[300], fifo[300],
	     hard[300];
	atomic_file_t a;
	struct stat st;
	char *back;

	(void)state;
	assert_non_null(mkdtemp(tmpdir_template(dir, sizeof dir, "test_atomic")));
	snprintf(path, sizeof path, "%s/out.txt", dir);
	snprintf(out, sizeof out, "%s/outside", dir);
	snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
	snprintf(lnk, sizeof lnk, "%s/link", dir);
	snprintf(fifo, sizeof fifo, "%s/fifo", dir);
	snprintf(hard, sizeof hard, "%s/hard", dir);
	put(out, "outside\n");

	/* a symlink at the temporary's name: removed, not written through */
	assert_int_equal(symlink(out, tmp), 0);
	assert_non_null(atomic_file_open(&a, path));
	fputs("mine\n", a.f);
	assert_int_equal(atomic_file_close(&a, 1), 0);
	assert_non_null(back = slurp(out));
	assert_string_equal(back, "outside\n");
	free(back);
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));

	/* a symlink or FIFO at PATH: refused, left as it is */
	assert_int_equal(symlink(out, lnk), 0);
	assert_null(atomic_file_open(&a, lnk));
	assert_int_equal(lstat(lnk, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_null(atomic_file_open(&a, fifo));
	assert_int_equal(atomic_file_check(fifo), -1);
	assert_int_equal(atomic_file_check(path), 0);
	assert_int_equal(lstat(fifo, &st), 0);
	assert_true(S_ISFIFO(st.st_mode));

	/* opened in place: no symlink, no FIFO, no second hard link for writing */
	assert_int_equal(atomic_file_open_fd(lnk, O_RDONLY), -1);
	assert_int_equal(atomic_file_open_fd(lnk, O_WRONLY | O_CREAT | O_APPEND), -1);
	assert_int_equal(atomic_file_open_fd(fifo, O_RDONLY), -1);
	assert_int_equal(link(out, hard), 0);
	assert_int_equal(atomic_file_open_fd(hard, O_WRONLY | O_TRUNC), -1);
	assert_non_null(back = slurp(out));
	assert_string_equal(back, "outside\n");
	free(back);
	int fd = atomic_file_open_fd(path, O_RDONLY);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(atomic_file_same(hard, out), 1);
	assert_int_equal(atomic_file_same(path, out), 0);
	assert_int_equal(atomic_file_beside(hard, path), 1);

	unlink(path);
	unlink(out);
	unlink(lnk);
	unlink(fifo);
	unlink(hard);
	assert_int_equal(rmdir(dir), 0);
}

static void test_sealed_together(void **state)
{
	char dir[200], p1[256], p2[256];
	atomic_file_t a, b;
	char *back;

	(void)state;
	assert_non_null(mkdtemp(tmpdir_template(dir, sizeof dir, "test_atomic")));
	snprintf(p1, sizeof p1, "%s/x.pdb", dir);
	snprintf(p2, sizeof p2, "%s/x.cif", dir);
	put(p1, "old pdb\n");
	/* the second cannot be written: the first is given up, its old version stays */
	assert_non_null(atomic_file_open(&a, p1));
	fputs("new pdb\n", a.f);
	assert_int_equal(atomic_file_seal(&a, 1), 0);
	assert_null(a.f);
	assert_int_equal(mkdir(p2, 0700), 0);
	assert_null(atomic_file_open(&b, p2));
	assert_true(atomic_file_close(&a, 0) < 0);
	assert_non_null(back = slurp(p1));
	assert_string_equal(back, "old pdb\n");
	free(back);
	assert_int_equal(rmdir(p2), 0);
	/* both sealed: both renamed */
	assert_non_null(atomic_file_open(&a, p1));
	assert_non_null(atomic_file_open(&b, p2));
	fputs("new pdb\n", a.f);
	fputs("new cif\n", b.f);
	assert_int_equal(atomic_file_seal(&a, 1), 0);
	assert_int_equal(atomic_file_seal(&b, 1), 0);
	assert_int_equal(atomic_file_close(&a, 1), 0);
	assert_int_equal(atomic_file_close(&b, 1), 0);
	assert_non_null(back = slurp(p1));
	assert_string_equal(back, "new pdb\n");
	free(back);
	assert_non_null(back = slurp(p2));
	assert_string_equal(back, "new cif\n");
	free(back);
	unlink(p1);
	unlink(p2);
	assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tmp_per_process),
		cmocka_unit_test(test_rule),
		cmocka_unit_test(test_sealed_together),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
