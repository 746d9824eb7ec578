/* report_table.h (prefix report_table_) - the record tables of the run
 * report (report.h), plain HTML without a script:
 *   on report.html  the failed and split records and the flagged ones,
 *                   each its first REPORT_TABLE_LIST rows and a link to
 *                   the rest, and an index of the record pages;
 *   DIR/report/     (a shard's: report.K-of-N/) the pages of every record
 *                   (records-001.html ...), in input order, and the whole
 *                   failed-and-split and flagged lists (problems-NNN.html,
 *                   flagged-NNN.html), REPORT_TABLE_ROWS rows a page, with
 *                   previous and next links.
 * A row: index, name, length, mean pLDDT in its AlphaFold DB band, pTM,
 * outcome (and reason), flags and links to the record's structure files
 * (../NAME.pdb ...).  Input order keeps a record's page while a run
 * refreshes the report (the rows settle in any order) and matches
 * summary.tsv; the failed, split and flagged lists are sorted by mean
 * pLDDT, lowest first (the records to look at first; a failed one, which
 * has none, before all).
 */
#ifndef ESMBATCH_CLI_REPORT_TABLE_H
#define ESMBATCH_CLI_REPORT_TABLE_H

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#define REPORT_TABLE_ROWS 200   /* rows of a page under DIR/report/ */
#define REPORT_TABLE_LIST 50    /* rows of a list on report.html */

/* a summary row (strings point into the summary's text) */
typedef struct {
	const char *name, *status, *reason, *bucket, *flags, *file;
	long        index;              /* in the input; -1: "-" */
	long        length;             /* -1: "-" (or out of range) */
	double      plddt, ptm, secs;   /* NAN: "-" */
	int64_t     band[4];            /* -1: "-" (an older row) */
} report_rec_t;

/* the pages' stylesheet and a row's pLDDT colours */
extern const char report_table_css[];
extern const char *const report_table_band_colour[4];

/* 1 when x has flags */
int report_table_flagged(const report_rec_t *x);

/* report.html's lists and its index of the record pages (links into
 * report SFX/); files: every file the journal describes, by name
 * (journal_file_index), or NULL */
void report_table_lists(FILE *f, const char *sfx, const report_rec_t *rec, int n,
                        const json_t *files);

/* Write DIR/report SFX/ (created when absent; refused when it is not a
 * directory of its own, e.g. a symlink), every page atomically, and
 * remove the pages of an earlier report beyond the last.  0, or -1 after
 * one logged line. */
int report_table_pages(const char *dir, const char *sfx, const report_rec_t *rec, int n,
                       const json_t *files);

/* Remove the temporaries of pages (NAME.html.tmp.PID) a killed run left
 * in DIR/report SFX/: only with the directory's lock held. */
void report_table_clean(const char *dir, const char *sfx);

#endif
