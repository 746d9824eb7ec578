/* tsv.h (prefix tsv_) - columns of a tab-separated line found by their
 * header's names (summary.tsv: merge and report read it). */
#ifndef ESMBATCH_TSV_H
#define ESMBATCH_TSV_H

#include <stddef.h>

/* the 0-based column of header (one line, ending at '\n' or NUL) named
 * name, or -1 */
int tsv_column(const char *header, const char *name);

/* column c (0-based; negative: none) of line (ending at '\n' or NUL),
 * copied into buf (truncated to cap - 1 bytes); returns buf, or the
 * static "-" when the line has no column c */
const char *tsv_field(const char *line, int c, char *buf, size_t cap);

#endif
