/* structure.h (prefix structure_) - the ESMFold structure module (HF EsmFoldStructureModule, OpenFold
 * style): input LayerNorms and projection, then sm_blocks iterations with
 * shared weights of invariant point attention, transition, backbone update
 * (quaternion) and angle resnet; after each block the backbone frames,
 * torsion angles and atom14 positions; after the last, the all-atom tail.
 *
 * Split of the work: the whole block loop runs through the op layer on
 * the backend, the per-residue geometry included (rigids, points into and
 * out of the frames, the quaternion update: op_ipa_in / op_ipa_out /
 * op_ipa_rigid), with no copy to or from the host; every block's frames,
 * unnormalised angles and states are kept in backend tensors and
 * downloaded once after the last block.  The host then does the pure
 * post-processing (angle normalisation, torsions to atoms, masks),
 * skipped while planning.
 *
 * Mask: the engine folds one unpadded sequence per pass, so the reference's
 * residue mask is all ones and its inf * (mask - 1) logit term is zero; it
 * is not carried.  Multimer linkers are masked only in the outputs (the
 * caller applies geom_apply_residue_mask to atom37 and atom37_mask).
 *
 * Struct fields carry their checkpoint names; P = trunk.structure_module.
 */
#ifndef ESMBATCH_MODEL_STRUCTURE_H
#define ESMBATCH_MODEL_STRUCTURE_H

#include "model/hparams.h"
#include "compute/forward.h"
#include "compute/ops.h"
#include "model/weights.h"

/* P.transition.layers.N */
typedef struct {
	lin_t l1, l2, l3;       /* .linear_{1,2,3} [c, c] + bias */
} structure_trans_t;

/* P.angle_resnet.layers.N */
typedef struct {
	lin_t l1, l2;           /* .linear_{1,2} [r, r] + bias */
} structure_resblock_t;

typedef struct {
	ln_t   ln_s;            /* P.layer_norm_s [c] */
	ln_t   ln_z;            /* P.layer_norm_z [c_z] */
	lin_t  lin_in;          /* P.linear_in [c, c] */
	lin_t  q;               /* P.ipa.linear_q [H d, c] */
	lin_t  kv;              /* P.ipa.linear_kv [2 H d, c] */
	lin_t  q_pts;           /* P.ipa.linear_q_points [3 H Pq, c] */
	lin_t  kv_pts;          /* P.ipa.linear_kv_points [3 H (Pq + Pv), c] */
	lin_t  b;               /* P.ipa.linear_b [H, c_z] (its bias goes in by op_ipa_in) */
	float *head_w;          /* P.ipa.head_weights [H] (op_ipa_in takes their softplus) */
	lin_t  out;             /* P.ipa.linear_out [c, H (d + 4 Pv + c_z)] */
	ln_t   ln_ipa;          /* P.layer_norm_ipa [c] */
	int    ntrans;
	structure_trans_t *trans;      /* P.transition.layers.N */
	ln_t   ln_trans;        /* P.transition.layer_norm [c] */
	lin_t  bb;              /* P.bb_update.linear [6, c] */
	lin_t  ar_in;           /* P.angle_resnet.linear_in [r, c] */
	lin_t  ar_initial;      /* P.angle_resnet.linear_initial [r, c] */
	int    nres;
	structure_resblock_t *res;     /* P.angle_resnet.layers.N */
	lin_t  ar_out;          /* P.angle_resnet.linear_out [2 angles, r] */
} structure_t;

/* Host outputs of one structure-module pass: one block, laid out by
 * structure_out_layout; allocated by structure_out_alloc and owned by the structure_out_t until
 * structure_out_free, or placed in a pass's host memory (fwd_host).  blocks = cfg
 * sm_blocks, A = sm_angles (7). */
typedef struct {
	int    L, blocks, c;
	float *frames;          /* [blocks, L, 7] quaternion w,x,y,z + translation (Angstrom) */
	float *positions;       /* [blocks, L, 14, 3] atom14 coordinates */
	float *angles;          /* [blocks, L, A, 2] (sin, cos), normalised */
	float *unnorm_angles;   /* [blocks, L, A, 2] before normalisation */
	float *states;          /* [blocks, L, c] single state after each block */
	float *sidechain;       /* [L, 8, 4, 4] rigid-group frames of the last block */
	float *atom37;          /* [L, 37, 3] from the last block's atom14 */
	float *atom14_mask;     /* [L, 14] */
	float *atom37_mask;     /* [L, 37] (no linker masking) */
} structure_out_t;

/* Load (be != NULL) or only check (be == NULL) the weights.  0 or negative
 * (each bad tensor logged). */
int  structure_load(structure_t *sm, const hparams_t *c, weights_t *w, be_t *be);
void structure_free(structure_t *sm);

/* Lay out the outputs of length L from base (frames first, at base), or
 * with base NULL only size them; returns the block's bytes. */
size_t structure_out_layout(structure_out_t *o, const hparams_t *c, int L, char *base);
/* 0, or negative when out of memory (then nothing is held). */
int  structure_out_alloc(structure_out_t *o, const hparams_t *c, int L);
void structure_out_free(structure_out_t *o);

/* One pass.
 *   s: [L, sm_c_s]  in: trunk2sm_s(s_s); out: the last block's state (the
 *                   input of the lDDT head);
 *   z: [L, L, sm_c_z] in: trunk2sm_z(s_z); out: layer_norm_z of it;
 *   aatype: host [L] (0..20);
 *   out: host results (laid out for this L), filled when executing.
 * Three downloads in all, after the last block.  Errors are recorded in fx. */
void structure_forward(fwd_t *fx, const structure_t *sm, const hparams_t *c, tensor_t s, tensor_t z,
                const int *aatype, structure_out_t *out);

#endif
