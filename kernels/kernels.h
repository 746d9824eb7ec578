/* kernels.h - the launchers of the CUDA kernels, callable from C.
 *
 * Every launcher enqueues its kernel(s) on the given stream, checks the
 * launch (cudaGetLastError) and returns 0, or a negative status: -EINVAL for
 * a shape it does not support, -EIO for a failed launch.  Nothing waits for
 * the kernel to finish.  All tensors are row-major float32 in device memory;
 * strides are in elements; shapes are written outermost first.
 */
#ifndef ESMBATCH_KERNELS_H
#define ESMBATCH_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* the CUDA error behind this host thread's last -EIO from a launcher */
const char *cu_last_error(void);

/* every kernel that takes dynamic shared memory may take up to bytes of
 * shared memory per block (the device's sharedMemPerBlockOptin) on the
 * current device: once per device, before its first launch, so that no
 * launcher sets a kernel attribute while other threads launch (0 or -EIO;
 * elementwise.cu); a launch that asks for more fails (-EIO).  One per
 * kernel file that has such kernels: */
int cu_smem_init(int bytes);
int cu_attn_smem_init(int bytes);
int cu_flash_attn_smem_init(int bytes);
int cu_ln_linear_smem_init(int bytes);
int cu_transition_smem_init(int bytes);
int cu_trimul_out_smem_init(int bytes);

/* the largest head dimension cu_attn / cu_flash_attn accept */
#define CU_ATTN_DMAX 256
#define CU_FLASH_DMAX 64

/* --- norm.cu --- */
/* y, x: [rows, d]; w, b: [d]; y may alias x */
int cu_layernorm(cudaStream_t s, float *y, const float *x, int64_t rows, int d,
                 const float *w, const float *b, float eps);
/* x: [rows, d], softmax over d in place */
int cu_softmax(cudaStream_t s, float *x, int64_t rows, int d);

/* --- elementwise.cu --- */
/* x: [n] = act(x) */
int cu_act(cudaStream_t s, float *x, int64_t n, be_act_t kind);
/* y, a, b: [n], y = a OP b; y may alias a or b */
int cu_binary(cudaStream_t s, float *y, const float *a, const float *b, int64_t n, be_bin_t kind);
/* y, x: [n], y = alpha * x + beta * y (beta == 0 ignores y) */
int cu_axpby(cudaStream_t s, float *y, const float *x, int64_t n, float alpha, float beta);
/* x: [n] = value */
int cu_fill(cudaStream_t s, float *x, int64_t n, float value);
/* y: [rows, d] = scale * table[idx[r], :]; idx: device int32 [rows] */
int cu_gather(cudaStream_t s, float *y, const float *table, const int32_t *idx,
              int64_t rows, int d, float scale);
/* y: [B, A, C] = x: [A, B, C] with the two leading dims swapped */
int cu_transpose(cudaStream_t s, float *y, const float *x, int64_t A, int64_t B, int64_t C);
/* y: [ni, L, 2c], y[i, j] = (q[j] * k[i0+i], q[j] - k[i0+i]); q, k: [L, c];
 * bf16: y is bfloat16 data, rounded to nearest even */
int cu_outer(cudaStream_t s, float *y, const float *q, const float *k, int i0, int ni, int L, int c, int bf16);
/* c: batch x [m, n] rows of stride ldc, batch stride stride_c:
 * c = beta * c + bias[n] (beta == 0 ignores c; bias may be NULL) */
int cu_gemm_prologue(cudaStream_t s, float *c, int64_t ldc, int64_t stride_c, int batch,
                     int m, int n, float beta, const float *bias);
/* c: batch x [m, n] rows of stride ldc, batch stride stride_c:
 * c = max(c + bias[n], 0) (bias may be NULL): a GEMM's bias and ReLU
 * epilogue after a product with beta 0, in one pass over c */
int cu_gemm_epilogue_relu(cudaStream_t s, float *c, int64_t ldc, int64_t stride_c, int batch,
                          int m, int n, const float *bias);
/* y: [rows, cols] packed bfloat16 (round to nearest even) = x: [rows, cols]
 * float32 rows of stride ld >= cols: a GEMM operand for a bf16 weight */
int cu_to_bf16(cudaStream_t s, uint16_t *y, const float *x, int64_t rows, int cols, int64_t ld);

/* --- attn.cu --- */
/* fused streaming attention as described by be_attn_t (backend.h); D <= CU_ATTN_DMAX */
int cu_attn(cudaStream_t s, const be_attn_t *a);

/* --- flash_attn.cu --- */
/* the same attention on tensor cores: q, k, v and the probabilities rounded
 * to bfloat16, products and softmax statistics in fp32; D <= CU_FLASH_DMAX */
int cu_flash_attn(cudaStream_t s, const be_attn_t *a);

/* --- ipa.cu --- */
/* the structure module's point steps as be_t.ipa_in, ipa_out, ipa_rigid
 * describe them (backend.h): rig: [L, 12] of state: [L, 7] (one block
 * reduces the mean translation), then qa, ka: [L, H, 3 Pq + 2], vp: [L, H,
 * 3 Pv] of qp: [L, 3, H Pq], kvp: [L, 3, H (Pq + Pv)]; hw, bb: [H] */
int cu_ipa_in(cudaStream_t s, float *qa, float *ka, float *vp, float *rig, const float *state,
              const float *qp, const float *kvp, const float *hw, const float *bb,
              int L, int H, int Pq, int Pv);
/* cat: [L, ldc], columns 0 .. 4 n - 1, from op: [L, n, 3] and rig: [L, 12] */
int cu_ipa_out(cudaStream_t s, float *cat, int64_t ldc, const float *op, const float *rig,
               int L, int n, float eps);
/* state: [L, 7] composed with upd: [L, 6] (NULL: identity); frame: [L, 7] or NULL */
int cu_ipa_rigid(cudaStream_t s, float *state, float *frame, const float *upd, int L, float scale);

/* --- transition.cu --- */
/* the transition of be_transition_t in one kernel: x: [rows, d] read once
 * and written once.  t->bf16: on the tensor cores (bf16 mma.sync, fp32
 * accumulation) at d 16, 32 and 128 with h a multiple of 32 (the pair
 * transition), the hidden layer in shared memory only; elsewhere with the
 * same bf16 rounding on the CUDA cores; fp32 weights: in fp32 on the CUDA
 * cores.  d up to about 5000.  The sequence transition (cu_seqtr_fits)
 * is the caller's: cu_seqtr_ln, then two GEMMs; cu_transition does it on
 * the CUDA cores where those cannot run. */
int cu_transition(cudaStream_t s, const be_transition_t *t);
/* the widest d of cu_seqtr_ln */
#define CU_SEQTR_DMAX 1024
/* 1 where t is a sequence transition: bf16, d and h multiples of 16, d
 * <= CU_SEQTR_DMAX, not one of the pair kernel's shapes */
int cu_seqtr_fits(const be_transition_t *t);
/* xn: [rows, d] bf16 on 16 bytes = LN(x) of t's rows (t as cu_seqtr_fits
 * takes it, rows d < 2^31; -EINVAL otherwise) */
int cu_seqtr_ln(cudaStream_t s, const be_transition_t *t, uint16_t *xn);

/* --- ln_linear.cu --- */
/* the largest k (input features) cu_ln_linear accepts */
#define CU_LNLIN_KMAX 512
/* be_ln_linear_t (backend.h): bf16 weights (w_bf16) on tensor cores, the
 * normed rows rounded to bfloat16 (fp32 statistics and accumulation);
 * fp32 weights in fp32 */
int cu_ln_linear(cudaStream_t s, const be_ln_linear_t *p);

/* --- trimul_out.cu --- */
/* the largest channel count cu_trimul_out takes */
#define CU_TRIMUL_OUT_CMAX 256
/* the triangle multiplication's output side as be_trimul_out_t says
 * (backend.h): z rows += (LayerNorm(x) W^T + b) * sigmoid(gv).  bf16 1:
 * on tensor cores, the normalised x and W rounded to bfloat16, statistics
 * and products in fp32; 0: all fp32 (then W must be fp32).
 * c <= CU_TRIMUL_OUT_CMAX */
int cu_trimul_out(cudaStream_t s, const be_trimul_out_t *t, int bf16);

/* --- relpos.cu --- */
/* z: [ni, L, c] += table[bin + 1] of each pair (i0 + i, j) as be_t.relpos
 * describes it; table: [2 bins + 2, c]; residx: device [L] floats */
int cu_relpos(cudaStream_t s, float *z, const float *table, const float *residx, int i0, int ni,
              int L, int c, int bins);

#ifdef __cplusplus
}
#endif

#endif
