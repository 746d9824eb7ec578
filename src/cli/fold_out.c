/* fold_out.c - a record's outputs (fold_run.h): its structure files and
 * PAE, written atomically when a fragment is folded; the outcome of its
 * fragments (renamed NAME.partIofN, or removed when the record failed);
 * its summary row; summary.tsv, or summary.partial.tsv when some record
 * has no final outcome.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"
#include "util/tsv.h"
#include "io/atomic_file.h"
#include "protein/cif.h"
#include "protein/pdb.h"
#include "model/tokenizer.h"
#include "sched/bucket.h"
#include "cli/fold_run.h"

/* x->row = the summary row of a record from column file on (status ok /
 * split / failed), every cell by util/tsv.h's rule; 0 or -1 (out of memory) */
int fold_row(fold_rec_t *x, const char *file, const char *status, const char *reason)
{
	char fig[160] = "-\t-\t-\t-\t-\t-\t-", qc[160] = "-\t-\t-\t-\t-", flags[96] = "-";
	char crc[17] = "-";
	int64_t nq = qc_residues(&x->qc);
	char *row = NULL;
	size_t len = 0;
	FILE *f;
	int rc = -1;

	if (x->res_folded && strcmp(status, "failed")) {
		snprintf(fig, sizeof fig, "%.2f\t%.4f\t%.2f\t%zu\t%zu\t%zu\t%lld",
		         x->plddt_sum / x->res_folded, x->ptm_sum / x->res_folded, x->secs,
		         x->fig.predicted, x->fig.allocated, x->fig.reserved,
		         (long long)x->fig.device_used);
		snprintf(qc, sizeof qc, "%.4f\t%lld\t%lld\t%lld\t%lld",
		         nq ? (double)(x->qc.band[QC_CONFIDENT] + x->qc.band[QC_VERY_HIGH]) / nq : 0.0,
		         (long long)x->qc.band[QC_VERY_LOW], (long long)x->qc.band[QC_LOW],
		         (long long)x->qc.band[QC_CONFIDENT], (long long)x->qc.band[QC_VERY_HIGH]);
		qc_flags(&x->qc, x->plddt_sum / x->res_folded, x->ptm_sum / x->res_folded, flags,
		         sizeof flags);
	}
	if (x->job.seq && *x->job.seq) qc_crc64_hex(x->job.seq, strlen(x->job.seq), crc);
	if ((f = open_memstream(&row, &len))) {
		/* one after another: the cells' order is the row's */
		rc = tsv_put(f, file ? file : "-");
		if (fputc('\t', f) < 0 || tsv_put(f, status) < 0 || fputc('\t', f) < 0 ||
		    tsv_put(f, reason ? reason : "-") < 0 || fprintf(f, "\t%s\t%s\t%s\t", fig, qc, crc) < 0 ||
		    tsv_put(f, flags) < 0 || fputc('\t', f) < 0 ||
		    tsv_put(f, strcmp(status, "failed") ? x->cached ? "cache" : "fold" : "-") < 0 ||
		    fputc('\t', f) < 0 || tsv_put(f, x->same_as ? x->same_as : "-") < 0)
			rc = -1;
		if (fclose(f) != 0) rc = -1;
	}
	free(x->row);
	x->row = rc < 0 ? NULL : row;
	if (rc < 0) free(row);
	return rc < 0 ? -1 : 0;
}

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
	fprintf(f, "%s\t", index);
	tsv_put(f, j->name && *j->name ? j->name : "-");
	fprintf(f, "\t%.*s\t%lld\t%s\t%s", (int)(tab - row), row, (long long)j->len, blabel, tab + 1);
	for (const char *c = row; *c; c++) tabs += *c == '\t';
	for (; tabs < FOLD_ROW_TABS; tabs++) fputs("\t-", f);
	fputc('\n', f);
}

/* AlphaFold DB layout: [{"predicted_aligned_error": [[..]], "max_predicted_aligned_error": x}],
 * one row and column per residue of the structure: a multimer's linker
 * residues (pdb_in_seq 0) left out */
static int fold_write_pae(FILE *f, const pdb_input_t *in, const model_out_t *out)
{
	int first = 1;

	fputs("[{\"predicted_aligned_error\": [", f);
	for (int i = 0; i < out->L; i++) {
		if (!pdb_in_seq(in, i)) continue;
		fputs(first ? "[" : ", [", f);
		first = 0;
		for (int k = 0, col = 0; k < out->L; k++)
			if (pdb_in_seq(in, k))
				fprintf(f, col++ ? ", %.2f" : "%.2f", out->pae[(size_t)i * out->L + k]);
		fputc(']', f);
	}
	fprintf(f, "], \"max_predicted_aligned_error\": %.2f}]\n", out->max_pae);
	return ferror(f) ? -1 : 0;
}

/* a fragment's file name before the record's fragments are numbered */
static char *fold_frag_name(const fold_rec_t *x, const sched_item_t *it)
{
	char *p = NULL;
	if (asprintf(&p, "%s.frag%d-%d", x->job.outname, it->start + 1, it->start + it->len) < 0)
		return NULL;
	return p;
}

/* one of a record's files, by its extension (fold_exts), into f */
static int fold_write_file(FILE *f, const char *ext, const pdb_input_t *in, const model_out_t *out)
{
	if (!strcmp(ext, ".pdb")) return pdb_write(f, in);
	if (!strcmp(ext, ".cif")) return cif_write(f, in);
	return fold_write_pae(f, in, out);
}

/* The files DIR/BASE EXT of one folded item, all or none: each written to
 * its temporary and sealed, then all renamed into place; on a failure
 * every temporary is removed and the files an earlier run left there
 * stay as they were.  0 or -1 (the file that failed in reason). */
static int fold_write_files(const char *dir, const char *base, const char *const *ext, int next,
                            const pdb_input_t *in, const model_out_t *out, char *reason,
                            size_t cap)
{
	atomic_file_t a[FOLD_MAX_FILES];
	int e, n = 0, rc = 0;

	for (e = 0; e < next && rc == 0; e++) {
		char *path = fold_path(dir, base, ext[e]);
		if (!path || !atomic_file_open(&a[n], path)) rc = -1;
		else if (atomic_file_seal(&a[n], fold_write_file(a[n].f, ext[e], in, out) == 0) < 0) rc = -1;
		else n++;
		free(path);
	}
	if (rc < 0) snprintf(reason, cap, "cannot write %s%s (output error)", base, ext[e - 1]);
	for (int k = 0; k < n; k++)
		if (atomic_file_close(&a[k], rc == 0) < 0 && rc == 0) {
			snprintf(reason, cap, "cannot write %s%s (output error)", base, ext[k]);
			rc = -1;
		}
	return rc;
}

/* 1 when it covers all of x's sequence (a whole record, not a fragment) */
static int fold_item_whole(const fold_rec_t *x, const sched_item_t *it)
{
	return it->start == 0 && it->len == (int)strlen(x->job.seq);
}

/* the outputs of one folded item (a whole record, or a fragment with the
 * record's chains and residue numbers) under x's name (fold_run.h) */
int fold_write_rec(fold_run_t *r, fold_rec_t *x, const sched_item_t *it, const sched_dev_t *d,
                   const tok_t *t, const model_out_t *out, const mem_fig_t *fig, double secs,
                   char *reason, size_t cap)
{
	const opt_t *o = r->o;
	int whole = fold_item_whole(x, it), rc = 0;
	char *base = whole ? strdup(x->job.outname) : fold_frag_name(x, it);
	char frag[96];
	int *residx = malloc(sizeof *residx * (t->L ? t->L : 1));
	int *chain = malloc(sizeof *chain * (t->L ? t->L : 1));
	const char *ext[FOLD_MAX_FILES];
	int next = fold_exts(o, ext);

	snprintf(frag, sizeof frag, "SEQUENCE %d-%d OF %zu, RECORD CHAINS AND NUMBERS",
	         it->start + 1, it->start + it->len, strlen(x->job.seq));
	pdb_meta_t meta = { .version = PACKAGE_VERSION, .weights = weights_fingerprint(r->wt),
	                    .ptm = out->ptm,
	                    .recycles = out->passes - 1, .chunk_size = it->chunk,
	                    .fragment = whole ? NULL : frag, .name = x->job.outname };
	if (residx && chain)
		tok_number(t, x->job.seq, it->start, !o->keep_linker_numbering, chain, residx);
	pdb_input_t pin = { .L = t->L, .aatype = t->aatype, .atom37 = out->atom37,
	                    .atom37_mask = out->atom37_mask, .plddt = out->plddt,
	                    .residue_index = residx, .chain_index = chain,
	                    .linker_mask = t->linker_mask, .meta = &meta };
	meta.mean_plddt = pdb_mean_plddt(&pin);   /* the files' and the summary's */
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
	if (rc == 0) rc = fold_write_files(o->outdir, base, ext, next, &pin, out, reason, cap);
	if (rc == 0)
		log_debug("%s: residues %d-%d on %s, mean pLDDT %.1f, pTM %.3f, %.2f s", x->job.name,
		         it->start + 1, it->start + it->len, d->be->name, meta.mean_plddt,
		         out->ptm, secs);
	pthread_mutex_lock(&r->lock);
	if (rc == 0) {
		x->frags++;
		x->res_folded += it->len;
		x->plddt_sum += meta.mean_plddt * it->len;
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

/* record x failed (some item of v[0..n) not folded, or none ran): its
 * folded fragments removed (not outputs), its row "failed" with the
 * first reason */
static void fold_finish_failed(fold_run_t *r, fold_rec_t *x, const sched_item_t *v, int n,
                               const char *const *ext, int next)
{
	const char *why = "not folded";
	int unrun = n == 0;

	for (int i = 0; i < n; i++) {
		if (v[i].state != SCHED_FOLDED) {
			why = v[i].reason;
			unrun |= v[i].unrun;
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
	fold_count_finished(r, x, v, n, why);
	int rc = fold_row(x, NULL, "failed", why);
	r->nfailed++;
	r->nunrun += unrun;   /* not final: summary.partial.tsv */
	if (rc < 0) fold_io_error(r);
}

/* record x's n > 1 fragments renamed NAME.partIofN in order: their names
 * (the file column) onto ff, their ranges onto rf.  0, or -1 when one
 * could not be renamed (logged) */
static int fold_rename_frags(fold_run_t *r, fold_rec_t *x, const sched_item_t *v, int n,
                             const char *const *ext, int next, FILE *ff, FILE *rf)
{
	int bad = 0;

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
			/* never over a FIFO, device or directory (atomic_file.h) */
			if (fp && tp && atomic_file_check(tp) < 0) {
				bad = 1;
			} else if (!fp || !tp || rename(fp, tp) < 0) {
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
	return bad ? -1 : 0;
}

/* the outputs of one folded item under its own record's name; a whole
 * record's structure then added to the cache (--cache) */
int fold_write_outputs(void *ctx, const sched_item_t *it, const sched_dev_t *d, const tok_t *t,
                       const model_out_t *out, const mem_fig_t *fig, double secs, char *reason,
                       size_t cap)
{
	fold_run_t *r = ctx;
	int rc = fold_write_rec(r, &r->rec[it->rec], it, d, t, out, fig, secs, reason, cap);

	if (rc == 0 && fold_item_whole(&r->rec[it->rec], it))
		fold_cache_add(r, it, d, t, out, fig, secs);
	return rc;
}

/* The outcome of record k from its final items v[0..n) (by ascending
 * start): ok, split (fragments renamed NAME.partIofN.pdb, .cif, .pae.json
 * in order) or failed (fragments already written removed); its row, and for ok and
 * split its done.jsonl line.  Called once per record, by one thread at a
 * time: on the scheduler's output step as soon as the record is settled,
 * or after the run for the records that never were. */
void fold_finish(fold_run_t *r, int k, const sched_item_t *v, int n)
{
	fold_rec_t *x = &r->rec[k];
	int failed = -1, bad = 0;
	char *files = NULL, *ranges = NULL;
	size_t fn = 0, rn = 0;
	FILE *ff = NULL, *rf = NULL;
	const char *status = "ok", *ext[FOLD_MAX_FILES];
	int next = fold_exts(r->o, ext);

	x->finished = 1;
	for (int i = 0; i < n && failed < 0; i++)
		if (v[i].state != SCHED_FOLDED) failed = i;
	if (failed >= 0 || n == 0) {
		fold_finish_failed(r, x, v, n, ext, next);
		return;
	}
	/* the file column and the fragment ranges, as long as they come */
	if (!(ff = open_memstream(&files, &fn)) || !(rf = open_memstream(&ranges, &rn))) {
		bad = 1;
	} else if (n == 1) {
		fprintf(ff, "%s%s", x->job.outname, ext[0]);
	} else {
		status = "split";
		bad = fold_rename_frags(r, x, v, n, ext, next, ff, rf) < 0;
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
		fold_count_finished(r, x, v, n, "cannot rename its fragments (output error)");
	} else if (fold_row(x, files, status, n > 1 ? ranges : NULL) < 0) {
		fold_io_error(r);
		r->nfailed++;
		fold_count_finished(r, x, v, n, "out of memory for its summary row");
	} else {
		fold_journal(r, x);
		if (n > 1) r->nsplit++;
		else r->nok++;
		fold_count_finished(r, x, v, n, NULL);
	}
	free(files);
	free(ranges);
}

/* summary.tsv's header and rows in input order; settled: only the records
 * whose row is made (a run under way) */
void fold_summary_rows(FILE *f, const fold_run_t *r, int settled)
{
	fputs("index\tname\tfile\tlength\tbucket\tstatus\treason\tmean_plddt\tptm"
	      "\tseconds\tpredicted_bytes\tallocated_bytes\treserved_bytes"
	      "\tdevice_used_bytes\tfrac_plddt_gt70\tplddt_very_low\tplddt_low"
	      "\tplddt_confident\tplddt_very_high\tcrc64\tflags\tsource\tsame_as\n", f);
	for (int i = 0; i < r->nrec; i++)
		if (!settled || r->rec[i].row) fold_summary_line(f, &r->rec[i]);
}

/* DIR/summary.tsv or DIR/summary.partial.tsv (the shard's suffix before
 * .tsv), or NULL (logged) */
static char *fold_summary_path(const fold_run_t *r, int complete)
{
	char *p = fold_file(r, complete ? "summary" : "summary.partial", ".tsv");

	if (!p) log_error("%s: out of memory", r->o->outdir);
	return p;
}

/* path removed when it is there; 0, or -1 (logged) */
static int fold_summary_unlink(const char *path)
{
	if (unlink(path) == 0 || errno == ENOENT) return 0;
	log_error("%s: cannot remove it: %s", path, strerror(errno));
	return -1;
}

int fold_summary_retract(const fold_run_t *r)
{
	char *sum = fold_summary_path(r, 1), *part = sum ? fold_summary_path(r, 0) : NULL;
	int rc = -1;

	if (part && atomic_file_check(sum) == 0 && atomic_file_check(part) == 0)
		rc = fold_summary_unlink(sum);
	free(sum);
	free(part);
	return rc;
}

/* every record's row in input order, to a temporary file renamed into
 * place: summary.tsv when the run is complete, then the partial table of
 * an earlier run removed; else summary.partial.tsv, and no summary.tsv.
 * 0 or -1 (logged). */
int fold_summary(fold_run_t *r, int complete)
{
	char *path = fold_summary_path(r, complete), *other = fold_summary_path(r, !complete);
	atomic_file_t a;
	int rc = -1;

	if (path && other && atomic_file_open(&a, path)) {
		fold_summary_rows(a.f, r, 0);
		rc = atomic_file_close(&a, 1);
	}
	if (rc == 0) rc = fold_summary_unlink(other);
	free(path);
	free(other);
	return rc;
}
