/* atomic_file.h (prefix atomic_file_) - files written atomically: the text goes to
 * PATH.tmp.PID (PID: this process's, so two processes writing PATH never
 * share a temporary), which is flushed to disk and renamed to PATH only
 * when everything was written, so PATH is either absent (or its old
 * version) or complete.
 *
 * Ownership: atomic_file_open fills a caller-owned atomic_file_t; atomic_file_close releases it
 * whatever happens.
 */
#ifndef ESMBATCH_AF_H
#define ESMBATCH_AF_H

#include <stdio.h>

typedef struct {
	FILE *f;      /* write here */
	char *path;   /* the final name */
	char *tmp;    /* PATH.tmp.PID */
} atomic_file_t;

/* Create PATH.tmp.PID for writing; returns a->f, or NULL after one logged line. */
FILE *atomic_file_open(atomic_file_t *a, const char *path);
/* ok != 0: flush, sync and close PATH.tmp.PID and rename it to PATH; ok == 0
 * (the caller gave up) or any failure: remove PATH.tmp.PID.  0 when PATH was
 * written, negative otherwise (a failure is logged). */
int   atomic_file_close(atomic_file_t *a, int ok);

#endif
