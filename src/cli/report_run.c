/* report_run.c - the journals read for the run report, and its settings
 * and speed in words (see report_run.h). */
#include "cli/report_run.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "util/grow.h"
#include "util/lines.h"
#include "util/log.h"
#include "util/num.h"
#include "util/tsv.h"
#include "io/atomic_file.h"
#include "io/journal.h"
#include "sched/shard.h"
#include "cli/svg.h"

void report_run_free(report_t *rp)
{
	free(rp->text);
	free(rp->rec);
	free(rp->fold);
	free(rp->dev);
	json_decref(rp->run);
	json_decref(rp->done);
	json_decref(rp->files);
}

/* Every figure read from the files (which a person may have edited) is
 * checked against its range before it is converted (num_to_i64) or
 * drawn: one out of range reads as missing. */
#define REPORT_MAX_INDEX (INT_MAX / 2)   /* a record, position, worker: sums stay in int */

/* a summary field: NAN when "-", not a number, not finite, or outside [lo, hi] */
static double report_num(const char *s, double lo, double hi)
{
	char *end;
	double v;

	if (!s || !*s || !strcmp(s, "-")) return NAN;
	v = strtod(s, &end);
	return *end || !(v >= lo && v <= hi) ? NAN : v;
}

/* a residue count of a summary field (a length, a band: sums over a
 * million records stay in int64), -1 when missing or out of range */
static int64_t report_residues(const char *s)
{
	int64_t v;
	return num_to_i64(report_num(s, 0, INT_MAX), 0, INT_MAX, &v) < 0 ? -1 : v;
}

/* the summary's rows, by the header's column names (an older summary's
 * missing columns read as "-").  0 or -1 (out of memory). */
static int report_parse_summary(report_t *rp, const char *summary)
{
	static const char *const want[] = { "name", "length", "bucket", "status", "reason",
		"mean_plddt", "ptm", "seconds", "plddt_very_low", "plddt_low", "plddt_confident",
		"plddt_very_high", "flags", "index", "file" };
	enum { NW = sizeof want / sizeof *want };
	int col[NW];
	size_t cap = 0;
	char *save = NULL, *line;

	if (!(rp->text = strdup(summary))) return -1;
	if (!(line = strtok_r(rp->text, "\n", &save))) return 0;
	for (int w = 0; w < NW; w++) col[w] = tsv_column(line, want[w]);
	while ((line = strtok_r(NULL, "\n", &save))) {
		const char *fld[NW];
		int c = 0;
		double ix;
		report_rec_t *x;
		if (grow_array(&rp->rec, &cap, (size_t)rp->nrec + 1, sizeof *rp->rec) < 0) return -1;
		for (int w = 0; w < NW; w++) fld[w] = "-";
		/* fields split in place; empty fields kept (strsep); decoded
		 * (util/tsv.h) as text, as the page shows them */
		for (char *p = line, *f; (f = strsep(&p, "\t")); c++)
			for (int w = 0; w < NW; w++)
				if (col[w] == c) fld[w] = tsv_decode(f, TSV_TEXT);
		x = &rp->rec[rp->nrec++];
		x->name = fld[0];
		x->length = (long)report_residues(fld[1]);
		x->bucket = fld[2];
		x->status = fld[3];
		x->reason = fld[4];
		x->plddt = report_num(fld[5], 0, 100);
		x->ptm = report_num(fld[6], 0, 1);
		x->secs = report_num(fld[7], 0, HUGE_VAL);
		for (int b = 0; b < 4; b++) x->band[b] = report_residues(fld[8 + b]);
		x->flags = fld[12];
		ix = report_num(fld[13], 0, REPORT_MAX_INDEX);
		x->index = isnan(ix) ? -1 : (long)ix;
		x->file = fld[14];
	}
	return 0;
}

static void report_copy(char *dst, size_t cap, const json_t *e, const char *key)
{
	snprintf(dst, cap, "%s", journal_str(e, key));
}

/* a count member of a run.jsonl event (bytes, records), -1 when absent
 * or out of range */
static int64_t report_int(const json_t *e, const char *key)
{
	const json_t *v = json_object_get(e, key);
	int64_t n;

	if (!json_is_number(v) || num_to_i64(json_number_value(v), 0, NUM_EXACT_MAX, &n) < 0) return -1;
	return n;
}

/* an index member (a record, position, worker), -1 when absent or out of range */
static int report_index(const json_t *e, const char *key)
{
	int64_t v = report_int(e, key);
	return v <= REPORT_MAX_INDEX ? (int)v : -1;
}

/* a time member of a fold event in seconds, 0 when absent or not finite */
static double report_secs(const json_t *e, const char *key)
{
	double t = json_number_value(json_object_get(e, key));
	return t >= 0 && t < HUGE_VAL ? t : 0;
}

/* run.jsonl's events (a torn or foreign line is skipped); of a shard's
 * run.K-of-N.jsonl in a merged directory (shard 1) only the first "run"
 * event, the skips and the time (its folds' records are the shard's).
 * 0, -1 out of memory, or -2 a line that cannot be read (logged). */
static int report_parse_run(report_t *rp, FILE *f, const char *path, int shard)
{
	lines_t ln;
	size_t fcap = 0, dcap = 0;
	int rc = 0, got;
	double t1 = 0;

	lines_init(&ln, f, path, NULL);
	while (rc == 0 && (got = lines_next(&ln)) != 0) {
		if (got < 0) {
			rc = -2;
			break;
		}
		json_t *e = json_loadb(ln.s, ln.n, 0, NULL);
		const char *ev = journal_str(e, "event");
		if (!strcmp(ev, "run") && !(shard && rp->run)) {
			json_decref(rp->run);
			rp->run = json_incref(e);
		} else if (!strcmp(ev, "skip")) {
			rp->skipped++;
		} else if (shard) {
			if (!strcmp(ev, "fold")) t1 = fmax(t1, report_secs(e, "t1"));
			if (!strcmp(ev, "fold") && !strcmp(journal_str(e, "status"), "ok"))
				rp->res_folded += report_index(e, "length") > 0 ? report_index(e, "length") : 0;
		} else if (!strcmp(ev, "device")) {
			if ((rc = grow_array(&rp->dev, &dcap, (size_t)rp->ndev + 1, sizeof *rp->dev)) < 0) {
				json_decref(e);
				break;
			}
			report_dev_t *d = &rp->dev[rp->ndev++];
			report_copy(d->name, sizeof d->name, e, "device");
			d->workers = report_index(e, "workers");
			d->budget = report_int(e, "budget");
			d->overhead = report_int(e, "overhead");
		} else if (!strcmp(ev, "fold")) {
			if ((rc = grow_array(&rp->fold, &fcap, (size_t)rp->nfold + 1, sizeof *rp->fold)) < 0) {
				json_decref(e);
				break;
			}
			report_fold_t *x = &rp->fold[rp->nfold++];
			x->rec = report_index(e, "record");
			x->start = report_index(e, "start");
			x->len = report_index(e, "length");
			x->worker = report_index(e, "worker");
			report_copy(x->dev, sizeof x->dev, e, "device");
			report_copy(x->status, sizeof x->status, e, "status");
			x->t0 = report_secs(e, "t0");
			x->t1 = report_secs(e, "t1");
			t1 = fmax(t1, x->t1);
			if (!strcmp(x->status, "ok") && x->len > 0) rp->res_folded += x->len;
			x->quota = report_int(e, "quota");
			x->has_fig = json_object_get(e, "reserved") != NULL;
			x->predicted = report_int(e, "predicted");
			x->allocated = report_int(e, "allocated");
			x->reserved = report_int(e, "reserved");
			x->device_used = report_int(e, "device_used");
		}
		json_decref(e);
	}
	lines_free(&ln);
	rp->wall = fmax(rp->wall, t1);
	rp->wall_sum += t1;
	return rc;
}

static void report_kv(FILE *f, const char *k, const char *v)
{
	fputs("<tr><th>", f);
	svg_esc(f, k);
	fputs("</th><td><code>", f);
	svg_esc(f, v);
	fputs("</code></td></tr>\n", f);
}

/* a setting in words (escaped; paths and fingerprints in code) */
static void report_say(FILE *f, const char *k, const char *fmt, ...)
{
	char v[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(v, sizeof v, fmt, ap);
	va_end(ap);
	fputs("<tr><th>", f);
	svg_esc(f, k);
	fputs("</th><td>", f);
	svg_esc(f, v);
	fputs("</td></tr>\n", f);
}

/* --num-recycles N in words: -1 as the number the model runs (model: the
 * weights' default, -1 when unknown) */
static const char *report_recycles(char *buf, size_t cap, int64_t n, int64_t model)
{
	if (n >= 0) snprintf(buf, cap, "%lld", (long long)n);
	else if (model >= 0) snprintf(buf, cap, "%lld (the model's default)", (long long)model);
	else snprintf(buf, cap, "the model's default (its number not recorded: an older run)");
	return buf;
}

/* a time in h, min, s */
static const char *report_hms(char *buf, size_t cap, double s)
{
	long t = lround(s);

	if (s < 60) snprintf(buf, cap, "%.1f s", s);
	else if (t < 3600) snprintf(buf, cap, "%ld min %02ld s", t / 60, t % 60);
	else snprintf(buf, cap, "%ld h %02ld min", t / 3600, t % 3600 / 60);
	return buf;
}

/* what the finished records were folded with (done.jsonl): a line per
 * combination */
static void report_done_settings(FILE *f, const report_t *rp, int64_t model)
{
	json_t *seen = json_object(), *e;
	const char *name, *wfp = journal_str(rp->run, "weights_fingerprint");

	json_object_foreach(rp->done, name, e) {
		char k[300], r[80], cs[24] = "auto";
		int64_t c = report_int(e, "chunk_size");
		/* the model's default is the run's when the weights are */
		report_recycles(r, sizeof r, report_int(e, "recycles"),
		                strcmp(journal_str(e, "weights"), wfp) ? -1 : model);
		if (c > 0) snprintf(cs, sizeof cs, "%lld", (long long)c);
		snprintf(k, sizeof k, "weights %s, precision %s, recycles %s, chunk size %s",
		         journal_str(e, "weights"), journal_str(e, "precision"), r, cs);
		json_object_set_new(seen, k, json_integer(json_integer_value(json_object_get(seen, k)) + 1));
	}
	json_object_foreach(seen, name, e)
		report_say(f, "records done", "%s: %lld record(s)", name, (long long)json_integer_value(e));
	json_decref(seen);
}

void report_run_settings(FILE *f, const report_t *rp)
{
	const json_t *r = rp->run;
	int64_t model = report_int(r, "model_recycles"), chunk = report_int(r, "chunk_size");
	const char *fmt = journal_str(r, "format"), *dev = journal_str(r, "devices");
	const char *wk = journal_str(r, "workers");
	char buf[160];

	fputs("<h2>Settings</h2>\n<table>\n", f);
	if (!r) fputs("<tr><td>run.jsonl holds no settings (an older run)</td></tr>\n", f);
	if (r) {
		report_say(f, "esmbatch", "%s on %s, started %s", journal_str(r, "version"),
		           journal_str(r, "host"), journal_str(r, "started"));
		if (rp->shards)
			report_say(f, "shards", "%d (run.K-of-N.jsonl; the first's settings)", rp->shards);
		report_kv(f, "input", journal_str(r, "input"));
		report_kv(f, "output directory", journal_str(r, "outdir"));
		report_kv(f, "weights", journal_str(r, "weights"));
		report_kv(f, "weights fingerprint", journal_str(r, "weights_fingerprint"));
		report_say(f, "recycles", "%s", report_recycles(buf, sizeof buf,
		           report_int(r, "num_recycles"), model));
		if (chunk > 0) report_say(f, "chunk size", "%lld", (long long)chunk);
		else report_say(f, "chunk size", "auto (each fold's, from its memory)");
		report_say(f, "precision", "%s%s", journal_str(r, "precision"),
		           strcmp(journal_str(r, "precision"), "auto") ? "" : " (each device's best)");
		report_say(f, "devices", "%s", strcmp(dev, "auto") ? dev
		           : "auto (every visible CUDA device, else the CPU)");
		report_say(f, "workers per device", "%s", strcmp(wk, "auto") ? wk
		           : "auto (as many as the quotas of the commonest bucket allow)");
		report_say(f, "files", "%s%s", *fmt ? fmt : "pdb",
		           json_is_true(json_object_get(r, "pae")) ? ", and the PAE (NAME.pae.json)" : "");
		report_say(f, "a record too long for a device", "%s",
		           json_is_true(json_object_get(r, "no_split")) ? "failed (--no-split)"
		           : "split into fragments that fit");
	}
	for (int i = 0; i < rp->ndev; i++) {
		char k[96];
		snprintf(k, sizeof k, "device %s", rp->dev[i].name);
		report_say(f, k, "budget %.1f MiB, %d worker(s), %.1f MiB overhead each",
		           rp->dev[i].budget / 1048576.0, rp->dev[i].workers,
		           rp->dev[i].overhead / 1048576.0);
	}
	report_done_settings(f, rp, model);
	fputs("</table>\n", f);
}

/* the run's wall time and throughput (records: folded by it) */
void report_run_throughput(FILE *f, const report_t *rp, long records)
{
	char t[48], u[48];

	fputs("<p class=\"run\">", f);
	if (!(rp->wall > 0)) {
		fputs("No fold in run.jsonl: no wall time.</p>\n", f);
		return;
	}
	records = records > 0 ? records : 0;
	if (rp->shards > 1)
		fprintf(f, "Wall time <b>%s</b> (the longest of %d shards, from its first fold to its "
		        "last; all shards: %s)", report_hms(t, sizeof t, rp->wall), rp->shards,
		        report_hms(u, sizeof u, rp->wall_sum));
	else
		fprintf(f, "Wall time <b>%s</b> (from the first fold to the last)",
		        report_hms(t, sizeof t, rp->wall));
	fprintf(f, ": <b>%.0f records/h</b>, <b>%.1f residues/s</b> (%ld record(s), %lld residues "
	        "folded by %s)", records * 3600 / rp->wall, rp->res_folded / rp->wall, records,
	        (long long)rp->res_folded, rp->shards > 1 ? "the shards side by side" : "this run");
	if (rp->shards > 1)
		fprintf(f, "; one shard after another: %.0f records/h", records * 3600 / rp->wall_sum);
	fputs(".</p>\n", f);
}

/* DIR/STEM SFX EXT for reading (the rule of atomic_file.h: never through
 * a symlink), its name in *p (the caller frees it), or NULL: *absent 1
 * when there is no such file, else 0 (a failure is logged) */
static FILE *report_fopen(const char *dir, const char *stem, const char *sfx, const char *ext,
                          char **p, int *absent)
{
	FILE *f;

	*absent = 0;
	if (asprintf(p, "%s/%s%s%s", dir, stem, sfx, ext) < 0) {
		*p = NULL;
		log_error("%s: out of memory", dir);
		return NULL;
	}
	if (!(f = atomic_file_fopen(*p, O_RDONLY, "r"))) *absent = errno == ENOENT;
	return f;
}

/* DIR/run SFX .jsonl (of a shard: shard 1, report_parse_run) and
 * DIR/done SFX .jsonl into rp (the latter's lines added to rp->done).
 * 0; 1 when there is no run SFX .jsonl; -1 (logged). */
static int report_read_run(report_t *rp, const char *dir, const char *sfx, int shard)
{
	char *path = NULL;
	json_t *done = NULL;
	int rc = 0, r, last, absent;
	FILE *f;

	if ((f = report_fopen(dir, "run", sfx, ".jsonl", &path, &absent))) {
		r = report_parse_run(rp, f, path, shard);
		fclose(f);
		if (r == -1) log_error("%s: out of memory reading it", path);
		if (r < 0) rc = -1;
	} else {
		rc = absent ? 1 : -1;
	}
	free(path);
	if (rc < 0) return rc;
	if ((f = report_fopen(dir, "done", sfx, ".jsonl", &path, &absent))) {
		r = journal_read(f, path, &done, &last);
		fclose(f);
		if (r < 0) rc = -1;
		else if (!rp->done) rp->done = json_incref(done);
		else if (json_object_update(rp->done, done) < 0) rc = -1;
		json_decref(done);
	} else if (!absent) {
		rc = -1;
	}
	free(path);
	return rc;
}

/* the N of DIR's run.K-of-N.jsonl files (the first found), 0 when none */
static int report_shards(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0, k, end;

	while (d && !n && (e = readdir(d))) {
		end = 0;   /* set only when the whole name matched */
		if (sscanf(e->d_name, "run.%d-of-%d.jsonl%n", &k, &n, &end) != 2 || !end ||
		    e->d_name[end] || k < 1 || n < k || n > SHARD_MAX)
			n = 0;
	}
	if (d) closedir(d);
	return n;
}

/* the whole of f named path, NUL-terminated, its lines bounded (lines.h;
 * f closed); NULL when unreadable or out of memory (logged) */
static char *report_slurp(FILE *f, const char *path)
{
	char *buf = NULL;
	size_t n = 0;
	lines_t ln;
	FILE *m;
	int rc;

	lines_init(&ln, f, path, NULL);
	if ((m = open_memstream(&buf, &n))) {
		while ((rc = lines_next(&ln)) > 0) {
			fwrite(ln.s, 1, ln.n, m);
			fputc('\n', m);
		}
		if (fclose(m) != 0 || rc < 0) {
			if (rc == 0) log_error("%s: out of memory reading it", path);
			free(buf);
			buf = NULL;
		}
	} else {
		log_error("%s: out of memory reading it", path);
	}
	lines_free(&ln);
	fclose(f);
	return buf;
}

/* DIR/run SFX .jsonl and DIR/done SFX .jsonl into rp, each when present;
 * in a merged directory (no run.jsonl; sfx "") every shard's
 * run.K-of-N.jsonl and done.K-of-N.jsonl.  0 or -1 (logged). */
static int report_read_runs(report_t *rp, const char *dir, const char *sfx)
{
	int n = 0, rc = report_read_run(rp, dir, sfx, 0);

	if (rc == 1 && !*sfx && (n = report_shards(dir)) > 0)
		for (int k = 1; k <= n && rc >= 0; k++) {
			char ks[32];
			snprintf(ks, sizeof ks, ".%d-of-%d", k, n);
			if ((rc = report_read_run(rp, dir, ks, 1)) == 0) rp->shards++;
		}
	return rc < 0 ? -1 : 0;
}

int report_run_read(report_t *rp, const char *dir, const char *sfx, const char *summary)
{
	char *path = NULL, *text = NULL;
	FILE *f;
	int rc = -1, absent;

	if (!summary) {
		/* no summary.tsv: the last run did not finish, its partial table */
		if (!(f = report_fopen(dir, "summary", sfx, ".tsv", &path, &absent)) && absent) {
			free(path);
			if ((f = report_fopen(dir, "summary.partial", sfx, ".tsv", &path, &absent)))
				log_warn("%s: the last run did not finish: the report is of its partial table",
				         path);
			else if (absent)
				log_error("%s/summary%s.tsv: cannot read: %s", dir, sfx, strerror(ENOENT));
		}
		if (!f) goto done;
		if (!(text = report_slurp(f, path))) goto done;
		summary = text;
	}
	if (report_parse_summary(rp, summary) < 0) {
		log_error("%s/report%s.html: out of memory", dir, sfx);
	} else if ((rc = report_read_runs(rp, dir, sfx)) == 0 &&
	           !(rp->files = rp->done ? journal_file_index(rp->done) : json_object())) {
		log_error("%s/report%s.html: out of memory", dir, sfx);
		rc = -1;
	}
done:
	free(path);
	free(text);
	return rc;
}
