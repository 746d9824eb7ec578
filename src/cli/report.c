/* report.c - DIR/report.html from an output directory's journals (see report.h). */
#include "config.h"

#include "cli/report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "util/env.h"
#include "util/log.h"
#include "io/atomic_file.h"
#include "protein/qc.h"
#include "model/weights.h"
#include "sched/bucket.h"
#include "cli/report_run.h"
#include "cli/report_table.h"
#include "cli/svg.h"

#define report_band_colour report_table_band_colour
static const char *const report_band_name[4] = { "very low (&lt; 50)", "low (50-70)",
	                                           "confident (70-90)", "very high (&gt; 90)" };

/* ---- the page ------------------------------------------------------------ */


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
	report_run_throughput(f, rp, ok + split - rp->skipped);
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

/* Past REPORT_POINTS_MAX records a scatter is a density: squares of
 * REPORT_CELL px, each its records' count (data-n) and mean pLDDT (its
 * colour), darker with more: the page's size bounded by the plot's. */
#define REPORT_POINTS_MAX 2000
#define REPORT_CELL       8

/* the density of rec's (length, y) in plot p: y = mean pLDDT (which 0) or seconds */
static void report_density(FILE *f, const report_t *rp, const svg_plot_t *p, int which)
{
	int nx = (int)ceil((p->w - p->l - p->r) / REPORT_CELL);
	int ny = (int)ceil((p->h - p->t - p->b) / REPORT_CELL);
	int *n = calloc((size_t)nx * ny, sizeof *n), most = 1;
	double *sum = calloc((size_t)nx * ny, sizeof *sum);

	for (int i = 0; n && sum && i < rp->nrec; i++) {
		const report_rec_t *x = &rp->rec[i];
		double y = which ? x->secs : x->plddt;
		if (isnan(y) || x->length < 0) continue;
		int cx = (int)((svg_x(p, x->length) - p->l) / REPORT_CELL);
		int cy = (int)((svg_y(p, y) - p->t) / REPORT_CELL);
		cx = cx < 0 ? 0 : cx >= nx ? nx - 1 : cx;
		cy = cy < 0 ? 0 : cy >= ny ? ny - 1 : cy;
		n[cy * nx + cx]++;
		sum[cy * nx + cx] += isnan(x->plddt) ? 0 : x->plddt;
		most = n[cy * nx + cx] > most ? n[cy * nx + cx] : most;
	}
	for (int k = 0; n && sum && k < nx * ny; k++) {
		if (!n[k]) continue;
		fprintf(f, "<rect class=\"cell\" data-n=\"%d\" x=\"%.1f\" y=\"%.1f\" width=\"%d\" "
		        "height=\"%d\" fill=\"%s\" fill-opacity=\"%.2f\"><title>%d</title></rect>\n", n[k],
		        p->l + REPORT_CELL * (k % nx), p->t + REPORT_CELL * (k / nx), REPORT_CELL,
		        REPORT_CELL, report_band_colour[qc_band(sum[k] / n[k])],
		        0.35 + 0.65 * log1p(n[k]) / log1p(most), n[k]);
	}
	free(n);
	free(sum);
}

/* a scatter of records against length: y = mean pLDDT (which 0) or seconds */
static void report_scatter(FILE *f, const report_t *rp, int which)
{
	double xmax = 0, ymax = which ? 0 : 100, stl2 = 0, sl4 = 0, c;
	int npts = 0;
	svg_plot_t p;

	for (int i = 0; i < rp->nrec; i++) {
		const report_rec_t *x = &rp->rec[i];
		double y = which ? x->secs : x->plddt;
		if (isnan(y) || x->length < 0) continue;
		npts++;
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
	for (int i = 0; i < rp->nrec && npts <= REPORT_POINTS_MAX; i++) {
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
	if (npts > REPORT_POINTS_MAX) report_density(f, rp, &p, which);
	svg_close(f);
	if (which)
		fprintf(f, "<figcaption>Fold time per record (a split record: its fragments' sum). "
		        "Dashed: the planner's model of time, t &prop; L&sup2;, scaled to the whole "
		        "records of this run (%.3g ms &times; (L/100)&sup2;).", c * 1e7);
	else
		fputs("<figcaption>Mean pLDDT per record against its length.", f);
	if (npts > REPORT_POINTS_MAX)
		fprintf(f, " %d records: squares of %d px, darker with more records, coloured by their "
		        "mean pLDDT.", npts, REPORT_CELL);
	fputs("</figcaption>", f);
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

/* a bar of a timeline: the folds of one worker from *first, n of them,
 * ending at t1 */
static void report_bar(FILE *f, const report_t *rp, const svg_plot_t *p, int lanes,
                       const report_fold_t *x, int n, double t1)
{
	double x0 = svg_x(p, x->t0), x1 = svg_x(p, t1), y = svg_y(p, lanes - x->worker);

	fprintf(f, "<rect class=\"fold\" data-n=\"%d\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
	        "height=\"%.1f\" fill=\"%s\" stroke=\"#fff\" stroke-width=\"0.5\"><title>", n, x0,
	        y + 2, x1 - x0 > 1 ? x1 - x0 : 1, svg_y(p, 0) - svg_y(p, 1) - 4,
	        report_status_colour(x->status));
	if (n > 1) {
		fprintf(f, "%d folds, worker %d, %.2f-%.2f s, ", n, x->worker, x->t0, t1);
	} else {
		svg_esc(f, x->rec >= 0 && x->rec < rp->nrec ? rp->rec[x->rec].name : "?");
		fprintf(f, " residues %d-%d, worker %d, %.2f-%.2f s, ", x->start + 1,
		        x->start + x->len, x->worker, x->t0, x->t1);
	}
	svg_esc(f, x->status);
	fputs("</title></rect>\n", f);
}

/* Past REPORT_MARKS_MAX folds, a worker's folds of one status less than
 * a pixel apart are one bar (its data-n: how many): the page's size
 * bounded by the timeline's pixels. */
#define REPORT_MARKS_MAX 2000

/* the bars of device dev's workers (lanes) in plot p */
static void report_lanes(FILE *f, const report_t *rp, const svg_plot_t *p, const char *dev,
                         int lanes)
{
	int merge = rp->nfold > REPORT_MARKS_MAX;
	const report_fold_t **open = calloc(lanes, sizeof *open);
	int *n = calloc(lanes, sizeof *n);
	double *t1 = calloc(lanes, sizeof *t1);

	if (!open || !n || !t1) merge = 0;
	for (int i = 0; i < rp->nfold; i++) {
		const report_fold_t *x = &rp->fold[i];
		int w = x->worker;
		if (strcmp(x->dev, dev)) continue;
		if (!merge || w < 0 || w >= lanes) {
			report_bar(f, rp, p, lanes, x, 1, x->t1);
			continue;
		}
		if (open[w] && !strcmp(open[w]->status, x->status) &&
		    svg_x(p, x->t0) - svg_x(p, t1[w]) < 1) {
			n[w]++;
			t1[w] = fmax(t1[w], x->t1);
			continue;
		}
		if (open[w]) report_bar(f, rp, p, lanes, open[w], n[w], t1[w]);
		open[w] = x;
		n[w] = 1;
		t1[w] = x->t1;
	}
	for (int w = 0; merge && w < lanes; w++)
		if (open[w]) report_bar(f, rp, p, lanes, open[w], n[w], t1[w]);
	free(open);
	free(n);
	free(t1);
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
		report_lanes(f, rp, &p, rp->dev[d].name, lanes);
		svg_close(f);
		fputs("<figcaption>", f);
		svg_esc(f, rp->dev[d].name);
		fprintf(f, ": %d fold(s) on %d worker(s); blue: folded, orange: out of memory "
		        "(requeued smaller), red: failed.</figcaption></figure>\n", n, lanes);
	}
}

static void report_page(FILE *f, const report_t *rp, const char *dir, const char *sfx)
{
	char when[64];
	time_t now = time(NULL);
	struct tm tm;

	strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", gmtime_r(&now, &tm));
	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>esmbatch "
	      "report: ", f);
	svg_esc(f, dir);
	fprintf(f, "</title>\n<style>%s</style></head>\n<body>\n<h1>esmbatch run report</h1>\n"
	        "<div class=\"sub\"><code>", report_table_css);
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
	report_table_lists(f, sfx, rp->rec, rp->nrec, rp->files);
	report_run_settings(f, rp);
	fputs("</body></html>\n", f);
}


int report_write(const char *dir, const char *sfx, const char *summary, long pending)
{
	report_t rp = { .pending = pending };
	char *path = NULL;
	atomic_file_t a;
	int rc = -1;

	if (report_run_read(&rp, dir, sfx, summary) < 0) goto done;
	/* the pages the report links to, first */
	if (report_table_pages(dir, sfx, rp.rec, rp.nrec, rp.files) < 0) goto done;
	if (asprintf(&path, "%s/report%s.html", dir, sfx) < 0) {
		log_error("%s/report%s.html: out of memory", dir, sfx);
		path = NULL;
		goto done;
	}
	if (!atomic_file_open(&a, path)) goto done;
	report_page(a.f, &rp, dir, sfx);
	rc = atomic_file_close(&a, 1);
done:
	free(path);
	report_run_free(&rp);
	return rc < 0 ? -1 : 0;
}

int report_run_event(FILE *jsonl, const opt_t *o, const weights_t *wt)
{
	const char *fmt = o->formats == (OPT_FMT_PDB | OPT_FMT_CIF) ? "pdb,cif"
	                  : o->formats == OPT_FMT_CIF ? "cif" : "pdb";
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
	/* the model's default: its trunk passes less one (model.h) */
	e = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:s, s:b, s:b, "
	              "s:s, s:s}",
	              "event", "run", "version", PACKAGE_VERSION, "started", when, "host", host,
	              "input", o->input ? o->input : "-", "outdir", o->outdir ? o->outdir : "-",
	              "weights", o->weights ? o->weights : "-", "weights_fingerprint",
	              weights_fingerprint(wt), "precision", be_prec_name(o->precision),
	              "num_recycles", o->num_recycles, "model_recycles", weights_cfg(wt)->max_recycles - 1,
	              "chunk_size", o->chunk_size, "devices", o->devices ? o->devices : "auto",
	              "pae", o->pae, "no_split", o->no_split, "workers", workers, "format", fmt);
	if (e && (line = json_dumps(e, JSON_COMPACT)) && fprintf(jsonl, "%s\n", line) > 0 &&
	    fflush(jsonl) == 0)
		rc = 0;
	free(line);
	json_decref(e);
	return rc;
}

double report_every(void)
{
	return env_seconds("ESMBATCH_REPORT_EVERY", REPORT_EVERY, 1e6);
}

int report_main(const opt_t *o)
{
	if (report_write(o->outdir, "", NULL, 0) < 0) return EXIT_FATAL;
	log_info("report in %s/report.html", o->outdir);
	return EXIT_OK;
}
