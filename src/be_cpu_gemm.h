/* be_cpu_gemm.h - the CPU backend's own float32 GEMM kernel (AVX-512F).
 *
 * For be_gemm_t products with A not transposed (the large operand read in
 * place, k contiguous); the CPU backend splits C into blocks and runs one
 * cg_block per task, falling back to CBLAS where cg_usable() is 0.
 */
#ifndef ESMBATCH_BE_CPU_GEMM_H
#define ESMBATCH_BE_CPU_GEMM_H

#include <stdint.h>

#include "be.h"

#define CG_KB 256   /* k per packed block of op(B) */
#define CG_NB 256   /* most columns one cg_block may cover */

/* 1 when this CPU runs the kernel (x86-64 with AVX-512F), else 0 */
int cg_usable(void);

/* C[b][i0 .. i0+mi, j0 .. j0+nj] = alpha A[b] op(B[b]) + beta C + bias over
 * the whole of k (k >= 1); g->transa must be 0, nj <= CG_NB.  P: scratch
 * of CG_KB * CG_NB floats, 64-byte aligned, owned by the caller. */
void cg_block(const be_gemm_t *g, int64_t b, int i0, int mi, int j0, int nj, float *P);

#endif
