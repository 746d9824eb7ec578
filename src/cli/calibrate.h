/* calibrate.h (prefix calib_) - `esmbatch calibrate`: the length gradient run for real, the
 * memory figures (memory.h) measured at each length, and a quota table
 * (quota.h, buckets/README) with an SVG plot of memory against length
 * beside it.
 *
 * Table header: device, precision, weights fingerprint, safety (1.15, 1.3
 * with --exclusive), then engine version, device memory, driver and
 * runtime, chunk size, recycles, date, and the per-device fixed costs in
 * their own fields: context= (resident before the weights), weights=
 * (what loading them added), worker_overhead= (what one warm-up pass at
 * each length left behind: BLAS buffers, attention scratch, thread stacks,
 * allocator arenas; no fold of those lengths adds to it).
 * Rows: max_len = the calibrated length, peak allocated, peak reserved,
 * device used, quota = ceil(reserved x safety) + worker_overhead.
 */
#ifndef ESMBATCH_CLI_CALIBRATE_H
#define ESMBATCH_CLI_CALIBRATE_H

#include <stdio.h>

#include "cli/options.h"
#include "sched/quota.h"

#define CALIB_SAFETY           1.15
#define CALIB_SAFETY_EXCLUSIVE 1.3
#define CALIB_LENGTHS          "256,512,768,1024,1344"

/* Returns a process exit code; the table of figures goes to out. */
int calib_main(const opt_t *o, FILE *out);

/* Parse "256,512,..." into up to max strictly ascending positive lengths;
 * the count, or -1 after one logged line. */
int calib_lengths(const char *s, int *len, int max);

/* Compare a table's device, weights, precision and engine version with
 * these; each difference is logged as a warning.  Returns the number of
 * differences in device or weights (the ones calibrate will not overwrite
 * without --force). */
int calib_table_check(const quota_table_t *t, const char *path, const char *device,
                      const char *weights, const char *precision);

#endif
