/* esm2.h (prefix esm2_) - the ESM-2 language model and ESMFold's projection of its layers to
 * the trunk input s_s_0.
 *
 * tokens -> embedding (token-dropout rescaling) -> N pre-LayerNorm blocks
 * (self-attention with the rotary embedding applied as q and k are loaded,
 * GELU feed-forward) -> final LayerNorm; the N+1
 * representations (without <cls>/<eos>) are combined as they are produced by
 * softmax(esm_s_combine), then esm_s_mlp, plus the amino-acid embedding.
 *
 * Host-held layers (esm2_load's nhost; --stream-lm): their six matrices
 * stay in host memory (weights_lin_host), and a pass copies each such
 * layer into one of two device slots of its arena as it comes to it
 * (op_fetch): the copy of the next host-held layer runs beside the layers
 * before it, and a slot is refilled only after the layer that read it ran.
 * The device holds the two slots (planned like any tensor of the pass)
 * instead of the layers (esm2_host_bytes); the results are the same bits.
 */
#ifndef ESMBATCH_MODEL_ESM2_H
#define ESMBATCH_MODEL_ESM2_H

#include "model/hparams.h"
#include "compute/ops.h"
#include "model/weights.h"

typedef struct {
	ln_t  attn_ln;          /* esm.encoder.layer.N.attention.LayerNorm */
	lin_t q, k, v;          /* esm.encoder.layer.N.attention.self.{query,key,value} */
	lin_t o;                /* esm.encoder.layer.N.attention.output.dense */
	ln_t  ffn_ln;           /* esm.encoder.layer.N.LayerNorm */
	lin_t fc1;              /* esm.encoder.layer.N.intermediate.dense [ffn, D] */
	lin_t fc2;              /* esm.encoder.layer.N.output.dense [D, ffn] */
	int   host;             /* 1: q, k, v, o, fc1, fc2's matrices are in host
	                           memory (their biases are not): fetched */
} esm2_layer_t;

typedef struct {
	int          nlayers;
	int          nhost;     /* of which host-held (esm2_layer_t.host) */
	esm2_layer_t *layers;
	const float *embed;     /* esm.embeddings.word_embeddings.weight [vocab, D] */
	ln_t         final_ln;  /* esm.encoder.emb_layer_norm_after */
	float       *combine;   /* softmax of esm_s_combine [layers + 1], host */
	ln_t         s_mlp_ln;  /* esm_s_mlp.0 */
	lin_t        s_mlp_1;   /* esm_s_mlp.1 [c_s, D] */
	lin_t        s_mlp_3;   /* esm_s_mlp.3 [c_s, c_s] */
	const float *aa_embed;  /* embedding.weight [23, c_s] */
	/* host [nlayers, hd/2]: each layer's rotary inverse frequencies,
	 * esm.encoder.layer.N.attention.self.rotary_embeddings.inv_freq, else
	 * esm.rotary_embeddings.inv_freq (shared), else 1 / 10000^(2i/hd) as
	 * ESM-2 builds them; the attention rotates q and k as it loads them
	 * (be_attn_t.rope) */
	float       *freq;
} esm2_t;

/* Load (be != NULL) or only check (be == NULL) the weights. 0 or negative.
 * nhost: layers held in host memory (at most the config's; spread evenly,
 * the last layer first); a be that does not fetch (be_supports(be,
 * BE_OP_FETCH) 0) holds none (logged). */
int  esm2_load(esm2_t *lm, const hparams_t *c, weights_t *w, be_t *be, int nhost);
/* bytes of the host-held layers' matrices as be holds them (bf16 where
 * be->weights_bf16): what the device does not hold of weights_bytes */
int64_t esm2_host_bytes(const esm2_t *lm, const be_t *be);
void esm2_free(esm2_t *lm);

/* tokens: host [L+2]; aatype: host [L]; s_s_0: [L, c_s] (written).
 * hidden: host [layers+1, L+2, D] and combined: host [L, D] receive the
 * intermediates when not NULL. */
void esm2_forward(fwd_t *fx, const esm2_t *lm, const hparams_t *c, const int32_t *tokens,
                  const int *aatype, tensor_t s_s_0, float *hidden, float *combined);

#endif
