/* fx.h - the forward context: activation tensors placed in one arena.
 *
 * A forward pass is written once and run twice.  Planning (fx_plan_begin):
 * every tensor gets a shape and an offset from the placement allocator (mp.h)
 * but no memory, and ops only check shapes; at the end mp.high is the arena
 * the pass needs and mp.peak_live its peak allocated bytes.  Executing
 * (fx_exec_begin): the arena is reserved once from the backend at that size
 * and the same sequence of fx_new/fx_drop calls replays the same offsets, so
 * nothing is allocated inside the pass.
 *
 * Errors are sticky: the first failing op or placement records a message in
 * fx->err/errmsg and every later op is skipped; the caller checks fx->err
 * once at the end.
 */
#ifndef ESMBATCH_FX_H
#define ESMBATCH_FX_H

#include <stddef.h>
#include <stdint.h>

#include "be.h"
#include "mp.h"

#define TN_MAX_DIMS 4

typedef struct {
	float  *d;                /* data in backend memory (a placeholder while planning) */
	int     nd;
	int64_t ne[TN_MAX_DIMS];  /* shape, outermost first */
	size_t  off;              /* offset in the arena */
	size_t  nbytes;           /* bytes owned; 0 for a view or an empty tensor */
} tn_t;

typedef struct {
	be_t   *be;
	int     planning;     /* 1: shapes and placement only */
	int     no_memo;      /* 1: fx_memo_begin never skips (tests) */
	mp_t    mp;
	char   *arena;        /* executing: arena base in backend memory */
	size_t  arena_size;
	int     err;          /* 0, or the first failure's status */
	char    errmsg[256];
} fx_t;

/* Start a planning pass: no memory, ops check shapes only. */
void fx_plan_begin(fx_t *fx, be_t *be);
/* Start an executing pass in an arena of arena_size bytes reserved from the
 * backend (the mp.high of a planning pass).  Returns 0, or -2 when the
 * backend refuses the reservation (an out-of-memory event, not a crash).
 * ESMBATCH_FAULT=oom:N in the environment refuses the Nth reservation of
 * the process (a test hook). */
int  fx_exec_begin(fx_t *fx, be_t *be, size_t arena_size);
/* Release the arena and the placement state. */
void fx_end(fx_t *fx);

/* Planning shortcut for a run of identical steps (trunk blocks, LM layers).
 * A step's effect on the placement depends only on the placement state it
 * starts from; when a step starts from the state the memo's step started
 * from, its outcome (end state, highest top, highest live bytes) is the
 * memo's, and planning applies it without running the step.  Every step
 * tried against one memo must make the same sequence of fx_new/fx_drop
 * calls, and leave every tensor it returns in place (in-place updates). */
typedef struct {
	int    valid;
	mp_t   in, out;       /* placement state at the step's start and end */
	size_t high, peak;    /* highest top and live bytes during the step */
	size_t saved_high, saved_peak;
} fx_memo_t;

void fx_memo_init(fx_memo_t *m);
void fx_memo_free(fx_memo_t *m);
/* 1: planning, and the step is known: its outcome was applied, skip it.
 * 0: run the step, then call fx_memo_end. */
int  fx_memo_begin(fx_t *fx, fx_memo_t *m);
void fx_memo_end(fx_t *fx, fx_memo_t *m);

/* New tensor of the given shape, placed in the arena.  On failure fx->err is
 * set and an empty tensor returned. */
tn_t fx_new(fx_t *fx, int nd, const int64_t *ne);
tn_t fx_new1(fx_t *fx, int64_t a);
tn_t fx_new2(fx_t *fx, int64_t a, int64_t b);
tn_t fx_new3(fx_t *fx, int64_t a, int64_t b, int64_t c);
tn_t fx_new4(fx_t *fx, int64_t a, int64_t b, int64_t c, int64_t d);
/* Release a tensor made by fx_new (views and empty tensors are ignored) and
 * clear it. */
void fx_drop(fx_t *fx, tn_t *t);

/* Rows r0..r0+n-1 of the leading dimension, as a view. */
tn_t tn_rows(tn_t t, int64_t r0, int64_t n);
/* The same data seen with another shape of equal element count. */
tn_t tn_reshape(tn_t t, int nd, const int64_t *ne);
tn_t tn_reshape2(tn_t t, int64_t a, int64_t b);
tn_t tn_reshape3(tn_t t, int64_t a, int64_t b, int64_t c);
int64_t tn_numel(tn_t t);

/* Record a failure (first one wins); returns the status given. */
int  fx_fail(fx_t *fx, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Copy a whole tensor between backend memory and a host buffer of
 * tn_numel(t) floats.  No-ops while planning. */
void fx_get(fx_t *fx, tn_t t, float *host);
void fx_set(fx_t *fx, tn_t t, const float *host);

#endif
