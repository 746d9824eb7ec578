/* heads.h (prefix heads_) - ESMFold's output heads: pLDDT (lddt_head on the structure
 * module's last state), pTM and predicted aligned error (ptm_head on the
 * trunk's pair state s_z), the distogram (distogram_head on s_z, symmetrised)
 * and the LM logits (lm_head on the trunk's s_s).
 *
 * The heavy parts (the projections, the softmax over bins and the expected
 * value over bins, a GEMM against the bin-value table) run through the op
 * layer; only per-residue / per-pair reductions run on the host.  pLDDT is
 * on the reference's 0..1 scale.
 *
 * Struct fields carry their checkpoint names.
 */
#ifndef ESMBATCH_MODEL_HEADS_H
#define ESMBATCH_MODEL_HEADS_H

#include "model/hparams.h"
#include "compute/forward.h"
#include "compute/ops.h"
#include "model/weights.h"

#define HEADS_LDDT_BINS 50   /* pLDDT bins of width 1/50 on 0..1 */
#define HEADS_PAE_BINS  64   /* ptm_head / distogram_head bins */
#define HEADS_PAE_MAX   31   /* max_bin of compute_tm / the aligned error */
#define HEADS_LM_TOKENS 23   /* lm_head outputs: 20 amino acids + X, pad, mask */

typedef struct {
	ln_t  lddt_ln;   /* lddt_head.0 [sm_c_s] */
	lin_t lddt_1;    /* lddt_head.1 [lddt_hidden, sm_c_s] */
	lin_t lddt_2;    /* lddt_head.2 [lddt_hidden, lddt_hidden] */
	lin_t lddt_3;    /* lddt_head.3 [37 x 50, lddt_hidden] */
	lin_t ptm;       /* ptm_head [64, c_z] */
	lin_t disto;     /* distogram_head [64, c_z] */
	lin_t lm;        /* lm_head [23, c_s] */
} heads_t;

/* Load (be != NULL) or only check (be == NULL) the weights.  0 or negative. */
int heads_load(heads_t *hd, const hparams_t *c, weights_t *w, be_t *be);

/* pLDDT per atom37 slot: softmax(lddt_head(states)) . bin centres.
 * states: [L, sm_c_s] (the structure module's last state)
 * -> plddt: host [L, 37]; plddt_res: host [L] = plddt[:, CA] (may be NULL). */
void heads_plddt(fwd_t *fx, const heads_t *hd, tensor_t states, float *plddt, float *plddt_res);

/* pTM and predicted aligned error from ptm_head(s_z), as compute_tm and
 * compute_predicted_aligned_error with max_bin 31, 64 bins, all residues
 * weighted 1.  s_z: [L, L, c_z]; chunk: rows of logits at a time (0 = all)
 * -> pae: host [L, L] (may be NULL); *ptm; *max_pae (the last bin centre). */
void heads_pae(fwd_t *fx, const heads_t *hd, tensor_t s_z, int chunk, float *pae, double *ptm,
               float *max_pae);

/* distogram_logits = (d + d^T) / 2 with d = distogram_head(s_z).
 * s_z: [L, L, c_z] -> out: [L, L, 64] */
void heads_distogram(fwd_t *fx, const heads_t *hd, tensor_t s_z, tensor_t out);

/* lm_logits = lm_head(s_s).  s_s: [L, c_s] -> out: [L, 23] */
void heads_lm(fwd_t *fx, const heads_t *hd, tensor_t s_s, tensor_t out);

/* fair-esm's mean pLDDT: sum(plddt * mask) / sum(mask) over [L, 37], with
 * mask the atom37 existence mask (for multimers already multiplied by the
 * linker mask, as fair-esm does before averaging).  NaN when no atom exists,
 * as in the reference. */
double heads_mean_plddt(int L, const float *plddt, const float *atom37_mask);

#endif
