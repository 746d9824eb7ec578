/* merge.c - `esmbatch merge` (see merge.h).
 *
 * The rows of the shard summaries are opaque text after their first
 * field, the record's index in the input: merge sorts them by it (rows
 * whose index is "-", --names names not found, after the others) and
 * reads only the status, name and reason columns, found by their header
 * names, to list the records that failed: a status is compared as written
 * (no status needs escaping), and the messages quote the name and reason
 * cells as written (escaped, util/tsv.h), so each is one line.  Every shard's header must be
 * the same line, and every row have its columns; every shard's run must
 * have had the same settings (its shard line's "settings").
 *
 * A shard whose run did not give every record a final outcome left
 * summary.partial.K-of-N.tsv instead (fold.c): merge takes its rows, names
 * it unfinished, and writes summary.partial.tsv, as it does when a shard
 * has no summary at all; summary.tsv only when every shard is complete.
 */
#include "cli/merge.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <jansson.h>

#include "util/grow.h"
#include "util/lines.h"
#include "util/log.h"
#include "util/tsv.h"
#include "io/atomic_file.h"
#include "io/dir_lock.h"
#include "io/journal.h"
#include "sched/shard.h"

typedef struct {
	long  index;   /* in the input; -1 for "-" */
	int   shard;   /* 1-based, then its line: the order of "-" rows */
	long  line;
	char *text;    /* the whole line, without its newline (owned) */
} merge_row_t;

/* one shard's fingerprint (run.K-of-N.jsonl's "shard" line) */
typedef struct {
	int    have;
	char   input[40], weights[160];
	long   records, in_shard;
	char  *settings;   /* its "settings" as compact JSON (owned), or NULL */
	int    partial;    /* its summary is summary.partial.K-of-N.tsv */
} merge_fp_t;

typedef struct {
	const char  *dir;
	int          n;            /* N of the shards found */
	merge_fp_t  *fp;           /* [n] */
	merge_row_t *row;
	long         nrow;
	size_t       cap;
	char        *head;         /* the shards' header line (owned) */
	int          tabs;         /* in head */
	int          ref;          /* the first shard with a fingerprint, -1 */
	int          missing;      /* shards without a summary */
	int          unknown;      /* of them, those never run */
	int          unfinished;   /* shards with summary.partial.K-of-N.tsv */
	long         nmissing;     /* the records of the missing shards that ran */
} merge_t;

/* missing shards logged one by one; the rest in one line */
#define MERGE_SAY_MISSING 10

/* NAME is STEM.K-of-N.EXT: *k and *n (an N over SHARD_MAX as
 * SHARD_MAX + 1); 1 when it is, else 0 */
static int merge_name(const char *name, const char *stem, const char *ext, int *k, int *n)
{
	size_t sl = strlen(stem);
	const char *p = name + sl + 1;
	char *end;
	long kk, nn;

	if (strncmp(name, stem, sl) || name[sl] != '.' || *p < '1' || *p > '9') return 0;
	kk = strtol(p, &end, 10);
	if (strncmp(end, "-of-", 4) || end[4] < '1' || end[4] > '9') return 0;
	nn = strtol(end + 4, &end, 10);
	if (strcmp(end, ext) || kk > nn) return 0;
	*k = kk > SHARD_MAX ? SHARD_MAX + 1 : (int)kk;
	*n = nn > SHARD_MAX ? SHARD_MAX + 1 : (int)nn;
	return 1;
}

/* The N of every shard file in the directory, which must be one; 0, or -1
 * (logged: none, or more than one N) */
static int merge_find_n(merge_t *m)
{
	static const char *const kind[][2] = { { "summary", ".tsv" }, { "summary.partial", ".tsv" },
	                                       { "run", ".jsonl" }, { "done", ".jsonl" } };
	DIR *d = opendir(m->dir);
	struct dirent *e;
	char first[256] = "";
	int rc = 0;

	if (!d) {
		log_error("%s: cannot open: %s", m->dir, strerror(errno));
		return -1;
	}
	while ((e = readdir(d)) && rc == 0) {
		int k, n;
		for (size_t i = 0; i < sizeof kind / sizeof *kind; i++) {
			if (!merge_name(e->d_name, kind[i][0], kind[i][1], &k, &n)) continue;
			if (n > SHARD_MAX) {
				log_error("%s/%s: not a shard's file (N is at most %d): remove it", m->dir,
				          e->d_name, SHARD_MAX);
				rc = -1;
			} else if (!m->n) {
				m->n = n;
				snprintf(first, sizeof first, "%s", e->d_name);
			} else if (n != m->n) {
				log_error("%s: shards of different N: %s and %s (remove the outputs of the "
				          "partition you do not want)", m->dir, first, e->d_name);
				rc = -1;
			}
		}
	}
	closedir(d);
	if (rc == 0 && !m->n) {
		log_error("%s: no shard outputs (fold --shard K/N writes summary.K-of-N.tsv there)", m->dir);
		rc = -1;
	}
	return rc;
}

/* shard k's fingerprint from run.k-of-N.jsonl (absent: have 0); 0 or -1 */
static int merge_read_fp(merge_t *m, int k)
{
	merge_fp_t *fp = &m->fp[k - 1];
	char *path = NULL;
	lines_t ln;
	FILE *f;
	int rc = 0, got;

	if (asprintf(&path, "%s/run.%d-of-%d.jsonl", m->dir, k, m->n) < 0) return -1;
	if (!(f = fopen(path, "r"))) {
		free(path);
		return 0;
	}
	lines_init(&ln, f, path, NULL);
	while ((got = lines_next(&ln)) != 0) {
		if (got < 0) {
			rc = -1;
			break;
		}
		json_t *e = json_loadb(ln.s, ln.n, 0, NULL);
		const char *ev = json_string_value(json_object_get(e, "event"));
		if (ev && !strcmp(ev, "shard")) {
			const char *in = json_string_value(json_object_get(e, "input"));
			const char *w = json_string_value(json_object_get(e, "weights"));
			if (!in || !w || json_integer_value(json_object_get(e, "shard")) != k ||
			    json_integer_value(json_object_get(e, "shards")) != m->n) {
				log_error("%s: its shard line does not name shard %d of %d", path, k, m->n);
				rc = -1;
			} else {
				fp->have = 1;
				snprintf(fp->input, sizeof fp->input, "%s", in);
				snprintf(fp->weights, sizeof fp->weights, "%s", w);
				fp->records = (long)json_integer_value(json_object_get(e, "records"));
				fp->in_shard = (long)json_integer_value(json_object_get(e, "in_shard"));
				json_t *set = json_object_get(e, "settings");
				if (set && !(fp->settings = json_dumps(set, JSON_COMPACT | JSON_SORT_KEYS)))
					rc = -1;
			}
			json_decref(e);
			break;
		}
		json_decref(e);
	}
	lines_free(&ln);
	fclose(f);
	free(path);
	return rc;
}

/* shard k's summary rows from STEM.k-of-N.tsv (absent file: 0 rows,
 * *found 0); 0 or -1 */
static int merge_read_summary(merge_t *m, int k, const char *stem, int *found)
{
	char *path = NULL, *line;
	lines_t rd;
	long ln = 0;
	FILE *f;
	int rc = 0, got;

	*found = 0;
	if (asprintf(&path, "%s/%s.%d-of-%d.tsv", m->dir, stem, k, m->n) < 0) return -1;
	if (!(f = fopen(path, "r"))) {
		if (errno != ENOENT) {
			log_error("%s: cannot read: %s", path, strerror(errno));
			rc = -1;
		}
		free(path);
		return rc;
	}
	*found = 1;
	lines_init(&rd, f, path, NULL);
	while (rc == 0 && (got = lines_next(&rd)) != 0) {
		if (got < 0) {
			rc = -1;
			break;
		}
		line = rd.s;
		if (ln++ == 0) {
			if (!m->head) {
				if (!(m->head = strdup(line))) rc = -1;
				for (const char *c = line; *c; c++) m->tabs += *c == '\t';
			} else if (strcmp(m->head, line)) {
				log_error("%s: its columns differ from another shard's (esmbatch versions "
				          "differ?)", path);
				rc = -1;
			}
			continue;
		}
		int tabs = 0;
		for (const char *c = line; *c; c++) tabs += *c == '\t';
		if (tabs != m->tabs) {
			log_error("%s:%ld: %d columns, the header has %d (a torn or edited row): rerun shard "
			          "%d/%d", path, ln, tabs + 1, m->tabs + 1, k, m->n);
			rc = -1;
			break;
		}
		char *end;
		long idx = strtol(line, &end, 10);
		if (!strncmp(line, "-\t", 2)) idx = -1;
		else if (end == line || *end != '\t' || idx < 0) {
			log_error("%s:%ld: not a summary row (no index)", path, ln);
			rc = -1;
			break;
		}
		if (grow_array(&m->row, &m->cap, (size_t)m->nrow + 1, sizeof *m->row) < 0) {
			rc = -1;
			break;
		}
		merge_row_t *r = &m->row[m->nrow];
		r->index = idx < 0 ? -1 : idx;
		r->shard = k;
		r->line = ln;
		if (!(r->text = strdup(line))) { rc = -1; break; }
		m->nrow++;
	}
	lines_free(&rd);
	fclose(f);
	free(path);
	return rc;
}

/* Shard k's rows from m->row[from] on that are not failed: each file of
 * their file column is the one done.k-of-N.jsonl describes (another run
 * into the directory may have written over it since).  0 or -1 (logged). */
static int merge_check_files(const merge_t *m, int k, long from)
{
	int cf = tsv_column(m->head, "file"), cs = tsv_column(m->head, "status"), last, rc = -1;
	char *path = NULL, st[16], ix[32];
	json_t *prev = NULL, *files = NULL;
	FILE *f;

	if (asprintf(&path, "%s/done.%d-of-%d.jsonl", m->dir, k, m->n) < 0) return -1;
	if (!(f = atomic_file_fopen(path, O_RDONLY, "r")) && errno != ENOENT) goto done;
	if (f) {
		int r = journal_read(f, path, &prev, &last);
		fclose(f);
		if (r < 0) goto done;
	}
	if (!(files = journal_file_index(prev))) goto done;
	for (long i = from; i < m->nrow; i++) {
		const char *t = m->row[i].text;
		if (!strcmp(tsv_field(t, cs, st, sizeof st), "failed")) continue;
		for (int c = 0; t && c < cf; c++) t = (t = strchr(t, '\t')) ? t + 1 : NULL;
		if (!t || !journal_row_files_are(files, m->dir, t)) {
			log_error("%s: record %s: its file is not the one shard %d/%d folded (another run "
			          "into the directory wrote over it?); rerun shard %d/%d", path,
			          tsv_field(m->row[i].text, 0, ix, sizeof ix), k, m->n, k, m->n);
			goto done;
		}
	}
	rc = 0;
done:
	free(path);
	json_decref(prev);
	json_decref(files);
	return rc;
}

/* by index, "-" rows last in shard and line order */
static int merge_cmp(const void *a, const void *b)
{
	const merge_row_t *x = a, *y = b;
	unsigned long ix = (unsigned long)x->index, iy = (unsigned long)y->index;   /* -1 last */

	if (ix != iy) return ix < iy ? -1 : 1;
	if (x->shard != y->shard) return x->shard < y->shard ? -1 : 1;
	return (x->line > y->line) - (x->line < y->line);
}

/* DIR/summary.tsv when every shard is complete, else
 * DIR/summary.partial.tsv; the other one removed.  0 or -1 (logged) */
static int merge_write(const merge_t *m, int complete)
{
	char *path = NULL, *other = NULL;
	atomic_file_t a;
	int rc = -1;

	if (asprintf(&path, "%s/summary%s.tsv", m->dir, complete ? "" : ".partial") < 0) return -1;
	if (asprintf(&other, "%s/summary%s.tsv", m->dir, complete ? ".partial" : "") < 0) other = NULL;
	if (other && atomic_file_open(&a, path)) {
		fprintf(a.f, "%s\n", m->head);
		for (long i = 0; i < m->nrow; i++) fprintf(a.f, "%s\n", m->row[i].text);
		rc = atomic_file_close(&a, 1);
	}
	if (rc == 0 && unlink(other) < 0 && errno != ENOENT) {
		log_error("%s: cannot remove it: %s", other, strerror(errno));
		rc = -1;
	}
	free(path);
	free(other);
	return rc;
}

/* each failed row logged, but an unfinished shard's (its one line says
 * it); how many */
static long merge_list_failed(const merge_t *m)
{
	int cs = tsv_column(m->head, "status"), cn = tsv_column(m->head, "name");
	int cr = tsv_column(m->head, "reason");
	char st[32], nm[256], why[512], ix[32];
	long nfailed = 0;

	for (long i = 0; cs >= 0 && i < m->nrow; i++) {
		if (m->fp[m->row[i].shard - 1].partial ||
		    strcmp(tsv_field(m->row[i].text, cs, st, sizeof st), "failed"))
			continue;
		nfailed++;
		log_error("record %s (%s): failed: %s", tsv_field(m->row[i].text, 0, ix, sizeof ix),
		          tsv_field(m->row[i].text, cn, nm, sizeof nm),
		          tsv_field(m->row[i].text, cr, why, sizeof why));
	}
	return nfailed;
}

/* shard k read into m: its fingerprint, its summary's rows (checked: one
 * partition, the same settings, its files, its row count), or counted
 * missing or unfinished (logged).  0, or -1 when the merge cannot go on */
static int merge_shard(merge_t *m, int k)
{
	int found, ref;
	long before = m->nrow;

	if (merge_read_fp(m, k) < 0 || merge_read_summary(m, k, "summary", &found) < 0 ||
	    (!found && merge_read_summary(m, k, "summary.partial", &m->fp[k - 1].partial) < 0))
		return -1;
	merge_fp_t *fp = &m->fp[k - 1];
	found |= fp->partial;
	if (found && !fp->have) {
		log_error("%s: summary%s.%d-of-%d.tsv has no run.%d-of-%d.jsonl naming its input and "
		          "weights: cannot check it belongs with the others", m->dir,
		          fp->partial ? ".partial" : "", k, m->n, k, m->n);
		return -1;
	}
	if (fp->have && m->ref < 0) m->ref = k - 1;
	ref = m->ref;
	if (fp->have && (strcmp(fp->input, m->fp[ref].input) || strcmp(fp->weights, m->fp[ref].weights) ||
	                 fp->records != m->fp[ref].records)) {
		log_error("%s: shard %d/%d (input %s, %ld records, weights %s) and shard %d/%d "
		          "(input %s, %ld records, weights %s) folded different inputs or weights: "
		          "not one partition", m->dir, ref + 1, m->n, m->fp[ref].input,
		          m->fp[ref].records, m->fp[ref].weights, k, m->n, fp->input, fp->records,
		          fp->weights);
		return -1;
	}
	if (fp->have && (!fp->settings != !m->fp[ref].settings ||
	                 (fp->settings && strcmp(fp->settings, m->fp[ref].settings)))) {
		log_error("%s: shard %d/%d (%s) and shard %d/%d (%s) were run with different settings: "
		          "rerun one with the other's", m->dir, ref + 1, m->n,
		          m->fp[ref].settings ? m->fp[ref].settings : "settings not recorded", k, m->n,
		          fp->settings ? fp->settings : "settings not recorded");
		return -1;
	}
	if (!found) {
		m->missing++;
		m->nmissing += fp->have ? fp->in_shard : 0;
		m->unknown += !fp->have;
		if (m->missing <= MERGE_SAY_MISSING && fp->have)
			log_error("shard %d/%d: no summary.%d-of-%d.tsv (not finished): its %ld record(s) "
			          "are missing; rerun it", k, m->n, k, m->n, fp->in_shard);
		else if (m->missing <= MERGE_SAY_MISSING)
			log_error("shard %d/%d: no summary.%d-of-%d.tsv (never run): its records are "
			          "missing; run it", k, m->n, k, m->n);
	} else if (merge_check_files(m, k, before) < 0) {
		return -1;
	} else if (fp->in_shard != m->nrow - before) {
		log_error("%s/summary%s.%d-of-%d.tsv: %ld rows, its run says %ld records: another "
		          "run's; rerun shard %d/%d", m->dir, fp->partial ? ".partial" : "", k, m->n,
		          m->nrow - before, fp->in_shard, k, m->n);
		return -1;
	} else if (fp->partial) {
		m->unfinished++;
		log_error("shard %d/%d: not finished (interrupted, or an output not written: "
		          "summary.partial.%d-of-%d.tsv, no summary.%d-of-%d.tsv): rerun it", k, m->n,
		          k, m->n, k, m->n);
	}
	return 0;
}

int merge_main(const opt_t *o)
{
	merge_t m = { .dir = o->outdir, .ref = -1 };
	int fd = -1, code = EXIT_FATAL, rc, missing, unknown, unfinished;
	long nfailed = 0, nmissing;
	char more[96] = "";

	if ((rc = dir_lock_take(m.dir, "", LOCK_EX, &fd)) < 0) {
		if (rc == DIR_LOCK_BUSY) {
			log_error("%s: an esmbatch run is writing into this directory (it holds .esmbatch.lock); "
			          "merge once every shard has ended", m.dir);
			code = EXIT_BUSY;
		}
		goto done;
	}
	if (merge_find_n(&m) < 0) goto done;
	if (!(m.fp = calloc(m.n, sizeof *m.fp))) goto done;
	for (int k = 1; k <= m.n; k++)
		if (merge_shard(&m, k) < 0) goto done;
	missing = m.missing;
	unknown = m.unknown;
	unfinished = m.unfinished;
	nmissing = m.nmissing;
	if (missing > MERGE_SAY_MISSING)
		log_error("and %d more shard(s) of %d without their summary (%d of them never run)",
		          missing - MERGE_SAY_MISSING, m.n, unknown);
	if (!m.head) {
		log_error("%s: no shard has its summary yet (summary.K-of-%d.tsv): nothing to merge", m.dir,
		          m.n);
		code = EXIT_PARTIAL;
		goto done;
	}
	qsort(m.row, m.nrow, sizeof *m.row, merge_cmp);
	for (long i = 1; i < m.nrow; i++)
		if (m.row[i].index >= 0 && m.row[i].index == m.row[i - 1].index) {
			log_error("%s: record %ld is in the summaries of shards %d and %d", m.dir,
			          m.row[i].index, m.row[i - 1].shard, m.row[i].shard);
			goto done;
		}
	nfailed = merge_list_failed(&m);
	if (merge_write(&m, !missing && !unfinished) < 0) goto done;
	if (unfinished) snprintf(more, sizeof more, "; %d shard(s) unfinished (failures not listed)",
	                         unfinished);
	if (unknown)
		log_info("%s/%s.tsv: %ld record(s) from %d of %d shards; %ld failed, %ld missing and "
		         "those of %d shard(s) never run%s", m.dir, missing || unfinished ?
		         "summary.partial" : "summary", m.nrow, m.n - missing, m.n, nfailed, nmissing,
		         unknown, more);
	else
		log_info("%s/%s.tsv: %ld record(s) from %d of %d shards; %ld failed, %ld missing%s", m.dir,
		         missing || unfinished ? "summary.partial" : "summary", m.nrow, m.n - missing,
		         m.n, nfailed, nmissing, more);
	code = missing || unfinished || nfailed ? EXIT_PARTIAL : EXIT_OK;
done:
	for (long i = 0; i < m.nrow; i++) free(m.row[i].text);
	free(m.row);
	free(m.head);
	for (int k = 0; m.fp && k < m.n; k++) free(m.fp[k].settings);
	free(m.fp);
	if (fd >= 0) close(fd);
	return code;
}
