/* report.c - DIR/report.html from an output directory's journals (see report.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "config.h"
#include "io/atomic_file.h"
#include "io/journal.h"
#include "protein/qc.h"
#include "cli/report.h"
#include "cli/svg.h"
#include "sched/bucket.h"
#include "util/lines.h"
#include "util/log.h"
#include "util/num.h"
#include "util/tsv.h"

/* AlphaFold DB band colours: very low, low, confident, very high */
static const char *const report_band_colour[4] = { "#ff7d45", "#ffdb13", "#65cbf3", "#0053d6" };
static const char *const report_band_name[4] = { "very low (&lt; 50)", "low (50-70)",
	                                           "confident (70-90)", "very high (&gt; 90)" };

/* a summary row (strings point into report_t.text) */
typedef struct {
	const char *name, *status, *reason, *bucket, *flags;
	long        length;             /* -1: "-" (or out of range) */
	double      plddt, ptm, secs;   /* NAN: "-" */
	int64_t     band[4];            /* -1: "-" (an older row) */
} report_rec_t;

/* a fold of run.jsonl */
typedef struct {
	int     rec, start, len, worker, has_fig;
	char    dev[64], status[32];
	double  t0, t1;
	int64_t quota, predicted, allocated, reserved, device_used;
} report_fold_t;

/* a device of run.jsonl */
typedef struct {
	char    name[64];
	int     workers;
	int64_t budget, overhead;
} report_dev_t;

typedef struct {
	char          *text;     /* the summary, split in place */
	report_rec_t  *rec;
	int            nrec;
	report_fold_t *fold;
	int            nfold;
	report_dev_t  *dev;
	int            ndev;
	json_t        *run;      /* the "run" event, or NULL */
	json_t        *done;     /* done.jsonl by name, or NULL */
	long           skipped, pending;
} report_t;

static void report_free(report_t *rp)
{
	free(rp->text);
	free(rp->rec);
	free(rp->fold);
	free(rp->dev);
	json_decref(rp->run);
	json_decref(rp->done);
}

/* room for one more of n items of size sz in *p (capacity *cap, doubled
 * from first); 0 or -1 (out of memory, *p kept) */
static int report_grow(void *p, int *cap, int n, size_t sz, int first)
{
	void **pp = p, *np;
	int nc;

	if (n < *cap) return 0;
	nc = *cap ? 2 * *cap : first;
	if (!(np = realloc(*pp, sz * nc))) return -1;
	*pp = np;
	*cap = nc;
	return 0;
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
		"plddt_very_high", "flags" };
	enum { NW = sizeof want / sizeof *want };
	int col[NW], cap = 0;
	char *save = NULL, *line;

	if (!(rp->text = strdup(summary))) return -1;
	if (!(line = strtok_r(rp->text, "\n", &save))) return 0;
	for (int w = 0; w < NW; w++) col[w] = tsv_column(line, want[w]);
	while ((line = strtok_r(NULL, "\n", &save))) {
		const char *fld[NW];
		int c = 0;
		report_rec_t *x;
		if (report_grow(&rp->rec, &cap, rp->nrec, sizeof *rp->rec, 64) < 0) return -1;
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

/* run.jsonl's events (a torn or foreign line is skipped).  0, -1 out of
 * memory, or -2 a line that cannot be read (logged). */
static int report_parse_run(report_t *rp, FILE *f, const char *path)
{
	lines_t ln;
	int fcap = 0, dcap = 0, rc = 0, got;

	lines_init(&ln, f, path, NULL);
	while (rc == 0 && (got = lines_next(&ln)) != 0) {
		if (got < 0) {
			rc = -2;
			break;
		}
		json_t *e = json_loadb(ln.s, ln.n, 0, NULL);
		const char *ev = journal_str(e, "event");
		if (!strcmp(ev, "run")) {
			json_decref(rp->run);
			rp->run = json_incref(e);
		} else if (!strcmp(ev, "skip")) {
			rp->skipped++;
		} else if (!strcmp(ev, "device")) {
			if ((rc = report_grow(&rp->dev, &dcap, rp->ndev, sizeof *rp->dev, 4)) < 0) {
				json_decref(e);
				break;
			}
			report_dev_t *d = &rp->dev[rp->ndev++];
			report_copy(d->name, sizeof d->name, e, "device");
			d->workers = report_index(e, "workers");
			d->budget = report_int(e, "budget");
			d->overhead = report_int(e, "overhead");
		} else if (!strcmp(ev, "fold")) {
			if ((rc = report_grow(&rp->fold, &fcap, rp->nfold, sizeof *rp->fold, 64)) < 0) {
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
	return rc;
}

/* ---- the page ------------------------------------------------------------ */

static const char report_css[] =
	"body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px;"
	"color:#222;max-width:1100px}"
	"h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;"
	"border-bottom:1px solid #ddd;padding-bottom:3px}"
	".sub{color:#666;font-size:13px}"
	"table{border-collapse:collapse;font-size:13px}td,th{padding:3px 10px 3px 0;"
	"text-align:left;vertical-align:top}th{color:#555;font-weight:600}"
	"td.n,th.n{text-align:right}"
	".counts{display:flex;gap:14px;flex-wrap:wrap}.count{border:1px solid #ddd;"
	"border-radius:6px;padding:8px 14px;min-width:90px}.count b{display:block;font-size:22px}"
	".charts{display:flex;flex-wrap:wrap;gap:18px}figure{margin:0}"
	"figcaption{font-size:12px;color:#555;max-width:520px}"
	"svg.chart{font-size:11px;background:#fff}svg .axis line{stroke:#888}"
	"svg .axis line.grid{stroke:#eee}svg text{fill:#333}"
	".legend span{display:inline-block;width:11px;height:11px;margin:0 4px 0 12px;"
	"vertical-align:-1px}.legend{font-size:12px}"
	"code{font-size:12px}figure.mem{max-width:540px}figure.mem table{font-size:12px}";

static void report_kv(FILE *f, const char *k, const char *v)
{
	fputs("<tr><th>", f);
	svg_esc(f, k);
	fputs("</th><td><code>", f);
	svg_esc(f, v);
	fputs("</code></td></tr>\n", f);
}

static void report_settings(FILE *f, const report_t *rp)
{
	const char *key;
	json_t *v;

	fputs("<h2>Settings</h2>\n<table>\n", f);
	if (!rp->run) fputs("<tr><td>run.jsonl holds no settings (an older run)</td></tr>\n", f);
	json_object_foreach(rp->run, key, v) {
		char buf[64];
		if (!strcmp(key, "event")) continue;
		if (json_is_string(v)) {
			report_kv(f, key, json_string_value(v));
		} else if (json_is_integer(v)) {
			snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
			report_kv(f, key, buf);
		} else if (json_is_boolean(v)) {
			report_kv(f, key, json_is_true(v) ? "yes" : "no");
		}
	}
	for (int i = 0; i < rp->ndev; i++) {
		char k[96], val[160];
		snprintf(k, sizeof k, "device %s", rp->dev[i].name);
		snprintf(val, sizeof val, "budget %.1f MiB, %d worker(s), %.1f MiB overhead each",
		         rp->dev[i].budget / 1048576.0, rp->dev[i].workers,
		         rp->dev[i].overhead / 1048576.0);
		report_kv(f, k, val);
	}
	/* what the finished records were folded with (done.jsonl) */
	{
		json_t *seen = json_object(), *e;
		const char *name;
		json_object_foreach(rp->done, name, e) {
			char k[256];
			snprintf(k, sizeof k, "weights %s, %s, recycles %lld, chunk %lld",
			         journal_str(e, "weights"), journal_str(e, "precision"),
			         (long long)report_int(e, "recycles"), (long long)report_int(e, "chunk_size"));
			json_object_set_new(seen, k,
			                    json_integer(json_integer_value(json_object_get(seen, k)) + 1));
		}
		json_object_foreach(seen, name, e) {
			char val[300];
			snprintf(val, sizeof val, "%s: %lld record(s)", name,
			         (long long)json_integer_value(e));
			report_kv(f, "done.jsonl", val);
		}
		json_decref(seen);
	}
	fputs("</table>\n", f);
}

static void report_count(FILE *f, const char *what, long n)
{
	fprintf(f, "<div class=\"count\"><b>%ld</b>%s</div>", n, what);
}

static void report_counts(FILE *f, const report_t *rp)
{
	long ok = 0, split = 0, failed = 0, flagged = 0;
	int64_t res = 0;

	for (int i = 0; i < rp->nrec; i++) {
		const report_rec_t *x = &rp->rec[i];
		ok += !strcmp(x->status, "ok");
		split += !strcmp(x->status, "split");
		failed += !strcmp(x->status, "failed");
		flagged += *x->flags && strcmp(x->flags, "-");
		if (strcmp(x->status, "failed") && x->length > 0) res += x->length;
	}
	fputs("<h2>Records</h2>\n<div class=\"counts\">", f);
	report_count(f, "records", rp->nrec + rp->pending);
	report_count(f, "folded whole", ok);
	report_count(f, "split", split);
	report_count(f, "failed", failed);
	report_count(f, "skipped (done before)", rp->skipped);
	if (rp->pending) report_count(f, "pending", rp->pending);
	report_count(f, "flagged", flagged);
	fprintf(f, "</div>\n<p class=\"sub\">%lld residues in the records folded or split.</p>\n",
	        (long long)res);
}

static void report_legend(FILE *f)
{
	fputs("<div class=\"legend\">pLDDT:", f);
	for (int b = 0; b < 4; b++)
		fprintf(f, "<span style=\"background:%s\"></span>%s", report_band_colour[b],
		        report_band_name[b]);
	fputs("</div>\n", f);
}

/* histogram of mean pLDDT (bins of 5), and the residues per band */
static void report_hist(FILE *f, const report_t *rp)
{
	int bin[20] = { 0 }, most = 0;
	int64_t band[4] = { 0 }, nres = 0;
	svg_plot_t p;

	for (int i = 0; i < rp->nrec; i++) {
		const report_rec_t *x = &rp->rec[i];
		if (!isnan(x->plddt)) {
			int k = (int)(x->plddt / 5);
			bin[k < 0 ? 0 : k > 19 ? 19 : k]++;
		}
		for (int b = 0; b < 4; b++) band[b] += x->band[b] > 0 ? x->band[b] : 0;
	}
	for (int k = 0; k < 20; k++) most = bin[k] > most ? bin[k] : most;
	for (int b = 0; b < 4; b++) nres += band[b];
	svg_plot_init(&p, 520, 300, 0, 100, 0, svg_nice(most));
	fputs("<figure>", f);
	svg_plot_open(f, &p, "plddt-hist", "mean pLDDT", "records");
	for (int k = 0; k < 20; k++) {
		double x0 = svg_x(&p, 5 * k), x1 = svg_x(&p, 5 * k + 5), y = svg_y(&p, bin[k]);
		fprintf(f, "<rect class=\"bar\" data-n=\"%d\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
		        "height=\"%.1f\" fill=\"%s\"><title>%d-%d: %d record(s)</title></rect>\n", bin[k],
		        x0 + 0.5, y, x1 - x0 - 1, svg_y(&p, 0) - y,
		        report_band_colour[qc_band(5 * k + 2.5)], 5 * k, 5 * k + 5, bin[k]);
	}
	svg_close(f);
	fputs("<figcaption>Mean pLDDT per record (whole or split), in the AlphaFold DB "
	      "bands.", f);
	if (nres) {
		fputs(" Residues per band:", f);
		for (int b = 0; b < 4; b++)
			fprintf(f, " %s %.1f%%", report_band_name[b], 100.0 * band[b] / nres);
		fputs(".", f);
	}
	fputs("</figcaption></figure>\n", f);
}

/* a scatter of records against length: y = mean pLDDT (which 0) or seconds */
static void report_scatter(FILE *f, const report_t *rp, int which)
{
	double xmax = 0, ymax = which ? 0 : 100, stl2 = 0, sl4 = 0, c;
	svg_plot_t p;

	for (int i = 0; i < rp->nrec; i++) {
		const report_rec_t *x = &rp->rec[i];
		double y = which ? x->secs : x->plddt;
		if (isnan(y) || x->length < 0) continue;
		xmax = x->length > xmax ? x->length : xmax;
		if (which) {
			ymax = y > ymax ? y : ymax;
			if (!strcmp(x->status, "ok")) {   /* the model, fitted on whole records */
				double l2 = (double)x->length * x->length;
				stl2 += y * l2;
				sl4 += l2 * l2;
			}
		}
	}
	c = sl4 > 0 ? stl2 / sl4 : 0;
	/* room above the slowest record */
	svg_plot_init(&p, 520, 300, 0, svg_nice(xmax), 0, which ? svg_nice(1.15 * ymax) : 100);
	fputs("<figure>", f);
	svg_plot_open(f, &p, which ? "time-length" : "plddt-length", "length (residues)",
	              which ? "seconds" : "mean pLDDT");
	if (!which)
		for (int b = 50; b <= 90; b += 20)
			fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
			        "stroke-dasharray=\"4 3\"/>\n", p.l, svg_y(&p, b), p.w - p.r, svg_y(&p, b),
			        report_band_colour[b == 50 ? 0 : b == 70 ? 1 : 2]);
	if (which && c > 0) {
		fputs("<path class=\"model\" fill=\"none\" stroke=\"#999\" stroke-width=\"1.5\" "
		      "stroke-dasharray=\"5 3\" d=\"", f);
		/* up to the length where it leaves the plot */
		double lmax = fmin(p.x1, sqrt(p.y1 / c));
		for (int k = 0; k <= 50; k++) {
			double l = lmax * k / 50;
			fprintf(f, "%s%.1f %.1f", k ? " L" : "M", svg_x(&p, l), svg_y(&p, c * l * l));
		}
		fputs("\"/>\n", f);
	}
	for (int i = 0; i < rp->nrec; i++) {
		const report_rec_t *x = &rp->rec[i];
		double y = which ? x->secs : x->plddt;
		if (isnan(y) || x->length < 0) continue;
		fprintf(f, "<circle class=\"pt\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\" "
		        "fill-opacity=\"0.85\" stroke=\"#333\" stroke-width=\"0.5\"><title>", svg_x(&p, x->length),
		        svg_y(&p, y), isnan(x->plddt) ? "#999" : report_band_colour[qc_band(x->plddt)]);
		svg_esc(f, x->name);
		fprintf(f, ": %ld residues, %s %.2f%s</title></circle>\n", x->length,
		        which ? "" : "pLDDT", y, which ? " s" : "");
	}
	svg_close(f);
	if (which)
		fprintf(f, "<figcaption>Fold time per record (a split record: its fragments' sum). "
		        "Dashed: the planner's model of time, t &prop; L&sup2;, scaled to the whole "
		        "records of this run (%.3g ms &times; (L/100)&sup2;).</figcaption>", c * 1e7);
	else
		fputs("<figcaption>Mean pLDDT per record against its length.</figcaption>", f);
	fputs("</figure>\n", f);
}

/* the bucket (default set) of a fold: its record's when it is the whole record */
static int report_bucket(const report_t *rp, const report_fold_t *x)
{
	if (x->rec >= 0 && x->rec < rp->nrec && x->start == 0 && x->len == rp->rec[x->rec].length)
		return bucket_parse(NULL, rp->rec[x->rec].bucket);
	return bucket_of(NULL, x->len);
}

/* per bucket, the largest of each figure over its folds that measured them */
static void report_memory(FILE *f, const report_t *rp)
{
	static const char *const what[5] = { "predicted", "allocated", "reserved", "device used",
		                             "quota" };
	static const char *const colour[5] = { "#9b9b9b", "#4a90d9", "#1c5fa8", "#e39c39",
		                               "#c0392b" };
	int nb = bucket_over(NULL) + 1, used = 0, folds[BUCKET_MAX + 1] = { 0 };
	double v[BUCKET_MAX + 1][5] = { { 0 } }, vmax = 0, vmin = HUGE_VAL;
	svg_plot_t p;

	for (int i = 0; i < rp->nfold; i++) {
		const report_fold_t *x = &rp->fold[i];
		int b = report_bucket(rp, x);
		if (!x->has_fig || b < 0 || b >= nb) continue;
		double fig[5] = { x->predicted, x->allocated, x->reserved, x->device_used, x->quota };
		folds[b]++;
		for (int k = 0; k < 5; k++) {
			double m = fig[k] / 1048576.0;
			if (m > v[b][k]) v[b][k] = m;
			if (m > vmax) vmax = m;
			if (m > 0 && m < vmin) vmin = m;
		}
	}
	for (int b = 0; b < nb; b++) used += folds[b] > 0;
	if (!used) {
		fputs("<p class=\"sub\">No fold of this run measured its memory.</p>\n", f);
		return;
	}
	/* a log scale: the device's use (weights, context; the process on the
	 * CPU) may dwarf a fold's arena */
	svg_plot_init(&p, 160 + 150.0 * used, 300, 0, used, pow(10, floor(log10(vmin))),
	              pow(10, ceil(log10(vmax))));
	p.ylog = 1;
	p.no_xticks = 1;
	fputs("<figure class=\"mem\">", f);
	svg_plot_open(f, &p, "memory", "bucket (model length up to)", "MiB (largest fold, log scale)");
	for (int b = 0, slot = 0; b < nb; b++) {
		char label[16];
		if (!folds[b]) continue;
		for (int k = 0; k < 5; k++) {
			double x0 = svg_x(&p, slot + 0.1 + 0.16 * k), y = svg_y(&p, v[b][k]);
			fprintf(f, "<rect class=\"mem\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
			        "fill=\"%s\"><title>%s: %.2f MiB</title></rect>\n", x0, y,
			        svg_x(&p, 0.16) - svg_x(&p, 0) - 1, svg_y(&p, 0) - y, colour[k], what[k],
			        v[b][k]);
		}
		bucket_label(NULL, b, label, sizeof label);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-weight=\"600\">%s"
		        "</text>\n", svg_x(&p, slot + 0.5), svg_y(&p, p.y0) + 16, label);
		slot++;
	}
	svg_close(f);
	fputs("<div class=\"legend\">", f);
	for (int k = 0; k < 5; k++)
		fprintf(f, "<span style=\"background:%s\"></span>%s", colour[k], what[k]);
	fputs("</div>\n<figcaption>Memory per bucket: the largest figure of its folds: the "
	      "planner's prediction, the peak of live tensors (allocated), the arena taken "
	      "(reserved), the device's use (CUDA: total - free; CPU: peak resident set) and the "
	      "quota granted.</figcaption>\n<table><tr><th>bucket</th><th class=\"n\">folds</th>", f);
	for (int k = 0; k < 5; k++) fprintf(f, "<th class=\"n\">%s MiB</th>", what[k]);
	fputs("<th class=\"n\">reserved / predicted</th></tr>\n", f);
	for (int b = 0; b < nb; b++) {
		char label[16];
		if (!folds[b]) continue;
		fprintf(f, "<tr><td>%s</td><td class=\"n\">%d</td>",
		        bucket_label(NULL, b, label, sizeof label), folds[b]);
		for (int k = 0; k < 5; k++) fprintf(f, "<td class=\"n\">%.2f</td>", v[b][k]);
		fprintf(f, "<td class=\"n\">%.3f</td></tr>\n", v[b][0] > 0 ? v[b][2] / v[b][0] : 0.0);
	}
	fputs("</table></figure>\n", f);
}

static const char *report_status_colour(const char *s)
{
	return !strcmp(s, "ok") ? "#4a90d9" : !strcmp(s, "oom") ? "#e39c39" : "#c0392b";
}

/* per device its workers' folds over time */
static void report_timelines(FILE *f, const report_t *rp)
{
	double tmax = 0;

	fputs("<h2>Workers over time</h2>\n", f);
	if (!rp->nfold) fputs("<p class=\"sub\">No fold in run.jsonl.</p>\n", f);
	for (int i = 0; i < rp->nfold; i++) tmax = rp->fold[i].t1 > tmax ? rp->fold[i].t1 : tmax;
	for (int d = 0; d < rp->ndev; d++) {
		int lanes = rp->dev[d].workers, n = 0;
		char id[32];
		svg_plot_t p;
		for (int i = 0; i < rp->nfold; i++)
			if (!strcmp(rp->fold[i].dev, rp->dev[d].name)) {
				n++;
				if (rp->fold[i].worker + 1 > lanes) lanes = rp->fold[i].worker + 1;
			}
		if (!n) continue;
		if (lanes < 1) lanes = 1;
		snprintf(id, sizeof id, "timeline-%d", d);
		svg_plot_init(&p, 1000, 60 + 26.0 * lanes, 0, svg_nice(tmax), 0, lanes);
		p.no_yticks = 1;
		fputs("<figure>", f);
		svg_plot_open(f, &p, id, "seconds since the run began", "");
		for (int w = 0; w < lanes; w++)
			fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">worker %d</text>\n",
			        p.l - 6, svg_y(&p, lanes - w - 0.5) + 4, w);
		for (int i = 0; i < rp->nfold; i++) {
			const report_fold_t *x = &rp->fold[i];
			double x0, x1, y;
			if (strcmp(x->dev, rp->dev[d].name)) continue;
			x0 = svg_x(&p, x->t0);
			x1 = svg_x(&p, x->t1);
			y = svg_y(&p, lanes - x->worker);
			fprintf(f, "<rect class=\"fold\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
			        "fill=\"%s\" stroke=\"#fff\" stroke-width=\"0.5\"><title>", x0, y + 2,
			        x1 - x0 > 1 ? x1 - x0 : 1, svg_y(&p, 0) - svg_y(&p, 1) - 4,
			        report_status_colour(x->status));
			svg_esc(f, x->rec >= 0 && x->rec < rp->nrec ? rp->rec[x->rec].name : "?");
			fprintf(f, " residues %d-%d, worker %d, %.2f-%.2f s, ", x->start + 1,
			        x->start + x->len, x->worker, x->t0, x->t1);
			svg_esc(f, x->status);
			fputs("</title></rect>\n", f);
		}
		svg_close(f);
		fputs("<figcaption>", f);
		svg_esc(f, rp->dev[d].name);
		fprintf(f, ": %d fold(s) on %d worker(s); blue: folded, orange: out of memory "
		        "(requeued smaller), red: failed.</figcaption></figure>\n", n, lanes);
	}
}

/* the failed and split records, then the flagged ones */
static void report_lists(FILE *f, const report_t *rp)
{
	int n = 0;

	fputs("<h2>Failed and split records</h2>\n<table><tr><th>record</th><th>status</th>"
	      "<th class=\"n\">length</th><th>reason</th></tr>\n", f);
	for (int i = 0; i < rp->nrec; i++) {
		const report_rec_t *x = &rp->rec[i];
		if (!strcmp(x->status, "ok")) continue;
		n++;
		fputs("<tr class=\"bad\"><td>", f);
		svg_esc(f, x->name);
		fputs("</td><td>", f);
		svg_esc(f, x->status);
		if (x->length >= 0) fprintf(f, "</td><td class=\"n\">%ld</td><td>", x->length);
		else fputs("</td><td class=\"n\">-</td><td>", f);
		svg_esc(f, x->reason);
		fputs("</td></tr>\n", f);
	}
	if (!n) fputs("<tr><td>none</td></tr>\n", f);
	fputs("</table>\n<h2>Flagged records</h2>\n<table><tr><th>record</th>"
	      "<th class=\"n\">mean pLDDT</th><th class=\"n\">pTM</th><th>flags</th></tr>\n", f);
	n = 0;
	for (int i = 0; i < rp->nrec; i++) {
		const report_rec_t *x = &rp->rec[i];
		if (!*x->flags || !strcmp(x->flags, "-")) continue;
		n++;
		fputs("<tr class=\"flagged\"><td>", f);
		svg_esc(f, x->name);
		fprintf(f, "</td><td class=\"n\">%.2f</td><td class=\"n\">%.4f</td><td>", x->plddt,
		        x->ptm);
		svg_esc(f, x->flags);
		fputs("</td></tr>\n", f);
	}
	if (!n) fputs("<tr><td>none</td></tr>\n", f);
	fputs("</table>\n<p class=\"sub\">Flags (README: summary.tsv): ptm_plddt_mismatch (pTM "
	      "&gt; 0.9 with mean pLDDT &lt; 50), ca_break:N (consecutive CA-CA outside 3.0-4.5 "
	      "&Aring;), clash:N (heavy atoms of different residues closer than 1.5 &Aring;).</p>\n",
	      f);
}

static void report_page(FILE *f, const report_t *rp, const char *dir)
{
	char when[64];
	time_t now = time(NULL);
	struct tm tm;

	strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", gmtime_r(&now, &tm));
	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>esmbatch "
	      "report: ", f);
	svg_esc(f, dir);
	fprintf(f, "</title>\n<style>%s</style></head>\n<body>\n<h1>esmbatch run report</h1>\n"
	        "<div class=\"sub\"><code>", report_css);
	svg_esc(f, dir);
	fprintf(f, "</code> &middot; written %s by %s %s%s</div>\n", when, PACKAGE_NAME,
	        PACKAGE_VERSION, rp->pending ? " &middot; <b>run under way</b>" : "");
	report_counts(f, rp);
	fputs("<h2>Confidence</h2>\n", f);
	report_legend(f);
	fputs("<div class=\"charts\">\n", f);
	report_hist(f, rp);
	report_scatter(f, rp, 0);
	fputs("</div>\n<h2>Time and memory</h2>\n<div class=\"charts\">\n", f);
	report_scatter(f, rp, 1);
	report_memory(f, rp);
	fputs("</div>\n", f);
	report_timelines(f, rp);
	report_lists(f, rp);
	report_settings(f, rp);
	fputs("</body></html>\n", f);
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

int report_write(const char *dir, const char *sfx, const char *summary, long pending)
{
	report_t rp = { .pending = pending };
	char *path = NULL, *text = NULL;
	atomic_file_t a;
	FILE *f;
	int rc = -1, last, absent;

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
		if (!f) goto fail;
		if (!(text = report_slurp(f, path))) goto fail;
		summary = text;
	}
	if (report_parse_summary(&rp, summary) < 0) goto oom;
	free(path);
	if ((f = report_fopen(dir, "run", sfx, ".jsonl", &path, &absent))) {
		int r = report_parse_run(&rp, f, path);
		fclose(f);
		if (r == -2) goto fail;
		if (r < 0) goto oom;
	} else if (!absent) {
		goto fail;
	}
	free(path);
	if ((f = report_fopen(dir, "done", sfx, ".jsonl", &path, &absent))) {
		int r = journal_read(f, path, &rp.done, &last);
		fclose(f);
		if (r < 0) goto fail;
	} else if (!absent) {
		goto fail;
	}
	free(path);
	if (asprintf(&path, "%s/report%s.html", dir, sfx) < 0) {
		path = NULL;
		goto oom;
	}
	if (!atomic_file_open(&a, path)) goto fail;
	report_page(a.f, &rp, dir);
	rc = atomic_file_close(&a, 1);
	goto fail;
oom:
	log_error("%s/report%s.html: out of memory", dir, sfx);
fail:
	free(path);
	free(text);
	report_free(&rp);
	return rc < 0 ? -1 : 0;
}

int report_run_event(FILE *jsonl, const opt_t *o, const char *weights_fp)
{
	char when[64], host[256] = "?", workers[16] = "auto";
	time_t now = time(NULL);
	struct tm tm;
	json_t *e;
	char *line = NULL;
	int rc = -1;

	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
	if (gethostname(host, sizeof host) < 0) snprintf(host, sizeof host, "?");
	host[sizeof host - 1] = 0;
	if (o->workers > 0) snprintf(workers, sizeof workers, "%d", o->workers);
	e = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:s, s:b, s:b, s:s}",
	              "event", "run", "version", PACKAGE_VERSION, "started", when, "host", host,
	              "input", o->input ? o->input : "-", "outdir", o->outdir ? o->outdir : "-",
	              "weights", o->weights ? o->weights : "-", "weights_fingerprint", weights_fp,
	              "precision", be_prec_name(o->precision), "num_recycles", o->num_recycles,
	              "chunk_size", o->chunk_size, "devices", o->devices ? o->devices : "auto",
	              "pae", o->pae, "no_split", o->no_split, "workers", workers);
	if (e && (line = json_dumps(e, JSON_COMPACT)) && fprintf(jsonl, "%s\n", line) > 0 &&
	    fflush(jsonl) == 0)
		rc = 0;
	free(line);
	json_decref(e);
	return rc;
}

double report_every(void)
{
	const char *e = getenv("ESMBATCH_REPORT_EVERY");
	char *end;
	double v;

	if (!e || !*e) return REPORT_EVERY;
	v = strtod(e, &end);
	return *end || !(v >= 0) ? REPORT_EVERY : v;
}

int report_main(const opt_t *o)
{
	if (report_write(o->outdir, "", NULL, 0) < 0) return EXIT_FATAL;
	log_info("report in %s/report.html", o->outdir);
	return EXIT_OK;
}
