/* test_fasta.c - FASTA intake: every accepted form, every bad input the
 * input rules name (each asserting the job's status and exact reason), the
 * compressed and stdin paths, fatal file errors, and --names with and
 * without a .fai index. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <htslib/faidx.h>

#include "io/fasta.h"
#include "model/tokenizer.h"
#include "io/job.h"
#include "util/lines.h"
#include "util/log.h"
#include "tmpdir.h"

#define FX TEST_DATA "/fasta/"
#define MAXJ 64

typedef struct { int n; job_t j[MAXJ]; } jobs_t;

static char tmpdir[64];

static int setup(void **state)
{
	return tmpdir_template(tmpdir, sizeof tmpdir, "esmbatch-fasta") && mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static void tmp_path(char *buf, size_t cap, const char *name)
{
	snprintf(buf, cap, "%s/%s", tmpdir, name);
}

static void write_file(const char *path, const char *data, size_t n)
{
	FILE *fp = fopen(path, "wb");
	assert_non_null(fp);
	assert_int_equal(fwrite(data, 1, n, fp), n);
	assert_int_equal(fclose(fp), 0);
}

/* read every job; returns fasta_next's last status (0 or -1) */
static int read_all(const char *path, const char *names, jobs_t *js)
{
	fasta_t *r = fasta_open(path, names, NULL);
	job_t j;
	int rc;

	js->n = 0;
	if (!r)
		return -2;
	job_init(&j);
	while ((rc = fasta_next(r, &j)) > 0) {
		assert_true(js->n < MAXJ);
		js->j[js->n++] = j;       /* the copy owns the strings now */
		job_init(&j);
	}
	job_free(&j);
	fasta_close(r);
	return rc;
}

/* 1 when fasta_open reads fa through its .fai for names */
static int index_used(const char *fa, const char *names)
{
	fasta_t *r = fasta_open(fa, names, NULL);
	int used;

	assert_non_null(r);
	used = fasta_uses_index(r);
	fasta_close(r);
	return used;
}

static void free_all(jobs_t *js)
{
	for (int i = 0; i < js->n; i++)
		job_free(&js->j[i]);
	js->n = 0;
}

static void assert_ok(const job_t *j, const char *name, const char *seq)
{
	if (j->status != JOB_OK)
		fail_msg("%s: expected ok, got failed: %s", name, j->reason);
	assert_string_equal(j->name, name);
	assert_string_equal(j->seq, seq);
	assert_null(j->reason);
}

static void assert_failed(const job_t *j, const char *reason)
{
	if (j->status != JOB_FAILED)
		fail_msg("expected failed '%s', got ok", reason);
	assert_null(j->seq);
	assert_int_equal(j->len, 0);
	assert_non_null(j->reason);
	assert_string_equal(j->reason, reason);
}

/* the five records of good.fa, from any container */
static void check_good(jobs_t *js)
{
	assert_int_equal(js->n, 5);
	assert_ok(&js->j[0], "seq1", "MKTAYIAKQRQISFVKSHFSRQ");
	assert_string_equal(js->j[0].header, "seq1 first  record");
	assert_int_equal(js->j[0].len, 22);
	assert_int_equal(js->j[0].nchains, 1);
	assert_ok(&js->j[1], "seq2", "MKTAYIAKQR");          /* lower case, '*' */
	assert_ok(&js->j[2], "seq3", "ACDEFGHIKLMNPQRSTVWYXBZUOJ");
	assert_ok(&js->j[3], "dimer", "MKTAYIAKQR:GSHMSELKNV"); /* trailing blanks */
	assert_int_equal(js->j[3].len, 20);
	assert_int_equal(js->j[3].nchains, 2);
	assert_int_equal(tok_model_len(js->j[3].len, js->j[3].nchains), 20 + TOK_LINKER_LEN);
	assert_ok(&js->j[4], "one", "M");
	for (int i = 0; i < 5; i++) {
		assert_int_equal(js->j[i].index, i);
		assert_int_equal(js->j[i].recno, i + 1);
		assert_string_equal(js->j[i].outname, js->j[i].name);
	}
}

/* the same records, plain, gzip and BGZF */
static void test_good_containers(void **state)
{
	static const char *files[] = { FX "good.fa", FX "good.fa.gz", FX "good.fa.bgz" };
	for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
		jobs_t js;
		assert_int_equal(read_all(files[i], NULL, &js), 0);
		check_good(&js);
		free_all(&js);
	}
}

static void test_stdin(void **state)
{
	jobs_t js;
	int saved = dup(0), fd = open(FX "good.fa.gz", O_RDONLY);
	assert_true(saved >= 0 && fd >= 0);
	assert_int_equal(dup2(fd, 0), 0);
	close(fd);
	assert_int_equal(read_all("-", NULL, &js), 0);
	dup2(saved, 0);
	close(saved);
	check_good(&js);
	free_all(&js);
}

static void test_crlf_no_final_newline(void **state)
{
	jobs_t js;
	assert_int_equal(read_all(FX "crlf_nonl.fa", NULL, &js), 0);
	assert_int_equal(js.n, 2);
	assert_ok(&js.j[0], "a", "MKVLAAG");
	assert_string_equal(js.j[0].header, "a desc");
	assert_ok(&js.j[1], "b", "GSHM");
	free_all(&js);
}

static void test_bad_records(void **state)
{
	static const struct { const char *name, *seq, *reason; } want[] = {
		{ "", NULL, "record 1: sequence before the first header (line 1)" },
		{ "digit", NULL, "record 2 'digit': invalid character '7' at position 4 (line 4)" },
		{ "ok1", "MKV", NULL },
		{ "dash", NULL, "record 4 'dash': invalid character '-' at position 3 (line 8)" },
		{ "dot", NULL, "record 5 'dot': invalid character '.' at position 5 (line 10)" },
		{ "innerstar", NULL, "record 6 'innerstar': '*' inside the sequence at position 3 (line 12)" },
		{ "ok2", "ACD", NULL },
		{ "ctrl", NULL, "record 8 'ctrl': invalid byte 0x01 at position 3 (line 16)" },
		{ "nul", NULL, "record 9 'nul': invalid byte 0x00 at position 4 (line 18)" },
		{ "tab", NULL, "record 10 'tab': invalid byte 0x09 at position 3 (line 20)" },
		{ "space", NULL, "record 11 'space': invalid byte 0x20 at position 3 (line 22)" },
		{ "empty", NULL, "record 12 'empty': empty sequence" },
		{ "emptystar", NULL, "record 13 'emptystar': empty sequence" },
		{ "colonstart", NULL, "record 14 'colonstart': chain separator ':' at the start, position 1 (line 27)" },
		{ "colonend", NULL, "record 15 'colonend': chain separator ':' at the end, position 4 (line 29)" },
		{ "colonendstar", NULL, "record 16 'colonendstar': chain separator ':' at the end, position 4 (line 31)" },
		{ "doublecolon", NULL, "record 17 'doublecolon': empty chain '::' at position 5 (line 33)" },
		{ "twostars", NULL, "record 18 'twostars': '*' inside the sequence at position 4 (line 35)" },
		{ "", NULL, "record 19: header has no name (line 36)" },
		{ "", NULL, "record 20: header has no name (line 38)" },
		{ "ok3", "MKVLAAG", NULL },
	};
	const int n = (int)(sizeof want / sizeof *want);
	jobs_t js;

	assert_int_equal(read_all(FX "bad.fa", NULL, &js), 0);
	assert_int_equal(js.n, n);
	for (int i = 0; i < n; i++) {
		const job_t *j = &js.j[i];
		assert_int_equal(j->index, i);
		assert_int_equal(j->recno, i + 1);
		assert_string_equal(j->name, want[i].name);
		assert_non_null(j->outname);
		if (want[i].seq)
			assert_ok(j, want[i].name, want[i].seq);
		else
			assert_failed(j, want[i].reason);
	}
	/* names for records without one come from the record number */
	assert_string_equal(js.j[0].outname, "record_1");
	assert_string_equal(js.j[18].outname, "record_19");
	assert_string_equal(js.j[20].header, "ok3 last");
	free_all(&js);
}

static void test_check_seq(void **state)
{
	char s1[] = "mkv:aaG*", s2[] = "MK1", s3[] = "", why[128];
	int64_t len = 0;
	int nch = 0;
	assert_int_equal(fasta_check_seq(s1, &len, &nch, why, sizeof why), 0);
	assert_string_equal(s1, "MKV:AAG");
	assert_int_equal(len, 6);
	assert_int_equal(nch, 2);
	assert_int_equal(fasta_check_seq(s2, &len, &nch, why, sizeof why), -1);
	assert_string_equal(why, "invalid character '1' at position 3");
	assert_int_equal(fasta_check_seq(s3, &len, &nch, why, sizeof why), -1);
	assert_string_equal(why, "empty sequence");
}

static void test_too_long_and_long_lines(void **state)
{
	char path[128];
	size_t n = FASTA_MAX_LEN + 1 + 5000000;   /* one 5+ MB line, > LINE_CHUNK */
	char *buf = malloc(n + 64), *p = buf;
	jobs_t js;

	assert_non_null(buf);
	/* a header longer than FASTA_MAX_HEADER is cut, not fatal */
	p += sprintf(p, ">big\n");
	memset(p, 'A', FASTA_MAX_LEN + 1);
	p += FASTA_MAX_LEN + 1;
	p += sprintf(p, "\n>max\n");
	memset(p, 'a', FASTA_MAX_LEN);
	p += FASTA_MAX_LEN;
	p += sprintf(p, "\n>");
	memset(p, 'h', FASTA_MAX_HEADER + 10);
	p += FASTA_MAX_HEADER + 10;
	p += sprintf(p, "\nMKV\n");
	tmp_path(path, sizeof path, "long.fa");
	write_file(path, buf, (size_t)(p - buf));
	free(buf);

	assert_int_equal(read_all(path, NULL, &js), 0);
	assert_int_equal(js.n, 3);
	assert_failed(&js.j[0], "record 1 'big': sequence longer than 1048576 residues");
	assert_int_equal(js.j[1].status, JOB_OK);
	assert_int_equal(js.j[1].len, FASTA_MAX_LEN);
	assert_int_equal(js.j[1].nchains, 1);
	assert_int_equal(js.j[2].status, JOB_OK);
	assert_int_equal(strlen(js.j[2].header), FASTA_MAX_HEADER);
	assert_int_equal(strlen(js.j[2].outname), JOB_NAME_MAX);
	free_all(&js);
}

static void test_binary_garbage(void **state)
{
	char path[128], buf[4096];
	jobs_t js;
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (char)(i * 7 + 3);
	buf[0] = 'x';
	for (size_t i = 0; i < sizeof buf; i++)
		if (buf[i] == '>' || buf[i] == '\n')
			buf[i] = 'x';
	tmp_path(path, sizeof path, "garbage.bin");
	write_file(path, buf, sizeof buf);
	assert_int_equal(read_all(path, NULL, &js), 0);
	assert_int_equal(js.n, 1);
	assert_failed(&js.j[0], "record 1: sequence before the first header (line 1)");
	free_all(&js);
}

static void test_empty_inputs(void **state)
{
	char path[128];
	jobs_t js;
	tmp_path(path, sizeof path, "empty.fa");
	write_file(path, "", 0);
	assert_int_equal(read_all(path, NULL, &js), 0);
	assert_int_equal(js.n, 0);
	tmp_path(path, sizeof path, "blank.fa");
	write_file(path, "\n\r\n  \n", 6);
	assert_int_equal(read_all(path, NULL, &js), 0);
	assert_int_equal(js.n, 0);
	tmp_path(path, sizeof path, "lone.fa");
	write_file(path, ">", 1);
	assert_int_equal(read_all(path, NULL, &js), 0);
	assert_int_equal(js.n, 1);
	assert_failed(&js.j[0], "record 1: header has no name (line 1)");
	free_all(&js);
}

static void test_duplicate_and_unsafe_names(void **state)
{
	static const char *out[] = {
		"sp_P12345_.._.._etc_passwd", "sp_P12345_.._.._etc_passwd_2",
		"hidden", "rf", "ABC", "abc_2", "abc_2_2", "record_8",
	};
	jobs_t js;
	assert_int_equal(read_all(FX "dupnames.fa", NULL, &js), 0);
	assert_int_equal(js.n, 8);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(js.j[i].status, JOB_OK);
		assert_string_equal(js.j[i].outname, out[i]);
		assert_null(strchr(js.j[i].outname, '/'));
	}
	assert_string_equal(js.j[0].name, "sp|P12345|../../etc/passwd");
	free_all(&js);
}

static void test_fatal_file_errors(void **state)
{
	jobs_t js;
	fasta_t *r;
	job_t j;

	assert_null(fasta_open(FX "no-such-file.fa", NULL, NULL));
	assert_null(fasta_open("", NULL, NULL));
	assert_int_equal(read_all(FX "corrupt.fa.gz", NULL, &js), -1);
	free_all(&js);
	assert_int_equal(read_all(FX "truncated.fa.gz", NULL, &js), -1);
	free_all(&js);
	assert_int_equal(read_all(FX "truncated.fa.bgz", NULL, &js), -1);
	free_all(&js);
	/* a directory: refused at open or at the first read */
	r = fasta_open(TEST_DATA, NULL, NULL);
	if (r) {
		job_init(&j);
		assert_int_equal(fasta_next(r, &j), -1);
		job_free(&j);
		fasta_close(r);
	}
	/* unreadable (meaningless as root, who reads anything) */
	if (geteuid() != 0) {
		char path[128];
		tmp_path(path, sizeof path, "noperm.fa");
		write_file(path, ">a\nM\n", 5);
		chmod(path, 0);
		assert_null(fasta_open(path, NULL, NULL));
	}
	/* missing names file */
	assert_null(fasta_open(FX "good.fa", FX "no-such-names.txt", NULL));
}

static void check_names_result(jobs_t *js)
{
	/* names.txt: ok2, nosuch, (blank), ok1, ok2 again (ignored) */
	assert_int_equal(js->n, 3);
}

static void test_names_streaming(void **state)
{
	jobs_t js;
	assert_int_equal(read_all(FX "bad.fa", FX "names.txt", &js), 0);
	check_names_result(&js);
	/* stream order, then what was not found */
	assert_ok(&js.j[0], "ok1", "MKV");
	assert_int_equal(js.j[0].recno, 3);
	assert_ok(&js.j[1], "ok2", "ACD");
	assert_int_equal(js.j[1].recno, 7);
	assert_failed(&js.j[2], "'nosuch' not found in " FX "bad.fa");
	assert_int_equal(js.j[2].recno, 0);
	assert_string_equal(js.j[2].name, "nosuch");
	free_all(&js);
}

static void test_names_faidx(void **state)
{
	char fa[128], names[128];
	FILE *in = fopen(FX "good.fa", "rb");
	char buf[4096];
	size_t n;
	fasta_t *r;
	jobs_t js;

	assert_non_null(in);
	n = fread(buf, 1, sizeof buf, in);
	fclose(in);
	tmp_path(fa, sizeof fa, "idx.fa");
	write_file(fa, buf, n);
	/* without an index: streaming */
	tmp_path(names, sizeof names, "want.txt");
	write_file(names, "dimer\nmissing\r\nseq1 trailing words\n", 35);
	r = fasta_open(fa, names, NULL);
	assert_non_null(r);
	assert_int_equal(fasta_uses_index(r), 0);
	fasta_close(r);
	assert_int_equal(fai_build(fa), 0);
	r = fasta_open(fa, names, NULL);
	assert_non_null(r);
	assert_int_equal(fasta_uses_index(r), 1);
	fasta_close(r);

	assert_int_equal(read_all(fa, names, &js), 0);
	assert_int_equal(js.n, 3);                  /* names-file order */
	assert_ok(&js.j[0], "dimer", "MKTAYIAKQR:GSHMSELKNV");
	assert_int_equal(js.j[0].recno, 4);
	assert_int_equal(js.j[0].nchains, 2);
	snprintf(buf, sizeof buf, "'missing' not found in %s", fa);
	assert_failed(&js.j[1], buf);
	assert_ok(&js.j[2], "seq1", "MKTAYIAKQRQISFVKSHFSRQ");
	assert_int_equal(js.j[2].recno, 1);
	assert_string_equal(js.j[2].outname, "seq1");
	free_all(&js);
}

/* a stale .fai: older than its file, or as new as its file but describing
 * other bytes, it is not used (the records come from streaming, right) */
static void test_stale_faidx(void **state)
{
	(void)state;
	char fa[128], fai[160], names[128];
	struct timespec t[2];
	struct stat sb;
	jobs_t js;

	tmp_path(fa, sizeof fa, "stale.fa");
	snprintf(fai, sizeof fai, "%s.fai", fa);
	tmp_path(names, sizeof names, "stale.txt");
	write_file(names, "b\n", 2);
	const char *before = ">a\nMKVLA\n>b\nGSHMS\n", *after = ">a\nMKVLAAAAAAAAA\n>b\nGSHMS\n";
	write_file(fa, before, strlen(before));
	assert_int_equal(fai_build(fa), 0);
	/* the file grows a longer first record; its index is a minute older */
	write_file(fa, after, strlen(after));
	assert_int_equal(stat(fa, &sb), 0);
	for (int same = 0; same < 2; same++) {
		t[0] = t[1] = sb.st_mtim;
		if (!same)
			t[0].tv_sec -= 60, t[1].tv_sec -= 60;
		assert_int_equal(utimensat(AT_FDCWD, fai, t, 0), 0);
		assert_int_equal(index_used(fa, names), 0);
		assert_int_equal(read_all(fa, names, &js), 0);
		assert_int_equal(js.n, 1);
		assert_ok(&js.j[0], "b", "GSHMS");
		free_all(&js);
	}
}

/* every entry of a .fai is checked against the FASTA before htslib reads
 * through it: a bad or incomplete index is not used (the file is read,
 * the records come out right), a good one is */
static void test_faidx_checked(void **state)
{
	(void)state;
	static const struct { const char *fai, *names; } bad[] = {
		{ "a\t5\t3\t5\t6\nb\t5\t12\t0\t0\n", "b\n" },     /* line width 0 */
		{ "a\t5\t3\t5\t6\nb\t5\t12\t5\t5\n", "b\n" },     /* no room for the line end */
		{ "a\t5\t3\t5\t6\n", "a\nb\n" },                    /* the last record missing */
		{ "b\t5\t12\t5\t6\nc\t5\t21\t5\t6\n", "b\nzz\n" }, /* the first missing */
		{ "a\t5\t3\t5\t6\nc\t5\t21\t5\t6\n", "zz\n" },    /* one in the middle */
		{ "a\t5\t3\t5\t6\nb\t5\t12\t5\t6\nc\t5\t21\t5\t6\nd\t1\t99\t1\t2\n",
		  "b\n" },                                           /* past the end */
		{ "a\t5\t3\t5\t6\nb\t5\t6\t5\t6\nc\t5\t21\t5\t6\n", "b\n" }, /* overlap */
		{ "a\t5\t3\t5\t6\nb\t5\t21\t5\t6\nc\t5\t12\t5\t6\n", "b\n" }, /* swapped */
		{ "a\t5\t3\t5\t6\na\t5\t12\t5\t6\nc\t5\t21\t5\t6\n", "c\n" }, /* twice */
		{ "a\t5\t3\t5\t6\t9\nb\t5\t12\t5\t6\t9\n", "b\n" }, /* FASTQ index */
		{ "a\t5\t3\t5\t6\nb\t-5\t12\t5\t6\n", "b\n" },     /* negative */
		{ "a\t5\t3\t5\t6\nb\t5\t12\t5\n", "b\n" },          /* a column short */
		{ "a\t5\t3\t5\t6\nb\t5\t12\t9223372036854775807\t6\n", "b\n" },
		{ "a\t5\t3\t5\t6\nb\t9223372036854775807\t12\t1\t2\n", "b\n" },
		{ "", "b\n" },                                       /* empty */
	};
	const char *text = ">a\nMKVLA\n>b\nGSHMS\n>c\nWWWWW\n";
	char fa[128], fai[160], names[128];
	jobs_t js;

	tmp_path(fa, sizeof fa, "chk.fa");
	snprintf(fai, sizeof fai, "%s.fai", fa);
	tmp_path(names, sizeof names, "chk.txt");
	write_file(fa, text, strlen(text));
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		write_file(fai, bad[i].fai, strlen(bad[i].fai));
		write_file(names, bad[i].names, strlen(bad[i].names));
		if (index_used(fa, names))
			fail_msg("index %zu used", i);
		assert_int_equal(read_all(fa, names, &js), 0);
		assert_true(js.n >= 1);
		if (!strncmp(bad[i].names, "b\n", 2))
			assert_ok(&js.j[0], "b", "GSHMS");
		free_all(&js);
	}
	/* the right index, with a name it rightly lacks: used */
	assert_int_equal(fai_build(fa), 0);
	write_file(names, "c\nzz\n", 5);
	assert_int_equal(index_used(fa, names), 1);
	assert_int_equal(read_all(fa, names, &js), 0);
	assert_int_equal(js.n, 2);
	assert_ok(&js.j[0], "c", "WWWWW");
	assert_int_equal(js.j[0].recno, 3);
	free_all(&js);
}

/* a names file's line is bounded: a longer one is an error, not a name */
static void test_names_long_line(void **state)
{
	(void)state;
	char names[128];
	size_t n = LINES_MAX + 2;
	char *big = malloc(n);

	assert_non_null(big);
	memset(big, 'a', n);
	big[n - 1] = '\n';
	tmp_path(names, sizeof names, "long.txt");
	write_file(names, big, n);
	free(big);
	assert_null(fasta_open(FX "good.fa", names, NULL));
	/* exactly LINES_MAX bytes is a line */
	big = malloc(n - 1);
	assert_non_null(big);
	memset(big, 'a', n - 1);
	big[n - 2] = '\n';
	write_file(names, big, n - 1);
	free(big);
	fasta_t *r = fasta_open(FX "good.fa", names, NULL);
	assert_non_null(r);
	fasta_close(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good_containers),
		cmocka_unit_test(test_stdin),
		cmocka_unit_test(test_crlf_no_final_newline),
		cmocka_unit_test(test_bad_records),
		cmocka_unit_test(test_check_seq),
		cmocka_unit_test(test_too_long_and_long_lines),
		cmocka_unit_test(test_binary_garbage),
		cmocka_unit_test(test_empty_inputs),
		cmocka_unit_test(test_duplicate_and_unsafe_names),
		cmocka_unit_test(test_fatal_file_errors),
		cmocka_unit_test(test_names_streaming),
		cmocka_unit_test(test_names_faidx),
		cmocka_unit_test(test_stale_faidx),
		cmocka_unit_test(test_faidx_checked),
		cmocka_unit_test(test_names_long_line),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
