/* report.h (prefix report_) - DIR/report.html, the run report: a
 * page of inline CSS and SVG (no script, no external font or file; its
 * links relative: to its record pages and the records' files) built from
 * an output directory's journals:
 *   summary.tsv  one row per record (status, pLDDT, time, bands, flags)
 *   run.jsonl    the run's settings ("run" event, report_run_event), its
 *                devices, every fold (device, worker, times, memory) and
 *                every record skipped as done before
 *   done.jsonl   the weights and options of every finished record
 * It shows records folded / split / failed / skipped, the run's wall time
 * and throughput; a histogram of mean pLDDT in the AlphaFold DB bands;
 * pLDDT and time against length (with the planner's model of time, t ~
 * L^2, scaled to the run; past 2,000 records a density); predicted and
 * measured memory per bucket; each device's workers over time; the
 * failed, split and flagged records (the first 50 of each, linked to the
 * rest) and the pages of every record (report_table.h); the settings in
 * words (report_run.h).  Its size does not grow with the records but for
 * a link per page of 200.
 *
 * `esmbatch fold` writes it at the end of a run and every report_every()
 * seconds during one (from the output step, with the rows settled so
 * far); `esmbatch report -o DIR` rebuilds it from the files.
 */
#ifndef ESMBATCH_CLI_REPORT_H
#define ESMBATCH_CLI_REPORT_H

#include <stdio.h>

#include "cli/options.h"
#include "model/weights.h"

#define REPORT_EVERY 180.0   /* seconds between refreshes during a run */

/* Seconds between refreshes: $ESMBATCH_REPORT_EVERY when it is a number
 * in [0, 1e6] (0: after every record), else REPORT_EVERY (with a warning
 * when it is set to anything else). */
double report_every(void);

/* One "run" line on run.jsonl: version, start time, host and the options
 * that shape the run (o), with the weights' fingerprint and the number of
 * recycles the model runs by default (what --num-recycles -1 means).
 * 0 or -1. */
int report_run_event(FILE *jsonl, const opt_t *o, const weights_t *wt);

/* Write DIR/report.html atomically (a shard's: sfx ".K-of-N" names
 * report.K-of-N.html, read from summary, run and done.K-of-N; else "").
 * summary: the summary's text (header line first), or NULL to read
 * DIR/summary.tsv (or, where there is none, the summary.partial.tsv of a
 * run that did not finish); pending: records of a run still under way (0 once it
 * ended).  0, or -1 after one logged line. */
int report_write(const char *dir, const char *sfx, const char *summary, long pending);

/* esmbatch report -o DIR: rebuild DIR/report.html; a process exit code. */
int report_main(const opt_t *o);

#endif
