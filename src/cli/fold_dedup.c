/* fold_dedup.c - records of the same sequence in one fold run
 * (fold_run.h): the first queued of each sequence (dedup.h) is folded,
 * and every later one is its copy.  A copy's files are written by the
 * same call that writes its original's, from the same fold, under the
 * copy's name (so the same bytes but for the name, all-or-none per item
 * as every output), and it is finished on the output step right after its
 * original: its own row (same_as: the original's name), fragments renamed,
 * done.jsonl line.  A record done by an earlier run is never an original:
 * a record of its sequence not done is folded again (docs/output.md).
 */
#include <stdlib.h>
#include <string.h>

#include "cli/fold_run.h"
#include "util/log.h"

int fold_source(fold_run_t *r, int k, int *from)
{
	fold_rec_t *x = &r->rec[k];
	int first = r->dedup ? dedup_add(r->dedup, x->job.seq, k) : k;

	if (first < 0) return -1;
	*from = first;
	return first == k ? FOLD_FROM_FOLD : FOLD_FROM_COPY;
}

int fold_write_copies(void *ctx, const sched_item_t *it, const sched_dev_t *d, const tok_t *t,
                      const model_out_t *out, const mem_fig_t *fig, double secs, char *reason,
                      size_t cap)
{
	fold_run_t *r = ctx;
	int rc = fold_write_outputs(ctx, it, d, t, out, fig, secs, reason, cap);

	for (int c = r->rec[it->rec].next_copy; rc == 0 && c >= 0; c = r->rec[c].next_copy) {
		fold_rec_t *x = &r->rec[c];
		char why[256];
		if (fold_write_rec(r, x, it, d, t, out, fig, secs, why, sizeof why) == 0) continue;
		log_error("record %lld (%s): %s", (long long)x->job.recno, x->job.name, why);
		pthread_mutex_lock(&r->lock);
		if (!x->copy_err && (x->copy_err = strdup(why))) x->copy_err_at = it->start;
		pthread_mutex_unlock(&r->lock);
	}
	return rc;
}

/* copy x's items: its original's v[0..n), the one whose files it could
 * not have (x->copy_err) failed with why; malloc'ed, or NULL */
static sched_item_t *fold_copy_items(const fold_rec_t *x, const sched_item_t *v, int n)
{
	sched_item_t *w = malloc((n ? n : 1) * sizeof *w);

	if (!w) return NULL;
	memcpy(w, v, n * sizeof *w);
	for (int i = 0; i < n && x->copy_err; i++)
		if (w[i].start == x->copy_err_at && w[i].state == SCHED_FOLDED) {
			w[i].state = SCHED_FAILED;
			snprintf(w[i].reason, sizeof w[i].reason, "%s", x->copy_err);
		}
	return w;
}

void fold_copies_finish(fold_run_t *r, int k, const sched_item_t *v, int n)
{
	for (int c = r->rec[k].next_copy; c >= 0; c = r->rec[c].next_copy) {
		sched_item_t *w = fold_copy_items(&r->rec[c], v, n);
		if (!w) {
			log_error("record %lld (%s): out of memory", (long long)r->rec[c].job.recno,
			          r->rec[c].job.name);
			fold_io_error(r);
			continue;
		}
		fold_finish(r, c, w, n);
		free(w);
	}
}
