/* fold_dir.c - the output directory of a fold (fold_run.h): its locks,
 * the temporaries a killed run left, done.jsonl (read at the start,
 * appended per finished record) and which records a rerun skips.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <jansson.h>

#include "cli/fold_run.h"
#include "io/dir_lock.h"
#include "io/journal.h"
#include "util/log.h"

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

/* done.jsonl: append the line of a record whose files are in place.  On
 * the output step (one thread at a time). */
void fold_journal(fold_run_t *r, const fold_rec_t *x)
{
	char h[17];
	json_t *e;
	char *line = NULL;

	fold_seq_hash(x, h);
	e = json_pack("{s:s, s:s, s:s, s:i, s:i, s:s, s:s, s:s}", "name", x->job.outname,
	              "sequence", h, "weights", weights_fingerprint(r->wt),
	              "recycles", r->o->num_recycles, "chunk_size", r->o->chunk_size,
	              "precision", be_prec_name(r->o->precision),
	              "numbering", fold_numbering(r->o), "row", x->row);
	if (!e || !(line = json_dumps(e, JSON_COMPACT)) || fprintf(r->done, "%s\n", line) < 0 ||
	    fflush(r->done) != 0) {
		log_error("%s/done%s.jsonl: write failed: %s", r->o->outdir, r->sfx, strerror(errno));
		fold_io_error(r);
	}
	free(line);
	json_decref(e);
}

/* The structure named in a row (relative to -o; NAME.pdb or NAME.cif)
 * and every other file this run asks of NAME (fold_exts) are there and
 * not empty (written atomically: there means complete); so a run that
 * asks for more (--format cif, --pae) refolds. */
static int fold_file_ok(void *ctx, const char *file, size_t n)
{
	const fold_run_t *r = ctx;
	const char *ext[FOLD_NEXT];
	int next = fold_exts(r->o, ext);

	if (n < 4 || (strncmp(file + n - 4, ".pdb", 4) && strncmp(file + n - 4, ".cif", 4))) return 0;
	for (int e = 0; e < next; e++) {
		char *p = NULL;
		struct stat st;
		int ok;
		if (asprintf(&p, "%s/%.*s%s", r->o->outdir, (int)n - 4, file, ext[e]) < 0) return 0;
		ok = stat(p, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
		free(p);
		if (!ok) return 0;
	}
	return 1;
}

/* a string member of a journal entry, "" when absent */
/* The row an earlier run left for record x when it matches this run and
 * its files are all there; NULL otherwise. */
const char *fold_resumable(const fold_run_t *r, const fold_rec_t *x)
{
	json_t *e = json_object_get(r->prev, x->job.outname);
	const char *row, *num;
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
	    !journal_files(row, fold_file_ok, (void *)r))
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
 * its own summary's and report's (other shards may be writing theirs).
 * Nothing else is touched. */
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
}

/* Read done.jsonl of -o (absent: nothing done) into r->prev; a torn last
 * line (a killed run) is ignored.  Open it for appending.  0 or -1. */
int fold_journal_open(fold_run_t *r)
{
	char *path = fold_file(r, "done", ".jsonl");
	int last = '\n', rc = 0;
	FILE *f;

	if (!path) return -1;
	if ((f = fopen(path, "r"))) {
		rc = journal_read(f, &r->prev, &last);
		fclose(f);
	} else if (!(r->prev = json_object())) {
		rc = -1;
	}
	if (rc < 0) {
		log_error("%s: out of memory reading it", path);
		free(path);
		return -1;
	}
	if (!(r->done = fopen(path, "a")) || (last != '\n' && fputc('\n', r->done) == EOF)) {
		log_error("%s: cannot write: %s", path, strerror(errno));
		free(path);
		return -1;
	}
	free(path);
	return 0;
}
