/* trunk.h (prefix trunk_) - the ESMFold folding trunk: relative positions, the triangular
 * self-attention blocks and the recycling input.
 *
 * Every pair operation works on row chunks of the pair state, so that
 * besides z itself (and one triangle-multiplication projection the size of
 * z) only a transient proportional to the chunk is alive.
 * Triangle and sequence attention use the backend's streaming attention,
 * so no [L, L, L] score tensor exists at any chunk size.
 *
 * Masks: the engine folds one unpadded sequence per forward pass (batches
 * are formed by the scheduler, never by padding), so every mask of the
 * reference is all ones and none is carried here.  Chain breaks act through
 * residue_index only, as in the reference.
 *
 * Struct fields carry their checkpoint names; N is the block index.
 */
#ifndef ESMBATCH_MODEL_TRUNK_H
#define ESMBATCH_MODEL_TRUNK_H

#include <stddef.h>
#include <stdint.h>

#include "model/hparams.h"
#include "compute/forward.h"
#include "compute/ops.h"
#include "model/weights.h"

/* distance bins of the recycled structure (trunk.recycle_disto) */
#define TRUNK_RECYCLE_BINS 15

/* rows per chunk of a length-L pair state: chunk, or L when chunk is 0 or
 * not below L */
static inline int trunk_rows(int chunk, int L) { return chunk > 0 && chunk < L ? chunk : L; }
/* rows of the chunk of n rows that starts at row i0 (the last one may be shorter) */
static inline int trunk_chunk(int L, int i0, int n) { return L - i0 < n ? L - i0 : n; }

/* OpenFold TriangleMultiplicativeUpdate; P = trunk.blocks.N.tri_mul_{out,in} */
typedef struct {
	ln_t  ln_in;    /* P.layer_norm_in [c_z] */
	lin_t a_p;      /* P.linear_a_p [c_z, c_z] + bias */
	lin_t a_g;      /* P.linear_a_g [c_z, c_z] + bias */
	lin_t b_p;      /* P.linear_b_p [c_z, c_z] + bias */
	lin_t b_g;      /* P.linear_b_g [c_z, c_z] + bias */
	ln_t  ln_out;   /* P.layer_norm_out [c_z] */
	lin_t z;        /* P.linear_z [c_z, c_z] + bias */
	lin_t g;        /* P.linear_g [c_z, c_z] + bias */
	lin_t proj;     /* [5 c_z, c_z]: the four projections and linear_g
	                 * above are views of its rows (one allocation,
	                 * weights_lin_group): f's p and g, r's p and g,
	                 * linear_g (see trunk_trimul) */
} trunk_trimul_t;

/* OpenFold TriangleAttention; P = trunk.blocks.N.tri_att_{start,end} */
typedef struct {
	ln_t  ln;       /* P.layer_norm [c_z] */
	lin_t bias;     /* P.linear [H_z, c_z], no bias */
	lin_t q, k, v;  /* P.mha.linear_{q,k,v} [c_z, c_z], no bias */
	lin_t g;        /* P.mha.linear_g [c_z, c_z] + bias */
	lin_t o;        /* P.mha.linear_o [c_z, c_z] + bias */
	lin_t proj;     /* [H_z + 4 c_z, c_z]: bias, q, k, v and g above are
	                 * views of its rows, in that order (one allocation,
	                 * weights_lin_group), multiplied by one ln_linear */
} trunk_triatt_t;

/* ResidueMLP: x + fc2(relu(fc1(ln(x)))); P = trunk.blocks.N.mlp_{seq,pair} */
typedef struct {
	ln_t  ln;       /* P.mlp.0 [c] */
	lin_t fc1;      /* P.mlp.1 [4c, c] + bias */
	lin_t fc2;      /* P.mlp.3 [c, 4c] + bias */
} trunk_mlp_t;

/* TriangularSelfAttentionBlock; P = trunk.blocks.N */
typedef struct {
	ln_t  ln_1;          /* P.layernorm_1 [c_s] */
	ln_t  p2s_ln;        /* P.pair_to_sequence.layernorm [c_z] */
	lin_t p2s;           /* P.pair_to_sequence.linear [H_s, c_z], no bias */
	lin_t att_proj;      /* P.seq_attention.proj [3 c_s, c_s], no bias */
	lin_t att_g;         /* P.seq_attention.g_proj [c_s, c_s] + bias */
	lin_t att_o;         /* P.seq_attention.o_proj [c_s, c_s] + bias */
	trunk_mlp_t mlp_seq; /* P.mlp_seq */
	ln_t  s2p_ln;        /* P.sequence_to_pair.layernorm [c_s] */
	lin_t s2p_proj;      /* P.sequence_to_pair.proj [c_z, c_s] + bias */
	lin_t s2p_o;         /* P.sequence_to_pair.o_proj [c_z, c_z] + bias */
	trunk_trimul_t mul_out;   /* P.tri_mul_out */
	trunk_trimul_t mul_in;    /* P.tri_mul_in */
	trunk_triatt_t att_start; /* P.tri_att_start */
	trunk_triatt_t att_end;   /* P.tri_att_end */
	trunk_mlp_t mlp_pair;     /* P.mlp_pair */
} trunk_block_t;

typedef struct {
	int            nblocks;        /* trunk.num_blocks */
	trunk_block_t *blocks;
	const float   *relpos;         /* trunk.pairwise_positional_embedding.embedding.weight [2 bins + 2, c_z] */
	ln_t           recycle_s_norm; /* trunk.recycle_s_norm [c_s] */
	ln_t           recycle_z_norm; /* trunk.recycle_z_norm [c_z] */
	const float   *recycle_disto;  /* trunk.recycle_disto.weight [15, c_z] */
	lin_t          trunk2sm_s;     /* trunk.trunk2sm_s [sm_c_s, c_s] + bias */
	lin_t          trunk2sm_z;     /* trunk.trunk2sm_z [sm_c_z, c_z] + bias */
} trunk_t;

/* Load every trunk tensor with the shape cfg implies.  be NULL: check names
 * and shapes only (pointers stay NULL).  0, or negative (each bad tensor
 * logged). */
int  trunk_load(trunk_t *t, const hparams_t *c, weights_t *w, be_t *be);
void trunk_free(trunk_t *t);

/* One trunk pass: z += relpos(residx), then every block.
 * s: [L, c_s], z: [L, L, c_z], both updated in place; residx: host int32 [L].
 * chunk: 0 = whole rows at once, else rows per chunk of every pair op. */
void trunk_iter(fwd_t *fx, const trunk_t *t, const hparams_t *c, tensor_t s, tensor_t z,
                const int32_t *residx, int chunk);

/* One block.  s: [L, c_s], z: [L, L, c_z] in place; chunk as trunk_iter. */
void trunk_block(fwd_t *fx, const trunk_block_t *b, const hparams_t *c, tensor_t s, tensor_t z, int chunk);

/* Recycling input of a pass:
 *   s = s_s_0 + recycle_s_norm(prev_s)
 *   z = recycle_z_norm(prev_z) + recycle_disto[bins[i L + j]]
 * s, s_s_0, prev_s: [L, c_s]; z, prev_z: [L, L, c_z] (z may be prev_z:
 * in place); bins: host int32 [L * L].  For the first pass prev_s and
 * prev_z are zeros and bins all 0.  chunk as trunk_iter. */
void trunk_recycle_in(fwd_t *fx, const trunk_t *t, tensor_t s, tensor_t z, tensor_t s_s_0, tensor_t prev_s,
                      tensor_t prev_z, const int32_t *bins, int chunk);

/* Activation arena (bytes, the planner's high-water mark) of one block at
 * length L with this chunk on backend be (whose ops decide the form of the
 * triangle multiplication), s and z included; weights need not be loaded.
 * 0 when planning fails. */
size_t trunk_block_peak(const hparams_t *c, be_t *be, int L, int chunk);

/* Memory traffic of one block at length L with this chunk on backend be,
 * in pair-tensor passes: the activation floats its ops read and write
 * (fwd_t.traffic, each operand once per op), over L L c_z; the sequence
 * track's small tensors are included.  The table in trunk.c breaks it
 * down.  -1 when planning fails. */
double trunk_block_passes(const hparams_t *c, be_t *be, int L, int chunk);

#endif
