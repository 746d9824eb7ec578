/* report_run.h (prefix report_run_) - what the run report (report.h) is
 * built from: an output directory's summary, run and done journals read
 * into a report_t (every figure range-checked: a person may have edited
 * them), and the run's settings, wall time and throughput in words.
 * A merged directory (`esmbatch merge`: summary.tsv, no run.jsonl) is
 * read with its shards' run.K-of-N.jsonl and done.K-of-N.jsonl: the
 * settings of the first, the time and skips of all. */
#ifndef ESMBATCH_CLI_REPORT_RUN_H
#define ESMBATCH_CLI_REPORT_RUN_H

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "cli/report_table.h"

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
	json_t        *files;    /* every file done.jsonl describes, by name, or NULL */
	long           skipped, pending;
	int            shards;   /* run.K-of-N.jsonl files read (a merged directory) */
	double         wall, wall_sum;   /* seconds folding: the longest run's, every run's sum */
	int64_t        res_folded;       /* residues of the folds that ended well (all runs) */
} report_t;

/* rp (zeroed but for pending) from DIR/summary SFX .tsv, or summary's
 * text (header line first) when not NULL, and DIR/run SFX .jsonl and
 * DIR/done SFX .jsonl when present (of a merged directory, its shards').
 * 0, or -1 after one logged line; report_run_free either way. */
int  report_run_read(report_t *rp, const char *dir, const char *sfx, const char *summary);
void report_run_free(report_t *rp);

/* the Settings section: the run's options in words (--num-recycles -1 as
 * the model default's number), its devices, what done.jsonl's records
 * were folded with */
void report_run_settings(FILE *f, const report_t *rp);
/* a line: the run's wall time, records/h and residues/s (records: those
 * it folded) */
void report_run_throughput(FILE *f, const report_t *rp, long records);

#endif
