/* report_table.c - the record tables of the run report (see report_table.h). */
#include "cli/report_table.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/log.h"
#include "io/atomic_file.h"
#include "protein/qc.h"
#include "cli/svg.h"

/* AlphaFold DB band colours: very low, low, confident, very high */
const char *const report_table_band_colour[4] = { "#ff7d45", "#ffdb13", "#65cbf3", "#0053d6" };

const char report_table_css[] =
	"body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px;"
	"color:#222;max-width:1100px}"
	"h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;"
	"border-bottom:1px solid #ddd;padding-bottom:3px}"
	".sub{color:#666;font-size:13px}"
	"table{border-collapse:collapse;font-size:13px}td,th{padding:3px 10px 3px 0;"
	"text-align:left;vertical-align:top}th{color:#555;font-weight:600}"
	"td.n,th.n{text-align:right}table.recs tr:nth-child(even){background:#f6f6f6}"
	"table.recs td{white-space:nowrap}table.recs td.w{white-space:normal;max-width:330px;"
	"overflow-wrap:anywhere}"
	".chip{display:inline-block;width:9px;height:9px;margin-right:5px;border-radius:2px}"
	".pages a,.nav a{margin-right:10px;white-space:nowrap}.nav{margin:10px 0;font-size:13px}"
	".counts{display:flex;gap:14px;flex-wrap:wrap}.count{border:1px solid #ddd;"
	"border-radius:6px;padding:8px 14px;min-width:90px}.count b{display:block;font-size:22px}"
	".charts{display:flex;flex-wrap:wrap;gap:18px}figure{margin:0}"
	"figcaption{font-size:12px;color:#555;max-width:520px}"
	"svg.chart{font-size:11px;background:#fff}svg .axis line{stroke:#888}"
	"svg .axis line.grid{stroke:#eee}svg text{fill:#333}"
	".legend span{display:inline-block;width:11px;height:11px;margin:0 4px 0 12px;"
	"vertical-align:-1px}.legend{font-size:12px}"
	"code{font-size:12px}figure.mem{max-width:540px}figure.mem table{font-size:12px}";

/* a list of records in the order it shows them */
typedef struct {
	const char          *stem;    /* its pages: STEM-NNN.html */
	const char          *title;   /* what it holds */
	const char          *cls;     /* its rows' class on report.html */
	const report_rec_t **row;
	int                  n;
} report_list_t;

enum { REPORT_ALL, REPORT_PROBLEMS, REPORT_FLAGGED, REPORT_NLISTS };

static const report_list_t report_list_kind[REPORT_NLISTS] = {
	{ "records", "Every record, in input order", "rec", NULL, 0 },
	{ "problems", "Failed and split records: failed first, then lowest mean pLDDT", "bad", NULL, 0 },
	{ "flagged", "Flagged records, lowest mean pLDDT first", "flagged", NULL, 0 },
};

int report_table_flagged(const report_rec_t *x)
{
	return *x->flags && strcmp(x->flags, "-") != 0;
}

/* "-" first (a failed record: nothing to judge it by), then the lowest
 * mean pLDDT, then input order */
static int report_table_cmp(const void *a, const void *b)
{
	const report_rec_t *x = *(const report_rec_t *const *)a, *y = *(const report_rec_t *const *)b;
	int xn = isnan(x->plddt), yn = isnan(y->plddt);

	if (xn != yn) return yn - xn;
	if (!xn && x->plddt != y->plddt) return x->plddt < y->plddt ? -1 : 1;
	return (x > y) - (x < y);
}

/* l = list kind k of rec[n]; 0 or -1 (out of memory) */
static int report_table_list(report_list_t *l, int k, const report_rec_t *rec, int n)
{
	*l = report_list_kind[k];
	if (!(l->row = malloc((n ? n : 1) * sizeof *l->row))) return -1;
	for (int i = 0; i < n; i++)
		if (k == REPORT_ALL || (k == REPORT_PROBLEMS && strcmp(rec[i].status, "ok")) ||
		    (k == REPORT_FLAGGED && report_table_flagged(&rec[i])))
			l->row[l->n++] = &rec[i];
	if (k != REPORT_ALL) qsort(l->row, l->n, sizeof *l->row, report_table_cmp);
	return 0;
}

/* a link to file (n bytes) in -o, from a page in up ("" or "../") */
static void report_table_link(FILE *f, const char *up, const char *file, size_t n)
{
	fprintf(f, "<a href=\"%s", up);
	svg_esc_url(f, file, n);
	fputs("\">", f);
	for (size_t i = 0; i < n; i++) {
		char c[2] = { file[i], 0 };
		svg_esc(f, c);
	}
	fputs("</a> ", f);
}

/* the files of a row: each of its file column (a split record's
 * fragments: several) with the mmCIF, PDB and PAE of the same stem that
 * the journal describes (files: done.jsonl's files by name, or NULL);
 * a name that is not a file in -o itself is text, not a link */
static void report_table_files(FILE *f, const char *up, const report_rec_t *x,
                               const json_t *files)
{
	static const char *const ext[] = { ".pdb", ".cif", ".pae.json" };
	const char *p = x->file;
	int any = 0;

	for (; p && *p && strcmp(p, "-"); p += *p == ',') {
		size_t n = strcspn(p, ","), stem = n;
		int mine = -1;
		if (!n || memchr(p, '/', n) || (n == 1 && *p == '.') || (n == 2 && !strncmp(p, "..", 2))) {
			p += n;
			continue;
		}
		any = 1;
		report_table_link(f, up, p, n);
		for (int e = 0; e < 3; e++) {
			size_t el = strlen(ext[e]);
			if (n > el && !strncmp(p + n - el, ext[e], el)) {
				stem = n - el;
				mine = e;
			}
		}
		for (int e = 0; files && mine >= 0 && e < 3; e++) {
			char *sib;
			if (e == mine || asprintf(&sib, "%.*s%s", (int)stem, p, ext[e]) < 0) continue;
			if (json_object_get(files, sib)) report_table_link(f, up, sib, strlen(sib));
			free(sib);
		}
		p += n;
	}
	if (!any) fputc('-', f);
}

static void report_table_head(FILE *f)
{
	fputs("<table class=\"recs\"><tr><th class=\"n\">#</th><th>record</th>"
	      "<th class=\"n\">length</th><th class=\"n\">mean pLDDT</th><th class=\"n\">pTM</th>"
	      "<th>outcome</th><th>flags</th><th>files</th></tr>\n", f);
}

static void report_table_row(FILE *f, const char *cls, const char *up, const report_rec_t *x,
                             const json_t *files)
{
	fprintf(f, "<tr class=\"%s\"><td class=\"n\">", cls);
	if (x->index >= 0) fprintf(f, "%ld", x->index);
	else fputc('-', f);
	fputs("</td><td>", f);
	svg_esc(f, x->name);
	if (x->length >= 0) fprintf(f, "</td><td class=\"n\">%ld", x->length);
	else fputs("</td><td class=\"n\">-", f);
	if (!isnan(x->plddt))
		fprintf(f, "</td><td class=\"n\"><span class=\"chip\" style=\"background:%s\"></span>"
		        "%.2f", report_table_band_colour[qc_band(x->plddt)], x->plddt);
	else fputs("</td><td class=\"n\">-", f);
	if (!isnan(x->ptm)) fprintf(f, "</td><td class=\"n\">%.4f", x->ptm);
	else fputs("</td><td class=\"n\">-", f);
	fputs("</td><td class=\"w\">", f);
	svg_esc(f, x->status);
	if (*x->reason && strcmp(x->reason, "-")) {
		fputs(": ", f);
		svg_esc(f, x->reason);
	}
	fputs("</td><td>", f);
	svg_esc(f, report_table_flagged(x) ? x->flags : "-");
	fputs("</td><td class=\"w\">", f);
	report_table_files(f, up, x, files);
	fputs("</td></tr>\n", f);
}

/* the link to page k (from 0) of l, in report SFX/ or beside it (dir "") */
static void report_table_href(FILE *f, const char *sfx, const char *dir, const report_list_t *l,
                              int k)
{
	fprintf(f, "<a href=\"%s%s%s%s-%03d.html\">", dir, *dir ? sfx : "", *dir ? "/" : "",
	        l->stem, k + 1);
}

/* the previous and next pages of page k of np, and the report */
static void report_table_nav(FILE *f, const char *sfx, const report_list_t *l, int k, int np)
{
	fprintf(f, "<div class=\"nav\"><a href=\"../report%s.html\">the report</a>", sfx);
	if (k > 0) {
		report_table_href(f, sfx, "", l, k - 1);
		fputs("&larr; previous</a>", f);
	}
	if (k + 1 < np) {
		report_table_href(f, sfx, "", l, k + 1);
		fputs("next &rarr;</a>", f);
	}
	fprintf(f, "page %d of %d</div>\n", k + 1, np);
}

/* SUB/STEM-NNN.html, page k of np of l; 0 or -1 (logged) */
static int report_table_page(const char *sub, const char *sfx, const report_list_t *l, int k,
                             int np, const json_t *files)
{
	int lo = k * REPORT_TABLE_ROWS, hi = lo + REPORT_TABLE_ROWS < l->n ? lo + REPORT_TABLE_ROWS : l->n;
	atomic_file_t a;
	char *path;
	FILE *f;

	if (asprintf(&path, "%s/%s-%03d.html", sub, l->stem, k + 1) < 0) {
		log_error("%s: out of memory", sub);
		return -1;
	}
	f = atomic_file_open(&a, path);
	free(path);
	if (!f) return -1;
	fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
	        "<title>esmbatch report: %s, page %d of %d</title>\n<style>%s</style></head>\n"
	        "<body>\n<h1>%s</h1>\n<div class=\"sub\">rows %d-%d of %d</div>\n", l->title, k + 1,
	        np, report_table_css, l->title, lo + 1, hi, l->n);
	report_table_nav(f, sfx, l, k, np);
	report_table_head(f);
	for (int i = lo; i < hi; i++) report_table_row(f, "rec", "../", l->row[i], files);
	fputs("</table>\n", f);
	report_table_nav(f, sfx, l, k, np);
	fputs("</body></html>\n", f);
	return atomic_file_close(&a, 1) < 0 ? -1 : 0;
}

/* SUB made a directory of its own (not a symlink); 0 or -1 (logged) */
static int report_table_mkdir(const char *sub)
{
	struct stat st;

	if (mkdir(sub, 0777) < 0 && errno != EEXIST) {
		log_error("%s: cannot create: %s", sub, strerror(errno));
		return -1;
	}
	if (lstat(sub, &st) < 0 || !S_ISDIR(st.st_mode)) {
		log_error("%s: not a directory (the report's pages go there): remove it", sub);
		return -1;
	}
	return 0;
}

int report_table_pages(const char *dir, const char *sfx, const report_rec_t *rec, int n,
                       const json_t *files)
{
	char *sub = NULL;
	int rc = -1;

	if (asprintf(&sub, "%s/report%s", dir, sfx) < 0) {
		log_error("%s/report%s: out of memory", dir, sfx);
		return -1;
	}
	if (report_table_mkdir(sub) < 0) goto done;
	rc = 0;
	for (int k = 0; k < REPORT_NLISTS && rc == 0; k++) {
		report_list_t l;
		int np;
		if (report_table_list(&l, k, rec, n) < 0) {
			log_error("%s: out of memory", sub);
			rc = -1;
			break;
		}
		np = (l.n + REPORT_TABLE_ROWS - 1) / REPORT_TABLE_ROWS;
		for (int p = 0; p < np && rc == 0; p++) rc = report_table_page(sub, sfx, &l, p, np, files);
		/* an earlier report's pages past the last */
		for (int p = np + 1; rc == 0; p++) {
			char *old;
			int gone;
			if (asprintf(&old, "%s/%s-%03d.html", sub, l.stem, p) < 0) break;
			gone = unlink(old) < 0;
			free(old);
			if (gone) break;
		}
		free(l.row);
	}
done:
	free(sub);
	return rc;
}

void report_table_clean(const char *dir, const char *sfx)
{
	char *sub = NULL;
	DIR *d;
	struct dirent *e;

	if (asprintf(&sub, "%s/report%s", dir, sfx) < 0) return;
	if ((d = opendir(sub))) {
		while ((e = readdir(d))) {
			const char *t = strstr(e->d_name, ".html.tmp.");
			char *p;
			if (!t || !t[10] || strspn(t + 10, "0123456789") != strlen(t + 10)) continue;
			if (asprintf(&p, "%s/%s", sub, e->d_name) < 0) continue;
			if (unlink(p) == 0) log_debug("%s: removed (left by a killed run)", p);
			free(p);
		}
		closedir(d);
	}
	free(sub);
}

/* one list on report.html: its first rows, and a link to the rest */
static void report_table_short(FILE *f, const char *sfx, const report_list_t *l,
                               const json_t *files)
{
	report_table_head(f);
	for (int i = 0; i < l->n && i < REPORT_TABLE_LIST; i++)
		report_table_row(f, l->cls, "", l->row[i], files);
	if (!l->n) fputs("<tr><td colspan=\"8\">none</td></tr>\n", f);
	fputs("</table>\n", f);
	if (l->n > REPORT_TABLE_LIST) {
		fprintf(f, "<p class=\"more\">The first %d of %d. ", REPORT_TABLE_LIST, l->n);
		report_table_href(f, sfx, "report", l, 0);
		fprintf(f, "All %d</a> (%d a page).</p>\n", l->n, REPORT_TABLE_ROWS);
	}
}

void report_table_lists(FILE *f, const char *sfx, const report_rec_t *rec, int n,
                        const json_t *files)
{
	report_list_t l[REPORT_NLISTS];
	int np;

	for (int k = 0; k < REPORT_NLISTS; k++)
		if (report_table_list(&l[k], k, rec, n) < 0) {
			for (int j = 0; j < k; j++) free(l[j].row);
			fputs("<p>out of memory: no record lists</p>\n", f);
			return;
		}
	fputs("<h2>Failed and split records</h2>\n", f);
	report_table_short(f, sfx, &l[REPORT_PROBLEMS], files);
	fputs("<h2>Flagged records</h2>\n", f);
	report_table_short(f, sfx, &l[REPORT_FLAGGED], files);
	fputs("<p class=\"sub\">Flags (docs/output.md): ptm_plddt_mismatch (pTM "
	      "&gt; 0.9 with mean pLDDT &lt; 50), ca_break:N (consecutive CA-CA outside 3.0-4.5 "
	      "&Aring;), clash:N (heavy atoms of different residues closer than 1.5 &Aring;). "
	      "Lowest mean pLDDT first.</p>\n", f);
	np = (n + REPORT_TABLE_ROWS - 1) / REPORT_TABLE_ROWS;
	fprintf(f, "<h2>Every record</h2>\n<p class=\"sub\">%d record(s) in input order, %d a "
	        "page, with links to their files:</p>\n<p class=\"pages\">", n, REPORT_TABLE_ROWS);
	for (int p = 0; p < np; p++) {
		report_table_href(f, sfx, "report", &l[REPORT_ALL], p);
		fprintf(f, "%d-%d</a> ", p * REPORT_TABLE_ROWS + 1,
		        (p + 1) * REPORT_TABLE_ROWS < n ? (p + 1) * REPORT_TABLE_ROWS : n);
	}
	if (!np) fputs("none", f);
	fputs("</p>\n", f);
	for (int k = 0; k < REPORT_NLISTS; k++) free(l[k].row);
}
