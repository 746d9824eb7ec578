/* test_quota.c - quota table TSV: the shipped reference table, every kind
 * of malformed table, lookups, and a write/read round trip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "util/log.h"
#include "sched/quota.h"
#include "tmpdir.h"

#define GIB (1LL << 30)
#define HDR "#esmbatch-quota\tv1\tdevice=GPU X\tprecision=bf16\tweights=sha256:ab\tsafety=1.15\n"
#define COLS "max_len\tpeak_allocated\tpeak_reserved\tdevice_used\tquota\n"

static quota_table_t *parse(const char *text)
{
	FILE *fp = fmemopen((void *)text, strlen(text), "r");
	quota_table_t *t;
	assert_non_null(fp);
	t = quota_read_fp(fp, "mem");
	fclose(fp);
	return t;
}

/* quota_read_fp of text (named "q.tsv") with stderr captured into log */
static quota_table_t *parse_logged(const char *text, char *log, size_t n)
{
	FILE *fp = fmemopen((void *)text, strlen(text), "r"), *tmp = tmpfile();
	int saved = dup(2);
	quota_table_t *t;

	assert_non_null(fp);
	assert_non_null(tmp);
	fflush(stderr);
	dup2(fileno(tmp), 2);
	t = quota_read_fp(fp, "q.tsv");
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	fclose(fp);
	rewind(tmp);
	log[fread(log, 1, n - 1, tmp)] = 0;
	fclose(tmp);
	return t;
}

static void test_reference_table(void **state)
{
	quota_table_t *t = quota_read(TEST_DATA "/../../buckets/reference-pytorch-rtx5090.tsv");
	bucket_set_t bs;
	assert_non_null(t);
	assert_int_equal(t->nrows, 5);
	assert_string_equal(t->precision, "bf16");
	assert_non_null(strstr(t->device, "RTX 5090"));
	assert_non_null(strstr(quota_get(t, "engine"), "PyTorch"));
	assert_int_equal(t->rows[0].max_len, 256);
	assert_int_equal(t->rows[4].max_len, 1344);
	/* 24.2 / 28.3 / 31 GiB at 1344, device_used unknown */
	assert_int_equal(t->rows[4].peak_allocated, (int64_t)(24.2 * GIB + 0.5));
	assert_int_equal(t->rows[4].peak_reserved, (int64_t)(28.3 * GIB + 0.5));
	assert_int_equal(t->rows[4].device_used, -1);
	assert_int_equal(t->rows[4].quota, 31 * GIB);
	assert_int_equal(t->rows[1].quota, 14 * GIB);
	bucket_set_default(&bs);
	assert_int_equal(quota_for_bucket(t, &bs, 0), 14 * GIB);
	assert_int_equal(quota_for_bucket(t, &bs, 1), 20 * GIB);
	assert_int_equal(quota_for_bucket(t, &bs, 2), 26 * GIB);
	assert_int_equal(quota_for_bucket(t, &bs, 3), 31 * GIB);
	assert_int_equal(quota_for_bucket(t, &bs, 4), -1);
	assert_int_equal(quota_find(t, 1)->max_len, 256);
	assert_int_equal(quota_find(t, 257)->max_len, 512);
	assert_null(quota_find(t, 1345));
	quota_free(t);
}

static void test_minimal(void **state)
{
	quota_table_t *t = parse(HDR "# comment\n\n" COLS "512\t-\t-\t-\t100\r\n# x\n768\t1\t2\t3\t200");
	assert_non_null(t);
	assert_string_equal(t->device, "GPU X");
	assert_string_equal(t->weights, "sha256:ab");
	assert_true(t->safety > 1.149 && t->safety < 1.151);
	assert_int_equal(t->nrows, 2);
	assert_int_equal(t->rows[0].peak_allocated, -1);
	assert_int_equal(t->rows[1].device_used, 3);
	assert_int_equal(t->rows[1].quota, 200);
	quota_free(t);
}

static void test_malformed(void **state)
{
	static const char *bad[] = {
		"",                                              /* empty */
		HDR,                                             /* no columns */
		HDR COLS,                                        /* no rows */
		"max_len\tpeak_allocated\n512\t1\t1\t1\t1\n",    /* no header */
		"#esmbatch-quota\tv2\tdevice=a\tprecision=b\tweights=c\tsafety=1.1\n" COLS "512\t1\t1\t1\t1\n",
		"#esmbatch-quota\tv1\tprecision=b\tweights=c\tsafety=1.1\n" COLS "512\t1\t1\t1\t1\n",
		"#esmbatch-quota\tv1\tdevice=a\tprecision=b\tweights=c\n" COLS "512\t1\t1\t1\t1\n",
		"#esmbatch-quota\tv1\tdevice=a\tprecision=b\tweights=c\tsafety=0.5\n" COLS "512\t1\t1\t1\t1\n",
		"#esmbatch-quota\tv1\tdevice=a\tprecision=b\tweights=c\tsafety=abc\n" COLS "512\t1\t1\t1\t1\n",
		"#esmbatch-quota\tv1\tdevice=a\tprecision=b\tweights=c\tsafety=1.1\tsafety=1.2\n" COLS "512\t1\t1\t1\t1\n",
		"#esmbatch-quota\tv1\tdevice=a\tdevice=b\tprecision=b\tweights=c\tsafety=1.1\n" COLS "512\t1\t1\t1\t1\n",
		"#esmbatch-quota\tv1\tdevice\tprecision=b\tweights=c\tsafety=1.1\n" COLS "512\t1\t1\t1\t1\n",
		"#esmbatch-quota\tv1\tdevice=a\tprecision=b\tweights=c\tsafety=1.1\tbad key=1\n" COLS "512\t1\t1\t1\t1\n",
		HDR "max_len\tquota\n512\t1\n",                   /* wrong columns */
		HDR COLS "512\t1\t1\t1\n",                        /* 4 fields */
		HDR COLS "512\t1\t1\t1\t1\t1\n",                  /* 6 fields */
		HDR COLS "512\t1\t1\t1\t-\n",                     /* unknown quota */
		HDR COLS "512\t1\t1\t1\t0\n",                     /* zero quota */
		HDR COLS "-\t1\t1\t1\t1\n",                       /* unknown max_len */
		HDR COLS "0\t1\t1\t1\t1\n",                       /* zero max_len */
		HDR COLS "512\t-1\t1\t1\t1\n",                    /* negative */
		HDR COLS "512\t1.5\t1\t1\t1\n",                   /* not integer */
		HDR COLS "512\t12GB\t1\t1\t1\n",                  /* unit */
		HDR COLS "512\t1e9\t1\t1\t1\n",                   /* exponent */
		HDR COLS "512\t 1\t1\t1\t1\n",                    /* blank */
		HDR COLS "512\t99999999999999999999\t1\t1\t1\n",  /* overflow */
		HDR COLS "768\t1\t1\t1\t1\n512\t1\t1\t1\t1\n",    /* descending */
		HDR COLS "512\t1\t1\t1\t1\n512\t1\t1\t1\t2\n",    /* duplicate */
		HDR COLS "512\t1\t1\t1\t9223372036854775807\n",    /* quota past 2^50 */
		HDR COLS "512\t1\t1125899906842625\t1\t1\n",       /* figure past 2^50 */
		HDR COLS "2147483648\t1\t1\t1\t1\n",               /* max_len past 2^31 - 1 */
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		quota_table_t *t = parse(bad[i]);
		if (t)
			fail_msg("malformed table %zu was accepted", i);
	}
}

/* the numeric header keys: out of range or not a number, each refused
 * with one line naming the file, the line and the key */
static void test_header_numbers(void **state)
{
	static const char *bad[] = {
		"worker_overhead=9223372036854775807", "worker_overhead=1125899906842625",
		"worker_overhead=-1", "worker_overhead=1e9", "worker_overhead=", "worker_overhead=12GB",
		"memory=-5", "context=0x10", "weights_bytes=1.5", "chunk_size=1048577", "recycles=-2",
		"recycles=65", "seconds_per_cost=nan", "seconds_per_cost=inf", "seconds_per_cost=-1",
		"seconds_per_cost=1e300", "seconds_per_cost=0x1p3", "safety=nan", "safety=1e300",
	};
	static const char *good[] = {
		"worker_overhead=0", "worker_overhead=1125899906842624", "recycles=-1", "chunk_size=64",
		"seconds_per_cost=2.5e-05", "memory=34359738368",
	};
	char text[512], log[4096], *eq;
	quota_table_t *t;

	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		char want[64];
		snprintf(text, sizeof text, "#esmbatch-quota\tv1\tdevice=a\tprecision=b\tweights=c\t%s%s\n" COLS
		         "512\t1\t1\t1\t1\n", bad[i], strncmp(bad[i], "safety=", 7) ? "\tsafety=1.1" : "");
		t = parse_logged(text, log, sizeof log);
		if (t) fail_msg("header field '%s' was accepted", bad[i]);
		/* one line: file, line and key */
		snprintf(want, sizeof want, "q.tsv:1: %.*s must be ", (int)(strchr(bad[i], '=') - bad[i]), bad[i]);
		if (!strstr(log, want) || strchr(log, '\n') != log + strlen(log) - 1)
			fail_msg("header field '%s': '%s'", bad[i], log);
	}
	for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
		snprintf(text, sizeof text, HDR COLS "512\t1\t1\t1\t1\n");
		eq = strchr(text, '\n');
		memmove(eq + 1 + strlen(good[i]), eq, strlen(eq) + 1);
		eq[0] = '\t';
		memcpy(eq + 1, good[i], strlen(good[i]));
		if (!(t = parse(text))) fail_msg("header field '%s' was refused", good[i]);
		quota_free(t);
	}
	/* a row's field out of range is named too */
	assert_null(parse_logged(HDR COLS "512\t1\t1\t1\t1\n768\t1\t1\t1\t9223372036854775807\n",
	                         log, sizeof log));
	if (!strstr(log, "q.tsv:4: quota must be ")) fail_msg("row field: '%s'", log);
	assert_null(parse_logged(HDR COLS "512\t1\t-5\t1\t1\n", log, sizeof log));
	if (!strstr(log, "q.tsv:3: peak_reserved must be ")) fail_msg("row field: '%s'", log);
	/* a quota past the bound cannot be added either */
	{
		quota_row_t r = { 512, 1, 1, 1, QUOTA_BYTES_MAX + 1 };
		assert_non_null(t = quota_init());
		assert_int_equal(quota_add_row(t, &r), -1);
		assert_int_equal(quota_set(t, "worker_overhead", "-1"), -1);
		assert_int_equal(quota_set(t, "worker_overhead", "4096"), 0);
		quota_free(t);
	}
}

static void test_missing_file(void **state)
{
	assert_null(quota_read(TEST_DATA "/no/such/table.tsv"));
}

static void test_round_trip(void **state)
{
	char dir[200], path[256];
	quota_table_t *t = quota_init(), *u;
	quota_row_t r1 = { 512, 1000, 2000, -1, 2300 };
	quota_row_t r2 = { 1024, 3000, 4000, 9000, 4600 };
	quota_row_t r0 = { 256, 1, 1, 1, 1 };

	assert_non_null(mkdtemp(tmpdir_template(dir, sizeof dir, "esmbatch-quota")));
	snprintf(path, sizeof path, "%s/q.tsv", dir);
	assert_int_equal(quota_write(t, path), -1);      /* no device yet */
	assert_int_equal(quota_set(t, "device", "NVIDIA H200"), 0);
	assert_int_equal(quota_set(t, "precision", "fp32"), 0);
	assert_int_equal(quota_set(t, "weights", "sha256:00ff"), 0);
	assert_int_equal(quota_set(t, "safety", "1.3"), 0);
	assert_int_equal(quota_set(t, "chunk_size", "64"), 0);
	assert_int_equal(quota_set(t, "bad key", "1"), -1);
	assert_int_equal(quota_set(t, "note", "tab\there"), -1);
	assert_int_equal(quota_set(t, "safety", "0.9"), -1);
	assert_int_equal(quota_add_row(t, &r1), 0);
	assert_int_equal(quota_add_row(t, &r2), 0);
	assert_int_equal(quota_add_row(t, &r0), -1);     /* not ascending */
	assert_int_equal(quota_write(t, path), 0);
	assert_int_equal(access(path, R_OK), 0);
	u = quota_read(path);
	assert_non_null(u);
	assert_string_equal(u->device, "NVIDIA H200");
	assert_string_equal(u->precision, "fp32");
	assert_string_equal(u->weights, "sha256:00ff");
	assert_true(u->safety == 1.3);
	assert_string_equal(quota_get(u, "chunk_size"), "64");
	assert_null(quota_get(u, "nope"));
	assert_int_equal(u->nrows, 2);
	assert_memory_equal(&u->rows[0], &r1, sizeof r1);
	assert_memory_equal(&u->rows[1], &r2, sizeof r2);
	quota_free(t);
	quota_free(u);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reference_table),
		cmocka_unit_test(test_minimal),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_header_numbers),
		cmocka_unit_test(test_missing_file),
		cmocka_unit_test(test_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
