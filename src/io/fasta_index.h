/* fasta_index.h (prefix fidx_) - a FASTA's .fai index, checked against the
 * FASTA before htslib's faidx is trusted with it.
 *
 * Each line of FILE.fai is NAME, LENGTH, OFFSET, LINEBASES, LINEWIDTH (a
 * sixth column, a FASTQ index, is refused).  Every entry is checked: the
 * numbers are non-negative integers, a record with residues has
 * LINEBASES >= 1 and LINEWIDTH > LINEBASES (a line's end, maybe blanks),
 * names are not repeated, and records do not overlap.  For a plain
 * (uncompressed) FASTA also: every record ends within the file, only blank
 * lines follow the last one (a shorter index is stale: records were added
 * or the index was cut), and the bytes before each record asked for are
 * blank lines and one header line naming it.  When a name asked for is
 * not in the index, every record's header is checked that way, so that
 * "not found" is never the word of an index that misses records.
 *
 * An index that fails a check is stale: fidx_open says so in one warning
 * line, and the caller reads the whole file instead.
 */
#ifndef ESMBATCH_IO_FASTA_INDEX_H
#define ESMBATCH_IO_FASTA_INDEX_H

#include <signal.h>
#include <stdint.h>

typedef struct fidx fidx_t;

/* Read and check fai, the index of the FASTA fa, for the names want[0..n).
 * compressed: fa is BGZF (its offsets are not file offsets: the checks
 * against the file's bytes are skipped).  stop (NULL or a flag) ends a
 * long check.  0 with *out usable, 1 when the index is not to be used
 * (warned, *out NULL), -1 on a fatal error (out of memory, interrupted;
 * logged). */
int  fidx_open(fidx_t **out, const char *fa, const char *fai, int compressed,
               char *const *want, int n, volatile sig_atomic_t *stop);
/* Record name: 1 with its 1-based record number (file order) and length,
 * 0 when absent. */
int  fidx_find(const fidx_t *x, const char *name, int64_t *recno, int64_t *len);
int  fidx_count(const fidx_t *x);
void fidx_close(fidx_t *x);

#endif
