/* plan.c - `esmbatch plan` (see plan.h).
 *
 * Output, one TSV row per bucket plus "failed", "total" and "distinct":
 *   bucket  records  residues  longest  quota
 * records/residues/longest count the good records whose model length
 * (residues + 25 per chain break) falls in the bucket; residues and longest
 * are residues as read.  The last row, "distinct", counts the good
 * records' distinct sequences (dedup.h): what fold folds (--no-dedup:
 * every record), and what the scheduler's plan below is made of.  quota
 * is in bytes, "-" when no table is given or
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
#include "cli/plan.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/grow.h"
#include "util/log.h"
#include "io/fasta.h"
#include "io/job.h"
#include "backend/devices.h"
#include "model/tokenizer.h"
#include "model/weights.h"
#include "sched/bucket.h"
#include "sched/dedup.h"
#include "sched/quota.h"
#include "sched/scheduler.h"
#include "sched/shard.h"
#include "cli/calibrate.h"
#include "cli/setup.h"

typedef struct {
	int64_t records, residues, longest;
} tally_t;

typedef struct {
	int64_t records, residues, cost;
} plan_shard_t;

/* every record's cost and residues, in input order (a failed record: 0) */
typedef struct {
	int64_t *cost, *res;
	int      n;
	size_t   cap_cost, cap_res;
} plan_recs_t;

static int plan_recs_add(plan_recs_t *p, int64_t cost, int64_t res)
{
	if (grow_array(&p->cost, &p->cap_cost, (size_t)p->n + 1, sizeof *p->cost) < 0 ||
	    grow_array(&p->res, &p->cap_res, (size_t)p->n + 1, sizeof *p->res) < 0)
		return -1;
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

/* what the input holds: the per-bucket tally of its good records, and what
 * the per-device plan (--weights) and the partition (--shards) need */
typedef struct {
	tally_t     t[BUCKET_MAX + 1];
	tally_t     uniq;      /* the good records' distinct sequences */
	int64_t     nfailed;
	char      **seq;       /* [nseq] the good records' sequences (--weights) */
	int        *idx;       /* [nseq] their record indexes */
	int         nseq;
	size_t      cap_seq, cap_idx;
	plan_recs_t recs;      /* --shards */
} plan_input_t;

static void plan_input_free(plan_input_t *in)
{
	for (int i = 0; i < in->nseq; i++) free(in->seq[i]);
	free(in->seq);
	free(in->idx);
	free(in->recs.cost);
	free(in->recs.res);
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

/* o->input's records into in (the per-device plan's: one of each
 * distinct sequence); a process exit code (EXIT_OK, or EXIT_FATAL after
 * logging) */
static int plan_read(const opt_t *o, plan_input_t *in)
{
	fasta_t *r;
	dedup_t *dd = NULL;
	job_t j;
	int rc = 0, code = EXIT_OK, first;

	if (!(r = fasta_open(o->input, o->names, NULL)))
		return EXIT_FATAL;
	job_init(&j);
	if (!o->no_dedup && !(dd = dedup_init())) {
		log_error("out of memory");
		code = EXIT_FATAL;
	}
	while (code == EXIT_OK && (rc = fasta_next(r, &j)) > 0) {
		if (o->shards && plan_recs_add(&in->recs, j.status == JOB_OK ? sched_cost((int)strlen(j.seq)) : 0,
		                               j.status == JOB_OK ? j.len : 0) < 0) {
			log_error("out of memory");
			code = EXIT_FATAL;
			break;
		}
		if (j.status != JOB_OK) {
			in->nfailed++;
			if (o->strict) {
				log_error("%s: %s (--strict)", fasta_path(r), j.reason);
				code = EXIT_FATAL;
				break;
			}
			log_warn("%s: %s", fasta_path(r), j.reason);
			continue;
		}
		if ((first = plan_distinct(dd, &j, &in->uniq)) < 0) {
			code = EXIT_FATAL;
			break;
		}
		if (o->weights && first) {   /* kept for the per-device plan */
			size_t need = (size_t)in->nseq + 1;
			if (grow_array(&in->seq, &in->cap_seq, need, sizeof *in->seq) < 0 ||
			    grow_array(&in->idx, &in->cap_idx, need, sizeof *in->idx) < 0) {
				log_error("out of memory");
				code = EXIT_FATAL;
				break;
			}
			in->idx[in->nseq] = (int)j.index;
			in->seq[in->nseq++] = j.seq;
			j.seq = NULL;
		}
		tally_t *b = &in->t[bucket_of(NULL, tok_model_len(j.len, j.nchains))];
		b->records++;
		b->residues += j.len;
		if (j.len > b->longest)
			b->longest = j.len;
	}
	if (rc < 0)
		code = EXIT_FATAL;
	dedup_free(dd);
	job_free(&j);
	fasta_close(r);
	return code;
}

/* the per-bucket table, "failed", "total" and "distinct"; returns the
 * records counted */
static int64_t plan_buckets(const quota_table_t *qt, const plan_input_t *in, FILE *out)
{
	bucket_set_t bs;
	tally_t tot = { 0, 0, 0 };
	const tally_t *t = in->t;
	char lab[32];

	bucket_set_default(&bs);
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
	fprintf(out, "failed\t%" PRId64 "\t-\t-\t-\n", in->nfailed);
	fprintf(out, "total\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t-\n",
	        tot.records + in->nfailed, tot.residues, tot.longest);
	fprintf(out, "distinct\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t-\n", in->uniq.records,
	        in->uniq.residues, in->uniq.longest);
	return tot.records + in->nfailed;
}

int plan_main(const opt_t *o, FILE *out)
{
	quota_table_t *qt = NULL;
	plan_input_t in = { 0 };
	int64_t nrec;
	int code;

	if (o->quota_table && !(qt = quota_read(o->quota_table)))
		return EXIT_FATAL;
	if (qt)
		log_info("quota table %s: device %s, precision %s, weights %s, safety %g",
		         o->quota_table, qt->device, qt->precision, qt->weights,
		         qt->safety);
	if ((code = plan_read(o, &in)) != EXIT_OK) goto done;
	code = EXIT_FATAL;
	nrec = plan_buckets(qt, &in, out);
	if (o->weights && plan_devices(o, qt, in.seq, in.idx, in.nseq, out) < 0)
		goto done;
	if (o->shards && plan_shards(o, qt, &in.recs, out) < 0)
		goto done;
	if (fflush(out) != 0 || ferror(out)) {
		log_error("cannot write the plan to stdout");
		goto done;
	}
	if (nrec == 0)
		log_warn("%s: no records", o->input);
	code = in.nfailed ? EXIT_PARTIAL : EXIT_OK;
done:
	plan_input_free(&in);
	quota_free(qt);
	return code;
}
