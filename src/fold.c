/* fold.c - the `fold` subcommand: read records, fold each, write a PDB per
 * record and one summary.tsv row per record, in input order, and one JSON
 * line per fold in run.jsonl with its memory figures (mem.h).
 *
 * Every input record gets exactly one row: ok, or failed with a reason (bad
 * record, fold error, output error).  Outputs are written atomically (a
 * temporary file renamed into place), so a killed run leaves complete files
 * only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

#include <jansson.h>

#include "bucket.h"
#include "calib.h"
#include "config.h"
#include "dev.h"
#include "fasta.h"
#include "fold.h"
#include "log.h"
#include "mem.h"
#include "model.h"
#include "pdb.h"
#include "st.h"
#include "tok.h"
#include "wt.h"

/* everything one run holds */
typedef struct {
	const opt_t *o;
	wt_t        *wt;
	be_t        *be;
	model_t      model;
	int          model_loaded;
	FILE        *summary;
	char        *summary_tmp, *summary_path;
	FILE        *jsonl;      /* run.jsonl */
	quota_table_t *qt;       /* --quota-table, or NULL */
	st_writer_t *dump;
	long         nok, nfailed;
	int          io_error;
} fold_run_t;

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

static double fold_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void fold_row(fold_run_t *r, const job_t *j, const char *file, const char *status,
                     const char *reason, const model_out_t *out, const mem_fig_t *fig,
                     double secs)
{
	char blabel[16] = "-";

	if (j->bucket >= 0) bucket_label(NULL, j->bucket, blabel, sizeof blabel);
	fprintf(r->summary, "%lld\t%s\t%s\t%lld\t%s\t%s\t%s\t", (long long)j->index,
	        j->name && *j->name ? j->name : "-", file ? file : "-", (long long)j->len,
	        blabel, status, reason ? reason : "-");
	if (out)
		fprintf(r->summary, "%.2f\t%.4f\t%.2f\t%zu\t%zu\t%zu\t%lld\n", 100.0 * out->mean_plddt,
		        out->ptm, secs, fig->predicted, fig->allocated, fig->reserved,
		        (long long)fig->device_used);
	else
		fprintf(r->summary, "-\t-\t-\t-\t-\t-\t-\n");
	if (fflush(r->summary) != 0 || ferror(r->summary)) {
		if (!r->io_error) log_error("%s: write failed: %s", r->summary_tmp, strerror(errno));
		r->io_error = 1;
	}
}

/* one line of run.jsonl for a fold that ran */
static void fold_jsonl(fold_run_t *r, const job_t *j, const model_run_t *run,
                       const model_out_t *out, const mem_fig_t *fig, double secs)
{
	json_t *o = json_pack("{s:I, s:s, s:I, s:s, s:i, s:i, s:f, s:I, s:I, s:I, s:I, s:I, s:f, s:f}",
	                      "index", (json_int_t)j->index, "name", j->name,
	                      "length", (json_int_t)j->model_len, "device", r->be->name,
	                      "chunk", run->chunk, "passes", out->passes, "seconds", secs,
	                      "predicted", (json_int_t)fig->predicted,
	                      "allocated", (json_int_t)fig->allocated,
	                      "reserved", (json_int_t)fig->reserved,
	                      "device_used", (json_int_t)fig->device_used,
	                      "growth", (json_int_t)fig->growth,
	                      "mean_plddt", 100.0 * out->mean_plddt, "ptm", (double)out->ptm);
	char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;

	if (!line || fprintf(r->jsonl, "%s\n", line) < 0 || fflush(r->jsonl) != 0) {
		if (!r->io_error) log_error("run.jsonl: write failed: %s", strerror(errno));
		r->io_error = 1;
	}
	free(line);
	json_decref(o);
}

/* AlphaFold DB layout: [{"predicted_aligned_error": [[..]], "max_predicted_aligned_error": x}] */
static int fold_write_pae(const char *path, const model_out_t *out)
{
	char *tmp = NULL;
	FILE *f;
	int rc = 0;

	if (asprintf(&tmp, "%s.tmp", path) < 0) return -1;
	if (!(f = fopen(tmp, "w"))) {
		log_error("%s: cannot write: %s", tmp, strerror(errno));
		free(tmp);
		return -1;
	}
	fputs("[{\"predicted_aligned_error\": [", f);
	for (int i = 0; i < out->L; i++) {
		fputs(i ? ", [" : "[", f);
		for (int k = 0; k < out->L; k++)
			fprintf(f, k ? ", %.2f" : "%.2f", out->pae[(size_t)i * out->L + k]);
		fputc(']', f);
	}
	fprintf(f, "], \"max_predicted_aligned_error\": %.2f}]\n", out->max_pae);
	if (ferror(f) | (fclose(f) != 0) || rename(tmp, path) < 0) {
		log_error("%s: write failed: %s", path, strerror(errno));
		unlink(tmp);
		rc = -1;
	}
	free(tmp);
	return rc;
}

/* fold one good record and write its outputs */
static void fold_job(fold_run_t *r, const job_t *j)
{
	const opt_t *o = r->o;
	model_run_t run = { .chunk = o->chunk_size, .dump = r->dump, .name = j->name,
	                    .passes = o->num_recycles >= 0 ? o->num_recycles + 1 : 0 };
	model_out_t out = { 0 };
	mem_fig_t fig;
	char err[256] = "", *file = NULL, *path = NULL;
	double t0 = fold_now();
	tok_t t;

	if (tok_encode(&t, j->seq, r->model.cfg) < 0) {
		fold_row(r, j, NULL, "failed", "cannot encode the sequence", NULL, NULL, 0.0);
		r->nfailed++;
		return;
	}
	if (mem_fold(&r->model, &t, &run, &out, &fig, err, sizeof err) < 0) {
		log_warn("record %lld (%s): %s", (long long)j->recno, j->name, err);
		fold_row(r, j, NULL, "failed", err, NULL, NULL, 0.0);
		r->nfailed++;
		goto done;
	}
	pdb_meta_t meta = { .version = PACKAGE_VERSION, .weights = wt_fingerprint(r->wt),
	                    .mean_plddt = 100.0 * out.mean_plddt, .ptm = out.ptm,
	                    .recycles = out.passes - 1, .chunk_size = o->chunk_size };
	pdb_input_t pin = { .L = t.L, .aatype = t.aatype, .atom37 = out.atom37,
	                    .atom37_mask = out.atom37_mask, .plddt = out.plddt,
	                    .residue_index = t.residx, .chain_index = t.chain, .meta = &meta };
	if (asprintf(&file, "%s.pdb", j->outname) < 0) file = NULL;
	path = fold_path(o->outdir, j->outname, ".pdb");
	if (!file || !path || pdb_write_atomic(path, &pin) < 0) {
		fold_row(r, j, NULL, "failed", "cannot write the PDB file", NULL, NULL, 0.0);
		r->nfailed++;
		r->io_error = 1;
		goto done;
	}
	if (o->pae) {
		char *pp = fold_path(o->outdir, j->outname, ".pae.json");
		if (!pp || fold_write_pae(pp, &out) < 0) r->io_error = 1;
		free(pp);
	}
	log_info("%s: %lld residues, mean pLDDT %.1f, pTM %.3f, %.2f s", j->name, (long long)j->len,
	         100.0 * out.mean_plddt, out.ptm, fold_now() - t0);
	fold_row(r, j, file, "ok", NULL, &out, &fig, fold_now() - t0);
	fold_jsonl(r, j, &run, &out, &fig, fold_now() - t0);
	r->nok++;
done:
	free(file);
	free(path);
	model_out_free(&out);
	tok_free(&t);
}

static void fold_close(fold_run_t *r)
{
	if (r->model_loaded) model_free(&r->model);
	wt_close(r->wt);
	be_free(r->be);
	if (r->summary) fclose(r->summary);
	if (r->jsonl) fclose(r->jsonl);
	quota_free(r->qt);
	free(r->summary_tmp);
	free(r->summary_path);
	st_writer_free(r->dump);
}

int fold_main(const opt_t *o)
{
	fold_run_t r = { .o = o };
	fasta_t *in = NULL;
	job_t j;
	int rc, code = EXIT_FATAL;

	job_init(&j);
	mem_policy();
	if (!(r.wt = wt_open(o->weights))) goto done;
	if (!(r.be = dev_open(o->devices, o->threads))) goto done;
	if (dev_precision(r.be, o->precision) < 0) goto done;
	if (model_load(&r.model, r.wt, r.be) < 0) goto done;
	r.model_loaded = 1;
	if (o->quota_table) {
		if (!(r.qt = quota_read(o->quota_table))) goto done;
		calib_table_check(r.qt, o->quota_table, r.be->name, wt_fingerprint(r.wt),
		                  r.be->precision);
	}
	if (fold_mkdirs(o->outdir) < 0) goto done;
	if (!(in = fasta_open(o->input, o->names))) goto done;
	r.summary_path = fold_path(o->outdir, "summary", ".tsv");
	r.summary_tmp = fold_path(o->outdir, "summary", ".tsv.tmp");
	if (!r.summary_path || !r.summary_tmp || !(r.summary = fopen(r.summary_tmp, "w"))) {
		log_error("%s: cannot write: %s", r.summary_tmp ? r.summary_tmp : o->outdir, strerror(errno));
		goto done;
	}
	fputs("index\tname\tfile\tlength\tbucket\tstatus\treason\tmean_plddt\tptm\tseconds"
	      "\tpredicted_bytes\tallocated_bytes\treserved_bytes\tdevice_used_bytes\n", r.summary);
	{
		char *jp = fold_path(o->outdir, "run", ".jsonl");
		if (!jp || !(r.jsonl = fopen(jp, "w"))) {
			log_error("%s/run.jsonl: cannot write: %s", o->outdir, strerror(errno));
			free(jp);
			goto done;
		}
		free(jp);
	}
	if (o->dump_tensors && !(r.dump = st_writer_init())) goto done;

	while ((rc = fasta_next(in, &j)) > 0) {
		if (j.status == JOB_OK) {
			fold_job(&r, &j);
			continue;
		}
		log_warn("%s: %s", fasta_path(in), j.reason);
		fold_row(&r, &j, NULL, "failed", j.reason, NULL, NULL, 0.0);
		r.nfailed++;
		if (o->strict) {
			log_error("%s: stopping at a bad record (--strict)", fasta_path(in));
			rc = -1;
			break;
		}
	}
	if (rc < 0 || r.io_error) goto done;
	if (fclose(r.summary) != 0 || rename(r.summary_tmp, r.summary_path) < 0) {
		r.summary = NULL;
		log_error("%s: cannot write: %s", r.summary_path, strerror(errno));
		goto done;
	}
	r.summary = NULL;
	if (r.dump && st_writer_save(r.dump, o->dump_tensors) < 0) goto done;
	log_info("%ld folded, %ld failed; summary in %s", r.nok, r.nfailed, r.summary_path);
	code = r.nfailed ? EXIT_PARTIAL : EXIT_OK;
done:
	job_free(&j);
	fasta_close(in);
	fold_close(&r);
	return code;
}
