/* cpu_avx512.h (prefix avx512_; cpu_has_avx512) - the CPU backend's own float32
 * kernels (AVX-512F): GEMM, the triangle-multiplication product, the
 * attention's softmax step, the gate and the layer norm.
 *
 * For be_gemm_t products with A not transposed (the large operand read in
 * place, k contiguous; B float32, or binary16 / bfloat16 with transb: b_f16,
 * b_bf16); the CPU backend splits C into blocks and runs one
 * avx512_block per task, falling back to CBLAS where cpu_has_avx512() is 0.
 */
#ifndef ESMBATCH_BACKEND_CPU_AVX512_H
#define ESMBATCH_BACKEND_CPU_AVX512_H

#include <stdint.h>

#include "backend/backend.h"

#define AVX512_KB 256   /* k per packed block of op(B) */
#define AVX512_NB 256   /* most columns one avx512_block may cover */
#define AVX512_TRI_KB 64   /* k per block of the triangle product */

/* 1 when this CPU runs the kernel (x86-64 with AVX-512F), else 0 */
int cpu_has_avx512(void);

/* panels of 32 columns in n columns; floats of a packed column block of
 * op(B): nj columns, all of k */
#define AVX512_PANELS(n) (((n) + 31) / 32)
#define AVX512_PACKED(k, nj) ((int64_t)(k) * AVX512_PANELS(nj) * 32)

/* op(B[b]) packed whole for avx512_block: packed: [AVX512_PACKED(k, n)], its column
 * block j0 (a multiple of AVX512_NB) at packed + j0 k.  This writes panel p,
 * columns 32 p .. 32 p + 31 (p < AVX512_PANELS(n)), so that threads can share
 * the packing; k >= 1. */
void avx512_pack_b(const be_gemm_t *g, int64_t b, int p, float *packed);

/* C[b][i0 .. i0+mi, j0 .. j0+nj] = alpha A[b] op(B[b]) + beta C + bias over
 * the whole of k (k >= 1); g->transa must be 0, nj <= AVX512_NB.  packed: those
 * columns from avx512_pack_b, or NULL: then they are packed here, one k block
 * at a time, into P (scratch of AVX512_KB * AVX512_NB floats, 64-byte aligned).
 * Both are owned by the caller.  ct: C is stored transposed, element
 * (i, j) at c[j ldc + i], and the bias is indexed by i. */
void avx512_block(const be_gemm_t *g, int64_t b, int i0, int mi, int j0, int nj, const float *packed,
              float *P, int ct);

/* The softmax step of an attention score tile s: [tq, tk] (rows of stride
 * lds, tk <= AVX512_KB), row by row: s += bias row (bias + i bias_sq, or NULL),
 * keys j with mask[j] == 0 (mask NULL: none) to -inf, then with the row's
 * running max m[i] and sum l[i] (-inf and 0 before its first keys):
 * m' = max(m, max_j s), s = e^(s - m'), l = l e^(m - m') + sum_j s, and
 * the row's accumulator acc: [tq, D] scaled by e^(m - m') (not read before
 * the first keys).  acc NULL: this is the only key tile, and s becomes the
 * softmax itself (divided by l).  A row whose keys are all masked is set
 * to 0 (l stays 0). */
void avx512_attn_rows(float *s, int64_t lds, int tq, int tk, const float *bias, int64_t bias_sq,
                  const float *mask, float *m, float *l, float *acc, int D);

/* y: [n] = a * sigmoid(b) (BE_GATE); y may be a or b */
void avx512_gate(float *y, const float *a, const float *b, int64_t n);

/* y: [rows, d] = LayerNorm(x: [rows, d]) with weight w and bias b: [d]
 * (mean, then the variance of the centred values); y may be x */
void avx512_layernorm(float *y, const float *x, int64_t rows, int d, const float *w, const float *b,
                  float eps);

/* x[:, j0 .. j1, c0 .. c0+16] of the triangle product
 * x: [ni, nj, c], x[i, j, :] = sum_k a[i, k, :] * b[j, k, :];
 * a: [ni, nk, c], b: [nj, nk, c]; c a multiple of 16.  ap: scratch of
 * ni * AVX512_TRI_KB * 16 floats, 64-byte aligned, owned by the caller. */
void avx512_trimul_block(float *x, const float *a, const float *b, int ni, int nj, int nk, int c,
                     int c0, int j0, int j1, float *ap);

#endif
