/* journal.h (prefix journal_) - reading done.jsonl, the resume journal of
 * an output directory: one JSON object per line, one line per record
 * whose files are in place (its output name, sequence hash, weights
 * fingerprint, options and summary row; written by cli/fold_dir.c).
 */
#ifndef ESMBATCH_JOURNAL_H
#define ESMBATCH_JOURNAL_H

#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

/* Read a journal from f (named path in messages) into *prev (new, owned
 * by the caller: json_decref): an object mapping each line's "name" to
 * that line's object, a later line for a name winning.  Lines that are not
 * a JSON object with a string "name" (a torn last line of a killed run)
 * are skipped.  *last: the last byte read ('\n' when nothing was).  0, or
 * -1 (*prev NULL) after one logged line: out of memory, a read error or a
 * line longer than LINES_MAX (util/lines.h). */
int journal_read(FILE *f, const char *path, json_t **prev, int *last);

/* The string at key of entry e; "" when absent or not a string. */
const char *journal_str(const json_t *e, const char *key);

/* The files of a summary row: its first field, comma-separated.  Calls
 * fn(ctx, file, n) for each (file not NUL-terminated: n bytes) while fn
 * returns nonzero.  1 when every file passed, 0 when one failed or the row
 * has no tab. */
int journal_files(const char *row, int (*fn)(void *ctx, const char *file, size_t n), void *ctx);

#endif
