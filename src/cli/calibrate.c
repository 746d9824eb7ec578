/* calibrate.c - `esmbatch calibrate` (see calibrate.h). */
#include "config.h"

#include "cli/calibrate.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"
#include "util/sysmem.h"
#include "io/atomic_file.h"
#include "backend/devices.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "model/weights.h"
#include "sched/memory.h"
#include "sched/scheduler.h"

#define CALIB_MAX     64
#define CALIB_SEED    20261129ull

/* one calibrated length */
typedef struct {
	int       L;
	mem_fig_t fig;
	double    seconds;
	int64_t   quota;
} calib_row_t;

int calib_lengths(const char *s, int *len, int max)
{
	int n = 0;
	const char *p = s;

	while (*p) {
		char *end;
		long v;
		errno = 0;
		v = strtol(p, &end, 10);
		if (end == p || errno || v < 1 || v > 1 << 20 || (*end && *end != ',') ||
		    (n && v <= len[n - 1]) || n == max) {
			log_error("--lengths %s: expected up to %d ascending lengths, comma-separated", s, max);
			return -1;
		}
		len[n++] = (int)v;
		p = *end ? end + 1 : end;
	}
	if (!n) log_error("--lengths: empty");
	return n ? n : -1;
}

int calib_table_check(const quota_table_t *t, const char *path, const char *device,
                      const char *weights, const char *precision)
{
	const char *engine = quota_get(t, "engine");
	int hard = 0;

	if (strcmp(t->device, device)) {
		log_warn("%s: made on device '%s', this is '%s'", path, t->device, device);
		hard++;
	}
	if (strcmp(t->weights, weights)) {
		log_warn("%s: made for weights %s, these are %s", path, t->weights, weights);
		hard++;
	}
	if (strcmp(t->precision, precision))
		log_warn("%s: made at precision %s, this run is %s", path, t->precision, precision);
	if (!engine || strcmp(engine, PACKAGE_NAME " " PACKAGE_VERSION))
		log_warn("%s: made by %s, this is " PACKAGE_NAME " " PACKAGE_VERSION, path,
		         engine ? engine : "an unknown engine");
	return hard;
}

/* a random protein of length L (fixed seed per length): malloc'ed */
static char *calib_seq(int L)
{
	static const char aa[] = "ACDEFGHIKLMNPQRSTVWY";
	uint64_t s = CALIB_SEED ^ (uint64_t)L * 0x9E3779B97F4A7C15ull;
	char *q = malloc(L + 1);

	if (!q) return NULL;
	for (int i = 0; i < L; i++) {
		s ^= s << 13; s ^= s >> 7; s ^= s << 17;
		q[i] = aa[s % 20];
	}
	q[L] = 0;
	return q;
}

/* bytes in use on the device now: driver total - free, or process RSS */
static int64_t calib_used(be_t *be, int64_t *total)
{
	size_t fr, tot;

	if (be_supports(be, BE_OP_MEM_INFO) && be->mem_info(be, &fr, &tot) == 0) {
		if (total) *total = (int64_t)tot;
		return (int64_t)(tot - fr);
	}
	if (total) {
		FILE *f = fopen("/proc/meminfo", "r");
		long long kb = -1;
		if (f) {
			if (fscanf(f, "MemTotal: %lld kB", &kb) != 1) kb = -1;
			fclose(f);
		}
		*total = kb < 0 ? -1 : (int64_t)kb * 1024;
	}
	return sysmem_rss();
}

/* fold one length with its figures; 0 or -1 (logged) */
static int calib_fold(const model_t *m, const model_run_t *run, int L, calib_row_t *row)
{
	char *s = calib_seq(L), err[256];
	struct timespec t0, t1;
	model_out_t out;
	tok_t t;
	int rc = -1;

	row->L = L;
	if (!s || tok_encode(&t, s, m->cfg) < 0) {
		log_error("calibrate: cannot encode a length-%d sequence", L);
		free(s);
		return -1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (sched_fold(m, &t, run, NULL, &out, &row->fig, err, sizeof err) < 0) {
		log_error("calibrate: length %d: %s", L, err);
	} else {
		clock_gettime(CLOCK_MONOTONIC, &t1);
		row->seconds = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
		model_out_free(&out);
		rc = 0;
	}
	tok_free(&t);
	free(s);
	return rc;
}

/* the SVG plot: predicted, reserved and measured bytes against length */
static int calib_svg(const char *path, const calib_row_t *rows, int n, const char *title)
{
	const double W = 640, H = 400, x0 = 70, y0 = 30, pw = 540, ph = 320;
	double ymax = 1, xmax = rows[n - 1].L;
	FILE *f;
	atomic_file_t a;

	for (int i = 0; i < n; i++) {
		double v[3] = { (double)rows[i].fig.predicted, (double)rows[i].fig.reserved,
		                (double)rows[i].fig.growth };
		for (int k = 0; k < 3; k++) if (v[k] > ymax) ymax = v[k];
	}
	ymax *= 1.1;
	if (!(f = atomic_file_open(&a, path))) return -1;
	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
	        "font-family=\"sans-serif\" font-size=\"12\">\n"
	        "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
	        "<text x=\"%.0f\" y=\"18\">%s</text>\n", W, H, x0, title);
	fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n"
	        "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n",
	        x0, y0 + ph, x0 + pw, y0 + ph, x0, y0, x0, y0 + ph);
	for (int k = 0; k <= 4; k++) {
		double y = y0 + ph - ph * k / 4;
		fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">%.2f GiB</text>\n",
		        x0 - 4, y + 4, ymax * k / 4 / (1 << 30));
	}
	for (int i = 0; i < n; i++)
		fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%d</text>\n",
		        x0 + pw * rows[i].L / xmax, y0 + ph + 16, rows[i].L);
	fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">length (residues)</text>\n",
	        x0 + pw / 2, H - 6);
	static const char *const name[3] = { "predicted", "reserved", "measured (fold's own)" };
	static const char *const color[3] = { "#1f77b4", "#2ca02c", "#d62728" };
	for (int k = 0; k < 3; k++) {
		fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"",
		        color[k], k == 2 ? " stroke-dasharray=\"6,3\"" : "");
		for (int i = 0; i < n; i++) {
			double v = k == 0 ? (double)rows[i].fig.predicted
			         : k == 1 ? (double)rows[i].fig.reserved : (double)rows[i].fig.growth;
			if (v < 0) continue;
			fprintf(f, "%.1f,%.1f ", x0 + pw * rows[i].L / xmax, y0 + ph - ph * v / ymax);
		}
		fprintf(f, "\"/>\n<text x=\"%.0f\" y=\"%.0f\" fill=\"%s\">%s</text>\n", x0 + 10,
		        y0 + 16 + 14 * k, color[k], name[k]);
	}
	fputs("</svg>\n", f);
	return atomic_file_close(&a, 1);
}

/* "x.tsv" -> "x.svg", else PATH.svg; malloc'ed */
static char *calib_svg_path(const char *tsv)
{
	size_t n = strlen(tsv);
	char *p = NULL;

	if (n > 4 && !strcmp(tsv + n - 4, ".tsv")) {
		if (asprintf(&p, "%.*s.svg", (int)(n - 4), tsv) < 0) p = NULL;
	} else if (asprintf(&p, "%s.svg", tsv) < 0) {
		p = NULL;
	}
	return p;
}

/* the title calib_svg writes: how a plot of calibrate is known again */
#define CALIB_SVG_MARK ">esmbatch calibrate: "

/* 1 when path may be written by calib_svg: absent, or a plot it wrote
 * (its title line among the first lines); else 0 */
static int calib_svg_ours(const char *path)
{
	char head[1024];
	size_t n;
	FILE *f = fopen(path, "r");

	if (!f) return errno == ENOENT;
	n = fread(head, 1, sizeof head - 1, f);
	fclose(f);
	head[n] = 0;
	return !strncmp(head, "<svg ", 5) && strstr(head, CALIB_SVG_MARK) != NULL;
}

static int calib_set_num(quota_table_t *t, const char *key, int64_t v)
{
	char b[32];
	snprintf(b, sizeof b, "%lld", (long long)v);
	return quota_set(t, key, b);
}

/* a byte count of the header; left out when unknown (negative) */
static int calib_set_bytes(quota_table_t *t, const char *key, int64_t v)
{
	return v < 0 ? 0 : calib_set_num(t, key, v);
}

/* what a calibration runs on: the device, the model on it, and its memory
 * in bytes (calib_used) */
typedef struct {
	be_t      *be;
	weights_t *w;
	model_t    m;
	int        loaded;
	int64_t    context;         /* used before the weights */
	int64_t    after_weights;   /* used once they are loaded */
	int64_t    total;           /* the device's memory */
	int64_t    overhead;        /* a worker's own memory (calib_warm_up) */
} calib_t;

/* the device and the model on it; 0, or -1 after logging */
static int calib_open(calib_t *c, const opt_t *o)
{
	if (!(c->be = dev_open(o->devices, o->threads))) return -1;
	if (dev_precision(c->be, o->precision) < 0) return -1;
	c->context = calib_used(c->be, &c->total);
	if (!(c->w = weights_open(o->weights))) return -1;
	if (model_load(&c->m, c->w, c->be, 0) < 0) return -1;
	c->loaded = 1;
	c->after_weights = calib_used(c->be, NULL);
	return 0;
}

static void calib_close(calib_t *c)
{
	if (c->loaded) model_free(&c->m);
	weights_close(c->w);
	be_free(c->be);
}

/* path and its plot may be written: no table of another device or weights
 * there, no file calibrate did not write where the plot goes (unless
 * --force); *svg the plot's path.  0, or -1 after logging */
static int calib_may_write(const calib_t *c, const opt_t *o, const char *path, char **svg)
{
	if (access(path, F_OK) == 0) {
		quota_table_t *old = quota_read(path);
		int other;
		if (!old) return -1;
		other = calib_table_check(old, path, c->be->name, weights_fingerprint(c->w),
		                          c->be->precision);
		quota_free(old);
		if (other && !o->force) {
			log_error("%s: a table of another device or weights; --force overwrites it", path);
			return -1;
		}
	}
	if (!(*svg = calib_svg_path(path))) return -1;
	if (!calib_svg_ours(*svg) && !o->force) {
		log_error("%s: not a plot calibrate wrote, and the table's plot goes there; --force "
		          "overwrites it", *svg);
		return -1;
	}
	return 0;
}

/* warm-up: one pass at every length gives the worker's own memory
 * (BLAS packing buffers, attention scratch, allocator arenas) the size
 * no fold of these lengths outgrows (not the longest fold's: the
 * GEMMs' blocks, hence the packed panels, are wider at short lengths);
 * what it leaves behind is the overhead (c->overhead).  0 or -1 */
static int calib_warm_up(calib_t *c, const model_run_t *run, const int *len, int n)
{
	calib_row_t warm;

	for (int i = 0; i < n; i++) {
		model_run_t once = *run;
		once.passes = 1;
		if (calib_fold(&c->m, &once, len[i], &warm) < 0) return -1;
	}
	c->overhead = calib_used(c->be, NULL) - c->after_weights;
	if (c->overhead < 0) c->overhead = 0;
	log_info("calibrate: context %.1f MiB, weights %.1f MiB, worker overhead %.1f MiB",
	         c->context / 1048576.0, (c->after_weights - c->context) / 1048576.0,
	         c->overhead / 1048576.0);
	return 0;
}

/* a table with the header of this calibration and no rows; NULL */
static quota_table_t *calib_header(const calib_t *c, const opt_t *o, double safety)
{
	quota_table_t *qt = quota_init();
	const be_t *be = c->be;
	char date[32], sf[32];
	time_t now = time(NULL);

	if (!qt) return NULL;
	strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	snprintf(sf, sizeof sf, "%.2f", safety);
	if (quota_set(qt, "device", be->name) || quota_set(qt, "precision", be->precision) ||
	    quota_set(qt, "weights", weights_fingerprint(c->w)) || quota_set(qt, "safety", sf) ||
	    quota_set(qt, "engine", PACKAGE_NAME " " PACKAGE_VERSION) ||
	    calib_set_bytes(qt, "memory", c->total) ||
	    quota_set(qt, "driver", be_supports(be, BE_OP_MEM_INFO) ? "unknown" : "none") ||
	    quota_set(qt, "runtime", be_supports(be, BE_OP_MEM_INFO) ? "unknown" : "none") ||
	    calib_set_num(qt, "chunk_size", o->chunk_size) ||
	    calib_set_num(qt, "recycles", o->num_recycles) ||
	    calib_set_bytes(qt, "context", c->context) ||
	    calib_set_bytes(qt, "weights_bytes", c->after_weights - c->context) ||
	    calib_set_bytes(qt, "worker_overhead", c->overhead) || quota_set(qt, "date", date)) {
		log_error("calibrate: cannot build the table header");
		quota_free(qt);
		return NULL;
	}
	return qt;
}

/* every length folded and measured: rows[0..n) and qt's rows, a line
 * each on out as it ends; then the seconds per unit of the planner's
 * cost, from the longest fold (plan --shards predicts a shard's seconds
 * with it).  0 or -1 */
static int calib_measure(calib_t *c, const model_run_t *run, const int *len, int n, double safety,
                         quota_table_t *qt, calib_row_t *rows, FILE *out)
{
	char spc[32];

	fprintf(out, "length\tpredicted\tallocated\treserved\tdevice_used\tmeasured\tratio\tquota\tseconds\n");
	for (int i = 0; i < n; i++) {
		calib_row_t *r = &rows[i];
		if (calib_fold(&c->m, run, len[i], r) < 0) return -1;
		r->quota = (int64_t)ceil(r->fig.reserved * safety) + c->overhead;
		quota_row_t qr = { len[i], (int64_t)r->fig.allocated, (int64_t)r->fig.reserved,
		                   r->fig.device_used, r->quota };
		if (quota_add_row(qt, &qr) < 0) return -1;
		fprintf(out, "%d\t%zu\t%zu\t%zu\t%lld\t%lld\t%.4f\t%lld\t%.2f\n", len[i], r->fig.predicted,
		        r->fig.allocated, r->fig.reserved, (long long)r->fig.device_used,
		        (long long)r->fig.growth,
		        r->fig.growth >= 0 ? (double)r->fig.growth / r->fig.predicted : NAN,
		        (long long)r->quota, r->seconds);
		fflush(out);
	}
	snprintf(spc, sizeof spc, "%.6g", rows[n - 1].seconds / (double)sched_cost(len[n - 1]));
	return quota_set(qt, "seconds_per_cost", spc) < 0 ? -1 : 0;
}

int calib_main(const opt_t *o, FILE *out)
{
	const char *path = o->outdir ? o->outdir : "quota.tsv";
	int len[CALIB_MAX], n, code = EXIT_FATAL;
	double safety = o->exclusive ? CALIB_SAFETY_EXCLUSIVE : CALIB_SAFETY;
	calib_row_t rows[CALIB_MAX];
	quota_table_t *qt = NULL;
	char *svg = NULL, title[256];
	calib_t c = { 0 };
	model_run_t run = { .chunk = o->chunk_size,
	                    .passes = o->num_recycles >= 0 ? o->num_recycles + 1 : 0 };

	if ((n = calib_lengths(o->lengths ? o->lengths : CALIB_LENGTHS, len, CALIB_MAX)) < 0)
		return EXIT_USAGE;
	sysmem_policy();
	if (calib_open(&c, o) < 0 || calib_may_write(&c, o, path, &svg) < 0 ||
	    calib_warm_up(&c, &run, len, n) < 0 || !(qt = calib_header(&c, o, safety)) ||
	    calib_measure(&c, &run, len, n, safety, qt, rows, out) < 0 || quota_write(qt, path) < 0)
		goto done;
	snprintf(title, sizeof title, "esmbatch calibrate: %s, weights %s, %s", c.be->name,
	         weights_fingerprint(c.w), c.be->precision);
	if (calib_svg(svg, rows, n, title) < 0) goto done;
	log_info("calibrate: wrote %s and %s", path, svg);
	code = EXIT_OK;
done:
	free(svg);
	quota_free(qt);
	calib_close(&c);
	return code;
}
