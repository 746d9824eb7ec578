/* lines.h (prefix lines_) - bounded line reading: how esmbatch reads every
 * text file line by line (names files, quota tables, .fai indexes,
 * done.jsonl, run.jsonl, summary.tsv, caches, /proc).
 *
 * A line holds at most LINES_MAX bytes (its '\n' not counted); a longer
 * one, a read error or out of memory is an error logged as one line naming
 * the file and the line number, never taken for the end of the file.  A
 * read interrupted by a signal (EINTR) is retried unless the stop flag is
 * set, which makes it an error ("interrupted").  Memory: one line.
 */
#ifndef ESMBATCH_UTIL_LINES_H
#define ESMBATCH_UTIL_LINES_H

#include <signal.h>
#include <stddef.h>
#include <stdio.h>

#define LINES_MAX (1 << 20)   /* bytes in a line, as the FASTA reader's */

typedef struct {
	FILE       *f;
	const char *name;     /* the file, for messages */
	volatile sig_atomic_t *stop;   /* NULL, or nonzero: stop reading */
	char       *s;        /* the line, NUL-terminated, '\n' removed
	                         ('\r' kept); it may hold NUL bytes */
	size_t      n;        /* its length in bytes */
	size_t      cap;
	long        lineno;   /* 1-based number of the line in s */
	int         nl;       /* 1 when it ended with '\n' (0: a last line
	                         without one) */
} lines_t;

/* Read f (not owned) named name (kept, not copied); stop may be NULL. */
void lines_init(lines_t *l, FILE *f, const char *name, volatile sig_atomic_t *stop);
/* The next line into l->s: 1, 0 at the end of the file, -1 on an error
 * (logged). */
int  lines_next(lines_t *l);
void lines_free(lines_t *l);

#endif
