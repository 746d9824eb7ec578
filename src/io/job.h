/* job.h (prefix job_) - the job record (one per input record) and output-name assignment.
 *
 * Every input record becomes exactly one job_t, good or bad.  A bad record
 * is a job with status JOB_FAILED and a one-line reason; it is never dropped.
 *
 * Ownership: a job_t owns every string it points to.  job_init() sets an
 * empty job, job_free() releases its strings and re-initialises it (so a
 * job_t can be reused).  To keep a job beyond the next fasta_next(), copy
 * the struct and job_init() the source: the copy now owns the strings.
 */
#ifndef ESMBATCH_IO_JOB_H
#define ESMBATCH_IO_JOB_H

#include <stddef.h>
#include <stdint.h>

#define JOB_NAME_MAX   100  /* longest output name, in bytes */

typedef enum { JOB_OK = 0, JOB_FAILED = 1 } job_status_t;

typedef struct {
	int64_t index;       /* 0-based position among this run's jobs */
	int64_t recno;       /* 1-based record number in the input; 0: none
	                        (a name asked for with --names and not found) */
	char   *header;      /* header line without '>', trailing blanks cut,
	                        control bytes shown as ' '; "" if none */
	char   *name;        /* first whitespace token of the header; "" if none */
	char   *outname;     /* file-safe, unique in the run: [A-Za-z0-9._-],
	                        no leading '.' or '-', at most JOB_NAME_MAX */
	char   *seq;         /* upper-cased, ':' between chains; NULL if failed */
	int64_t len;         /* residues, ':' not counted; 0 if failed */
	int     nchains;     /* number of ':'-separated chains; 0 if failed */
	job_status_t status;
	char   *reason;      /* why it failed; NULL when JOB_OK */
} job_t;

void job_init(job_t *j);
void job_free(job_t *j);
/* Mark j failed: formats the reason, drops the sequence.  0 or -1 (ENOMEM). */
int  job_fail(job_t *j, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
const char *job_status_name(job_status_t s);   /* "ok", "failed" */

/* Write the file-safe form of name into out (cap >= 1): every byte not in
 * [A-Za-z0-9._-] becomes '_', leading '.' and '-' are removed, the result
 * is cut to min(cap - 1, JOB_NAME_MAX) bytes.  Returns its length (0 when
 * nothing is left: the caller picks a fallback). */
size_t job_safe_name(const char *name, char *out, size_t cap);

/* --- unique output names within one run -------------------------------- */
typedef struct job_names job_names_t;

job_names_t *job_names_init(void);
void         job_names_free(job_names_t *n);
/* 1 when name has the form of a split record's fragment (compared
 * case-blind): NAME.partIofN (the fragments' files) or NAME.fragA-B (their
 * temporary names while the record's other fragments fold), I, N, A, B
 * decimal digits.  No record gets such an output name. */
int job_name_reserved(const char *name);

/* Assign a unique output name for a record: the safe name, or
 * "record_RECNO" when that is empty; when taken (compared case-blind, so
 * outputs also stay apart on case-insensitive file systems) or reserved
 * (job_name_reserved) "_2", "_3", ... is appended, cutting the base so
 * the bound holds.  *out is malloc'ed and
 * owned by the caller.  Returns 0, 1 if the name was changed to be unique
 * (logged as a warning), -1 on ENOMEM. */
int job_names_assign(job_names_t *n, const char *name, int64_t recno,
                     char **out);

#endif
