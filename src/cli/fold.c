/* fold.c - the `fold` subcommand: read records, fold each, write its
 * structure (a PDB and/or an mmCIF, --format) and one summary.tsv row per
 * record, in input order, and one JSON
 * line per fold in run.jsonl with its memory figures (memory.h).
 *
 * Every input record gets exactly one row: ok, split, or failed with a
 * reason (bad record, fold error, output error, interrupted).  Outputs are
 * written atomically (a temporary file renamed into place), so a killed run
 * leaves complete files only.
 *
 * Resuming: once a record's files are in place, one JSON line in
 * done.jsonl (appended, flushed) names it with its sequence hash, the
 * weights fingerprint, the options that change its output (--num-recycles,
 * --chunk-size, --precision, a multimer's numbering) and its summary row.
 * A rerun into the same directory skips a record whose latest line matches
 * and whose files (all that --format and --pae ask for) are there, keeping
 * that row; --force (or --dump-tensors) refolds all.
 *
 * Sharded (--shard K/N, shard.h): only the records of shard K are read
 * into the run; summary, done, run and report files carry the suffix
 * .K-of-N, and run.K-of-N.jsonl names the input, the weights and N, for
 * `esmbatch merge`.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "io/atomic_file.h"
#include "io/dir_lock.h"
#include "sched/bucket.h"
#include "cli/calibrate.h"
#include "config.h"
#include "backend/devices.h"
#include "io/fasta.h"
#include "io/journal.h"
#include "cli/fold.h"
#include "cli/report.h"
#include "cli/setup.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/sysmem.h"
#include "sched/memory.h"
#include "model/model.h"
#include "protein/cif.h"
#include "protein/pdb.h"
#include "protein/qc.h"
#include "sched/scheduler.h"
#include "sched/shard.h"
#include "io/safetensors.h"
#include "model/tokenizer.h"
#include "model/weights.h"

/* one input record and what became of it */
typedef struct {
	job_t     job;
	int       frags;       /* fragments folded (1: the whole record) */
	int64_t   res_done;    /* residues folded */
	double    plddt_sum;   /* mean pLDDT x residues, over fragments */
	double    ptm_sum;     /* pTM x residues */
	double    secs;
	mem_fig_t fig;         /* the largest fragment's figures */
	qc_t      qc;          /* pLDDT bands and flag counts, over fragments */
	char     *row;         /* its summary row from column file on, once final */
	int       skipped;     /* done by an earlier run (done.jsonl) */
	int       finished;    /* fold_finish ran */
} fold_rec_t;

/* everything one run holds */
typedef struct {
	const opt_t *o;
	weights_t        *wt;
	sched_dev_t *dev;
	int          ndev;
	fold_rec_t  *rec;
	int          nrec;
	FILE        *jsonl;      /* run.jsonl */
	FILE        *done;       /* done.jsonl, appended */
	int          lockfd;     /* DIR/.esmbatch.lock, flock'ed; -1 none */
	shard_t      shard;      /* --shard; n 0: the whole input */
	char         sfx[32];    /* ".K-of-N" or "" (shard_suffix) */
	int          shardfd;    /* DIR/.esmbatch.K-of-N.lock, flock'ed; -1 none */
	json_t      *mine;       /* sharded: this shard's output names (keys) */
	char         input_fp[17];  /* sharded: hash of every record's name and sequence */
	int          ninput;     /* sharded: records in the whole input */
	json_t      *prev;       /* its entries by output name (the latest wins) */
	quota_table_t *qt;       /* --quota-table, or NULL */
	safetensors_writer_t *dump;
	long         nok, nfailed, nsplit, nskipped;
	long         todo, ended;  /* records queued for this run; ended of them */
	int64_t      res_todo, res_ended;
	double       t_start, t_said;   /* run start; last progress log line */
	double       t_report;   /* report.html last written (sched_now) */
	long         io_errors;  /* outputs not written: the run goes on, exit 1 */
	pthread_mutex_t lock;    /* io_errors, and the results of a record's
	                            fragments (fold_done) from the workers;
	                            finishing a record is the output step's */
} fold_run_t;

static volatile sig_atomic_t fold_stop;

/* an output could not be written (logged by the caller) */
static void fold_io_error(fold_run_t *r)
{
	pthread_mutex_lock(&r->lock);
	r->io_errors++;
	pthread_mutex_unlock(&r->lock);
}

static void fold_on_signal(int sig)
{
	(void)sig;
	fold_stop = 1;
}

/* mkdir -p; 0 or negative (logged) */
static int fold_mkdirs(const char *dir)
{
	char *p = strdup(dir);
	int rc = 0;

	if (!p) return -1;
	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s) continue;
		char c = *s;
		*s = 0;
		if (mkdir(p, 0777) < 0 && errno != EEXIST) {
			log_error("%s: cannot create directory: %s", p, strerror(errno));
			rc = -1;
			break;
		}
		*s = c;
		if (!c) break;
	}
	free(p);
	return rc;
}

static char *fold_path(const char *dir, const char *name, const char *ext)
{
	char *p = NULL;
	if (asprintf(&p, "%s/%s%s", dir, name, ext) < 0) return NULL;
	return p;
}

/* The files this run writes per record (or fragment), as the extensions
 * of its name: the structures asked by --format, then with --pae the PAE.
 * The summary's file column names the first: the PDB, or the mmCIF when
 * only cif is asked.  Returns how many (at most FOLD_NEXT). */
#define FOLD_NEXT 3
static int fold_exts(const opt_t *o, const char *ext[FOLD_NEXT])
{
	int n = 0;

	if (o->formats & OPT_FMT_PDB) ext[n++] = ".pdb";
	if (o->formats & OPT_FMT_CIF) ext[n++] = ".cif";
	if (o->pae) ext[n++] = ".pae.json";
	return n;
}

/* DIR/STEM.K-of-N.EXT when sharded, else DIR/STEM.EXT (summary, done,
 * run); ext starts with its dot */
static char *fold_file(const fold_run_t *r, const char *stem, const char *ext)
{
	char *p = NULL;
	if (asprintf(&p, "%s/%s%s%s", r->o->outdir, stem, r->sfx, ext) < 0) return NULL;
	return p;
}

/* x->row = the summary row of a record from column file on (status ok /
 * split / failed); 0 or -1 (out of memory) */
static int fold_row(fold_rec_t *x, const char *file, const char *status, const char *reason)
{
	char fig[160] = "-\t-\t-\t-\t-\t-\t-", qc[160] = "-\t-\t-\t-\t-", flags[96] = "-";
	char crc[17] = "-";
	int64_t nq = qc_residues(&x->qc);
	int rc;

	if (x->res_done && strcmp(status, "failed")) {
		snprintf(fig, sizeof fig, "%.2f\t%.4f\t%.2f\t%zu\t%zu\t%zu\t%lld",
		         x->plddt_sum / x->res_done, x->ptm_sum / x->res_done, x->secs,
		         x->fig.predicted, x->fig.allocated, x->fig.reserved,
		         (long long)x->fig.device_used);
		snprintf(qc, sizeof qc, "%.4f\t%lld\t%lld\t%lld\t%lld",
		         nq ? (double)(x->qc.band[QC_CONFIDENT] + x->qc.band[QC_VERY_HIGH]) / nq : 0.0,
		         (long long)x->qc.band[QC_VERY_LOW], (long long)x->qc.band[QC_LOW],
		         (long long)x->qc.band[QC_CONFIDENT], (long long)x->qc.band[QC_VERY_HIGH]);
		qc_flags(&x->qc, x->plddt_sum / x->res_done, x->ptm_sum / x->res_done, flags,
		         sizeof flags);
	}
	if (x->job.seq && *x->job.seq) qc_crc64_hex(x->job.seq, strlen(x->job.seq), crc);
	free(x->row);
	rc = asprintf(&x->row, "%s\t%s\t%s\t%s\t%s\t%s\t%s", file ? file : "-", status,
	              reason ? reason : "-", fig, qc, crc, flags);
	if (rc < 0) x->row = NULL;
	return rc < 0 ? -1 : 0;
}

/* tabs in a row from column file on: summary.tsv has 21 columns, the row
 * all but index, name, length and bucket */
#define FOLD_ROW_TABS 16

/* a record's line of summary.tsv (x->row; a failed row when it could not
 * be made).  A row an older version left in done.jsonl has fewer columns:
 * the missing ones at the end are "-". */
static void fold_summary_line(FILE *f, const fold_rec_t *x)
{
	const job_t *j = &x->job;
	const char *row = x->row ? x->row : "-\tfailed\tout of memory";
	const char *tab = strchr(row, '\t');
	char blabel[16] = "-", index[24] = "-";
	int tabs = 0;

	if (j->status == JOB_OK)
		bucket_label(NULL, bucket_of(NULL, tok_model_len(j->len, j->nchains)), blabel, sizeof blabel);
	/* index (the position in the input, not among the selected records;
	 * "-": a --names name not found), name, file, length, bucket, then
	 * status onwards */
	if (j->recno > 0) snprintf(index, sizeof index, "%lld", (long long)j->recno - 1);
	fprintf(f, "%s\t%s\t%.*s\t%lld\t%s\t%s", index,
	        j->name && *j->name ? j->name : "-", (int)(tab - row), row,
	        (long long)j->len, blabel, tab + 1);
	for (const char *c = row; *c; c++) tabs += *c == '\t';
	for (; tabs < FOLD_ROW_TABS; tabs++) fputs("\t-", f);
	fputc('\n', f);
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

/* done.jsonl: append the line of a record whose files are in place.  On
 * the output step (one thread at a time). */
static void fold_journal(fold_run_t *r, const fold_rec_t *x)
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
static const char *fold_resumable(const fold_run_t *r, const fold_rec_t *x)
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
static int fold_lock_dir(fold_run_t *r)
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

/* Remove what killed runs left in the output directory: temporaries of
 * the atomic writer (NAME.pdb.tmp.PID, NAME.cif.tmp.PID,
 * NAME.pae.json.tmp.PID, summary.tsv.tmp.PID, report.html.tmp.PID, or the
 * older NAME.pdb.tmp form).  Only with the directory's lock held: then no
 * other run is writing them; a shard removes only its own records' (other
 * shards may be writing theirs).  Nothing else is touched. */
static void fold_clean_tmp(const fold_run_t *r)
{
	/* the last two are whole names, the others a NAME's ending */
	static const char *const kind[] = { ".pdb.tmp", ".cif.tmp", ".pae.json.tmp",
	                                    "summary.tsv.tmp", "report.html.tmp" };
	const size_t nk = sizeof kind / sizeof *kind;
	DIR *d = opendir(r->o->outdir);
	struct dirent *e;

	if (!d) return;
	while ((e = readdir(d))) {
		const char *t = strstr(e->d_name, ".tmp");
		size_t n;
		int ours = 0;
		/* .tmp at the end, or followed by .DIGITS */
		while (t && t[4] && !(t[4] == '.' && t[5] && strspn(t + 5, "0123456789") == strlen(t + 5)))
			t = strstr(t + 1, ".tmp");
		if (!t) continue;
		n = t + 4 - e->d_name;
		size_t stem = 0;
		for (size_t k = 0; k < nk && !ours; k++) {
			size_t kl = strlen(kind[k]);
			ours = n >= kl && !strncmp(e->d_name + n - kl, kind[k], kl) &&
			       (k < nk - 2 ? n > kl : n == kl);
			stem = n - kl;
		}
		if (!ours || (r->shard.n && !fold_tmp_mine(r, e->d_name, stem))) continue;
		char *p = fold_path(r->o->outdir, e->d_name, "");
		if (p && unlink(p) == 0) log_debug("%s: removed (left by a killed run)", p);
		free(p);
	}
	closedir(d);
}

/* Read done.jsonl of -o (absent: nothing done) into r->prev; a torn last
 * line (a killed run) is ignored.  Open it for appending.  0 or -1. */
static int fold_journal_open(fold_run_t *r)
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

/* AlphaFold DB layout: [{"predicted_aligned_error": [[..]], "max_predicted_aligned_error": x}] */
static int fold_write_pae(const char *path, const model_out_t *out)
{
	atomic_file_t a;

	if (!atomic_file_open(&a, path)) return -1;
	fputs("[{\"predicted_aligned_error\": [", a.f);
	for (int i = 0; i < out->L; i++) {
		fputs(i ? ", [" : "[", a.f);
		for (int k = 0; k < out->L; k++)
			fprintf(a.f, k ? ", %.2f" : "%.2f", out->pae[(size_t)i * out->L + k]);
		fputc(']', a.f);
	}
	fprintf(a.f, "], \"max_predicted_aligned_error\": %.2f}]\n", out->max_pae);
	return atomic_file_close(&a, 1);
}

/* a fragment's file name before the record's fragments are numbered */
static char *fold_frag_name(const fold_rec_t *x, const sched_item_t *it)
{
	char *p = NULL;
	if (asprintf(&p, "%s.frag%d-%d", x->job.outname, it->start + 1, it->start + it->len) < 0)
		return NULL;
	return p;
}

/* one of a record's files, by its extension (fold_exts) */
static int fold_write_file(const char *path, const char *ext, const pdb_input_t *in,
                           const model_out_t *out)
{
	if (!strcmp(ext, ".pdb")) return pdb_write_atomic(path, in);
	if (!strcmp(ext, ".cif")) return cif_write_atomic(path, in);
	return fold_write_pae(path, out);
}

/* sched_done_fn: write the outputs of one folded item (a whole record, or
 * a fragment with the record's chains and residue numbers) */
static int fold_done(void *ctx, const sched_item_t *it, const sched_dev_t *d, const tok_t *t,
                     const model_out_t *out, const mem_fig_t *fig, double secs, char *reason,
                     size_t cap)
{
	fold_run_t *r = ctx;
	const opt_t *o = r->o;
	fold_rec_t *x = &r->rec[it->rec];
	int whole = it->start == 0 && it->len == (int)strlen(x->job.seq), rc = 0;
	char *base = whole ? strdup(x->job.outname) : fold_frag_name(x, it);
	char frag[96];
	int *residx = malloc(sizeof *residx * (t->L ? t->L : 1));
	int *chain = malloc(sizeof *chain * (t->L ? t->L : 1));
	const char *ext[FOLD_NEXT];
	int next = fold_exts(o, ext), e = 0;

	snprintf(frag, sizeof frag, "SEQUENCE %d-%d OF %zu, RECORD CHAINS AND NUMBERS",
	         it->start + 1, it->start + it->len, strlen(x->job.seq));
	pdb_meta_t meta = { .version = PACKAGE_VERSION, .weights = weights_fingerprint(r->wt),
	                    .mean_plddt = 100.0 * out->mean_plddt, .ptm = out->ptm,
	                    .recycles = out->passes - 1, .chunk_size = it->chunk,
	                    .fragment = whole ? NULL : frag, .name = x->job.outname };
	if (residx && chain)
		tok_number(t, x->job.seq, it->start, !o->keep_linker_numbering, chain, residx);
	pdb_input_t pin = { .L = t->L, .aatype = t->aatype, .atom37 = out->atom37,
	                    .atom37_mask = out->atom37_mask, .plddt = out->plddt,
	                    .residue_index = residx, .chain_index = chain,
	                    .linker_mask = t->linker_mask, .meta = &meta };
	qc_input_t qin = { .L = t->L, .atom37 = out->atom37, .atom37_mask = out->atom37_mask,
	                   .plddt = out->plddt, .chain = t->chain };
	qc_t qc;
	if (!base || !residx || !chain) {
		snprintf(reason, cap, "cannot write %s%s (out of memory)", x->job.outname, ext[0]);
		rc = -1;
	} else if (qc_measure(&qin, &qc) < 0) {
		snprintf(reason, cap, "out of memory checking its structure");
		rc = -1;
	}
	for (e = 0; rc == 0 && e < next; e++) {
		char *path = fold_path(o->outdir, base, ext[e]);
		if (!path || fold_write_file(path, ext[e], &pin, out) < 0) {
			snprintf(reason, cap, "cannot write %s%s (output error)", base, ext[e]);
			rc = -1;
		}
		free(path);
		if (rc < 0) break;
	}
	for (int k = 0; rc < 0 && base && k < e; k++) {   /* no part of a record's outputs */
		char *path = fold_path(o->outdir, base, ext[k]);
		if (path) unlink(path);
		free(path);
	}
	if (rc == 0)
		log_info("%s: residues %d-%d on %s, mean pLDDT %.1f, pTM %.3f, %.2f s", x->job.name,
		         it->start + 1, it->start + it->len, d->be->name, 100.0 * out->mean_plddt,
		         out->ptm, secs);
	pthread_mutex_lock(&r->lock);
	if (rc == 0) {
		x->frags++;
		x->res_done += it->len;
		x->plddt_sum += 100.0 * out->mean_plddt * it->len;
		x->ptm_sum += (double)out->ptm * it->len;
		x->secs += secs;
		qc_merge(&x->qc, &qc);
		if (fig->reserved >= x->fig.reserved) x->fig = *fig;
	} else {
		r->io_errors++;
	}
	pthread_mutex_unlock(&r->lock);
	free(residx);
	free(chain);
	free(base);
	return rc;
}

/* The outcome of record k from its final items v[0..n) (by ascending
 * start): ok, split (fragments renamed NAME.partIofN.pdb, .cif, .pae.json
 * in order) or failed (fragments already written removed); its row, and for ok and
 * split its done.jsonl line.  Called once per record, by one thread at a
 * time: on the scheduler's output step as soon as the record is settled,
 * or after the run for the records that never were. */
static void fold_finish(fold_run_t *r, int k, const sched_item_t *v, int n)
{
	fold_rec_t *x = &r->rec[k];
	int failed = -1, bad = 0, rc;
	char *files = NULL, *ranges = NULL;
	size_t fn = 0, rn = 0;
	FILE *ff = NULL, *rf = NULL;
	const char *status = "ok", *ext[FOLD_NEXT];
	int next = fold_exts(r->o, ext);

	x->finished = 1;
	for (int i = 0; i < n && failed < 0; i++)
		if (v[i].state != SCHED_DONE) failed = i;
	if (failed >= 0 || n == 0) {
		const char *why = "not folded";
		for (int i = 0; i < n; i++) {
			if (v[i].state != SCHED_DONE) {
				why = v[i].reason;
				continue;
			}
			/* a fragment of a record that failed: not an output */
			for (int e = 0; e < next; e++) {
				char *from = fold_frag_name(x, &v[i]);
				char *fp = from ? fold_path(r->o->outdir, from, ext[e]) : NULL;
				if (fp) unlink(fp);
				free(fp);
				free(from);
			}
		}
		log_warn("record %lld (%s): %s", (long long)x->job.recno, x->job.name, why);
		rc = fold_row(x, NULL, "failed", why);
		r->nfailed++;
		if (rc < 0) fold_io_error(r);
		return;
	}
	/* the file column and the fragment ranges, as long as they come */
	if (!(ff = open_memstream(&files, &fn)) || !(rf = open_memstream(&ranges, &rn))) {
		bad = 1;
	} else if (n == 1) {
		fprintf(ff, "%s%s", x->job.outname, ext[0]);
	} else {
		status = "split";
		for (int i = 0; i < n; i++) {
			char *from = fold_frag_name(x, &v[i]), *part = NULL;
			if (!from || asprintf(&part, "%s.part%dof%d", x->job.outname, i + 1, n) < 0) {
				log_error("record %lld (%s): out of memory", (long long)x->job.recno,
				          x->job.name);
				part = NULL;
				bad = 1;
			}
			for (int e = 0; e < next && part; e++) {
				char *fp = fold_path(r->o->outdir, from, ext[e]);
				char *tp = fold_path(r->o->outdir, part, ext[e]);
				if (!fp || !tp || rename(fp, tp) < 0) {
					log_error("%s: cannot rename to %s: %s", fp ? fp : from, tp ? tp : part,
					          strerror(errno));
					bad = 1;
				}
				free(fp);
				free(tp);
			}
			fprintf(ff, "%s%s%s", i ? "," : "", part ? part : "?", ext[0]);
			fprintf(rf, "%s%d-%d", i ? "," : "fragments ", v[i].start + 1,
			        v[i].start + v[i].len);
			free(from);
			free(part);
		}
	}
	if (ff && fclose(ff) != 0) bad = 1;
	if (rf && fclose(rf) != 0) bad = 1;
	if (bad) {
		/* its files are not all in place: failed, folded again by a rerun */
		log_warn("record %lld (%s): its fragments could not all be renamed", (long long)x->job.recno,
		         x->job.name);
		fold_io_error(r);
		if (fold_row(x, NULL, "failed", "cannot rename its fragments (output error)") < 0)
			fold_io_error(r);
		r->nfailed++;
	} else if (fold_row(x, files, status, n > 1 ? ranges : NULL) < 0) {
		fold_io_error(r);
		r->nfailed++;
	} else {
		fold_journal(r, x);
		if (n > 1) r->nsplit++;
		else r->nok++;
	}
	free(files);
	free(ranges);
}

/* Progress after a record ended: on a terminal the live status line,
 * else an info line at most every FOLD_SAY seconds.  On the output step. */
#define FOLD_SAY 10.0
static void fold_progress(fold_run_t *r, sched_t *s, const fold_rec_t *x)
{
	char line[256];
	double now = sched_now(), dt = now - r->t_start, rate;
	int n;

	r->ended++;
	r->res_ended += x->job.len;
	rate = dt > 0 ? r->res_ended / dt : 0;
	n = snprintf(line, sizeof line, "%ld/%ld records, %.0f residues/s, ETA ", r->ended, r->todo,
	             rate);
	if (rate > 0)
		n += snprintf(line + n, sizeof line - n, "%.0f s", (r->res_todo - r->res_ended) / rate);
	else
		n += snprintf(line + n, sizeof line - n, "-");
	for (int i = 0; i < r->ndev && n < (int)sizeof line; i++)
		n += snprintf(line + n, sizeof line - n, ", %s %.1f/%.1f MiB", r->dev[i].be->name,
		              sched_granted(s, i) / 1048576.0, r->dev[i].budget / 1048576.0);
	if (log_status_line(line) < 0 && (now - r->t_said >= FOLD_SAY || r->ended == r->todo)) {
		log_info("progress: %s", line);
		r->t_said = now;
	}
}

/* ESMBATCH_FAULT=slowio:MS: each record's output step takes MS
 * milliseconds longer (a slow file system), so tests can see that it holds
 * up no worker; 0 when not set */
static long fold_slowio_ms(void)
{
	const char *e = getenv("ESMBATCH_FAULT");
	long ms = 0;

	if (!e || sscanf(e, "slowio:%ld", &ms) != 1 || ms < 0) return 0;
	return ms;
}

static void fold_report(fold_run_t *r);

/* sched_settled_fn: the output step of a record */
static void fold_settled(void *ctx, sched_t *s, int rec, const sched_item_t *v, int n)
{
	fold_run_t *r = ctx;
	long ms = fold_slowio_ms();

	if (ms > 0) {
		struct timespec ts = { ms / 1000, ms % 1000 * 1000000L };
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR) continue;
	}
	fold_finish(r, rec, v, n);
	fold_progress(r, s, &r->rec[rec]);
	if (sched_now() - r->t_report >= report_every()) fold_report(r);
}

static void fold_close(fold_run_t *r)
{
	/* the weights' buffers are released through their backends: close
	 * the weights before the devices free those */
	weights_close(r->wt);
	setup_devs_close(r->dev, r->ndev);
	for (int i = 0; i < r->nrec; i++) {
		job_free(&r->rec[i].job);
		free(r->rec[i].row);
	}
	free(r->rec);
	if (r->jsonl) fclose(r->jsonl);
	if (r->done) fclose(r->done);
	json_decref(r->prev);
	json_decref(r->mine);
	quota_free(r->qt);
	safetensors_writer_free(r->dump);
	if (r->lockfd >= 0) close(r->lockfd);   /* the directory is free for the next run */
	if (r->shardfd >= 0) close(r->shardfd);
	pthread_mutex_destroy(&r->lock);
}

/* read every record (the scheduler orders work by length); bad records
 * stay as failed jobs.  0, or -1 (a read error, or a bad record under
 * --strict) */
static int fold_read(fold_run_t *r, fasta_t *in)
{
	int rc, cap = 0;
	job_t j;

	job_init(&j);
	while ((rc = fasta_next(in, &j)) > 0) {
		if (r->nrec == cap) {
			int nc = cap ? 2 * cap : 64;
			fold_rec_t *nr = realloc(r->rec, nc * sizeof *nr);
			if (!nr) { rc = -1; break; }
			r->rec = nr;
			cap = nc;
		}
		memset(&r->rec[r->nrec], 0, sizeof *r->rec);
		r->rec[r->nrec++].job = j;   /* the copy owns the strings */
		job_init(&j);
		if (r->rec[r->nrec - 1].job.status != JOB_OK) {
			log_warn("%s: %s", fasta_path(in), r->rec[r->nrec - 1].job.reason);
			if (r->o->strict) {
				log_error("%s: stopping at a bad record (--strict)", fasta_path(in));
				rc = -1;
				break;
			}
		}
	}
	job_free(&j);
	return rc < 0 ? -1 : 0;
}

/* the plan (sched_plan) in the log: devices and buckets at info level,
 * the order of work at debug level */
static void fold_log_plan(sched_t *s)
{
	char *buf = NULL, *line, *save = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	int debug = log_get_level() >= LOG_DEBUG, part = 0;

	if (!f) return;
	if (sched_plan(s, f, debug) < 0 || fclose(f) != 0) {
		free(buf);
		return;
	}
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(line, "start\t", 6)) part = 1;
		log_msg(part ? LOG_DEBUG : LOG_INFO, "plan: %s", line);
	}
	free(buf);
}

/* summary.tsv's header and rows in input order; settled: only the records
 * whose row is made (a run under way) */
static void fold_summary_rows(FILE *f, const fold_run_t *r, int settled)
{
	fputs("index\tname\tfile\tlength\tbucket\tstatus\treason\tmean_plddt\tptm"
	      "\tseconds\tpredicted_bytes\tallocated_bytes\treserved_bytes"
	      "\tdevice_used_bytes\tfrac_plddt_gt70\tplddt_very_low\tplddt_low"
	      "\tplddt_confident\tplddt_very_high\tcrc64\tflags\n", f);
	for (int i = 0; i < r->nrec; i++)
		if (!settled || r->rec[i].row) fold_summary_line(f, &r->rec[i]);
}

/* summary.tsv: every record's row in input order, written to a temporary
 * file renamed into place.  0 or -1 (logged). */
static int fold_summary(fold_run_t *r)
{
	char *path = fold_file(r, "summary", ".tsv");
	atomic_file_t a;
	int rc = -1;

	if (path && atomic_file_open(&a, path)) {
		fold_summary_rows(a.f, r, 0);
		rc = atomic_file_close(&a, 1);
	}
	free(path);
	return rc;
}

/* report.html from the rows settled so far (report.h); a failure is only
 * logged: the report is a view of the journals, rebuilt by `esmbatch
 * report`.  On the output step, or after the run. */
static void fold_report(fold_run_t *r)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	long rows = 0;

	r->t_report = sched_now();
	if (!f) return;
	fold_summary_rows(f, r, 1);
	if (fclose(f) == 0) {
		for (int i = 0; i < r->nrec; i++) rows += r->rec[i].row != NULL;
		if (report_write(r->o->outdir, r->sfx, buf, r->nrec - rows) < 0)
			log_warn("%s/report%s.html not written%s", r->o->outdir, r->sfx,
			         *r->sfx ? "" : "; `esmbatch report -o DIR` rebuilds it");
	}
	free(buf);
}

/* --shard K/N: the input's fingerprint (every record's name and
 * sequence, or reason, in order), the partition of all records by the
 * planner's cost (failed ones cost nothing), and only shard K's records
 * kept in r->rec, in input order.  0 or -1 (out of memory, logged). */
static int fold_shard(fold_run_t *r)
{
	int64_t *cost = malloc((r->nrec ? r->nrec : 1) * sizeof *cost);
	int *of = malloc((r->nrec ? r->nrec : 1) * sizeof *of), n = 0, rc = -1;
	uint64_t h = 0;

	if (!cost || !of || !(r->mine = json_object())) goto fail;
	for (int i = 0; i < r->nrec; i++) {
		const job_t *j = &r->rec[i].job;
		const char *body = j->status == JOB_OK ? j->seq : j->reason ? j->reason : "";
		const char *name = j->name ? j->name : "";
		h = hash_bytes(h, name, strlen(name) + 1);
		h = hash_bytes(h, body, strlen(body) + 1);
		cost[i] = j->status == JOB_OK ? sched_cost((int)strlen(j->seq)) : 0;
	}
	snprintf(r->input_fp, sizeof r->input_fp, "%016llx", (unsigned long long)h);
	r->ninput = r->nrec;
	if (shard_assign(cost, r->nrec, r->shard.n, of) < 0) goto fail;
	for (int i = 0; i < r->nrec; i++) {
		if (of[i] != r->shard.k - 1) {
			job_free(&r->rec[i].job);
			continue;
		}
		r->rec[n++] = r->rec[i];
		if (json_object_set_new(r->mine, r->rec[i].job.outname, json_true()) < 0) {
			r->nrec = n;
			goto fail;
		}
	}
	r->nrec = n;
	log_info("shard %d/%d: %d of the %d records of %s", r->shard.k, r->shard.n, n, r->ninput,
	         r->o->input);
	rc = 0;
fail:
	if (rc < 0) log_error("--shard %d/%d: out of memory", r->shard.k, r->shard.n);
	free(cost);
	free(of);
	return rc;
}

/* run.K-of-N.jsonl's first line: what `esmbatch merge` checks shards by */
static int fold_shard_line(fold_run_t *r)
{
	json_t *e = json_pack("{s:s, s:i, s:i, s:s, s:i, s:i, s:s}", "event", "shard", "shard",
	                      r->shard.k, "shards", r->shard.n, "input", r->input_fp, "records",
	                      r->ninput, "in_shard", r->nrec, "weights", weights_fingerprint(r->wt));
	char *line = e ? json_dumps(e, JSON_COMPACT) : NULL;
	int rc = line && fprintf(r->jsonl, "%s\n", line) > 0 ? 0 : -1;

	if (rc < 0) log_error("%s/run%s.jsonl: cannot write: %s", r->o->outdir, r->sfx, strerror(errno));
	free(line);
	json_decref(e);
	return rc;
}

int fold_main(const opt_t *o)
{
	fold_run_t r = { .o = o, .lockfd = -1, .shardfd = -1 };
	fasta_t *in = NULL;
	sched_t *s = NULL;
	const char **names = NULL;
	struct sigaction sa = { .sa_handler = fold_on_signal }, old_int, old_term;
	int code = EXIT_FATAL, stopped = 0, rc;
	int64_t cpu_total;

	pthread_mutex_init(&r.lock, NULL);
	sysmem_policy();
	/* from here a signal stops the run cleanly, also while loading */
	fold_stop = 0;
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	/* the input and the output directory first: a bad one fails before
	 * the weights (14 GB for esmfold_v1) are loaded */
	if (!(in = fasta_open(o->input, o->names))) goto done;
	if (o->shard && shard_parse(o->shard, &r.shard) < 0) {
		code = EXIT_USAGE;
		goto done;
	}
	shard_suffix(&r.shard, r.sfx, sizeof r.sfx);
	if (fold_read(&r, in) < 0) goto done;
	if (r.nrec == 0) log_warn("%s: no records", o->input);
	if (r.shard.n && fold_shard(&r) < 0) goto done;
	if (fold_mkdirs(o->outdir) < 0) goto done;
	if ((rc = fold_lock_dir(&r)) < 0) {
		if (rc == DIR_LOCK_BUSY) code = EXIT_BUSY;
		goto done;
	}
	fold_clean_tmp(&r);
	if (fold_journal_open(&r) < 0) goto done;
	{
		char *jp = fold_file(&r, "run", ".jsonl");
		if (!jp || !(r.jsonl = fopen(jp, "w"))) {
			log_error("%s/run%s.jsonl: cannot write: %s", o->outdir, r.sfx, strerror(errno));
			free(jp);
			goto done;
		}
		free(jp);
	}
	cpu_total = dev_cpu_memory(o->cpu_memory);   /* before the weights take their share */
	if (!(r.wt = weights_open(o->weights))) goto done;
	if (r.shard.n && fold_shard_line(&r) < 0) goto done;
	if (o->quota_table && !(r.qt = quota_read(o->quota_table))) goto done;
	if (setup_devs_open(o, r.wt, r.qt, 1, cpu_total, &r.dev, &r.ndev) < 0) goto done;
	for (int i = 0; r.qt && i < r.ndev; i++)
		calib_table_check(r.qt, o->quota_table, r.dev[i].be->name, weights_fingerprint(r.wt),
		                  r.dev[i].be->precision);
	if (o->dump_tensors && !(r.dump = safetensors_writer_init())) goto done;
	if (!(names = calloc(r.nrec + 1, sizeof *names))) goto done;
	for (int i = 0; i < r.nrec; i++) names[i] = r.rec[i].job.name;

	sched_opt_t so = { .chunk = o->chunk_size, .no_split = o->no_split,
	                   .passes = o->num_recycles >= 0 ? o->num_recycles + 1 : 0,
	                   .safety = r.qt ? r.qt->safety : CALIB_SAFETY, .qt = r.qt,
	                   .jsonl = r.jsonl, .stop = &fold_stop, .done = fold_done,
	                   .settled = fold_settled, .ctx = &r, .dump = r.dump, .names = names };
	if (!(s = sched_init(r.dev, r.ndev, &so))) goto done;
	if (report_run_event(r.jsonl, o, weights_fingerprint(r.wt)) < 0)
		log_warn("%s/run.jsonl: cannot write the run's settings", o->outdir);
	for (int i = 0; i < r.nrec; i++) {
		fold_rec_t *x = &r.rec[i];
		const char *row;
		if (x->job.status != JOB_OK) {
			if (fold_row(x, NULL, "failed", x->job.reason) < 0) goto done;
			r.nfailed++;
		} else if ((row = fold_resumable(&r, x))) {
			if (!(x->row = strdup(row))) goto done;
			x->skipped = 1;
			r.nskipped++;
			fprintf(r.jsonl, "{\"event\":\"skip\",\"record\":%d}\n", i);
		} else if (sched_add(s, i, x->job.seq) < 0) {
			goto done;
		} else {
			r.todo++;
			r.res_todo += x->job.len;
		}
	}
	sched_auto_workers(s);
	fold_log_plan(s);
	if (r.nskipped)
		log_info("%ld record(s) done by an earlier run into %s: skipped (--force refolds them)",
		         r.nskipped, o->outdir);
	fflush(r.jsonl);
	r.t_start = r.t_said = r.t_report = sched_now();
	stopped = sched_run(s) < 0;
	log_status_line(NULL);

	for (int i = 0; i < r.nrec; i++) {
		sched_item_t *v;
		int n;
		if (r.rec[i].finished || r.rec[i].row) continue;
		if ((n = sched_outcome(s, i, &v)) < 0) goto done;
		fold_finish(&r, i, v, n);
		free(v);
	}
	/* what can be written is written, whatever could not be before */
	if (fold_summary(&r) < 0) r.io_errors++;
	fold_report(&r);
	if (r.dump && safetensors_writer_save(r.dump, o->dump_tensors) < 0) r.io_errors++;
	log_info("%ld folded, %ld split, %ld failed, %ld skipped (done before); summary in %s/summary%s.tsv",
	         r.nok, r.nsplit, r.nfailed, r.nskipped, o->outdir, r.sfx);
	code = stopped || r.io_errors ? EXIT_FATAL : r.nfailed ? EXIT_PARTIAL : EXIT_OK;
	if (r.io_errors)
		log_error("%s: %ld output(s) could not be written (see above; a record whose files are "
		          "not all there is failed); rerun the same command once they can be",
		          o->outdir, r.io_errors);
	if (stopped) log_error("interrupted: the records not folded are marked failed; "
	                       "rerun the same command to fold only those");
done:
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	sched_free(s);
	free(names);
	fasta_close(in);
	fold_close(&r);
	return code;
}
