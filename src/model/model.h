/* model.h (prefix model_) - the whole ESMFold model on one backend, and one fold.
 *
 * model_load() asks every part (language model, trunk, structure module,
 * heads) for its tensors; the model_t then holds them in backend memory,
 * owned by the weights_t it was loaded from (keep it open).  The forward
 * pass runs twice: model_plan() plans it (shapes and placement only, giving
 * the arena size and the peak allocated bytes; the scheduler does this once
 * per record and chunk while placing it), model_fold() runs it for real
 * inside an arena reserved at exactly that size.  Every host buffer of a fold
 * (results, recycle bins, index lists, dump staging) is planned with the
 * tensors (fwd_host): a fold allocates nothing else.
 */
#ifndef ESMBATCH_MODEL_MODEL_H
#define ESMBATCH_MODEL_MODEL_H

#include <stddef.h>

#include "backend/backend.h"
#include "compute/arena.h"
#include "model/hparams.h"
#include "model/heads.h"
#include "model/esm2.h"
#include "model/structure.h"
#include "io/safetensors.h"
#include "model/tokenizer.h"
#include "model/trunk.h"
#include "model/weights.h"

typedef struct {
	const hparams_t *cfg;
	be_t        *be;       /* the weights' backend; for a shapes-only model the
	                          backend its passes are planned for (its ops decide
	                          the trunk's form), or NULL (planned as on CUDA) */
	esm2_t       lm;
	trunk_t      trunk;
	structure_t         sm;
	heads_t      heads;
} model_t;

/* How to run one fold. */
typedef struct {
	int          chunk;    /* rows per chunk of every pair op; 0 = unchunked */
	int          passes;   /* trunk passes (recycles + 1); 0 = the config's max_recycles */
	fwd_emit_fn  emit;     /* receives the named intermediates, or NULL */
	void        *emit_ctx;
	int          no_memo;  /* planning runs every block (fwd_memo_t; tests) */
	arena_t     *arena;    /* executing: the worker's kept arena (grown when
	                          short), or NULL: one reserved for this fold */
} model_run_t;

/* The emit hook of --dump-tensors: each intermediate as NAME/TENSOR into
 * the writer w (set emit = model_dump_emit, emit_ctx = a model_dump_t). */
typedef struct {
	safetensors_writer_t *w;
	const char           *name;
} model_dump_t;
void model_dump_emit(void *ctx, const char *tensor, safetensors_dtype_t dtype, int nd,
                     const int64_t *shape, const void *data);

/* What the planning pass of one fold found: the arena a fold reserves, and
 * its host buffers.  Made by model_plan (the scheduler, once per record and
 * chunk), taken by model_fold. */
typedef struct {
	size_t arena;          /* activation arena = reserved bytes; 0: no plan */
	size_t peak_live;      /* peak allocated bytes */
	size_t host;           /* host arena bytes (0 where backend memory is host
	                          memory: then in `arena`) */
} model_plan_t;

/* Host results of one fold.  They lie in the fold's own planned host
 * memory (fwd_host_keep: the arena on the CPU, else the host arena), which
 * the model_out_t holds until model_out_free; where that is a kept arena
 * (model_run_t.arena on a host-memory backend) mem is NULL and the results
 * are valid until the worker's next fold. */
typedef struct {
	int    L;
	float *atom37;         /* [L, 37, 3] Angstrom */
	float *atom37_mask;    /* [L, 37] linker residues masked */
	float *plddt;          /* [L, 37] 0..1 */
	float *pae;            /* [L, L] Angstrom */
	float  mean_plddt;     /* 0..1 */
	float  ptm;
	float  max_pae;
	int    passes;         /* trunk passes run */
	size_t arena;          /* planned = reserved activation bytes */
	size_t peak_live;      /* planned peak allocated bytes */
	size_t exec_arena;     /* the executing pass's own high-water mark */
	size_t exec_peak_live; /* and its own peak allocated bytes */
	size_t host;           /* planned host arena bytes (0 where backend
	                          memory is host memory: then in `arena`) */
	size_t exec_host;      /* the executing pass's own host high-water mark */
	void  *mem;            /* the memory the results lie in */
	be_t  *mem_be;         /* the backend whose free releases it, or NULL */
	int64_t device_used;   /* driver total - free with the arena held
	                          (be->mem_info); -1 without one */
} model_out_t;

/* be == NULL only checks names and shapes (e.g. against a manifest).
 * lm_host: the language model's layers held in host memory and fetched
 * as a pass reaches them (esm2_load's nhost; --stream-lm), 0: none. */
int  model_load(model_t *m, weights_t *w, be_t *be, int lm_host);
void model_free(model_t *m);

/* Plan one fold of t as r runs it on m's backend (a planning pass).  0, or
 * -1 after logging. */
int  model_plan(const model_t *m, const tok_t *t, const model_run_t *r, model_plan_t *p);
/* Fold one encoded sequence as planned by p (model_plan with the same m's
 * backend kind, t and r); p NULL or without a plan: planned here first.
 * 0, or negative with a one-line reason in err
 * (util/status.h: STATUS_OOM when an arena cannot be reserved, an event
 * to retry smaller; STATUS_PLAN when the pass outgrew its plan, a bug;
 * STATUS_FAIL with "non-finite output (WHAT)" when a coordinate, pLDDT,
 * pTM or PAE value is a NaN or an infinity: nothing of it is returned). */
int  model_fold(const model_t *m, const tok_t *t, const model_run_t *r, const model_plan_t *p,
                model_out_t *out, char *err, size_t errcap);
void model_out_free(model_out_t *o);

#endif
