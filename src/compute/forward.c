/* fx.c - the forward context: placement, arena, tensors, sticky errors. */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute/forward.h"
#include "util/log.h"

/* while planning, tensors point into a fake, never dereferenced range so
 * that views and strides can still be computed */
#define FX_FAKE_BASE ((char *)0 + 4096)

void fx_plan_begin(fx_t *fx, be_t *be)
{
	memset(fx, 0, sizeof *fx);
	fx->be = be;
	fx->planning = 1;
	mp_init(&fx->mp, 0);
	mp_init(&fx->hmp, 0);
}

/* ESMBATCH_FAULT=oom:N: the Nth arena reservation of the process (1-based)
 * is refused, so tests can prove an out-of-memory event is survived */
static long fx_fault_at;
static atomic_long fx_fault_count;
static pthread_once_t fx_fault_once = PTHREAD_ONCE_INIT;

static void fx_fault_init(void)
{
	const char *e = getenv("ESMBATCH_FAULT");
	if (e && sscanf(e, "oom:%ld", &fx_fault_at) != 1) fx_fault_at = 0;
}

static int fx_fault_due(void)
{
	pthread_once(&fx_fault_once, fx_fault_init);
	return fx_fault_at > 0 && atomic_fetch_add(&fx_fault_count, 1) + 1 == fx_fault_at;
}

int fx_exec_begin(fx_t *fx, be_t *be, size_t arena_size)
{
	void *p = NULL;

	memset(fx, 0, sizeof *fx);
	fx->be = be;
	mp_init(&fx->mp, arena_size);
	mp_init(&fx->hmp, 0);
	if (fx_fault_due())
		return fx_fail(fx, -2, "cannot reserve a %zu-byte arena on %s (ESMBATCH_FAULT)",
		               arena_size, be->name);
	if (arena_size && be->alloc(be, arena_size, &p) < 0)
		return fx_fail(fx, -2, "cannot reserve a %zu-byte arena on %s", arena_size, be->name);
	fx->arena = p;
	fx->arena_size = arena_size;
	return 0;
}

int fx_exec_host(fx_t *fx, size_t host_size)
{
	void *p = NULL;

	mp_free(&fx->hmp);
	mp_init(&fx->hmp, host_size);
	if (host_size && posix_memalign(&p, 64, host_size) != 0)
		return fx_fail(fx, -2, "cannot reserve a %zu-byte host arena", host_size);
	fx->host = p;
	fx->host_size = host_size;
	return 0;
}

void fx_end(fx_t *fx)
{
	if (fx->arena) fx->be->free(fx->be, fx->arena);
	free(fx->host);
	fx->arena = NULL;
	fx->host = NULL;
	mp_free(&fx->mp);
	mp_free(&fx->hmp);
}

/* 1: host buffers lie in the arena (backend memory is host memory) */
static int fx_host_shared(const fx_t *fx)
{
	return fx->be && fx->be->host_mem;
}

void *fx_host(fx_t *fx, size_t nbytes)
{
	int shared = fx_host_shared(fx);
	mp_t *mp = shared ? &fx->mp : &fx->hmp;
	size_t cap = shared ? fx->arena_size : fx->host_size, off;

	if (fx->err) return NULL;
	if (mp_alloc(mp, nbytes, &off) < 0 || (!fx->planning && off + nbytes > cap)) {
		fx_fail(fx, -2, "%s of %zu bytes exhausted by a %zu-byte host buffer (planner mismatch)",
		        shared ? "arena" : "host arena", cap, nbytes);
		return NULL;
	}
	return (fx->planning ? FX_FAKE_BASE : shared ? fx->arena : fx->host) + off;
}

void fx_host_drop(fx_t *fx, void *p, size_t nbytes)
{
	int shared = fx_host_shared(fx);
	const char *base = fx->planning ? FX_FAKE_BASE : shared ? fx->arena : fx->host;

	if (p && mp_release(shared ? &fx->mp : &fx->hmp, (size_t)((char *)p - base), nbytes) < 0)
		fx_fail(fx, -1, "out of memory in the placement bookkeeping");
}

void *fx_piece(char *base, size_t *off, size_t nbytes)
{
	size_t at = (*off + 63) / 64 * 64;

	*off = at + nbytes;
	return base ? base + at : NULL;
}

void *fx_host_keep(fx_t *fx, be_t **be)
{
	void *p;

	if (fx_host_shared(fx)) {
		p = fx->arena;
		*be = fx->be;
		fx->arena = NULL;
	} else {
		p = fx->host;
		*be = NULL;
		fx->host = NULL;
	}
	return p;
}

int fx_fail(fx_t *fx, int status, const char *fmt, ...)
{
	va_list ap;

	if (fx->err) return status;
	fx->err = status ? status : -1;
	va_start(ap, fmt);
	vsnprintf(fx->errmsg, sizeof fx->errmsg, fmt, ap);
	va_end(ap);
	return status;
}

tn_t fx_new(fx_t *fx, int nd, const int64_t *ne)
{
	tn_t t = { 0 };
	size_t n = sizeof(float);

	if (fx->err) return t;
	if (nd < 1 || nd > TN_MAX_DIMS) {
		fx_fail(fx, -1, "tensor of %d dimensions", nd);
		return t;
	}
	for (int i = 0; i < nd; i++) {
		if (ne[i] < 0) { fx_fail(fx, -1, "negative dimension"); return t; }
		n *= (size_t)ne[i];
	}
	t.nd = nd;
	memcpy(t.ne, ne, nd * sizeof *ne);
	if (n == 0) return t;
	/* executing, the arena is the bound (mp's limit 0 would mean unbounded) */
	if (mp_alloc(&fx->mp, n, &t.off) < 0 || (!fx->planning && t.off + n > fx->arena_size)) {
		fx_fail(fx, -2, "arena of %zu bytes exhausted by a %zu-byte tensor (planner mismatch)",
		        fx->arena_size, n);
		return (tn_t){ 0 };
	}
	t.nbytes = n;
	t.d = (float *)((fx->planning ? FX_FAKE_BASE : fx->arena) + t.off);
	return t;
}

void fx_memo_init(fx_memo_t *m)
{
	memset(m, 0, sizeof *m);
	mp_init(&m->in, 0);
	mp_init(&m->out, 0);
}

void fx_memo_free(fx_memo_t *m)
{
	mp_free(&m->in);
	mp_free(&m->out);
	memset(m, 0, sizeof *m);
}

static size_t fx_max(size_t a, size_t b) { return a > b ? a : b; }

int fx_memo_begin(fx_t *fx, fx_memo_t *m)
{
	size_t high = fx->mp.high, peak = fx->mp.peak_live;

	if (!fx->planning || fx->err) return 0;
	if (m->valid && !fx->no_memo && mp_same(&fx->mp, &m->in)) {
		if (mp_copy(&fx->mp, &m->out) < 0) {
			fx_fail(fx, -1, "out of memory in the placement bookkeeping");
			return 1;
		}
		fx->mp.high = fx_max(high, m->high);
		fx->mp.peak_live = fx_max(peak, m->peak);
		return 1;
	}
	m->valid = 0;
	if (mp_copy(&m->in, &fx->mp) < 0) return 0;
	/* measure the step alone: its own highest top and live bytes */
	m->saved_high = high;
	m->saved_peak = peak;
	fx->mp.high = fx->mp.top;
	fx->mp.peak_live = fx->mp.live;
	m->valid = -1;   /* recording */
	return 0;
}

void fx_memo_end(fx_t *fx, fx_memo_t *m)
{
	if (m->valid != -1) return;
	m->high = fx->mp.high;
	m->peak = fx->mp.peak_live;
	fx->mp.high = fx_max(m->saved_high, m->high);
	fx->mp.peak_live = fx_max(m->saved_peak, m->peak);
	m->valid = !fx->err && mp_copy(&m->out, &fx->mp) == 0;
}

tn_t fx_new1(fx_t *fx, int64_t a) { return fx_new(fx, 1, (int64_t[]){ a }); }
tn_t fx_new2(fx_t *fx, int64_t a, int64_t b) { return fx_new(fx, 2, (int64_t[]){ a, b }); }
tn_t fx_new3(fx_t *fx, int64_t a, int64_t b, int64_t c) { return fx_new(fx, 3, (int64_t[]){ a, b, c }); }
tn_t fx_new4(fx_t *fx, int64_t a, int64_t b, int64_t c, int64_t d)
{
	return fx_new(fx, 4, (int64_t[]){ a, b, c, d });
}

void fx_drop(fx_t *fx, tn_t *t)
{
	if (t->nbytes && mp_release(&fx->mp, t->off, t->nbytes) < 0)
		fx_fail(fx, -1, "out of memory in the placement bookkeeping");
	memset(t, 0, sizeof *t);
}

int64_t tn_numel(tn_t t)
{
	int64_t n = t.nd ? 1 : 0;
	for (int i = 0; i < t.nd; i++) n *= t.ne[i];
	return n;
}

tn_t tn_rows(tn_t t, int64_t r0, int64_t n)
{
	int64_t row = t.nd ? tn_numel(t) / (t.ne[0] ? t.ne[0] : 1) : 0;
	tn_t v = t;

	v.d = t.d ? t.d + r0 * row : NULL;
	v.ne[0] = n;
	v.nbytes = 0;
	return v;
}

tn_t tn_reshape(tn_t t, int nd, const int64_t *ne)
{
	tn_t v = t;
	v.nd = nd;
	memcpy(v.ne, ne, nd * sizeof *ne);
	v.nbytes = 0;
	return v;
}

tn_t tn_reshape2(tn_t t, int64_t a, int64_t b) { return tn_reshape(t, 2, (int64_t[]){ a, b }); }
tn_t tn_reshape3(tn_t t, int64_t a, int64_t b, int64_t c) { return tn_reshape(t, 3, (int64_t[]){ a, b, c }); }

void fx_get(fx_t *fx, tn_t t, float *host)
{
	if (fx->planning || fx->err || !tn_numel(t)) return;
	if (fx->be->download(fx->be, host, t.d, tn_numel(t) * sizeof(float)) < 0)
		fx_fail(fx, -1, "%s: copy to host failed", fx->be->name);
}

void fx_set(fx_t *fx, tn_t t, const float *host)
{
	if (fx->planning || fx->err || !tn_numel(t)) return;
	if (fx->be->upload(fx->be, t.d, host, tn_numel(t) * sizeof(float)) < 0)
		fx_fail(fx, -1, "%s: copy to device failed", fx->be->name);
}
