/* test_placement.c - property tests of the placement planner (placement.h)
 * and of the plan-then-execute contract of the forward context (forward.h).
 *
 * The planner is driven by long random sequences of place_alloc / place_release
 * (sizes including 0, 1 and exact multiples of PLACE_ALIGN, random lifetimes)
 * and checked against a model of the live blocks after every step. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "compute/arena.h"
#include "compute/forward.h"
#include "compute/placement.h"
#include "compute/ops.h"
#include "util/status.h"

#define MAX_LIVE 512

/* ---- a deterministic generator (xorshift64*), independent of libc ------- */

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s >> 12; *s ^= *s << 25; *s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

/* uniform in [0, n) */
static size_t rng_below(uint64_t *s, size_t n) { return (size_t)(rng_next(s) % n); }

/* A size drawn to hit the rounding edge cases often: 0, 1, PLACE_ALIGN - 1,
 * PLACE_ALIGN, PLACE_ALIGN + 1, small, medium and occasionally large. */
static size_t rng_size(uint64_t *s)
{
	switch (rng_below(s, 8)) {
	case 0: return 0;
	case 1: return 1;
	case 2: return PLACE_ALIGN - 1 + rng_below(s, 3);
	case 3: return rng_below(s, 4 * PLACE_ALIGN);
	case 4: return PLACE_ALIGN * (1 + rng_below(s, 16));
	case 5: return rng_below(s, 1 << 20);
	default: return rng_below(s, 1 << 14);
	}
}

/* the bytes place_alloc actually takes for a request (0 takes one unit) */
static size_t taken(size_t nbytes) { return place_round(nbytes ? nbytes : 1); }

/* ---- the model: live blocks as the test placed them ---------------------- */

typedef struct { size_t off, nbytes; } blk_t;

typedef struct {
	blk_t  live[MAX_LIVE];
	int    n;
	size_t sum;      /* sum of taken() over live blocks */
	size_t max_sum;  /* max of sum over time */
} model_t;

static int cmp_span(const void *a, const void *b)
{
	const place_block_t *x = a, *y = b;
	return (x->off > y->off) - (x->off < y->off);
}

/* The full structural invariant: the live blocks and the free gaps tile
 * [0, top) exactly (no overlap, no hole), every offset is aligned, gaps are
 * sorted and coalesced and none touches the top, top <= high, and the
 * planner's live/peak counters agree with the model. */
static void check_invariants(const place_t *mp, const model_t *md)
{
	static place_block_t span[2 * MAX_LIVE + 4096];
	int ns = 0;

	assert_true(mp->nfree + md->n <= (int)(sizeof span / sizeof *span));
	for (int i = 0; i < md->n; i++)
		span[ns++] = (place_block_t){ md->live[i].off, taken(md->live[i].nbytes) };
	for (int i = 0; i < mp->nfree; i++) {
		assert_true(mp->free[i].size > 0);
		assert_int_equal(mp->free[i].size % PLACE_ALIGN, 0);
		if (i > 0) /* sorted and coalesced: a gap never touches the previous one */
			assert_true(mp->free[i - 1].off + mp->free[i - 1].size < mp->free[i].off);
		span[ns++] = mp->free[i];
	}
	if (mp->nfree)
		assert_true(mp->free[mp->nfree - 1].off + mp->free[mp->nfree - 1].size < mp->top);
	qsort(span, ns, sizeof *span, cmp_span);
	size_t at = 0;
	for (int i = 0; i < ns; i++) {
		assert_int_equal(span[i].off % PLACE_ALIGN, 0);
		assert_int_equal(span[i].off, at);   /* neither overlap nor hole */
		at += span[i].size;
	}
	assert_int_equal(at, mp->top);
	assert_true(mp->top <= mp->high);
	if (mp->limit) assert_true(mp->high <= mp->limit);
	assert_int_equal(mp->live, md->sum);
	assert_int_equal(mp->peak_live, md->max_sum);
}

/* The offset the documented policy picks for n taken bytes: the smallest
 * gap that fits (lowest offset on ties), else the top; SIZE_MAX when the
 * limit forbids it. */
static size_t expected_offset(const place_t *mp, size_t n)
{
	int best = -1;
	for (int i = 0; i < mp->nfree; i++)
		if (mp->free[i].size >= n && (best < 0 || mp->free[i].size < mp->free[best].size))
			best = i;
	if (best >= 0) return mp->free[best].off;
	if (mp->limit && mp->top + n > mp->limit) return SIZE_MAX;
	return mp->top;
}

static void model_add(model_t *md, size_t off, size_t nbytes)
{
	md->live[md->n++] = (blk_t){ off, nbytes };
	md->sum += taken(nbytes);
	if (md->sum > md->max_sum) md->max_sum = md->sum;
}

static void model_remove(place_t *mp, model_t *md, int i)
{
	assert_int_equal(place_release(mp, md->live[i].off, md->live[i].nbytes), 0);
	md->sum -= taken(md->live[i].nbytes);
	md->live[i] = md->live[--md->n];
}

/* Runs `steps` random alloc/release steps (then releases everything),
 * checking the invariants after each; the offsets of successful allocs are
 * written to offs (capacity steps) and their number returned. */
static int run_sequence(uint64_t seed, int steps, size_t limit, size_t *offs, int *nfail)
{
	static model_t md;
	place_t mp;
	int noff = 0;

	memset(&md, 0, sizeof md);
	place_init(&mp, limit);
	*nfail = 0;
	for (int s = 0; s < steps; s++) {
		/* grow while small, shrink while large: lifetimes of all lengths */
		int grow = md.n == 0 || (md.n < MAX_LIVE && rng_below(&seed, MAX_LIVE) >= (size_t)md.n / 2 + 40);
		if (grow) {
			size_t nbytes = rng_size(&seed), off = 0;
			size_t want = expected_offset(&mp, taken(nbytes));
			place_t before = mp;
			int rc = place_alloc(&mp, nbytes, &off);
			if (want == SIZE_MAX) {
				/* beyond the limit: refused, nothing changed */
				assert_int_equal(rc, -1);
				assert_int_equal(mp.top, before.top);
				assert_int_equal(mp.live, before.live);
				assert_int_equal(mp.nfree, before.nfree);
				++*nfail;
			} else {
				assert_int_equal(rc, 0);
				assert_int_equal(off, want);
				model_add(&md, off, nbytes);
				offs[noff++] = off;
			}
		} else {
			model_remove(&mp, &md, (int)rng_below(&seed, md.n));
		}
		check_invariants(&mp, &md);
	}
	while (md.n) {
		model_remove(&mp, &md, (int)rng_below(&seed, md.n));
		check_invariants(&mp, &md);
	}
	/* everything released: the space is empty again, the peaks remain */
	assert_int_equal(mp.live, 0);
	assert_int_equal(mp.top, 0);
	assert_int_equal(mp.nfree, 0);
	assert_int_equal(mp.peak_live, md.max_sum);
	assert_true(mp.high >= mp.peak_live);
	place_free(&mp);
	return noff;
}

/* Unbounded: thousands of steps per seed keep the tiling invariant, follow
 * best fit, and peak_live is the max over time of the live sum. */
static void test_mp_random_unbounded(void **state)
{
	(void)state;
	enum { STEPS = 6000 };
	size_t *offs = malloc(STEPS * sizeof *offs);
	assert_non_null(offs);
	for (uint64_t seed = 1; seed <= 8; seed++) {
		int nfail;
		run_sequence(seed * 0x9E3779B97F4A7C15ULL, STEPS, 0, offs, &nfail);
		assert_int_equal(nfail, 0);
	}
	free(offs);
}

/* Determinism (the arena relies on it): the same sequence gives the same
 * offsets, with and without a limit. */
static void test_mp_deterministic(void **state)
{
	(void)state;
	enum { STEPS = 4000 };
	size_t *a = malloc(STEPS * sizeof *a), *b = malloc(STEPS * sizeof *b);
	assert_non_null(a);
	assert_non_null(b);
	for (uint64_t seed = 100; seed < 104; seed++)
		for (size_t limit = 0; limit <= (8u << 20); limit += (8u << 20)) {
			int fa, fb;
			int na = run_sequence(seed, STEPS, limit, a, &fa);
			int nb = run_sequence(seed, STEPS, limit, b, &fb);
			assert_int_equal(na, nb);
			assert_int_equal(fa, fb);
			assert_memory_equal(a, b, na * sizeof *a);
		}
	free(a);
	free(b);
}

/* A limit: placements never pass it, and place_alloc fails exactly when no gap
 * fits and the top would pass it (checked inside run_sequence); the
 * sequences are sized so that failures really happen. */
static void test_mp_limit(void **state)
{
	(void)state;
	enum { STEPS = 4000 };
	size_t *offs = malloc(STEPS * sizeof *offs);
	assert_non_null(offs);
	int total_fail = 0;
	for (uint64_t seed = 7; seed < 12; seed++) {
		int nfail;
		run_sequence(seed, STEPS, (size_t)(2 + seed) << 20, offs, &nfail);
		total_fail += nfail;
	}
	assert_true(total_fail > 0);
	free(offs);
}

/* Hand-made cases of the documented policy: 0 and 1 byte take one unit;
 * the smallest fitting gap wins over a larger lower one; freed neighbours
 * merge; a block at the top lowers it and swallows the gap below. */
static void test_mp_policy(void **state)
{
	(void)state;
	place_t mp;
	size_t o[6];
	const size_t U = PLACE_ALIGN;

	place_init(&mp, 0);
	assert_int_equal(place_round(0), 0);
	assert_int_equal(place_round(1), U);
	assert_int_equal(place_round(U + 1), 2 * U);
	assert_int_equal(place_alloc(&mp, 0, &o[0]), 0);          /* [0, U) */
	assert_int_equal(place_alloc(&mp, 3 * U, &o[1]), 0);      /* [U, 4U) */
	assert_int_equal(place_alloc(&mp, 1, &o[2]), 0);          /* [4U, 5U) */
	assert_int_equal(place_alloc(&mp, U, &o[3]), 0);          /* [5U, 6U) */
	assert_int_equal(place_alloc(&mp, 2 * U - 7, &o[4]), 0);  /* [6U, 8U) */
	assert_int_equal(place_alloc(&mp, U, &o[5]), 0);          /* [8U, 9U) */
	assert_int_equal(o[0], 0);
	assert_int_equal(o[1], U);
	assert_int_equal(o[4], 6 * U);
	assert_int_equal(mp.live, 9 * U);
	/* gaps [U, 4U) and [6U, 8U): a 2U block prefers the exact, higher gap */
	assert_int_equal(place_release(&mp, o[1], 3 * U), 0);
	assert_int_equal(place_release(&mp, o[4], 2 * U - 7), 0);
	size_t x;
	assert_int_equal(place_alloc(&mp, 2 * U, &x), 0);
	assert_int_equal(x, 6 * U);
	assert_int_equal(place_release(&mp, x, 2 * U), 0);
	/* releasing [4U, 6U) merges [U, 8U) into one gap */
	assert_int_equal(place_release(&mp, o[2], 1), 0);
	assert_int_equal(place_release(&mp, o[3], U), 0);
	assert_int_equal(mp.nfree, 1);
	assert_int_equal(mp.free[0].off, U);
	assert_int_equal(mp.free[0].size, 7 * U);
	/* releasing the top block swallows it: top falls to U */
	assert_int_equal(place_release(&mp, o[5], U), 0);
	assert_int_equal(mp.top, U);
	assert_int_equal(mp.nfree, 0);
	assert_int_equal(mp.high, 9 * U);
	assert_int_equal(mp.peak_live, 9 * U);
	place_free(&mp);

	/* a limit of exactly 2U holds two units, not three */
	place_init(&mp, 2 * U);
	assert_int_equal(place_alloc(&mp, U, &o[0]), 0);
	assert_int_equal(place_alloc(&mp, 1, &o[1]), 0);
	assert_int_equal(place_alloc(&mp, 1, &o[2]), -1);
	assert_int_equal(mp.live, 2 * U);
	place_free(&mp);
}

/* ---- the forward context: plan once, execute in exactly place.high ------ */

#define FWD_MAX_TENSORS 256

typedef struct {
	size_t off[FWD_MAX_TENSORS], nbytes[FWD_MAX_TENSORS];
	int    n;
} trace_t;

static tensor_t traced(fwd_t *fx, trace_t *tr, tensor_t t)
{
	if (tr->n < FWD_MAX_TENSORS) {
		tr->off[tr->n] = t.off;
		tr->nbytes[tr->n] = t.nbytes;
		tr->n++;
	}
	return t;
}

/* A small model-like pass over L rows of width c: an embedding, a stack of
 * residual blocks (layernorm, two linears with a gated activation, temporaries
 * of mixed lifetimes) and a chunked pairwise stage whose chunk buffers come and
 * go.  Every tensor's placement is traced; out gets the [L, c] result. */
static void forward(fwd_t *fx, trace_t *tr, int L, int c, const float *in, float *out,
                    const lin_t *l1, const lin_t *l2, const ln_t *ln)
{
	tensor_t x = traced(fx, tr, fwd_new2(fx, L, c));
	fwd_set(fx, x, in);
	for (int blk = 0; blk < 3; blk++) {
		tensor_t h = traced(fx, tr, fwd_new2(fx, L, c));
		op_layernorm(fx, h, x, ln);
		tensor_t u = traced(fx, tr, fwd_new2(fx, L, 2 * c));
		tensor_t g = traced(fx, tr, fwd_new2(fx, L, 2 * c));
		op_linear(fx, u, h, l1, 0.0f);
		op_linear(fx, g, h, l1, 0.0f);
		fwd_drop(fx, &h);
		op_binary(fx, u, u, g, BE_GATE);
		fwd_drop(fx, &g);
		op_linear(fx, x, u, l2, 1.0f);   /* residual: x += u W2^T + b2 */
		fwd_drop(fx, &u);
	}
	/* chunked pairwise stage: [chunk, L, 2c] features reduced to a row sum */
	tensor_t acc = traced(fx, tr, fwd_new2(fx, L, 2 * c));
	tensor_t empty = traced(fx, tr, fwd_new1(fx, 0));   /* placed nowhere */
	op_fill(fx, acc, 0.0f);
	for (int i0 = 0; i0 < L; i0 += 3) {
		int ni = L - i0 < 3 ? L - i0 : 3;
		tensor_t pair = traced(fx, tr, fwd_new3(fx, ni, L, 2 * c));
		op_outer(fx, pair, x, x, i0, 0);
		for (int i = 0; i < ni; i++)
			op_axpby(fx, tensor_rows(acc, 0, L), tensor_reshape2(tensor_rows(pair, i, 1), L, 2 * c), 1.0f / L, 1.0f);
		fwd_drop(fx, &pair);
	}
	fwd_drop(fx, &empty);
	tensor_t y = traced(fx, tr, fwd_new2(fx, L, c));
	op_linear(fx, y, acc, l2, 0.0f);
	fwd_drop(fx, &acc);
	op_binary(fx, y, y, x, BE_ADD);
	fwd_drop(fx, &x);
	fwd_get(fx, y, out);
	fwd_drop(fx, &y);
}

typedef struct {
	int    L, c;
	float *w1, *b1, *w2, *b2, *lw, *lb, *in;
	lin_t  l1, l2;
	ln_t   ln;
} fwd_model_t;

static float *rand_floats(uint64_t *s, size_t n, float amp)
{
	float *x = malloc((n ? n : 1) * sizeof *x);
	assert_non_null(x);
	for (size_t i = 0; i < n; i++)
		x[i] = amp * ((float)(rng_next(s) >> 40) / (float)(1 << 24) * 2.0f - 1.0f);
	return x;
}

static void fwd_model_init(fwd_model_t *m, int L, int c, uint64_t seed)
{
	m->L = L; m->c = c;
	m->w1 = rand_floats(&seed, (size_t)2 * c * c, 0.3f);
	m->b1 = rand_floats(&seed, (size_t)2 * c, 0.1f);
	m->w2 = rand_floats(&seed, (size_t)2 * c * c, 0.3f);
	m->b2 = rand_floats(&seed, (size_t)c, 0.1f);
	m->lw = rand_floats(&seed, (size_t)c, 1.0f);
	m->lb = rand_floats(&seed, (size_t)c, 1.0f);
	m->in = rand_floats(&seed, (size_t)L * c, 1.0f);
	m->l1 = (lin_t){ .w = m->w1, .b = m->b1, .out = 2 * c, .in = c };
	m->l2 = (lin_t){ .w = m->w2, .b = m->b2, .out = c, .in = 2 * c };
	m->ln = (ln_t){ m->lw, m->lb, c, 1e-5f };
}

static void fwd_model_free(fwd_model_t *m)
{
	free(m->w1); free(m->b1); free(m->w2); free(m->b2);
	free(m->lw); free(m->lb); free(m->in);
}

/* Planning then executing the same pass in an arena of exactly place.high
 * bytes: every tensor lands at the planned offset, inside the arena, the
 * execution's peaks equal the plan's, and the result is finite. */
static void test_fx_plan_then_execute(void **state)
{
	(void)state;
	be_t *be = be_cpu_init(1);
	assert_non_null(be);
	static const int shapes[][2] = { { 1, 1 }, { 5, 3 }, { 17, 8 }, { 33, 5 } };
	for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
		fwd_model_t m;
		fwd_model_init(&m, shapes[s][0], shapes[s][1], 42 + s);
		float *out = calloc((size_t)m.L * m.c, sizeof *out);
		assert_non_null(out);
		static trace_t plan, exec;
		fwd_t fx;

		memset(&plan, 0, sizeof plan);
		memset(&exec, 0, sizeof exec);
		fwd_plan_begin(&fx, be);
		forward(&fx, &plan, m.L, m.c, m.in, out, &m.l1, &m.l2, &m.ln);
		assert_int_equal(fx.err, 0);
		size_t high = fx.place.high, peak = fx.place.peak_live;
		assert_true(high > 0);
		assert_int_equal(fx.place.live, 0);
		fwd_end(&fx);

		assert_int_equal(fwd_exec_begin(&fx, be, high), 0);
		forward(&fx, &exec, m.L, m.c, m.in, out, &m.l1, &m.l2, &m.ln);
		assert_int_equal(fx.err, 0);
		assert_int_equal(fx.place.high, high);
		assert_int_equal(fx.place.peak_live, peak);
		fwd_end(&fx);

		assert_int_equal(plan.n, exec.n);
		assert_memory_equal(plan.off, exec.off, plan.n * sizeof *plan.off);
		assert_memory_equal(plan.nbytes, exec.nbytes, plan.n * sizeof *plan.nbytes);
		for (int i = 0; i < exec.n; i++)
			assert_true(exec.off[i] + exec.nbytes[i] <= high);
		for (int i = 0; i < m.L * m.c; i++)
			assert_true(out[i] == out[i] && out[i] - out[i] == 0.0f);   /* finite */

		/* one unit less and the same pass cannot run: the plan is tight */
		assert_int_equal(fwd_exec_begin(&fx, be, high - PLACE_ALIGN), 0);
		memset(&exec, 0, sizeof exec);
		forward(&fx, &exec, m.L, m.c, m.in, out, &m.l1, &m.l2, &m.ln);
		assert_int_equal(fx.err, STATUS_PLAN);   /* a bug, not out of memory */
		assert_non_null(strstr(fx.errmsg, "exhausted"));
		fwd_end(&fx);

		free(out);
		fwd_model_free(&m);
	}
	be_free(be);
}

/* An executing pass never places a tensor outside its arena, not even in an
 * arena of 0 bytes (where the planner's limit of 0 means "unbounded"). */
static void test_fx_zero_arena(void **state)
{
	(void)state;
	be_t *be = be_cpu_init(1);
	fwd_t fx;
	assert_non_null(be);
	assert_int_equal(fwd_exec_begin(&fx, be, 0), 0);
	tensor_t e = fwd_new2(&fx, 0, 7);        /* empty tensors need no arena */
	assert_int_equal(fx.err, 0);
	assert_int_equal(e.nbytes, 0);
	tensor_t t = fwd_new2(&fx, 2, 2);
	assert_int_equal(fx.err, STATUS_PLAN);
	assert_null(t.d);
	fwd_end(&fx);
	be_free(be);
}

static int refuse_alloc(be_t *be, size_t n, void **p) { *p = NULL; return -1; }

/* A backend that cannot reserve the arena is an event: fwd_exec_begin
 * returns a negative status with a message, and later work is skipped. */
static void test_fx_arena_refused(void **state)
{
	(void)state;
	be_t *cpu = be_cpu_init(1);
	assert_non_null(cpu);
	be_t be = *cpu;
	be.alloc = refuse_alloc;
	fwd_t fx;
	assert_true(fwd_exec_begin(&fx, &be, 1 << 20) < 0);
	assert_true(fx.err < 0);
	assert_non_null(strstr(fx.errmsg, "arena"));
	tensor_t t = fwd_new2(&fx, 4, 4);
	assert_null(t.d);
	assert_int_equal(fx.place.live, 0);
	fwd_end(&fx);
	be_free(cpu);
}

/* one pass mixing tensors and host buffers: a host buffer lives across
 * a tensor, another is transient; executing, the buffers are written */
static void host_pass(fwd_t *fx, char **keep)
{
	char *a = fwd_host(fx, 1000);
	tensor_t t = fwd_new2(fx, 16, 16);
	char *b = fwd_host(fx, 3000);
	if (!fx->planning && !fx->err) {
		memset(a, 1, 1000);
		memset(b, 2, 3000);
	}
	fwd_host_drop(fx, b, 3000);
	fwd_drop(fx, &t);
	*keep = a;
}

/* Host buffers are planned: in the arena where backend memory is host
 * memory, else in a host arena of the planned size; executing places them
 * as planned, and fwd_host_keep hands over the memory live buffers lie in. */
static void test_fx_host(void **state)
{
	(void)state;
	be_t *cpu = be_cpu_init(1);
	assert_non_null(cpu);
	be_t dev = *cpu;
	dev.host_mem = 0;
	for (int shared = 1; shared >= 0; shared--) {
		be_t *be = shared ? cpu : &dev, *owner = NULL;
		fwd_t fx;
		char *keep;

		fwd_plan_begin(&fx, be);
		host_pass(&fx, &keep);
		assert_int_equal(fx.err, 0);
		size_t high = fx.place.high, host = fx.host_place.high;
		size_t tensor = place_round(sizeof(float) * 256);
		size_t hosted = place_round(1000) + place_round(3000);
		assert_int_equal(high, shared ? tensor + hosted : tensor);
		assert_int_equal(host, shared ? 0 : hosted);
		fwd_end(&fx);

		assert_int_equal(fwd_exec_begin(&fx, be, high), 0);
		assert_int_equal(fwd_exec_host(&fx, host), 0);
		host_pass(&fx, &keep);
		assert_int_equal(fx.err, 0);
		assert_int_equal(fx.place.high, high);
		assert_int_equal(fx.host_place.high, host);
		void *mem = fwd_host_keep(&fx, &owner);
		assert_true(keep == (char *)mem);       /* the first placement */
		assert_ptr_equal(owner, shared ? be : NULL);
		fwd_end(&fx);
		assert_int_equal(keep[999], 1);         /* still there */
		if (owner) owner->free(owner, mem);
		else free(mem);

		/* one unit less host memory and the pass cannot run */
		if (!shared) {
			assert_int_equal(fwd_exec_begin(&fx, be, high), 0);
			assert_int_equal(fwd_exec_host(&fx, host - PLACE_ALIGN), 0);
			host_pass(&fx, &keep);
			assert_int_equal(fx.err, STATUS_PLAN);
			assert_non_null(strstr(fx.errmsg, "host arena"));
			fwd_end(&fx);
		}
	}
	be_free(cpu);
}

/* backend allocations and releases, counted (test_fx_kept) */
static int kept_allocs, kept_frees;
static be_t *kept_cpu;
static int count_alloc(be_t *be, size_t n, void **p) { kept_allocs++; return kept_cpu->alloc(kept_cpu, n, p); }
static void count_free(be_t *be, void *p) { kept_frees++; kept_cpu->free(kept_cpu, p); }

/* A worker's kept arena (arena.h): passes that fit reuse it with no
 * allocation or release; a larger one grows it (one release, one
 * reservation); fwd_end leaves it, and a host buffer kept from it is not
 * handed over (the arena still owns it); arena_free releases it once. */
static void test_fx_kept(void **state)
{
	(void)state;
	assert_non_null(kept_cpu = be_cpu_init(1));
	be_t be = *kept_cpu;
	be.alloc = count_alloc;
	be.free = count_free;
	kept_allocs = kept_frees = 0;
	arena_t a;
	arena_init(&a, &be);
	static const size_t sizes[] = { 1 << 16, 1 << 14, 1 << 16, 1 << 18, 1 << 12 };
	void *first = NULL;
	for (int i = 0; i < 5; i++) {
		fwd_t fx;
		be_t *owner = &be;
		assert_int_equal(fwd_exec_begin_kept(&fx, &a, sizes[i]), 0);
		tensor_t t = fwd_new2(&fx, 16, 16);
		assert_int_equal(fx.err, 0);
		assert_ptr_equal(t.d, a.base);
		if (i == 0) first = a.base;
		if (i < 3) assert_ptr_equal(a.base, first);
		assert_null(fwd_host_keep(&fx, &owner));
		assert_null(owner);
		fwd_end(&fx);
		assert_non_null(a.base);
	}
	assert_int_equal(kept_allocs, 2);   /* 64 KiB, then grown to 256 KiB */
	assert_int_equal(kept_frees, 1);
	assert_int_equal(a.size, 1 << 18);
	assert_int_equal(a.reserves, 2);
	arena_free(&a);
	assert_int_equal(kept_frees, 2);
	assert_null(a.base);
	be_free(kept_cpu);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mp_policy),
		cmocka_unit_test(test_mp_random_unbounded),
		cmocka_unit_test(test_mp_deterministic),
		cmocka_unit_test(test_mp_limit),
		cmocka_unit_test(test_fx_plan_then_execute),
		cmocka_unit_test(test_fx_zero_arena),
		cmocka_unit_test(test_fx_arena_refused),
		cmocka_unit_test(test_fx_host),
		cmocka_unit_test(test_fx_kept),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
