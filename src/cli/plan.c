/* plan.c - `esmbatch plan` (see plan.h).
 *
 * Output, one TSV row per bucket plus "failed" and "total":
 *   bucket  records  residues  longest  quota
 * records/residues/longest count the good records whose model length
 * (residues + 25 per chain break) falls in the bucket; residues and longest
 * are residues as read.  A last row, "distinct", counts the good records'
 * distinct sequences (dedup.h): what fold folds (--no-dedup: every
 * record), and what the scheduler's plan below is made of.  quota is in bytes, "-" when no table is given or
 * no row covers the bucket ("over" never has one: such jobs get halved).
 *
 * With --weights (a safetensors file, or a manifest .json: only shapes are
 * read, nothing is loaded on a device), a blank line and the scheduler's
 * plan follow for --devices (sched_plan): per device its budget and
 * expected peak; per device and bucket how many run at once; the order of
 * work.  The same plan is logged when fold starts.
 *
 * With --shards N, a blank line and the partition fold --shard K/N folds
 * (shard.h), one row per shard:
 *   shard  records  residues  cost  seconds
 * cost in the planner's unit (sched_cost); seconds: cost x the quota
 * table's seconds_per_cost (calibrate measures it), "-" without one.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <stdlib.h>

#include "sched/bucket.h"
#include "sched/dedup.h"
#include "cli/calibrate.h"
#include "backend/devices.h"
#include "io/fasta.h"
#include "io/job.h"
#include "cli/setup.h"
#include "util/log.h"
#include "cli/plan.h"
#include "sched/quota.h"
#include "sched/scheduler.h"
#include "sched/shard.h"
#include "model/tokenizer.h"
#include "model/weights.h"

typedef struct {
	int64_t records, residues, longest;
} tally_t;

typedef struct {
	int64_t records, residues, cost;
} plan_shard_t;

/* every record's cost and residues, in input order (a failed record: 0) */
typedef struct {
	int64_t *cost, *res;
	int      n, cap;
} plan_recs_t;

static int plan_recs_add(plan_recs_t *p, int64_t cost, int64_t res)
{
	if (p->n == p->cap) {
		int nc = p->cap ? 2 * p->cap : 64;
		int64_t *c = realloc(p->cost, nc * sizeof *c), *r = c ? realloc(p->res, nc * sizeof *r) : NULL;
		if (c) p->cost = c;
		if (r) p->res = r;
		if (!c || !r) return -1;
		p->cap = nc;
	}
	p->cost[p->n] = cost;
	p->res[p->n++] = res;
	return 0;
}

/* the partition into o->shards shards (shard.h) of the records; 0 or -1 */
static int plan_shards(const opt_t *o, const quota_table_t *qt, const plan_recs_t *p, FILE *out)
{
	int *of = malloc((p->n ? p->n : 1) * sizeof *of);
	plan_shard_t *t = calloc(o->shards, sizeof *t);
	const char *spc = qt ? quota_get(qt, "seconds_per_cost") : NULL;
	double rate = spc ? atof(spc) : 0;
	int rc = -1;

	if (!of || !t || shard_assign(p->cost, p->n, o->shards, of) < 0) {
		log_error("--shards: out of memory");
		goto done;
	}
	for (int i = 0; i < p->n; i++) {
		t[of[i]].records++;
		t[of[i]].residues += p->res[i];
		t[of[i]].cost += p->cost[i];
	}
	fprintf(out, "\nshard\trecords\tresidues\tcost\tseconds\n");
	for (int k = 0; k < o->shards; k++) {
		fprintf(out, "%d/%d\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t", k + 1, o->shards,
		        t[k].records, t[k].residues, t[k].cost);
		if (rate > 0) fprintf(out, "%.0f\n", rate * t[k].cost);
		else fputs("-\n", out);
	}
	rc = 0;
done:
	free(of);
	free(t);
	return rc;
}

/* the scheduler's plan of seq[0..n) (record indexes idx) on --devices;
 * 0 or -1 after logging */
static int plan_devices(const opt_t *o, const quota_table_t *qt, char **seq, const int *idx, int n,
                        FILE *out)
{
	size_t len = strlen(o->weights);
	int64_t cpu_total = dev_cpu_memory(o->cpu_memory);
	weights_t *w = len > 5 && !strcmp(o->weights + len - 5, ".json") ? weights_open_manifest(o->weights)
	                                                              : weights_open_shapes(o->weights);
	sched_dev_t *dev = NULL;
	sched_t *s = NULL;
	int ndev = 0, rc = -1;

	if (!w || setup_devs_open(o, w, qt, 0, cpu_total, &dev, &ndev) < 0) goto done;
	sched_opt_t so = { .chunk = o->chunk_size, .no_split = o->no_split,
	                   .passes = o->num_recycles >= 0 ? o->num_recycles + 1 : 0,
	                   .safety = qt ? qt->safety : CALIB_SAFETY, .qt = qt };
	if (!(s = sched_init(dev, ndev, &so))) goto done;
	for (int i = 0; i < n; i++)
		if (sched_add(s, idx[i], seq[i]) < 0) goto done;
	sched_auto_workers(s);
	fputc('\n', out);
	rc = sched_plan(s, out, 1);
done:
	sched_free(s);
	weights_close(w);   /* before the backends its buffers live on */
	setup_devs_close(dev, ndev);
	return rc;
}

/* 1 when good record j brings a sequence no record before it had (dd
 * NULL, --no-dedup: every record), counted in u; 0 when it does not; -1
 * out of memory (logged) */
static int plan_distinct(dedup_t *dd, const job_t *j, tally_t *u)
{
	int first = dd ? dedup_add(dd, j->seq, (int)j->index) : (int)j->index;

	if (first < 0) log_error("out of memory");
	if (first != (int)j->index) return first < 0 ? -1 : 0;
	u->records++;
	u->residues += j->len;
	if (j->len > u->longest) u->longest = j->len;
	return 1;
}

int plan_cmd_main(const opt_t *o, FILE *out)
{
	char **seq = NULL;
	int *idx = NULL, nseq = 0, capseq = 0;
	quota_table_t *qt = NULL;
	fasta_t *r;
	bucket_set_t bs;
	tally_t t[BUCKET_MAX + 1], tot = { 0, 0, 0 }, uniq = { 0, 0, 0 };
	dedup_t *dd = NULL;
	int64_t nfailed = 0;
	plan_recs_t recs = { 0 };
	job_t j;
	int rc = 0, code = EXIT_OK;
	char lab[32];

	bucket_set_default(&bs);
	memset(t, 0, sizeof t);
	if (o->quota_table && !(qt = quota_read(o->quota_table)))
		return EXIT_FATAL;
	if (qt)
		log_info("quota table %s: device %s, precision %s, weights %s, safety %g",
		         o->quota_table, qt->device, qt->precision, qt->weights,
		         qt->safety);
	if (!(r = fasta_open(o->input, o->names, NULL))) {
		quota_free(qt);
		return EXIT_FATAL;
	}
	job_init(&j);
	if (!o->no_dedup && !(dd = dedup_init())) {
		log_error("out of memory");
		code = EXIT_FATAL;
	}
	while (code == EXIT_OK && (rc = fasta_next(r, &j)) > 0) {
		if (o->shards && plan_recs_add(&recs, j.status == JOB_OK ? sched_cost((int)strlen(j.seq)) : 0,
		                               j.status == JOB_OK ? j.len : 0) < 0) {
			log_error("out of memory");
			code = EXIT_FATAL;
			break;
		}
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
		int first = plan_distinct(dd, &j, &uniq);
		if (first < 0) {
			code = EXIT_FATAL;
			break;
		}
		if (o->weights && first && nseq == capseq) {   /* kept for the per-device plan */
			int nc = capseq ? 2 * capseq : 64;
			char **ns = realloc(seq, nc * sizeof *ns);
			int *ni = ns ? realloc(idx, nc * sizeof *ni) : NULL;
			if (ns) seq = ns;
			if (ni) idx = ni;
			if (!ns || !ni) {
				log_error("out of memory");
				code = EXIT_FATAL;
				break;
			}
			capseq = nc;
		}
		if (o->weights && first) {
			idx[nseq] = (int)j.index;
			seq[nseq++] = j.seq;
			j.seq = NULL;
		}
		tally_t *b = &t[bucket_of(NULL, tok_model_len(j.len, j.nchains))];
		b->records++;
		b->residues += j.len;
		if (j.len > b->longest)
			b->longest = j.len;
	}
	if (rc < 0)
		code = EXIT_FATAL;
	job_free(&j);
	fasta_close(r);
	if (code != EXIT_OK) goto done;

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
	fprintf(out, "distinct\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t-\n", uniq.records,
	        uniq.residues, uniq.longest);
	if (o->weights && plan_devices(o, qt, seq, idx, nseq, out) < 0) {
		code = EXIT_FATAL;
		goto done;
	}
	if (o->shards && plan_shards(o, qt, &recs, out) < 0) {
		code = EXIT_FATAL;
		goto done;
	}
	if (fflush(out) != 0 || ferror(out)) {
		log_error("cannot write the plan to stdout");
		code = EXIT_FATAL;
		goto done;
	}
	if (tot.records + nfailed == 0)
		log_warn("%s: no records", o->input);
	code = nfailed ? EXIT_PARTIAL : EXIT_OK;
done:
	for (int i = 0; i < nseq; i++) free(seq[i]);
	free(seq);
	free(idx);
	free(recs.cost);
	free(recs.res);
	dedup_free(dd);
	quota_free(qt);
	return code;
}
