/* fasta.h (prefix fasta_) - streaming FASTA intake: one record at a time becomes one job.
 *
 * Input: plain, gzip or BGZF file, or "-" for stdin (read through htslib's
 * BGZF layer, which detects the compression).  With a names file, only the
 * records named in it are returned: through FILE.fai random access (htslib
 * faidx) in names-file order when the index exists and passes the checks
 * of fasta_index.h, else by filtering the stream (a stale index: one
 * warning line); a name not found becomes a failed job at the end.  Names
 * files are read by util/lines.h (bounded lines).
 *
 * Validation (a bad record is a failed job, never a silent drop):
 * letters A-Z / a-z are accepted (the 20 amino acids, X, and B Z U O J,
 * which the model maps to X) and upper-cased; one terminal '*' is removed;
 * ':' separates chains (not first, not last, never "::").  Anything else
 * (digits, '-', '.', an inner '*', blanks inside a line, control bytes),
 * an empty sequence, a header with no name, or sequence before the first
 * header fails the record with a reason naming the record, the offending
 * character and its 1-based position.  CRLF line ends, blank lines,
 * trailing blanks on a line and a missing final newline are fine.
 *
 * Memory: only the current record is held.
 * Ownership: the fasta_t owns its handle and buffers; fasta_next() fills a
 * caller-owned job_t (see job.h), freeing what it held before.
 */
#ifndef ESMBATCH_IO_FASTA_H
#define ESMBATCH_IO_FASTA_H

#include <signal.h>
#include <stdint.h>

#include "io/job.h"

#define FASTA_MAX_LEN  (1 << 20)   /* residues; a longer record fails */
#define FASTA_MAX_HEADER 65536     /* a longer header is cut */

typedef struct fasta fasta_t;

/* Open path ("-" = stdin); names_file may be NULL.  stop (may be NULL): a
 * flag a signal handler sets; once set, opening and reading end within a
 * fraction of a second with an error ("interrupted"), also on a pipe,
 * FIFO or device that sends nothing or never ends.  NULL after logging
 * one line naming the file when it is missing or unreadable. */
fasta_t *fasta_open(const char *path, const char *names_file, volatile sig_atomic_t *stop);
/* Next job into *out: 1 a job (ok or failed), 0 end of input, -1 a fatal
 * error (read error, corrupt or truncated compressed data, stopped) after
 * logging one line naming the file. */
int      fasta_next(fasta_t *r, job_t *out);
void     fasta_close(fasta_t *r);

const char *fasta_path(const fasta_t *r);
int         fasta_uses_index(const fasta_t *r);   /* 1 if faidx is used */

/* Validate and normalise one sequence in place (upper-case, strip the
 * terminal '*').  Returns 0, or -1 with a reason in why (no record name). */
int fasta_check_seq(char *seq, int64_t *len, int *nchains,
                    char *why, size_t why_cap);

#endif
