/* ops.h (prefix op_) - the op layer model code is written against.
 *
 * Each op checks shapes (a mismatch is a bug, recorded as fx->err), does
 * nothing while planning or after an error, and otherwise calls the
 * backend.  Weights are float32 in backend memory, described by lin_t / ln_t,
 * but for Linear matrices held as bfloat16 (lin_t.bf16) or binary16 (lin_t.f16).
 * Shapes: [..., d] means any leading dimensions, flattened to rows.
 */
#ifndef ESMBATCH_COMPUTE_OPS_H
#define ESMBATCH_COMPUTE_OPS_H

#include "compute/forward.h"

/* nn.Linear: w [out, in] (checkpoint layout), b [out] or NULL; bf16: w
 * is bfloat16 data (be->weights_bf16), to be passed to GEMMs as such
 * (be_gemm_t.a_bf16 / b_bf16); f16: w is the file's binary16 data
 * (be->weights_f16, weights_lin_f16), for op_linear only (be_gemm_t.b_f16) */
typedef struct { const float *w, *b; int out, in, bf16, f16; } lin_t;
/* nn.LayerNorm over the last dimension: w, b [d] */
typedef struct { const float *w, *b; int d; float eps; } ln_t;

/* y: [..., out] = x: [..., in] W^T + b + beta * y */
void op_linear(fwd_t *fx, tensor_t y, tensor_t x, const lin_t *l, float beta);
/* op_linear on x of bf16 data ([.., in] elements in a [.., in / 2] float
 * tensor, as op_outer writes it) and a bf16 weight: no stage */
void op_linear_bf16(fwd_t *fx, tensor_t y, tensor_t x, const lin_t *l, float beta);
/* y: [..., d] = LayerNorm(x: [..., d]); y may be x */
void op_layernorm(fwd_t *fx, tensor_t y, tensor_t x, const ln_t *ln);
/* x: [...] = act(x) */
void op_act(fwd_t *fx, tensor_t x, be_act_t kind);
/* y = a OP b, same element counts; y may be a or b */
void op_binary(fwd_t *fx, tensor_t y, tensor_t a, tensor_t b, be_bin_t kind);
/* y = alpha * x + beta * y */
void op_axpby(fwd_t *fx, tensor_t y, tensor_t x, float alpha, float beta);
void op_fill(fwd_t *fx, tensor_t x, float value);
/* x: [..., d] softmax over d in place */
void op_softmax(fwd_t *fx, tensor_t x);
/* n bytes of weights held in host memory (be->host_alloc) into the
 * pass's tensor dst (at its start), on the backend's copy path: after the
 * ops so far (dst may be a buffer they still read), beside the ops that
 * follow until op_fetch_wait (be_t.fetch); needs be_supports(be,
 * BE_OP_FETCH) */
void op_fetch(fwd_t *fx, tensor_t dst, const void *src, size_t n);
/* the ops that follow run after every op_fetch before */
void op_fetch_wait(fwd_t *fx);
/* y: [rows, d] = scale * table[idx[r]] ; table: [*, d] weights; idx host */
void op_gather(fwd_t *fx, tensor_t y, const float *table, const int32_t *idx, float scale);
/* y: [B, A, ...] = x: [A, B, ...] */
void op_transpose(fwd_t *fx, tensor_t y, tensor_t x);
/* y: [ni, L, 2c], y[i, j] = (q[j] * k[i0+i], q[j] - k[i0+i]); q, k: [L, c];
 * bf16: y is bf16 data, [ni, L, 2c] elements in a [ni, L, c] float tensor */
void op_outer(fwd_t *fx, tensor_t y, tensor_t q, tensor_t k, int i0, int bf16);
/* x: [ni, nj, c], x[i, j] = sum_k a[i, k] * b[j, k] (per channel);
 * a: [ni, nk, c], b: [nj, nk, c]; needs be_supports(be, BE_OP_TRIMUL) */
void op_trimul(fwd_t *fx, tensor_t x, tensor_t a, tensor_t b);
/* The structure module's point steps (be_t.ipa_in / ipa_out / ipa_rigid):
 * state: [L, 7] backbone frames (quaternion, translation) -> rig: [L, 12];
 * qp: [L, 3 H Pq], kvp: [L, 3 H (Pq + Pv)] -> qa, ka: [L, H, 3 Pq + 2],
 * vp: [L, H, 3 Pv]; hw, bb: [H] weights (ipa.head_weights,
 * ipa.linear_b.bias) */
typedef struct {
	tensor_t qa, ka, vp, rig;        /* outputs */
	tensor_t state, qp, kvp;         /* inputs */
	const float *hw, *bb;
	int H, Pq, Pv;
} op_ipa_in_t;
void op_ipa_in(fwd_t *fx, const op_ipa_in_t *a);
/* op: [L, n 3] attended points -> cat: [L, W], columns c0 .. c0 + 4 n - 1
 * (x, y, z, norm in each residue's frame of rig: [L, 12]) */
void op_ipa_out(fwd_t *fx, tensor_t cat, int64_t c0, tensor_t op, tensor_t rig, float eps);
/* state: [L, 7] <- state composed with upd: [L, 6]; frame: [L, 7] = the
 * new state with its translation times scale.  upd and frame empty
 * (tensor_t){ 0 }: state = identity frames. */
void op_ipa_rigid(fwd_t *fx, tensor_t state, tensor_t frame, tensor_t upd, float scale);
/* x: [..., d] += fc2(relu(fc1(LayerNorm(x)))) in one pass over x (read
 * once, written once; be_transition_t): fc1 [h, d], fc2 [d, h], both bf16 or
 * neither */
void op_transition(fwd_t *fx, tensor_t x, const ln_t *ln, const lin_t *fc1, const lin_t *fc2);
/* The triangle multiplication's output side in one pass over z: rows
 * i0..i0+nc-1 of z: [L, L, c] (or of z^T, in place, where transposed)
 * += (ln(x) W^T + b) * sigmoid(gv), lin = linear_z: [c, c];
 * gv: [nc, L, c] gate logits (linear_g of the update's input);
 * x: the product, [nc, L, c] channel-last or, where channel_major,
 * [c, nc L]; x and gv apart from z */
typedef struct {
	tensor_t z; int i0;
	int transposed;      /* 1: the rows are those of z^T */
	tensor_t x;
	int channel_major;   /* 1: x is [c, nc L] */
	tensor_t gv;
	const ln_t *ln; const lin_t *lin;
} op_trimul_out_t;
void op_trimul_out(fwd_t *fx, const op_trimul_out_t *t);
/* z: [ni, L, c] (rows i0.. of the pair tensor) += table[bin of (i0 + i,
 * j) + 1] (be_t.relpos); table: [2 bins + 2, c] weights; residx: [L]
 * residue indices as floats, in backend memory */
void op_relpos(fwd_t *fx, tensor_t z, const float *table, tensor_t residx, int i0, int bins);
/* raw strided-batched GEMM and fused attention (pointers from tensors);
 * g->prec = BE_PREC_FP32 where the model needs fp32 inputs whatever
 * --precision says, BE_PREC_AUTO (0) for the device's precision */
void op_gemm(fwd_t *fx, const be_gemm_t *g);
void op_attn(fwd_t *fx, const be_attn_t *a);
/* layer norm and the linears that consume it in one pass over x (raw,
 * pointers from tensors; be_ln_linear_t): x read once, each output group
 * written once (twice where its beta adds to it) */
void op_ln_linear(fwd_t *fx, const be_ln_linear_t *p);

#endif
