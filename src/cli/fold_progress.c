/* fold_progress.c - what a fold run says of its progress (fold_run.h):
 * one line per record as it ends ("[k/N] NAME: ..."), the progress line
 * (records, rate, ETA, what runs, each device's peak grant) as the live status
 * line on a terminal or a "progress:" log line elsewhere, and the ticker:
 * a thread that says it again every ESMBATCH_PROGRESS_EVERY seconds while
 * a long record runs.  The counts are r->lock's.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "util/env.h"
#include "util/log.h"
#include "cli/fold_run.h"

#define FOLD_SAY 10.0           /* least seconds between progress lines as records end */
#define FOLD_EVERY_LOG 60.0     /* default ticker period into a log */
#define FOLD_EVERY_TTY 1.0      /* default ticker period on a terminal */

/* secs as "1h02m", "3m05s" or "42s" into buf[cap] */
static void fold_secs(double secs, char *buf, size_t cap)
{
	long t = secs > 0 && secs < 1e9 ? (long)(secs + 0.5) : 0;

	if (t >= 3600) snprintf(buf, cap, "%ldh%02ldm", t / 3600, t / 60 % 60);
	else if (t >= 60) snprintf(buf, cap, "%ldm%02lds", t / 60, t % 60);
	else snprintf(buf, cap, "%lds", t);
}

/* the progress line into line[cap]: records, rate, ETA, the record
 * running longest, each device's peak grant.  r->lock held. */
static void fold_line(fold_run_t *r, sched_t *s, char *line, size_t cap)
{
	double now = sched_now(), dt = now - r->t_start, rate, secs = 0;
	char el[32], eta[32] = "-", ran[32];
	int n, rec = -1, running = sched_running(s, &rec, &secs);

	rate = dt > 0 ? r->res_finished / dt : 0;
	fold_secs(dt, el, sizeof el);
	if (rate > 0) fold_secs((r->res_todo - r->res_finished) / rate, eta, sizeof eta);
	n = snprintf(line, cap, "%ld/%ld records in %s, %.0f residues/s, ETA %s", r->nfinished, r->todo, el,
	             rate, eta);
	if (running > 0 && rec >= 0 && rec < r->nrec && n < (int)cap) {
		fold_secs(secs, ran, sizeof ran);
		n += snprintf(line + n, cap - n, ", running %s (%lld residues) for %s", r->rec[rec].job.name,
		              (long long)r->rec[rec].job.len, ran);
		if (running > 1 && n < (int)cap) n += snprintf(line + n, cap - n, " and %d more", running - 1);
	}
	for (int i = 0; i < r->ndev && n < (int)cap; i++)
		n += snprintf(line + n, cap - n, ", %s peak %.1f/%.1f MiB", r->dev[i].be->name,
		              sched_granted(s, i) / 1048576.0, r->dev[i].budget / 1048576.0);
}

/* the line drawn on a terminal, else logged when `every` seconds have
 * passed since the last (or force).  r->lock held. */
static void fold_say(fold_run_t *r, sched_t *s, double every, int force)
{
	char line[512];
	double now = sched_now();

	if (!log_on_terminal() && !force && now - r->t_said < every) return;
	fold_line(r, s, line, sizeof line);
	if (log_status_line(line) < 0) {
		log_info("progress: %s", line);
		r->t_said = now;
	}
}

void fold_progress(fold_run_t *r, sched_t *s)
{
	double say = r->every > 0 && r->every < FOLD_SAY ? r->every : FOLD_SAY;

	pthread_mutex_lock(&r->lock);
	fold_say(r, s, say, r->nfinished == r->todo);
	pthread_mutex_unlock(&r->lock);
}

void fold_count_finished(fold_run_t *r, const fold_rec_t *x, const sched_item_t *v, int n, const char *why)
{
	int unrun = why && n > 0;
	char secs[32];
	long k;

	for (int i = 0; i < n; i++) unrun &= v[i].state == SCHED_FAILED && v[i].unrun;
	if (x->same_as) {   /* a copy: its original's fold counted it */
		if (unrun) return;
		if (why) log_warn("record %lld (%s): %s", (long long)x->job.recno, x->job.name, why);
		else log_info("%s: %s, written from the fold of %s", x->job.name, n > 1 ? "split" : "ok",
		              x->same_as);
		return;
	}
	pthread_mutex_lock(&r->lock);
	k = ++r->nfinished;
	r->res_finished += x->job.len;
	pthread_mutex_unlock(&r->lock);
	if (unrun) return;   /* counted in one line after the run */
	if (why) {
		log_warn("[%ld/%ld] record %lld (%s): %s", k, r->todo, (long long)x->job.recno, x->job.name, why);
		return;
	}
	if (x->secs < 60) snprintf(secs, sizeof secs, "%.2f s", x->secs);
	else fold_secs(x->secs, secs, sizeof secs);
	if (n > 1)
		log_info("[%ld/%ld] %s: split into %d fragments, %lld residues, mean pLDDT %.1f, pTM %.3f, %s",
		         k, r->todo, x->job.name, n, (long long)x->job.len, x->plddt_sum / x->res_folded,
		         x->ptm_sum / x->res_folded, secs);
	else
		log_info("[%ld/%ld] %s: ok, %lld residues on %s, mean pLDDT %.1f, pTM %.3f, %s", k, r->todo,
		         x->job.name, (long long)x->job.len, x->cached ? "the cache" : r->dev[v[0].dev].be->name,
		         x->plddt_sum / x->res_folded, x->ptm_sum / x->res_folded, secs);
}

/* the ticker's thread: the progress line every r->every seconds, until
 * fold_tick_stop */
static void *fold_ticker(void *arg)
{
	fold_run_t *r = arg;

	pthread_mutex_lock(&r->lock);
	while (!r->tick_quit) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		double at = ts.tv_sec + ts.tv_nsec * 1e-9 + r->every;
		ts.tv_sec = (time_t)at;
		ts.tv_nsec = (long)((at - ts.tv_sec) * 1e9);
		while (!r->tick_quit && pthread_cond_timedwait(&r->tick, &r->lock, &ts) != ETIMEDOUT)
			continue;
		if (!r->tick_quit) fold_say(r, r->sched, r->every * 0.999, 0);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

int fold_tick_start(fold_run_t *r, sched_t *s)
{
	pthread_condattr_t ca;
	int rc = 0;

	r->every = env_seconds("ESMBATCH_PROGRESS_EVERY",
	                       log_on_terminal() ? FOLD_EVERY_TTY : FOLD_EVERY_LOG, 1e6);
	r->sched = s;
	r->t_start = r->t_said = sched_now();
	if (r->every <= 0) return 0;
	if (pthread_condattr_init(&ca) != 0) return -1;
	if (pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 || pthread_cond_init(&r->tick, &ca) != 0)
		rc = -1;
	pthread_condattr_destroy(&ca);
	if (rc == 0 && pthread_create(&r->ticker, NULL, fold_ticker, r) != 0) {
		pthread_cond_destroy(&r->tick);
		rc = -1;
	}
	if (rc < 0) log_warn("no progress lines while a record runs: cannot start their thread");
	r->ticking = rc == 0;
	return rc;
}

void fold_tick_stop(fold_run_t *r)
{
	if (!r->ticking) return;
	pthread_mutex_lock(&r->lock);
	r->tick_quit = 1;
	pthread_cond_signal(&r->tick);
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->ticker, NULL);
	pthread_cond_destroy(&r->tick);
	r->ticking = 0;
}
