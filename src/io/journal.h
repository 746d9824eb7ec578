/* journal.h (prefix journal_) - reading done.jsonl, the resume journal of
 * an output directory: one JSON object per line, one line per record
 * whose files are in place (its output name, sequence hash, weights
 * fingerprint, options, summary row, and "files": each of its files in -o
 * by name with [size, mtime seconds, mtime nanoseconds]; written by
 * cli/fold_dir.c).  A line is trusted for a file only while the file is
 * the one it describes (journal_file_is), and its row only when it is one
 * summary line naming files in -o itself (journal_row_ok).
 */
#ifndef ESMBATCH_IO_JOURNAL_H
#define ESMBATCH_IO_JOURNAL_H

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

/* [size, mtime seconds, mtime nanoseconds] of DIR/NAME (name: n bytes)
 * when it is a regular file (a symlink is not followed: NULL); NULL when
 * absent, not a regular file, or out of memory.  New reference. */
json_t *journal_stat(const char *dir, const char *name, size_t n);

/* 1 when files (a line's "files", or a journal_file_index) describes
 * NAME (n bytes) and DIR/NAME is still that file (journal_stat equal),
 * else 0 (a line without "files", from before 0.2.0, describes none). */
int journal_file_is(const json_t *files, const char *dir, const char *name, size_t n);

/* Every file the entries of a journal (journal_read's *prev) describe,
 * by name: a new object (NULL when out of memory). */
json_t *journal_file_index(const json_t *prev);

/* 1 when every file of a row's file column (journal_files) is one that
 * files describes, unchanged in DIR (journal_file_is), else 0. */
int journal_row_files_are(const json_t *files, const char *dir, const char *row);

/* 1 when a row read from a journal may be copied into summary.tsv: one
 * line (no control character but TAB) of at most tabs TABs whose file
 * column names files in -o itself (no '/', not "." or ".."); else 0. */
int journal_row_ok(const char *row, int tabs);

#endif
