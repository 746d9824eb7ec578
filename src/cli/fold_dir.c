/* fold_dir.c - the output directory of a fold (fold_run.h): the names of
 * its files, the count of outputs not written, its locks, the temporaries
 * a killed run left, done.jsonl (read at the start, appended per finished
 * record) and which records a rerun skips.  It calls neither fold.c nor
 * fold_out.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <jansson.h>

#include "util/log.h"
#include "io/atomic_file.h"
#include "io/dir_lock.h"
#include "io/journal.h"
#include "cli/fold_run.h"
#include "cli/report_table.h"

/* an output could not be written (logged by the caller) */
void fold_io_error(fold_run_t *r)
{
	pthread_mutex_lock(&r->lock);
	r->io_errors++;
	pthread_mutex_unlock(&r->lock);
}

/* DIR/NAME EXT */
char *fold_path(const char *dir, const char *name, const char *ext)
{
	char *p = NULL;
	if (asprintf(&p, "%s/%s%s", dir, name, ext) < 0) return NULL;
	return p;
}

/* the files of a record, as extensions (fold_run.h) */
int fold_exts(const opt_t *o, const char *ext[FOLD_MAX_FILES])
{
	int n = 0;

	if (o->formats & OPT_FMT_PDB) ext[n++] = ".pdb";
	if (o->formats & OPT_FMT_CIF) ext[n++] = ".cif";
	if (o->pae) ext[n++] = ".pae.json";
	return n;
}

/* DIR/STEM.K-of-N.EXT when sharded, else DIR/STEM.EXT (summary, done,
 * run); ext starts with its dot */
char *fold_file(const fold_run_t *r, const char *stem, const char *ext)
{
	char *p = NULL;
	if (asprintf(&p, "%s/%s%s%s", r->o->outdir, stem, r->sfx, ext) < 0) return NULL;
	return p;
}

/* 16 hex digits of the record's sequence */
static void fold_seq_hash(const fold_rec_t *x, char out[17])
{
	snprintf(out, 17, "%016llx",
	         (unsigned long long)weights_fnv(WEIGHTS_FNV_SEED, x->job.seq, strlen(x->job.seq)));
}

/* A multimer's residue numbering in this run's files, as done.jsonl
 * names it: "chain" (per chain from 1) or "model" (--keep-linker-numbering;
 * a line without it: a run before 0.2.0, which numbered so). */
static const char *fold_numbering(const opt_t *o)
{
	return o->keep_linker_numbering ? "model" : "chain";
}

/* the files of a row and this run's extensions (fold_each) */
typedef struct {
	const fold_run_t *r;
	int (*fn)(void *ctx, const char *name);
	void *ctx;
} fold_each_t;

/* one structure named in a row (relative to -o; NAME.pdb or NAME.cif):
 * fn of NAME with each extension this run writes (fold_exts) */
static int fold_each_ext(void *ctx, const char *file, size_t n)
{
	const fold_each_t *c = ctx;
	const char *ext[FOLD_MAX_FILES];
	int next = fold_exts(c->r->o, ext), ok = 1;

	if (n < 4 || (strncmp(file + n - 4, ".pdb", 4) && strncmp(file + n - 4, ".cif", 4))) return 0;
	for (int e = 0; e < next && ok; e++) {
		char *p = NULL;
		if (asprintf(&p, "%.*s%s", (int)n - 4, file, ext[e]) < 0) return 0;
		ok = c->fn(c->ctx, p);
		free(p);
	}
	return ok;
}

/* fn(ctx, name) for every file of a record's row that this run writes,
 * while it returns nonzero: 1 when all passed */
static int fold_each(const fold_run_t *r, const char *row, int (*fn)(void *, const char *),
                     void *ctx)
{
	fold_each_t c = { r, fn, ctx };
	return journal_files(row, fold_each_ext, &c);
}

/* a file of a record just written: its journal_stat in the "files" of its line */
typedef struct {
	const char *dir;
	json_t *files;
} fold_stat_t;

static int fold_stat_file(void *ctx, const char *name)
{
	fold_stat_t *c = ctx;
	json_t *st = journal_stat(c->dir, name, strlen(name));

	if (!st) log_error("%s/%s: not a regular file after it was written", c->dir, name);
	return st && json_object_set_new(c->files, name, st) == 0;
}

/* done.jsonl: append the line of a record whose files are in place, with
 * their sizes and times (what a rerun checks them by).  On the output
 * step (one thread at a time). */
void fold_journal(fold_run_t *r, const fold_rec_t *x)
{
	char h[17];
	json_t *e;
	char *line = NULL;
	fold_stat_t st = { r->o->outdir, json_object() };

	fold_seq_hash(x, h);
	if (!st.files || !fold_each(r, x->row, fold_stat_file, &st)) {
		json_decref(st.files);
		fold_io_error(r);
		return;
	}
	e = json_pack("{s:s, s:s, s:s, s:i, s:i, s:s, s:s, s:s, s:o}", "name", x->job.outname,
	              "sequence", h, "weights", weights_fingerprint(r->wt),
	              "recycles", r->o->num_recycles, "chunk_size", r->o->chunk_size,
	              "precision", be_prec_name(r->o->precision),
	              "numbering", fold_numbering(r->o), "row", x->row, "files", st.files);
	if (!e || !(line = json_dumps(e, JSON_COMPACT)) || fprintf(r->journal, "%s\n", line) < 0 ||
	    fflush(r->journal) != 0) {
		log_error("%s/done%s.jsonl: write failed: %s", r->o->outdir, r->sfx, strerror(errno));
		fold_io_error(r);
	}
	free(line);
	json_decref(e);
}

/* a file of a record an earlier run left: the one its line describes */
typedef struct {
	const char *dir;
	const json_t *e;
} fold_kept_t;

static int fold_file_kept(void *ctx, const char *name)
{
	const fold_kept_t *c = ctx;
	return journal_file_is(json_object_get(c->e, "files"), c->dir, name, strlen(name));
}

/* The row an earlier run left for record x when it matches this run, is
 * one summary line naming files in -o, and every file this run asks of
 * its structures (fold_exts: a run that asks for more, --format cif or
 * --pae, refolds) is the one the line describes (not replaced since, by
 * size and modification time); NULL otherwise. */
const char *fold_resumable(const fold_run_t *r, const fold_rec_t *x)
{
	json_t *e = json_object_get(r->prev, x->job.outname);
	const char *row, *num;
	fold_kept_t kept = { r->o->outdir, e };
	char h[17];

	if (!e || r->o->force || r->o->dump_tensors) return NULL;
	fold_seq_hash(x, h);
	row = journal_str(e, "row");
	num = journal_str(e, "numbering");
	if (strcmp(h, journal_str(e, "sequence")) ||
	    (x->job.nchains > 1 && strcmp(fold_numbering(r->o), *num ? num : "model")) ||
	    strcmp(weights_fingerprint(r->wt), journal_str(e, "weights")) ||
	    strcmp(be_prec_name(r->o->precision), journal_str(e, "precision")) ||
	    json_integer_value(json_object_get(e, "recycles")) != r->o->num_recycles ||
	    json_integer_value(json_object_get(e, "chunk_size")) != r->o->chunk_size ||
	    !journal_row_ok(row, FOLD_ROW_TABS) || !fold_each(r, row, fold_file_kept, &kept))
		return NULL;
	return row;
}

/* One run at a time writes into an output directory: an exclusive lock
 * on DIR/.esmbatch.lock (a name no record's output can have; dir_lock.h),
 * held while r->lockfd is open.  A shard holds that lock shared with the
 * other shards, and its own DIR/.esmbatch.K-of-N.lock exclusive.  0;
 * DIR_LOCK_BUSY when another run holds it; -1 on another error.  Each
 * logged in one line. */
int fold_lock_dir(fold_run_t *r)
{
	int rc;

	if (r->shard.n) {
		rc = dir_lock_take(r->o->outdir, r->sfx, LOCK_EX, &r->shardfd);
		if (rc == DIR_LOCK_BUSY)
			log_error("%s: another esmbatch run is folding shard %d/%d into this directory "
			          "(it holds .esmbatch%s.lock); wait for it to end", r->o->outdir,
			          r->shard.k, r->shard.n, r->sfx);
		if (rc < 0) return rc;
	}
	rc = dir_lock_take(r->o->outdir, "", r->shard.n ? LOCK_SH : LOCK_EX, &r->lockfd);
	if (rc == DIR_LOCK_BUSY)
		log_error("%s: another esmbatch run is writing into this directory (it holds "
		          ".esmbatch.lock%s); wait for it to end or use another -o", r->o->outdir,
		          r->shard.n ? ": a run of the whole input, or a merge" : "");
	return rc;
}

/* A temporary whose name begins with stem[0..n) (a record's output
 * name, or NAME.fragA-B) belongs to one of this shard's records. */
static int fold_tmp_mine(const fold_run_t *r, const char *stem, size_t n)
{
	char *name = strndup(stem, n), *frag;
	int mine;

	if (!name) return 0;
	mine = json_object_get(r->mine, name) != NULL;
	if (!mine && (frag = strrchr(name, '.')) && !strncmp(frag, ".frag", 5)) {
		*frag = 0;
		mine = json_object_get(r->mine, name) != NULL;
	}
	free(name);
	return mine;
}

/* name is a fragment's finished file, STEM.fragA-B.EXT (EXT .pdb, .cif or
 * .pae.json): the length of STEM.fragA-B, else 0 */
static size_t fold_frag_file(const char *name)
{
	static const char *const ext[] = { ".pdb", ".cif", ".pae.json" };
	const char *f = strstr(name, ".frag");

	for (; f; f = strstr(f + 1, ".frag")) {
		const char *p = f + 5;
		size_t a = strspn(p, "0123456789"), b = a && p[a] == '-' ? strspn(p + a + 1, "0123456789") : 0;
		if (!b) continue;
		p += a + 1 + b;
		for (size_t k = 0; k < sizeof ext / sizeof *ext; k++)
			if (!strcmp(p, ext[k])) return (size_t)(p - name);
	}
	return 0;
}

/* Remove what killed runs left in the output directory: temporaries of
 * the atomic writer (NAME.pdb.tmp.PID, NAME.cif.tmp.PID,
 * NAME.pae.json.tmp.PID, summary.tsv.tmp.PID, report.html.tmp.PID, or the
 * older NAME.pdb.tmp form; a shard's summary.K-of-N.tsv.tmp.PID and
 * report.K-of-N.html.tmp.PID), and the fragments of a split run killed
 * before it renamed them (NAME.fragA-B.pdb, .cif, .pae.json: a name no
 * record's own files can have).  Only with the directory's lock held: then
 * no other run is writing them; a shard removes only its own records' and
 * its own summary's and report's (other shards may be writing theirs),
 * and its report pages' (report_table_clean).  Nothing else is touched. */
void fold_clean_tmp(const fold_run_t *r)
{
	/* the first three are a NAME's ending, the last two whole names */
	char summary[64], report[64];
	const char *const kind[] = { ".pdb.tmp", ".cif.tmp", ".pae.json.tmp", summary, report };
	const size_t nk = sizeof kind / sizeof *kind;
	DIR *d = opendir(r->o->outdir);
	struct dirent *e;

	if (!d) return;
	snprintf(summary, sizeof summary, "summary%s.tsv.tmp", r->sfx);
	snprintf(report, sizeof report, "report%s.html.tmp", r->sfx);
	while ((e = readdir(d))) {
		const char *t = strstr(e->d_name, ".tmp");
		size_t n, frag = t ? 0 : fold_frag_file(e->d_name);
		int ours = 0, whole = 0;
		if (frag && (!r->shard.n || fold_tmp_mine(r, e->d_name, frag))) {
			char *p = fold_path(r->o->outdir, e->d_name, "");
			if (p && unlink(p) == 0) log_debug("%s: removed (a fragment of a killed run)", p);
			free(p);
			continue;
		}
		/* .tmp at the end, or followed by .DIGITS */
		while (t && t[4] && !(t[4] == '.' && t[5] && strspn(t + 5, "0123456789") == strlen(t + 5)))
			t = strstr(t + 1, ".tmp");
		if (!t) continue;
		n = t + 4 - e->d_name;
		size_t stem = 0;
		for (size_t k = 0; k < nk && !ours; k++) {
			size_t kl = strlen(kind[k]);
			whole = k >= nk - 2;
			ours = n >= kl && !strncmp(e->d_name + n - kl, kind[k], kl) && (whole ? n == kl : n > kl);
			stem = n - kl;
		}
		if (!ours || (r->shard.n && !whole && !fold_tmp_mine(r, e->d_name, stem))) continue;
		char *p = fold_path(r->o->outdir, e->d_name, "");
		if (p && unlink(p) == 0) log_debug("%s: removed (left by a killed run)", p);
		free(p);
	}
	closedir(d);
	report_table_clean(r->o->outdir, r->sfx);
}

/* Read done.jsonl of -o (absent: nothing done) into r->prev; a torn last
 * line (a killed run) is ignored.  Keep it open for appending (one
 * descriptor, opened under the rule of atomic_file.h).  0 or -1. */
int fold_journal_open(fold_run_t *r)
{
	char *path = fold_file(r, "done", ".jsonl");
	int last = '\n', rc;

	if (!path) return -1;
	if (!(r->journal = atomic_file_fopen(path, O_RDWR | O_CREAT | O_APPEND, "a+"))) {
		free(path);
		return -1;
	}
	rewind(r->journal);
	if ((rc = journal_read(r->journal, path, &r->prev, &last)) < 0)
		;   /* logged */
	else if (fseek(r->journal, 0, SEEK_END) < 0 || (last != '\n' && fputc('\n', r->journal) == EOF)) {
		log_error("%s: cannot write: %s", path, strerror(errno));
		rc = -1;
	}
	free(path);
	return rc;
}

int fold_check_output(const fold_run_t *r, const char *path)
{
	static const char *const own[] = { ".pdb", ".cif", ".pae.json", ".jsonl", ".tsv", ".html",
		                           ".lock" };
	const opt_t *o = r->o;
	const char *const in[] = { o->input, o->names, o->quota_table, o->weights };
	const char *base = strrchr(path, '/');
	char *journal = fold_file(r, "done", ".jsonl");
	int rc = journal ? atomic_file_check(path) : -1;

	base = base ? base + 1 : path;
	for (size_t i = 0; rc == 0 && i < sizeof in / sizeof *in; i++)
		if (atomic_file_same(path, in[i])) {
			log_error("%s: is the input %s: refused as an output", path, in[i]);
			rc = -1;
		}
	if (rc == 0 && o->weights && !strcmp(base, "config.json") && atomic_file_beside(path, o->weights)) {
		log_error("%s: is the config.json of the weights %s: refused as an output", path, o->weights);
		rc = -1;
	}
	for (size_t k = 0; rc == 0 && k < sizeof own / sizeof *own && atomic_file_beside(path, journal); k++) {
		size_t n = strlen(base), kl = strlen(own[k]);
		const char *at = strstr(base, own[k]);
		if ((n >= kl && !strcmp(base + n - kl, own[k])) || (at && !strncmp(at + kl, ".tmp", 4))) {
			log_error("%s: a name of the files a fold writes into %s: refused as an output", path,
			          o->outdir);
			rc = -1;
		}
	}
	free(journal);
	return rc;
}
