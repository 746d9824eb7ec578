/* plan_cmd.c - `esmbatch plan` (see plan_cmd.h).
 *
 * Output, one TSV row per bucket plus "failed" and "total":
 *   bucket  records  residues  longest  quota
 * records/residues/longest count the good records whose model length
 * (residues + 25 per chain break) falls in the bucket; residues and longest
 * are residues as read.  quota is in bytes, "-" when no table is given or
 * no row covers the bucket ("over" never has one: such jobs get halved).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "bucket.h"
#include "fasta.h"
#include "job.h"
#include "log.h"
#include "plan_cmd.h"
#include "quota.h"

typedef struct {
	int64_t records, residues, longest;
} tally_t;

int plan_cmd_main(const opt_t *o, FILE *out)
{
	quota_table_t *qt = NULL;
	fasta_t *r;
	bucket_set_t bs;
	tally_t t[BUCKET_MAX + 1], tot = { 0, 0, 0 };
	int64_t nfailed = 0;
	job_t j;
	int rc, code = EXIT_OK;
	char lab[32];

	bucket_set_default(&bs);
	memset(t, 0, sizeof t);
	if (o->quota_table && !(qt = quota_read(o->quota_table)))
		return EXIT_FATAL;
	if (qt)
		log_info("quota table %s: device %s, precision %s, weights %s, safety %g",
		         o->quota_table, qt->device, qt->precision, qt->weights,
		         qt->safety);
	if (!(r = fasta_open(o->input, o->names))) {
		quota_free(qt);
		return EXIT_FATAL;
	}
	job_init(&j);
	while ((rc = fasta_next(r, &j)) > 0) {
		if (j.status != JOB_OK) {
			nfailed++;
			if (o->strict) {
				log_error("%s: %s (--strict)", fasta_path(r), j.reason);
				code = EXIT_FATAL;
				break;
			}
			log_warn("%s: %s", fasta_path(r), j.reason);
			continue;
		}
		tally_t *b = &t[j.bucket];
		b->records++;
		b->residues += j.len;
		if (j.len > b->longest)
			b->longest = j.len;
	}
	if (rc < 0)
		code = EXIT_FATAL;
	job_free(&j);
	fasta_close(r);
	if (code != EXIT_OK) {
		quota_free(qt);
		return code;
	}

	fprintf(out, "bucket\trecords\tresidues\tlongest\tquota\n");
	for (int b = 0; b <= bs.n; b++) {
		int64_t q = qt ? quota_for_bucket(qt, &bs, b) : -1;
		fprintf(out, "%s\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t",
		        bucket_label(&bs, b, lab, sizeof lab),
		        t[b].records, t[b].residues, t[b].longest);
		if (q >= 0)
			fprintf(out, "%" PRId64 "\n", q);
		else
			fputs("-\n", out);
		tot.records += t[b].records;
		tot.residues += t[b].residues;
		if (t[b].longest > tot.longest)
			tot.longest = t[b].longest;
	}
	fprintf(out, "failed\t%" PRId64 "\t-\t-\t-\n", nfailed);
	fprintf(out, "total\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t-\n",
	        tot.records + nfailed, tot.residues, tot.longest);
	quota_free(qt);
	if (fflush(out) != 0 || ferror(out)) {
		log_error("cannot write the plan to stdout");
		return EXIT_FATAL;
	}
	if (tot.records + nfailed == 0)
		log_warn("%s: no records", o->input);
	return nfailed ? EXIT_PARTIAL : EXIT_OK;
}
