/* forward.c - the forward context: placement, arena, tensors, sticky errors. */
#include "compute/forward.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/grow.h"
#include "util/log.h"
#include "util/status.h"

/* while planning, tensors point into a fake, never dereferenced range so
 * that views and strides can still be computed */
#define FWD_FAKE_BASE ((char *)0 + 4096)

void fwd_plan_begin(fwd_t *fx, be_t *be)
{
	memset(fx, 0, sizeof *fx);
	fx->be = be;
	fx->planning = 1;
	place_init(&fx->place, 0);
	place_init(&fx->host_place, 0);
}

/* ESMBATCH_FAULT=KIND:N: the Nth event of KIND in the process (1-based)
 * is a fault (forward.h: fwd_fault), so tests can prove it is survived */
static char fwd_fault_kind[16];
static long fwd_fault_at;
static atomic_long fwd_fault_count;
static pthread_once_t fwd_fault_once = PTHREAD_ONCE_INIT;

static void fwd_fault_init(void)
{
	const char *e = getenv("ESMBATCH_FAULT");
	if (!e || sscanf(e, "%15[a-z]:%ld", fwd_fault_kind, &fwd_fault_at) != 2) fwd_fault_at = 0;
}

int fwd_fault(const char *kind)
{
	pthread_once(&fwd_fault_once, fwd_fault_init);
	return fwd_fault_at > 0 && !strcmp(kind, fwd_fault_kind) &&
	       atomic_fetch_add(&fwd_fault_count, 1) + 1 == fwd_fault_at;
}

/* the executing pass's arena: kept (in the worker's arena, grown when
 * short) or, kept NULL, reserved for this pass alone */
static int fwd_exec_arena(fwd_t *fx, be_t *be, arena_t *kept, size_t arena_size)
{
	void *p = NULL;
	int rc;

	memset(fx, 0, sizeof *fx);
	fx->be = be;
	place_init(&fx->place, arena_size);
	place_init(&fx->host_place, 0);
	if (fwd_fault("oom")) {
		if (kept) arena_release(kept);   /* as a refused reservation leaves it */
		return fwd_fail(fx, STATUS_OOM, "cannot reserve a %zu-byte arena on %s (ESMBATCH_FAULT)",
		               arena_size, be->name);
	}
	if (kept) {
		rc = arena_reserve(kept, arena_size);
		p = kept->base;
	} else {
		rc = arena_size ? be->alloc(be, arena_size, &p) : 0;
	}
	if (rc < 0) {
		/* a lost device is not out of memory: smaller would fail too */
		if (rc == STATUS_DEVICE)
			return fwd_fail(fx, STATUS_DEVICE, "cannot reserve a %zu-byte arena on %s: the device is lost",
			                arena_size, be->name);
		return fwd_fail(fx, STATUS_OOM, "cannot reserve a %zu-byte arena on %s", arena_size, be->name);
	}
	fx->arena = p;
	fx->arena_size = arena_size;
	fx->kept = kept;
	return 0;
}

int fwd_exec_begin(fwd_t *fx, be_t *be, size_t arena_size)
{
	return fwd_exec_arena(fx, be, NULL, arena_size);
}

int fwd_exec_begin_kept(fwd_t *fx, arena_t *kept, size_t arena_size)
{
	return fwd_exec_arena(fx, kept->be, kept, arena_size);
}

int fwd_exec_host(fwd_t *fx, size_t host_size)
{
	void *p = NULL;

	place_free(&fx->host_place);
	place_init(&fx->host_place, host_size);
	if (host_size && posix_memalign(&p, 64, host_size) != 0)
		return fwd_fail(fx, STATUS_OOM, "cannot reserve a %zu-byte host arena", host_size);
	fx->host = p;
	fx->host_size = host_size;
	return 0;
}

static void fwd_graph_free(fwd_t *fx);

void fwd_end(fwd_t *fx)
{
	fwd_graph_free(fx);
	if (fx->arena && !fx->kept) fx->be->free(fx->be, fx->arena);
	free(fx->host);
	fx->arena = NULL;
	fx->host = NULL;
	place_free(&fx->place);
	place_free(&fx->host_place);
}

/* 1: host buffers lie in the arena (backend memory is host memory) */
static int fwd_host_shared(const fwd_t *fx)
{
	return fx->be && fx->be->host_mem;
}

void *fwd_host(fwd_t *fx, size_t nbytes)
{
	int shared = fwd_host_shared(fx);
	place_t *mp = shared ? &fx->place : &fx->host_place;
	size_t cap = shared ? fx->arena_size : fx->host_size, off;

	if (fx->err) return NULL;
	if (place_alloc(mp, nbytes, &off) < 0 || (!fx->planning && off + nbytes > cap)) {
		fwd_fail(fx, STATUS_PLAN, "%s of %zu bytes exhausted by a %zu-byte host buffer (planner mismatch)",
		        shared ? "arena" : "host arena", cap, nbytes);
		return NULL;
	}
	return (fx->planning ? FWD_FAKE_BASE : shared ? fx->arena : fx->host) + off;
}

void fwd_host_drop(fwd_t *fx, void *p, size_t nbytes)
{
	int shared = fwd_host_shared(fx);
	const char *base = fx->planning ? FWD_FAKE_BASE : shared ? fx->arena : fx->host;

	if (p && place_release(shared ? &fx->place : &fx->host_place, (size_t)((char *)p - base), nbytes) < 0)
		fwd_fail(fx, -1, "out of memory in the placement bookkeeping");
}

void *fwd_piece(char *base, size_t *off, size_t nbytes)
{
	size_t at = (*off + 63) / 64 * 64;

	*off = at + nbytes;
	return base ? base + at : NULL;
}

void *fwd_host_keep(fwd_t *fx, be_t **be)
{
	void *p;

	if (fwd_host_shared(fx)) {
		p = fx->kept ? NULL : fx->arena;   /* a kept arena stays the worker's */
		*be = fx->kept ? NULL : fx->be;
		fx->arena = NULL;
	} else {
		p = fx->host;
		*be = NULL;
		fx->host = NULL;
	}
	return p;
}

int fwd_fail(fwd_t *fx, int status, const char *fmt, ...)
{
	va_list ap;

	if (fx->err) return status;
	fx->err = status ? status : -1;
	va_start(ap, fmt);
	vsnprintf(fx->errmsg, sizeof fx->errmsg, fmt, ap);
	va_end(ap);
	return status;
}

tensor_t fwd_new(fwd_t *fx, int nd, const int64_t *ne)
{
	tensor_t t = { 0 };
	size_t n = sizeof(float);

	if (fx->err) return t;
	if (nd < 1 || nd > TENSOR_MAX_DIMS) {
		fwd_fail(fx, -1, "tensor of %d dimensions", nd);
		return t;
	}
	for (int i = 0; i < nd; i++) {
		if (ne[i] < 0) { fwd_fail(fx, STATUS_FAIL, "negative dimension"); return t; }
		n *= (size_t)ne[i];
	}
	t.nd = nd;
	memcpy(t.ne, ne, nd * sizeof *ne);
	if (n == 0) return t;
	/* executing, the arena is the bound (place's limit 0 would mean unbounded) */
	if (place_alloc(&fx->place, n, &t.off) < 0 || (!fx->planning && t.off + n > fx->arena_size)) {
		fwd_fail(fx, STATUS_PLAN, "arena of %zu bytes exhausted by a %zu-byte tensor (planner mismatch)",
		        fx->arena_size, n);
		return (tensor_t){ 0 };
	}
	t.nbytes = n;
	t.d = (float *)((fx->planning ? FWD_FAKE_BASE : fx->arena) + t.off);
	return t;
}

int fwd_owns(const fwd_t *fx, const void *p)
{
	uintptr_t base = (uintptr_t)(fx->planning ? FWD_FAKE_BASE : fx->arena), q = (uintptr_t)p;
	size_t size = fx->planning ? fx->place.high : fx->arena_size;

	return base && q >= base && q - base < size;
}

void fwd_memo_init(fwd_memo_t *m)
{
	memset(m, 0, sizeof *m);
	place_init(&m->in, 0);
	place_init(&m->out, 0);
}

void fwd_memo_free(fwd_memo_t *m)
{
	place_free(&m->in);
	place_free(&m->out);
	memset(m, 0, sizeof *m);
}

static size_t fwd_max(size_t a, size_t b) { return a > b ? a : b; }

int fwd_memo_begin(fwd_t *fx, fwd_memo_t *m)
{
	size_t high = fx->place.high, peak = fx->place.peak_live;

	if (!fx->planning || fx->err) return 0;
	if (m->valid && !fx->no_memo && place_same(&fx->place, &m->in)) {
		if (place_copy(&fx->place, &m->out) < 0) {
			fwd_fail(fx, -1, "out of memory in the placement bookkeeping");
			return 1;
		}
		fx->place.high = fwd_max(high, m->high);
		fx->place.peak_live = fwd_max(peak, m->peak);
		return 1;
	}
	m->valid = 0;
	if (place_copy(&m->in, &fx->place) < 0) return 0;
	/* measure the step alone: its own highest top and live bytes */
	m->saved_high = high;
	m->saved_peak = peak;
	fx->place.high = fx->place.top;
	fx->place.peak_live = fx->place.live;
	m->valid = -1;   /* recording */
	return 0;
}

void fwd_memo_end(fwd_t *fx, fwd_memo_t *m)
{
	if (m->valid != -1) return;
	m->high = fx->place.high;
	m->peak = fx->place.peak_live;
	fx->place.high = fwd_max(m->saved_high, m->high);
	fx->place.peak_live = fwd_max(m->saved_peak, m->peak);
	m->valid = !fx->err && place_copy(&m->out, &fx->place) == 0;
}

/* --- recorded steps (fwd_graph_begin) --------------------------------------- */

static void fwd_graph_free(fwd_t *fx)
{
	if (fx->graph_rec) fwd_graph_end(fx);
	if (fx->ngraphs)
		log_debug("%s: %d steps recorded as graphs, %d replays", fx->be->name, fx->ngraphs,
		          fx->graph_runs);
	for (int i = 0; i < fx->ngraphs; i++) {
		if (fx->graphs[i].g) fx->be->graph_free(fx->be, fx->graphs[i].g);
		place_free(&fx->graphs[i].in);
		place_free(&fx->graphs[i].out);
	}
	free(fx->graphs);
	fx->graphs = NULL;
	fx->ngraphs = 0;
	fx->graphs_cap = 0;
}

/* 1 when r was recorded on the operands ops[nops] */
static int fwd_graph_ops_same(const fwd_graph_t *r, const tensor_t *ops, int nops)
{
	for (int i = 0; i < FWD_GRAPH_OPS; i++) {
		tensor_t t = i < nops ? ops[i] : (tensor_t){ 0 };
		if (r->ops[i] != t.d || memcmp(r->ne[i], t.ne, sizeof t.ne)) return 0;
	}
	return 1;
}

/* the entry of step id, a new (invalid) one if there is none; NULL when
 * out of memory */
static fwd_graph_t *fwd_graph_entry(fwd_t *fx, int id)
{
	for (int i = 0; i < fx->ngraphs; i++)
		if (fx->graphs[i].id == id) return &fx->graphs[i];
	if (grow_array(&fx->graphs, &fx->graphs_cap, (size_t)fx->ngraphs + 1, sizeof *fx->graphs) < 0)
		return NULL;
	fwd_graph_t *g = &fx->graphs[fx->ngraphs++];
	memset(g, 0, sizeof *g);
	g->id = id;
	place_init(&g->in, 0);
	place_init(&g->out, 0);
	return g;
}

/* r replayed: the placement as the step left it */
static int fwd_graph_replay(fwd_t *fx, fwd_graph_t *r)
{
	size_t high = fx->place.high, peak = fx->place.peak_live;
	int rc = fx->be->graph_run(fx->be, r->g);

	if (rc < 0) {
		fwd_fail(fx, rc == STATUS_DEVICE ? rc : -1, "%s: replaying step %d failed", fx->be->name, r->id);
		return 1;
	}
	fx->graph_runs++;
	if (place_copy(&fx->place, &r->out) < 0) fwd_fail(fx, -1, "out of memory in the placement bookkeeping");
	fx->place.high = fwd_max(high, fx->place.high);
	fx->place.peak_live = fwd_max(peak, fx->place.peak_live);
	return 1;
}

int fwd_graph_begin(fwd_t *fx, int id, const tensor_t *ops, int nops)
{
	fwd_graph_t *r;

	if (fx->planning || fx->emit || fx->err || fx->graph_rec || nops > FWD_GRAPH_OPS ||
	    !be_supports(fx->be, BE_OP_GRAPH) || !(r = fwd_graph_entry(fx, id)))
		return 0;
	if (r->valid && place_same(&fx->place, &r->in) && fwd_graph_ops_same(r, ops, nops))
		return fwd_graph_replay(fx, r);
	if (r->g) fx->be->graph_free(fx->be, r->g);
	r->g = NULL;
	r->valid = 0;
	for (int i = 0; i < FWD_GRAPH_OPS; i++) {
		r->ops[i] = i < nops ? ops[i].d : NULL;
		if (i < nops) memcpy(r->ne[i], ops[i].ne, sizeof r->ne[i]);
		else memset(r->ne[i], 0, sizeof r->ne[i]);
	}
	if (place_copy(&r->in, &fx->place) < 0 || fx->be->graph_begin(fx->be) < 0) return 0;
	fx->graph_rec = (int)(r - fx->graphs) + 1;
	log_debug("%s: step %d: recording a graph", fx->be->name, id);
	return 0;
}

void fwd_graph_end(fwd_t *fx)
{
	fwd_graph_t *r;
	void *g = NULL;
	int rc;

	if (!fx->graph_rec) return;
	r = &fx->graphs[fx->graph_rec - 1];
	fx->graph_rec = 0;
	rc = fx->be->graph_end(fx->be, &g);
	if (fx->err || rc < 0) {
		/* the step's work was recorded, not run: without a recording it is lost */
		if (g) fx->be->graph_free(fx->be, g);
		fwd_fail(fx, rc == STATUS_DEVICE ? rc : -1, "%s: recording step %d failed", fx->be->name, r->id);
		return;
	}
	r->g = g;
	if (place_copy(&r->out, &fx->place) < 0) {
		fwd_fail(fx, -1, "out of memory in the placement bookkeeping");
		return;
	}
	r->valid = 1;
	log_debug("%s: step %d: graph recorded", fx->be->name, r->id);
	rc = fx->be->graph_run(fx->be, g);
	if (rc < 0) fwd_fail(fx, rc == STATUS_DEVICE ? rc : -1, "%s: running step %d failed", fx->be->name, r->id);
}

tensor_t fwd_new1(fwd_t *fx, int64_t a) { return fwd_new(fx, 1, (int64_t[]){ a }); }
tensor_t fwd_new2(fwd_t *fx, int64_t a, int64_t b) { return fwd_new(fx, 2, (int64_t[]){ a, b }); }
tensor_t fwd_new3(fwd_t *fx, int64_t a, int64_t b, int64_t c) { return fwd_new(fx, 3, (int64_t[]){ a, b, c }); }
tensor_t fwd_new4(fwd_t *fx, int64_t a, int64_t b, int64_t c, int64_t d)
{
	return fwd_new(fx, 4, (int64_t[]){ a, b, c, d });
}

void fwd_drop(fwd_t *fx, tensor_t *t)
{
	if (t->nbytes && place_release(&fx->place, t->off, t->nbytes) < 0)
		fwd_fail(fx, -1, "out of memory in the placement bookkeeping");
	memset(t, 0, sizeof *t);
}

int64_t tensor_numel(tensor_t t)
{
	int64_t n = t.nd ? 1 : 0;
	for (int i = 0; i < t.nd; i++) n *= t.ne[i];
	return n;
}

tensor_t tensor_rows(tensor_t t, int64_t r0, int64_t n)
{
	int64_t row = t.nd ? tensor_numel(t) / (t.ne[0] ? t.ne[0] : 1) : 0;
	tensor_t v = t;

	v.d = t.d ? t.d + r0 * row : NULL;
	v.ne[0] = n;
	v.nbytes = 0;
	return v;
}

tensor_t tensor_reshape(tensor_t t, int nd, const int64_t *ne)
{
	tensor_t v = t;
	v.nd = nd;
	memcpy(v.ne, ne, nd * sizeof *ne);
	v.nbytes = 0;
	return v;
}

tensor_t tensor_reshape2(tensor_t t, int64_t a, int64_t b) { return tensor_reshape(t, 2, (int64_t[]){ a, b }); }
tensor_t tensor_reshape3(tensor_t t, int64_t a, int64_t b, int64_t c) { return tensor_reshape(t, 3, (int64_t[]){ a, b, c }); }

void fwd_get(fwd_t *fx, tensor_t t, float *host)
{
	if (fx->planning || fx->err || !tensor_numel(t)) return;
	int rc = fx->be->download(fx->be, host, t.d, tensor_numel(t) * sizeof(float));
	if (rc < 0)
		fwd_fail(fx, rc == STATUS_DEVICE ? rc : -1, "%s: copy to host failed%s", fx->be->name,
		         rc == STATUS_DEVICE ? ": the device is lost" : "");
}

void fwd_set(fwd_t *fx, tensor_t t, const float *host)
{
	if (fx->planning || fx->err || !tensor_numel(t)) return;
	int rc = fx->be->upload(fx->be, t.d, host, tensor_numel(t) * sizeof(float));
	if (rc < 0)
		fwd_fail(fx, rc == STATUS_DEVICE ? rc : -1, "%s: copy to device failed%s", fx->be->name,
		         rc == STATUS_DEVICE ? ": the device is lost" : "");
}

/* --- the emit hook ---------------------------------------------------------- */

void fwd_emit(fwd_t *fx, const char *name, tensor_t t)
{
	size_t n = sizeof(float) * tensor_numel(t);
	float *h;

	if (!fx->emit || fx->err || !(h = fwd_host(fx, n))) return;
	fwd_get(fx, t, h);
	fwd_emit_host(fx, name, h, t.nd, t.ne);
	fwd_host_drop(fx, h, n);
}

void fwd_emit_host(fwd_t *fx, const char *name, const float *x, int nd, const int64_t *shape)
{
	if (fx->emit && !fx->planning && !fx->err && x)
		fx->emit(fx->emit_ctx, name, SAFETENSORS_F32, nd, shape, x);
}

void fwd_emit_i32(fwd_t *fx, const char *name, const int32_t *x, int n)
{
	int64_t *v;

	if (!fx->emit || fx->err || !(v = fwd_host(fx, sizeof *v * n))) return;
	if (!fx->planning) {
		for (int i = 0; i < n; i++) v[i] = x[i];
		fx->emit(fx->emit_ctx, name, SAFETENSORS_I64, 1, (int64_t[]){ n }, v);
	}
	fwd_host_drop(fx, v, sizeof *v * n);
}
