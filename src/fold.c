/* fold.c - TEMPORARY placeholder for the fold subcommand, written with the
 * CLI foundation so bad inputs already give their errors.  It reads and
 * checks the input, then reports that folding is not implemented (exit 2).
 * The model work replaces this file. */
#include "fasta.h"
#include "fold.h"
#include "job.h"
#include "log.h"

int fold_main(const opt_t *o)
{
	fasta_t *r = fasta_open(o->input, o->names);
	job_t j;
	long nok = 0, nbad = 0;
	int rc;

	if (!r)
		return EXIT_FATAL;
	job_init(&j);
	while ((rc = fasta_next(r, &j)) > 0) {
		if (j.status == JOB_OK) {
			nok++;
			continue;
		}
		nbad++;
		if (o->strict) {
			log_error("%s: %s (--strict)", fasta_path(r), j.reason);
			rc = -1;
			break;
		}
		log_warn("%s: %s", fasta_path(r), j.reason);
	}
	job_free(&j);
	fasta_close(r);
	if (rc < 0)
		return EXIT_FATAL;
	log_info("%s: %ld good records, %ld failed", o->input, nok, nbad);
	log_error("folding is not implemented yet");
	return EXIT_USAGE;
}
