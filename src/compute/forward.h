/* forward.h (prefix fwd_, tensor_) - the forward context: activation tensors placed in one arena.
 *
 * A forward pass is written once and run twice.  Planning (fwd_plan_begin):
 * every tensor gets a shape and an offset from the placement allocator (placement.h)
 * but no memory, and ops only check shapes; at the end place.high is the arena
 * the pass needs and place.peak_live its peak allocated bytes.  Executing
 * (fwd_exec_begin): the arena is reserved once from the backend at that size
 * and the same sequence of fwd_new/fwd_drop calls replays the same offsets, so
 * nothing is allocated inside the pass.
 *
 * Errors are sticky: the first failing op or placement records a message in
 * fx->err/errmsg and every later op is skipped; the caller checks fx->err
 * once at the end.
 */
#ifndef ESMBATCH_COMPUTE_FORWARD_H
#define ESMBATCH_COMPUTE_FORWARD_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "compute/arena.h"
#include "compute/placement.h"
#include "io/safetensors.h"

#define TENSOR_MAX_DIMS 4

typedef struct {
	float  *d;                /* data in backend memory (a placeholder while planning) */
	int     nd;
	int64_t ne[TENSOR_MAX_DIMS];  /* shape, outermost first */
	size_t  off;              /* offset in the arena */
	size_t  nbytes;           /* bytes owned; 0 for a view or an empty tensor */
} tensor_t;

/* The emit hook (--dump-tensors): receives each intermediate the model
 * names, as host data (SAFETENSORS_F32 or SAFETENSORS_I64), while a pass
 * executes; the data is only valid during the call. */
typedef void (*fwd_emit_fn)(void *ctx, const char *name, safetensors_dtype_t dtype, int nd,
                            const int64_t *shape, const void *data);

#define FWD_GRAPH_OPS 4   /* operands a recorded step is keyed by */

/* one recorded step of an executing pass (fwd_graph_begin) */
typedef struct {
	int      id;
	int      valid;
	place_t  in, out;                  /* placement state at its start and end */
	float   *ops[FWD_GRAPH_OPS];       /* the operands' data it was recorded on */
	int64_t  ne[FWD_GRAPH_OPS][TENSOR_MAX_DIMS];
	void    *g;                        /* the backend's recording */
} fwd_graph_t;

typedef struct {
	be_t   *be;
	int     planning;     /* 1: shapes and placement only */
	int     no_memo;      /* 1: fwd_memo_begin never skips (tests) */
	place_t place;        /* tensors in the arena */
	char   *arena;        /* executing: arena base in backend memory */
	arena_t *kept;        /* executing in a worker's kept arena (not
	                         released by fwd_end), or NULL */
	size_t  arena_size;
	place_t host_place;   /* host buffers where backend memory is not host memory */
	char   *host;         /* executing: their host arena (fwd_exec_host) */
	size_t  host_size;
	fwd_emit_fn emit;     /* or NULL; set after fwd_plan_begin/fwd_exec_begin, the
	                         same in both passes (its staging is planned) */
	void   *emit_ctx;
	/* activation floats the ops have read and written so far, planning
	 * included (ops.c: each operand counted once per op; weights, biases
	 * and host data not counted; nor steps a memo skips): a pass's
	 * memory traffic, which trunk_block_passes divides into pair-tensor
	 * passes */
	int64_t traffic;
	fwd_graph_t *graphs;  /* [graphs_cap] recordings of this pass (fwd_graph_begin) */
	int     ngraphs;
	size_t  graphs_cap;
	int     graph_rec;    /* 1 + the index in graphs being recorded, or 0 */
	int     graph_runs;   /* replays so far */
	int     err;          /* 0, or the first failure's status (util/status.h:
	                         STATUS_OOM, STATUS_PLAN, else STATUS_FAIL) */
	char    errmsg[256];
} fwd_t;

/* A test hook: 1 when ESMBATCH_FAULT=KIND:N is set and this is the Nth
 * call for KIND in the process, else 0.  Kinds: "oom" (fwd_exec_begin),
 * "nan" (model_fold's outputs). */
int  fwd_fault(const char *kind);
/* Start a planning pass: no memory, ops check shapes only. */
void fwd_plan_begin(fwd_t *fx, be_t *be);
/* Start an executing pass in an arena of arena_size bytes reserved from the
 * backend (the place.high of a planning pass).  Returns 0, or STATUS_OOM when the
 * backend refuses the reservation (an out-of-memory event, not a crash).
 * ESMBATCH_FAULT=oom:N in the environment refuses the Nth reservation of
 * the process (a test hook). */
int  fwd_exec_begin(fwd_t *fx, be_t *be, size_t arena_size);
/* The same in a worker's kept arena (arena.h), on its backend: reserved
 * only when it holds less than arena_size (released first), else reused;
 * it stays the worker's after fwd_end.  A refusal (ESMBATCH_FAULT's
 * included) leaves it holding nothing. */
int  fwd_exec_begin_kept(fwd_t *fx, arena_t *kept, size_t arena_size);
/* Reserve the host arena of an executing pass: host_size bytes of host
 * memory (the host_place.high of a planning pass; 0 where the backend's memory is
 * host memory).  0, or STATUS_OOM when the host refuses it. */
int  fwd_exec_host(fwd_t *fx, size_t host_size);
/* Release the arenas (but not one handed over by fwd_host_keep) and the
 * placement state. */
void fwd_end(fwd_t *fx);

/* Host memory of one pass (results, geometry, index lists, dump staging) is
 * planned like the tensors: placed by the same best-fit rule, in the arena
 * itself where the backend's memory is host memory (be->host_mem, the CPU),
 * else in a host arena placed by host_place and reserved by fwd_exec_host.  Either
 * way a plan covers every byte a pass allocates.  While planning the pointer
 * is a placeholder, never to be dereferenced.  NULL (fx->err set) on
 * failure.  fwd_host_drop releases a buffer with the size it was given. */
void *fwd_host(fwd_t *fx, size_t nbytes);
void  fwd_host_drop(fwd_t *fx, void *p, size_t nbytes);
/* Hand the memory the host buffers lie in to the caller, so that buffers
 * still live (a fold's results) outlive the pass: returns the arena (*be set
 * to the backend, whose free releases it) or the host arena (*be = NULL,
 * free() releases it); fwd_end then leaves it alone.  NULL while planning,
 * and NULL (*be = NULL) for a kept arena: the buffers stay valid in it
 * until the worker's next pass. */
void *fwd_host_keep(fwd_t *fx, be_t **be);
/* Laying out several host buffers in one block: the next nbytes at *off
 * (64-byte aligned; *off advances), base + that offset, or NULL when base
 * is NULL (a sizing run: *off ends as the block's size). */
void *fwd_piece(char *base, size_t *off, size_t nbytes);

/* Planning shortcut for a run of identical steps (trunk blocks, LM layers).
 * A step's effect on the placement depends only on the placement state it
 * starts from; when a step starts from the state the memo's step started
 * from, its outcome (end state, highest top, highest live bytes) is the
 * memo's, and planning applies it without running the step.  Every step
 * tried against one memo must make the same sequence of fwd_new/fwd_drop
 * calls, place no host buffers (fwd_host), and leave every tensor it returns
 * in place (in-place updates). */
typedef struct {
	int    valid;
	place_t   in, out;       /* placement state at the step's start and end */
	size_t high, peak;    /* highest top and live bytes during the step */
	size_t saved_high, saved_peak;
} fwd_memo_t;

void fwd_memo_init(fwd_memo_t *m);
void fwd_memo_free(fwd_memo_t *m);
/* 1: planning, and the step is known: its outcome was applied, skip it.
 * 0: run the step, then call fwd_memo_end. */
int  fwd_memo_begin(fwd_t *fx, fwd_memo_t *m);
void fwd_memo_end(fwd_t *fx, fwd_memo_t *m);

/* Recording a step that repeats within one executing pass (a trunk block
 * in every recycle) on backends with graphs (be_supports(be,
 * BE_OP_GRAPH): CUDA), so that a later run is one replay instead of its
 * kernel launches.  1: a recording of step id made from the same
 * placement state and on the same operands (ops[nops], their data and
 * shapes; nops <= FWD_GRAPH_OPS) exists: it was replayed and the placement
 * set to the state the step ended in; skip the step.  0: run the step,
 * then call fwd_graph_end, which ends the recording (if one was begun),
 * runs it and keeps it for later.  The step must make no upload,
 * download, gather, wait or host buffer (the backend refuses them while
 * recording: the step fails), must touch only memory whose addresses are
 * the same each time (the arena, weights), and must place the same way
 * from the same state.  Off (0, nothing recorded) while planning, with an
 * emit hook, after an error and on backends without graphs.  A failure
 * within the step ends and discards the recording.  Recordings are freed
 * by fwd_end: never reused by another pass. */
int  fwd_graph_begin(fwd_t *fx, int id, const tensor_t *ops, int nops);
void fwd_graph_end(fwd_t *fx);

/* New tensor of the given shape, placed in the arena.  On failure fx->err is
 * set and an empty tensor returned. */
tensor_t fwd_new(fwd_t *fx, int nd, const int64_t *ne);
tensor_t fwd_new1(fwd_t *fx, int64_t a);
tensor_t fwd_new2(fwd_t *fx, int64_t a, int64_t b);
tensor_t fwd_new3(fwd_t *fx, int64_t a, int64_t b, int64_t c);
tensor_t fwd_new4(fwd_t *fx, int64_t a, int64_t b, int64_t c, int64_t d);
/* Release a tensor made by fwd_new (views and empty tensors are ignored) and
 * clear it. */
void fwd_drop(fwd_t *fx, tensor_t *t);

/* Rows r0..r0+n-1 of the leading dimension, as a view. */
tensor_t tensor_rows(tensor_t t, int64_t r0, int64_t n);
/* The same data seen with another shape of equal element count. */
tensor_t tensor_reshape(tensor_t t, int nd, const int64_t *ne);
tensor_t tensor_reshape2(tensor_t t, int64_t a, int64_t b);
tensor_t tensor_reshape3(tensor_t t, int64_t a, int64_t b, int64_t c);
int64_t tensor_numel(tensor_t t);

/* 1 when p lies in the pass's arena (an activation tensor, not a weight),
 * planning included */
int  fwd_owns(const fwd_t *fx, const void *p);

/* Record a failure (first one wins); returns the status given. */
int  fwd_fail(fwd_t *fx, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Hand an intermediate to fx->emit (nothing without one): a tensor, staged
 * in a host buffer of the pass (planned in both passes); host floats of the
 * given shape; host int32s [n], staged as int64.  The host forms only call
 * the hook while executing. */
void fwd_emit(fwd_t *fx, const char *name, tensor_t t);
void fwd_emit_host(fwd_t *fx, const char *name, const float *x, int nd, const int64_t *shape);
void fwd_emit_i32(fwd_t *fx, const char *name, const int32_t *x, int n);

/* Copy a whole tensor between backend memory and a host buffer of
 * tensor_numel(t) floats.  No-ops while planning. */
void fwd_get(fwd_t *fx, tensor_t t, float *host);
void fwd_set(fwd_t *fx, tensor_t t, const float *host);

#endif
