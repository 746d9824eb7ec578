/* fold.c - the `fold` subcommand: read records, fold each, write its
 * structure (a PDB and/or an mmCIF, --format) and one summary.tsv row per
 * record, in input order, and one JSON
 * line per fold in run.jsonl with its memory figures (memory.h).
 *
 * Every input record gets exactly one row: ok, split, or failed with a
 * reason (bad record, fold error, output error, interrupted).  Outputs are
 * written atomically (a temporary file renamed into place), so a killed run
 * leaves complete files only.  The table is summary.tsv only when every
 * record has a final outcome (ok, split, failed for a reason of its own)
 * and every output was written; else (interrupted, no device left, an
 * output error) it is summary.partial.tsv.  A run removes an earlier
 * run's summary.tsv as it starts folding, so summary.tsv (a make target)
 * exists only while the last run that folded into the directory
 * completed.
 *
 * Resuming: once a record's files are in place, one JSON line in
 * done.jsonl (appended, flushed) names it with its sequence hash, the
 * weights fingerprint, the options that change its output (--num-recycles,
 * --chunk-size, --precision, a multimer's numbering), its summary row and
 * its files' sizes and mtimes.  A rerun into the same directory skips a
 * record whose latest line matches and whose files (all that --format and
 * --pae ask for) are the ones the line describes, keeping that row;
 * --force (or --dump-tensors) refolds all.
 *
 * Records of the same sequence (dedup.h; --no-dedup: none) are folded
 * once: each later one is a copy, its files written from the first one's
 * fold under its own name, its own row naming that record (same_as) and
 * its own done.jsonl line (fold_dedup.c).
 *
 * Sharded (--shard K/N, shard.h): only the records of shard K are read
 * into the run; summary, done, run and report files carry the suffix
 * .K-of-N, and run.K-of-N.jsonl names the input, the weights and N, for
 * `esmbatch merge`.
 *
 * This file runs the command, fold_main one stage after another (open
 * the input, the shard, the directory's locks, done.jsonl, run.jsonl, the
 * model; queue; run; close with the exit status; fold_run.h lists them
 * in a record's life); a record's outputs are fold_out.c's, the output
 * directory (file names, locks, leftovers, done.jsonl) fold_dir.c's.
 */
#include "config.h"

#include "cli/fold.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "util/grow.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/sysmem.h"
#include "io/atomic_file.h"
#include "io/dir_lock.h"
#include "io/fasta.h"
#include "backend/devices.h"
#include "cli/calibrate.h"
#include "cli/fold_run.h"
#include "cli/report.h"
#include "cli/setup.h"

static volatile sig_atomic_t fold_stop;

static void fold_on_signal(int sig)
{
	(void)sig;
	fold_stop = 1;
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
static void fold_record_settled(void *ctx, sched_t *s, int rec, const sched_item_t *v, int n)
{
	fold_run_t *r = ctx;
	long ms = fold_slowio_ms();

	if (ms > 0) {
		struct timespec ts = { ms / 1000, ms % 1000 * 1000000L };
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR) continue;
	}
	fold_finish(r, rec, v, n);
	fold_copies_finish(r, rec, v, n);
	fold_progress(r, s);
	if (sched_now() - r->t_report >= r->report_every) fold_report(r);
}

/* close: everything the run holds released, the directory's locks last */
static void fold_close(fold_run_t *r)
{
	sched_free(r->sched);
	fold_cache_close(r);
	dedup_free(r->dedup);
	free(r->names);
	fasta_close(r->in);
	/* the weights' buffers are released through their backends: close
	 * the weights before the devices free those */
	weights_close(r->wt);
	setup_devs_close(r->dev, r->ndev);
	for (int i = 0; i < r->nrec; i++) {
		job_free(&r->rec[i].job);
		free(r->rec[i].row);
		free(r->rec[i].copy_err);
	}
	free(r->rec);
	if (r->jsonl) fclose(r->jsonl);
	if (r->journal) fclose(r->journal);
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
	size_t cap = 0;
	job_t j;
	int rc;

	job_init(&j);
	while ((rc = fasta_next(in, &j)) > 0) {
		if (grow_array(&r->rec, &cap, (size_t)r->nrec + 1, sizeof *r->rec) < 0) {
			rc = -1;
			break;
		}
		memset(&r->rec[r->nrec], 0, sizeof *r->rec);
		r->rec[r->nrec].next_copy = -1;
		r->rec[r->nrec++].job = j;   /* the copy owns the strings */
		job_init(&j);
		if (r->rec[r->nrec - 1].job.status != JOB_OK) {
			/* a shard warns of its own bad records only (fold_shard) */
			if (!r->shard.n || r->o->strict)
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
 * kept in r->rec, in input order, its bad ones warned of (one shard
 * each).  0 or -1 (out of memory, logged). */
static int fold_shard(fold_run_t *r)
{
	int64_t *cost = malloc((r->nrec ? r->nrec : 1) * sizeof *cost);
	int *of = malloc((r->nrec ? r->nrec : 1) * sizeof *of), n = 0, rc = -1;
	uint64_t h = 0;

	if (!cost || !of || !(r->mine = json_object())) goto done;
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
	if (shard_assign(cost, r->nrec, r->shard.n, of) < 0) goto done;
	for (int i = 0; i < r->nrec; i++) {
		if (of[i] != r->shard.k - 1) {
			job_free(&r->rec[i].job);
			continue;
		}
		r->rec[n++] = r->rec[i];
		if (r->rec[i].job.status != JOB_OK) log_warn("%s: %s", r->o->input, r->rec[i].job.reason);
		if (json_object_set_new(r->mine, r->rec[i].job.outname, json_true()) < 0) {
			r->nrec = n;
			goto done;
		}
	}
	r->nrec = n;
	log_info("shard %d/%d: %d of the %d records of %s", r->shard.k, r->shard.n, n, r->ninput,
	         r->o->input);
	rc = 0;
done:
	if (rc < 0) log_error("--shard %d/%d: out of memory", r->shard.k, r->shard.n);
	free(cost);
	free(of);
	return rc;
}

/* run.K-of-N.jsonl's first line: what `esmbatch merge` checks shards by:
 * the input, the weights, N and the settings that change a record's
 * outputs (its files: --format and --pae) */
static int fold_shard_line(fold_run_t *r)
{
	const opt_t *o = r->o;
	const char *ext[FOLD_MAX_FILES];
	int next = fold_exts(o, ext);
	json_t *files = json_array();
	for (int i = 0; files && i < next; i++) json_array_append_new(files, json_string(ext[i]));
	json_t *e = json_pack("{s:s, s:i, s:i, s:s, s:i, s:i, s:s, s:{s:i, s:i, s:s, s:b, s:o}}", "event",
	                      "shard", "shard", r->shard.k, "shards", r->shard.n, "input", r->input_fp,
	                      "records", r->ninput, "in_shard", r->nrec, "weights",
	                      weights_fingerprint(r->wt), "settings", "num_recycles", o->num_recycles,
	                      "chunk_size", o->chunk_size, "precision", be_prec_name(o->precision),
	                      "keep_linker_numbering", o->keep_linker_numbering, "files", files);
	char *line = e ? json_dumps(e, JSON_COMPACT) : NULL;
	int rc = line && fprintf(r->jsonl, "%s\n", line) > 0 ? 0 : -1;

	if (rc < 0) log_error("%s/run%s.jsonl: cannot write: %s", r->o->outdir, r->sfx, strerror(errno));
	free(line);
	json_decref(e);
	return rc;
}

/* open, the input: the FASTA, --shard's K/N, every record read.  0 or
 * an exit code */
static int fold_open_input(fold_run_t *r)
{
	const opt_t *o = r->o;

	if (!(r->in = fasta_open(o->input, o->names, &fold_stop))) return EXIT_FATAL;
	if (o->shard && shard_parse(o->shard, &r->shard) < 0) return EXIT_USAGE;
	shard_suffix(&r->shard, r->sfx, sizeof r->sfx);
	if (fold_read(r, r->in) < 0) return EXIT_FATAL;
	if (r->nrec == 0) log_warn("%s: no records", o->input);
	return 0;
}

/* open, the shard: only shard K's records kept (fold_shard); 0 or an
 * exit code */
static int fold_open_shard(fold_run_t *r)
{
	return r->shard.n && fold_shard(r) < 0 ? EXIT_FATAL : 0;
}

/* open, the output directory: made, --dump-tensors checked against it,
 * its locks taken and a killed run's leftovers removed.  0 or an exit
 * code */
static int fold_open_locks(fold_run_t *r)
{
	const opt_t *o = r->o;
	int rc;

	if (atomic_file_mkdirs(o->outdir) < 0) return EXIT_FATAL;
	if (o->dump_tensors && fold_check_output(r, o->dump_tensors) < 0) return EXIT_USAGE;
	if ((rc = fold_lock_dir(r)) < 0) return rc == DIR_LOCK_BUSY ? EXIT_BUSY : EXIT_FATAL;
	fold_clean_tmp(r);
	return 0;
}

/* open, done.jsonl: what earlier runs finished; 0 or an exit code */
static int fold_open_journal(fold_run_t *r)
{
	return fold_journal_open(r) < 0 ? EXIT_FATAL : 0;
}

/* open, run.jsonl (run.K-of-N.jsonl); 0 or an exit code */
static int fold_open_run_log(fold_run_t *r)
{
	char *jp = fold_file(r, "run", ".jsonl");

	if (!jp) log_error("%s/run%s.jsonl: out of memory", r->o->outdir, r->sfx);
	if (jp) r->jsonl = atomic_file_fopen(jp, O_WRONLY | O_CREAT | O_TRUNC, "w");
	free(jp);
	return r->jsonl ? 0 : EXIT_FATAL;
}

/* open, the model: the weights (a shard's first run.jsonl line names
 * them), the quota table, the devices, the --dump-tensors writer.  0 or
 * an exit code */
static int fold_open_model(fold_run_t *r)
{
	const opt_t *o = r->o;
	int64_t cpu_total = dev_cpu_memory(o->cpu_memory);   /* before the weights take their share */

	if (!(r->wt = weights_open(o->weights))) return EXIT_FATAL;
	if (r->shard.n && fold_shard_line(r) < 0) return EXIT_FATAL;
	if (o->quota_table && !(r->qt = quota_read(o->quota_table))) return EXIT_FATAL;
	if (setup_devs_open(o, r->wt, r->qt, 1, cpu_total, &r->dev, &r->ndev) < 0) return EXIT_FATAL;
	for (int i = 0; r->qt && i < r->ndev; i++)
		calib_table_check(r->qt, o->quota_table, r->dev[i].be->name, weights_fingerprint(r->wt),
		                  r->dev[i].be->precision);
	if (o->dump_tensors && !(r->dump = safetensors_writer_init())) return EXIT_FATAL;
	return fold_cache_open(r) < 0 ? EXIT_FATAL : 0;
}

/* record i, a copy of record from: after from's last copy so far (its
 * copies in input order), and named in its row */
static void fold_copy_of(fold_run_t *r, int i, int from)
{
	fold_rec_t *o = &r->rec[from];

	if (o->next_copy < 0) o->next_copy = i;
	else r->rec[o->last_copy].next_copy = i;
	o->last_copy = i;
	r->rec[i].same_as = r->rec[from].job.outname;
	r->ncopies++;
	fprintf(r->jsonl, "{\"event\":\"copy\",\"record\":%d,\"of\":%d}\n", i, from);
}

/* queue: the scheduler made, and every record failed (a bad one),
 * skipped (done by an earlier run: fold_resumable), written from the
 * cache (fold_cache_take), queued (sched_add) or a copy of one queued
 * (fold_source); the plan logged.  0 or an exit code */
static int fold_queue(fold_run_t *r)
{
	const opt_t *o = r->o;
	int from, src;

	if (!(r->names = calloc(r->nrec + 1, sizeof *r->names))) return EXIT_FATAL;
	for (int i = 0; i < r->nrec; i++) r->names[i] = r->rec[i].job.name;
	sched_opt_t so = { .chunk = o->chunk_size, .no_split = o->no_split,
	                   .passes = o->num_recycles >= 0 ? o->num_recycles + 1 : 0,
	                   .safety = r->qt ? r->qt->safety : CALIB_SAFETY, .qt = r->qt,
	                   .jsonl = r->jsonl, .stop = &fold_stop, .folded = fold_write_copies,
	                   .settled = fold_record_settled, .ctx = r, .dump = r->dump, .names = r->names };
	if (!(r->sched = sched_init(r->dev, r->ndev, &so))) return EXIT_FATAL;
	if (!o->no_dedup && !o->dump_tensors && !(r->dedup = dedup_init())) return EXIT_FATAL;
	if (report_run_event(r->jsonl, o, r->wt) < 0)
		log_warn("%s/run.jsonl: cannot write the run's settings", o->outdir);
	for (int i = 0; i < r->nrec; i++) {
		fold_rec_t *x = &r->rec[i];
		const char *row;
		int hit = 0;
		if (x->job.status != JOB_OK) {
			if (fold_row(x, NULL, "failed", x->job.reason) < 0) return EXIT_FATAL;
			r->nfailed++;
		} else if ((row = fold_resumable(r, x))) {
			if (!(x->row = strdup(row))) return EXIT_FATAL;
			x->skipped = 1;
			r->nskipped++;
			fprintf(r->jsonl, "{\"event\":\"skip\",\"record\":%d}\n", i);
		} else if ((hit = fold_cache_take(r, i)) != 0) {
			if (hit < 0) return EXIT_FATAL;
		} else if ((src = fold_source(r, i, &from)) < 0) {
			return EXIT_FATAL;
		} else if (src == FOLD_FROM_COPY) {
			fold_copy_of(r, i, from);
		} else if (sched_add(r->sched, i, x->job.seq) < 0) {
			return EXIT_FATAL;
		} else {
			r->todo++;
			r->res_todo += x->job.len;
		}
	}
	sched_auto_workers(r->sched);
	fold_log_plan(r->sched);
	if (r->nskipped)
		log_info("%ld record(s) done by an earlier run into %s: skipped (--force refolds them)",
		         r->nskipped, o->outdir);
	if (r->ncached) log_info("%ld record(s) written from the cache %s", r->ncached, o->cache);
	if (r->ncopies)
		log_info("%ld record(s) of the same sequence as an earlier one: written from its fold, "
		         "%ld to fold (--no-dedup folds each)", r->ncopies, r->todo);
	return 0;
}

/* run: the workers fold the queue (sched_run; each record's outputs on
 * the output step as it settles, fold_record_settled; the ticker's
 * progress line meanwhile), then the records that never settled are
 * finished.  *stopped: interrupted (also while placing).  0 or an exit
 * code */
static int fold_run_workers(fold_run_t *r, int *stopped)
{
	fflush(r->jsonl);
	if (fold_summary_retract(r) < 0) return EXIT_FATAL;
	r->t_start = r->t_said = r->t_report = sched_now();
	r->report_every = report_every();
	fold_tick_start(r, r->sched);
	*stopped = sched_run(r->sched) < 0;

	for (int i = 0; i < r->nrec; i++) {
		sched_item_t *v;
		int n;
		if (r->rec[i].finished || r->rec[i].row || r->rec[i].same_as) continue;
		if ((n = sched_outcome(r->sched, i, &v)) < 0) return EXIT_FATAL;
		fold_finish(r, i, v, n);
		fold_copies_finish(r, i, v, n);
		free(v);
	}
	fold_tick_stop(r);
	log_status_line(NULL);
	*stopped |= fold_stop && r->nunrun > 0;   /* stopped while placing */
	return 0;
}

/* close: the dump, summary.tsv (summary.partial.tsv when not complete),
 * report.html, the last log lines; the exit status */
static int fold_exit_status(fold_run_t *r, int stopped)
{
	const opt_t *o = r->o;
	int complete;

	/* what can be written is written, whatever could not be before */
	if (r->dump && safetensors_writer_save(r->dump, o->dump_tensors) < 0) r->io_errors++;
	complete = !stopped && !r->nunrun && !r->io_errors;
	if (fold_summary(r, complete) < 0) r->io_errors++;
	fold_report(r);
	log_info("%ld folded, %ld split, %ld failed, %ld skipped (done before); summary in %s/summary%s%s.tsv",
	         r->nok, r->nsplit, r->nfailed, r->nskipped, o->outdir, complete ? "" : ".partial", r->sfx);
	if (r->io_errors)
		log_error("%s: %ld output(s) could not be written (see above; a record whose files are "
		          "not all there is failed); rerun the same command once they can be",
		          o->outdir, r->io_errors);
	if (stopped || r->nunrun)
		log_error("%s: %ld record(s) not folded are marked failed in summary.partial%s.tsv; "
		          "rerun the same command to fold only those (it writes summary%s.tsv once "
		          "every record has a final outcome)", stopped ? "interrupted" : "no device left",
		          r->nunrun, r->sfx, r->sfx);
	return stopped || r->io_errors ? EXIT_FATAL : r->nfailed ? EXIT_PARTIAL : EXIT_OK;
}

/* The stages of a run, in order (fold_run.h: the life of a record).  The
 * input and the output directory come first: a bad one fails before the
 * weights (14 GB for esmfold_v1) are loaded. */
int fold_main(const opt_t *o)
{
	fold_run_t r = { .o = o, .lockfd = -1, .shardfd = -1 };
	struct sigaction sa = { .sa_handler = fold_on_signal }, old_int, old_term;
	int code, stopped = 0;

	pthread_mutex_init(&r.lock, NULL);
	sysmem_policy();
	/* from here a signal stops the run cleanly, also while loading */
	fold_stop = 0;
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	if (!(code = fold_open_input(&r)) && !(code = fold_open_shard(&r)) &&
	    !(code = fold_open_locks(&r)) && !(code = fold_open_journal(&r)) &&
	    !(code = fold_open_run_log(&r)) && !(code = fold_open_model(&r)) &&
	    !(code = fold_queue(&r)) && !(code = fold_run_workers(&r, &stopped)))
		code = fold_exit_status(&r, stopped);
	fold_tick_stop(&r);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	fold_close(&r);
	return code;
}
