/* fuzz_fasta.c - libFuzzer: the FASTA reader (io/fasta.c) on any bytes,
 * plain, gzip or BGZF (htslib detects which): every record becomes a job
 * or a failed job, never a crash, a leak or an overread. */
#include <stdint.h>
#include <string.h>

#include "fuzz_file.h"
#include "io/fasta.h"
#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	const char *path;
	fasta_t *r;
	job_t j;

	log_set_level(-1);   /* quiet: bad records are the point */
	if (!(path = fuzz_file(data, n, ".fa")) || !(r = fasta_open(path, NULL, NULL))) return 0;
	job_init(&j);
	while (fasta_next(r, &j) > 0) {
		if (j.status == JOB_OK && j.seq && strlen(j.seq) < (size_t)j.len) __builtin_trap();
		job_free(&j);
		job_init(&j);
	}
	job_free(&j);
	fasta_close(r);
	return 0;
}
