/* tsv.h (prefix tsv_) - the cells of esmbatch's tab-separated tables
 * (summary.tsv: fold writes it, merge and report read it): one escaping
 * rule for every cell written, its decoding, and columns found by their
 * header's names.
 *
 * The rule (docs/output.md): a backslash is written "\\", a TAB "\t", a
 * newline "\n", a carriage return "\r"; any other control byte (0x00-0x1f,
 * 0x7f) and any byte that is not part of valid UTF-8 is "\xHH" (two
 * lower-case hex digits); and a cell that begins with '"', '=', '+', '@'
 * or '-' (but is not "-" or a decimal number) has that first byte as
 * "\xHH", so that CSV readers take no quotes and spreadsheets no formula
 * from it.  Everything else is written as it is, so a cell is one line of
 * valid UTF-8 without TABs.
 */
#ifndef ESMBATCH_UTIL_TSV_H
#define ESMBATCH_UTIL_TSV_H

#include <stddef.h>
#include <stdio.h>

/* write cell (a C string) to f by the rule; 0 or -1 (a write error) */
int tsv_put(FILE *f, const char *cell);

/* Decode cell in place (the result is never longer); a backslash before
 * anything but \\, t, n, r and xHH is kept as it is, and so is "\x00".
 * text: for showing as UTF-8 text: an escaped byte that is a control
 * byte (but TAB and newline) or not ASCII becomes U+FFFD.  Returns cell. */
#define TSV_TEXT 1
char *tsv_decode(char *cell, int text);

/* the 0-based column of header (one line, ending at '\n' or NUL) named
 * name, or -1 */
int tsv_column(const char *header, const char *name);

/* column c (0-based; negative: none) of line (ending at '\n' or NUL),
 * as written (not decoded), copied into buf (truncated to cap - 1 bytes); returns buf, or the
 * static "-" when the line has no column c */
const char *tsv_field(const char *line, int c, char *buf, size_t cap);

#endif
