/* fold_run.h (prefix fold_) - what the files of the `fold` command share:
 * a record's state (fold_rec_t), the run's (fold_run_t), and the functions
 * one of its files calls in another, each calling only the ones below it:
 *   fold.c      the run: input, shards, scheduler, progress, report, exit
 *   fold_out.c  a record's outputs: structure files, its summary row, the
 *               outcome of its fragments, summary.tsv or summary.partial.tsv
 *   fold_dedup.c  records of the same sequence: the one folded, its
 *               copies' files written with its own, their outcome with its
 *   fold_dir.c  the output directory: the names of its files, outputs not
 *               written, its locks, the leftovers of a killed run,
 *               done.jsonl and what a rerun skips
 *   fold_progress.c  what the run says as it goes: a line per record,
 *               the progress line, the ticker thread
 *   fold_cache.c  --cache: a record written from the store before it is
 *               queued, a folded one added to it
 * Private to src/cli/fold*.c.
 *
 * The life of a record, the functions it passes through in order:
 *   fold_main           cli/fold.c         the run's stages, each one below
 *   fold_open_input     cli/fold.c         read from the FASTA into r->rec
 *   fold_open_shard     cli/fold.c         kept when it is shard K's (--shard)
 *   fold_queue          cli/fold.c         failed, skipped (done before), taken
 *   fold_cache_take     cli/fold_cache.c   from the cache (--cache), or:
 *   fold_source         cli/fold_dedup.c   queued, or a copy of an earlier record
 *   sched_add           sched/scheduler.c  planned on each device, maybe halved
 *   sched_run           sched/scheduler.c  the workers start
 *   sched_worker        sched/scheduler.c  a worker takes it (the longest that fits)
 *   sched_fold          sched/scheduler.c  folded, its memory measured (model_fold)
 *   fold_write_copies   cli/fold_dedup.c   its files and its copies', on the worker:
 *   fold_write_outputs  cli/fold_out.c     its files written (fold_write_rec)
 *   fold_cache_add      cli/fold_cache.c   its structure stored (--cache)
 *   sched_fold_ended    sched/scheduler.c  ok, out of memory, device lost or failed
 *   sched_drain         sched/scheduler.c  the output step: one thread, in order
 *   fold_record_settled cli/fold.c         every item of it ended:
 *   fold_finish         cli/fold_out.c     its row, fragments renamed, done.jsonl
 *   fold_copies_finish  cli/fold_dedup.c   the same for each of its copies
 *   fold_exit_status    cli/fold.c         summary.tsv, report.html, exit status
 * (tests/test_life.sh checks that each is defined in the file named.)
 *
 * One word per end of things, each meaning this and only this
 * (tests/test_life.sh checks that each name exists in src/, and that the
 * names these words retired are gone), the glossary:
 *   ended     sched_fold_ended     a fold of an item is over, whatever came of it
 *   folded    SCHED_FOLDED         an item's fold succeeded and its files are
 *                                  written (sched_folded_fn: fold_write_outputs)
 *   settled   fold_record_settled  every item of a record has ended; the
 *                                  scheduler hands the record over
 *   finished  fold_finish          a settled record's outcome made final: its row,
 *                                  fragments renamed or removed, done.jsonl
 *   done      fold_journal         in done.jsonl (r->journal): a rerun skips it
 *   unrun     nunrun               failed before it ran, for no fault of its own
 *                                  (stopped, no device left): not final
 */
#ifndef ESMBATCH_CLI_FOLD_RUN_H
#define ESMBATCH_CLI_FOLD_RUN_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "cli/options.h"
#include "io/fasta.h"
#include "io/safetensors.h"
#include "io/struct_cache.h"
#include "model/model.h"
#include "model/weights.h"
#include "protein/qc.h"
#include "sched/dedup.h"
#include "sched/memory.h"
#include "sched/quota.h"
#include "sched/scheduler.h"
#include "sched/shard.h"

/* one input record and what became of it */
typedef struct {
	job_t     job;
	int       frags;       /* fragments folded (1: the whole record) */
	int64_t   res_folded;  /* residues folded */
	double    plddt_sum;   /* mean pLDDT x residues, over fragments */
	double    ptm_sum;     /* pTM x residues */
	double    secs;
	mem_fig_t fig;         /* the largest fragment's figures */
	qc_t      qc;          /* pLDDT bands and flag counts, over fragments */
	char     *row;         /* its summary row from column file on, once final */
	int       skipped;     /* done by an earlier run (done.jsonl) */
	int       finished;    /* fold_finish ran */
	int       cached;      /* written from the cache (--cache) */
	const char *same_as;   /* a copy: the output name of the record folded
	                          for it (its job's); NULL: folded itself */
	int       next_copy;   /* the next copy of the same record folded; -1 none */
	int       last_copy;   /* the record folded: its last copy (next_copy >= 0) */
	char     *copy_err;    /* a copy whose files could not be written: why */
	int       copy_err_at; /* the start of that item */
} fold_rec_t;

/* everything one run holds */
typedef struct {
	const opt_t *o;
	weights_t        *wt;
	sched_dev_t *dev;
	int          ndev;
	fold_rec_t  *rec;
	int          nrec;
	fasta_t     *in;         /* the input, open from the first stage on */
	const char **names;      /* [nrec + 1] the records' names (the dump's) */
	FILE        *jsonl;      /* run.jsonl */
	FILE        *journal;    /* done.jsonl, appended */
	int          lockfd;     /* DIR/.esmbatch.lock, flock'ed; -1 none */
	shard_t      shard;      /* --shard; n 0: the whole input */
	char         sfx[32];    /* ".K-of-N" or "" (shard_suffix) */
	int          shardfd;    /* DIR/.esmbatch.K-of-N.lock, flock'ed; -1 none */
	json_t      *mine;       /* sharded: this shard's output names (keys) */
	char         input_fp[17];  /* sharded: hash of every record's name and sequence */
	int          ninput;     /* sharded: records in the whole input */
	json_t      *prev;       /* its entries by output name (the latest wins) */
	quota_table_t *qt;       /* --quota-table, or NULL */
	dedup_t     *dedup;      /* the sequences queued; NULL: every record
	                            folded (--no-dedup, --dump-tensors) */
	long         ncopies;    /* records written from another's fold */
	safetensors_writer_t *dump;
	cache_t     *cache;      /* --cache, or NULL */
	long         nok, nfailed, nsplit, nskipped;
	long         ncached;    /* of nok, written from the cache */
	long         nunrun;     /* of nfailed, those with no final outcome:
	                            an item never run (interrupted, no device
	                            left) */
	long         todo, nfinished;   /* records queued for this run; finished of them */
	int64_t      res_todo, res_finished;
	double       t_start, t_said;   /* run start; last progress log line */
	double       every;      /* the ticker's period (s); 0: none */
	sched_t     *sched;      /* the scheduler, from the queue stage on (the
	                            ticker reads it) */
	pthread_t    ticker;
	pthread_cond_t tick;     /* wakes the ticker to stop */
	int          ticking, tick_quit;
	double       t_report;   /* report.html last written (sched_now) */
	double       report_every; /* seconds between its refreshes (report_every) */
	long         io_errors;  /* outputs not written: the run goes on, exit 1 */
	pthread_mutex_t lock;    /* io_errors, and the results of a record's
	                            fragments (fold_write_outputs) from the
	                            workers; finishing a record is the output
	                            step's; nfinished, res_finished, t_said (the
	                            ticker reads them) */
} fold_run_t;

/* The files this run writes per record (or fragment), as the extensions
 * of its name: the structures asked by --format, then with --pae the PAE.
 * The summary's file column names the first: the PDB, or the mmCIF when
 * only cif is asked. */
#define FOLD_MAX_FILES 3

/* tabs in a row from column file on: summary.tsv has 23 columns, the row
 * all but index, name, length and bucket */
#define FOLD_ROW_TABS 18

/* where a record's structure comes from (fold_source) */
typedef enum { FOLD_FROM_FOLD, FOLD_FROM_COPY } fold_from_t;

/* fold_out.c */
/* x->row from column file on; 0 or -1 (out of memory) */
int  fold_row(fold_rec_t *x, const char *file, const char *status, const char *reason);
/* The files of one folded item written under record x's name (x: the
 * item's record, or a copy of it), and its figures added to x's.  0, or
 * -1 with why in reason. */
int  fold_write_rec(fold_run_t *r, fold_rec_t *x, const sched_item_t *it, const sched_dev_t *d,
                    const tok_t *t, const model_out_t *out, const mem_fig_t *fig, double secs,
                    char *reason, size_t cap);
/* write the files of one folded item under its record's name
 * (fold_write_rec; fold_write_copies calls it as the sched_folded_fn) */
int  fold_write_outputs(void *ctx, const sched_item_t *it, const sched_dev_t *d,
                        const tok_t *t, const model_out_t *out, const mem_fig_t *fig,
                        double secs, char *reason, size_t cap);
/* the outcome of record k from its final items v[0..n): ok, split, failed */
void fold_finish(fold_run_t *r, int k, const sched_item_t *v, int n);
/* summary.tsv's header and rows (settled: only the rows made so far) */
void fold_summary_rows(FILE *f, const fold_run_t *r, int settled);
/* as the run starts folding: the summary of an earlier run removed (it
 * would claim every record final whatever this run does), once both
 * summaries this run may write at its end are found writable.  0 or -1
 * (logged) */
int  fold_summary_retract(const fold_run_t *r);
/* complete (every record has a final outcome, every output written):
 * summary.tsv, and an earlier summary.partial.tsv removed; else
 * summary.partial.tsv (summary.tsv removed).  Written atomically; 0 or
 * -1 (logged). */
int  fold_summary(fold_run_t *r, int complete);

/* fold_cache.c */
/* --cache: the store opened (nothing without it); 0 or -1 (logged) */
int  fold_cache_open(fold_run_t *r);
void fold_cache_close(fold_run_t *r);
/* Before record i is queued: when the cache holds its structure, its
 * files and row written from it and the record finished (1), else 0;
 * -1 out of memory. */
int  fold_cache_take(fold_run_t *r, int i);
/* After a whole record's files are written (fold_write_outputs, on the
 * worker): its structure added to the cache (a failure is only logged). */
void fold_cache_add(fold_run_t *r, const sched_item_t *it, const sched_dev_t *d, const tok_t *t,
                    const model_out_t *out, const mem_fig_t *fig, double secs);

/* fold_dedup.c */
/* Where record k's structure comes from: FOLD_FROM_FOLD (queued), or
 * FOLD_FROM_COPY (*from: the earlier record of the same sequence queued
 * in this run, whose fold writes k's files too).  A record done by an
 * earlier run is never asked.  -1 out of memory. */
int  fold_source(fold_run_t *r, int k, int *from);
/* sched_folded_fn: fold_write_outputs, then the same item's files for each
 * copy of its record; a copy that cannot be written fails alone */
int  fold_write_copies(void *ctx, const sched_item_t *it, const sched_dev_t *d,
                       const tok_t *t, const model_out_t *out, const mem_fig_t *fig,
                       double secs, char *reason, size_t cap);
/* record k's copies finished as k was (fold_finish with k's items
 * v[0..n)), in input order; on the output step, right after k's */
void fold_copies_finish(fold_run_t *r, int k, const sched_item_t *v, int n);

/* fold_progress.c */
/* Record x is finished (its items v[0..n)): counted, and one line, "[k/N]
 * NAME: ..." (info), or with why (it failed) a warning, none for a record
 * none of whose items ran (interrupted, no device left: the run's last
 * line counts them, nunrun).  A copy (x->same_as) is not counted (N
 * counts folds) and its line has no [k/N].  From fold_finish. */
void fold_count_finished(fold_run_t *r, const fold_rec_t *x, const sched_item_t *v, int n, const char *why);
/* The progress line as a record is finished: the live status line on a
 * terminal, else a "progress:" info line at most every 10 s (or
 * ESMBATCH_PROGRESS_EVERY if less) and after the last.  On the output
 * step. */
void fold_progress(fold_run_t *r, sched_t *s);
/* Start the ticker on s (the scheduler about to run): the progress line
 * again every ESMBATCH_PROGRESS_EVERY seconds (default 60 into a log, 1
 * on a terminal; 0: none), so a long record shows in a log while it
 * runs.  0, or -1 (no ticker, logged: the run goes on). */
int  fold_tick_start(fold_run_t *r, sched_t *s);
/* Stop and join the ticker; nothing when none runs. */
void fold_tick_stop(fold_run_t *r);

/* fold_dir.c */
/* an output could not be written (logged by the caller) */
void  fold_io_error(fold_run_t *r);
/* DIR/NAME EXT, or NULL */
char *fold_path(const char *dir, const char *name, const char *ext);
/* ext[] = the extensions of a record's files; how many (<= FOLD_MAX_FILES) */
int   fold_exts(const opt_t *o, const char *ext[FOLD_MAX_FILES]);
/* DIR/STEM.K-of-N EXT when sharded, else DIR/STEM EXT; or NULL */
char *fold_file(const fold_run_t *r, const char *stem, const char *ext);
/* take the directory's locks: 0, DIR_LOCK_BUSY or -1 (logged) */
int  fold_lock_dir(fold_run_t *r);
/* remove a killed run's temporaries (with the locks held) */
void fold_clean_tmp(const fold_run_t *r);
/* read done.jsonl into r->prev and open it for appending; 0 or -1 */
int  fold_journal_open(fold_run_t *r);
/* append record x's line to done.jsonl (on the output step) */
void fold_journal(fold_run_t *r, const fold_rec_t *x);
/* the row an earlier run left for x when it can be kept, else NULL */
const char *fold_resumable(const fold_run_t *r, const fold_rec_t *x);
/* An output the run writes beside -o (--dump-tensors PATH) may be none
 * of its inputs (the FASTA, --names, --quota-table, the weights, the
 * config.json beside them) and none of the files it writes in -o (there:
 * a name ending .pdb, .cif, .pae.json, .jsonl, .tsv, .html or .lock, or a
 * temporary of one); it must be absent or a regular file.  0, or -1
 * after one logged line. */
int  fold_check_output(const fold_run_t *r, const char *path);

#endif
