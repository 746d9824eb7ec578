/* cpu_dnnl.h (prefix cpu_dnnl_) - the CPU backend's bf16 GEMMs: both
 * operands rounded to bfloat16 (to nearest even; a bf16 weight as held),
 * products accumulated in fp32.  Through oneDNN's bf16 matmul where it has
 * one (AMX or AVX512-BF16, chosen at run time, DNNL_MAX_CPU_ISA obeyed);
 * elsewhere, in a build without oneDNN, and on the shapes where the own
 * fp32 kernels are faster, the same rounded operands widened to fp32 and
 * multiplied by the fp32 GEMM (an nn.Linear's bf16 weight widened as the
 * own kernel packs it: cpu.c): a product of two bf16 values is exact in
 * fp32, so either way differs only in the order of the sums. */
#ifndef ESMBATCH_BACKEND_CPU_DNNL_H
#define ESMBATCH_BACKEND_CPU_DNNL_H

#include "backend/backend.h"

/* What oneDNN offers this process, found once: *isa the name of the ISA
 * it chose ("avx512_core_amx", "avx2", ...; DNNL_MAX_CPU_ISA caps it);
 * the return value 1 where bf16 GEMMs run on its bf16 matmul (AMX; with
 * AVX512-BF16 only under the test hook ESMBATCH_CPU_DNNL, the own fp32
 * kernels being faster there), 0 where they are widened to fp32, -1 in
 * a build without oneDNN (*isa "none"). */
int cpu_dnnl_probe(const char **isa);

/* oneDNN's version ("2.6.3"), or NULL in a build without it */
const char *cpu_dnnl_version(void);

/* x: [n] float32 (bf16 0) or bfloat16 (bf16 1) values as float32 rounded to
 * bfloat16 (to nearest even), malloc'ed (the caller frees it); NULL when
 * out of memory.  How every widened bf16 GEMM rounds its operands. */
float *cpu_dnnl_round(const void *x, int64_t n, int bf16);

/* 1 where cpu_dnnl_gemm runs g on oneDNN's bf16 matmul (cpu_dnnl_probe
 * gives 1 and the shape is one it is faster at), else 0 */
int cpu_dnnl_takes(const be_gemm_t *g);

/* g at bf16 (as above) on be, a CPU backend or one that wraps it: through
 * oneDNN where cpu_dnnl_probe gives 1 and the shape is one it is faster
 * at, else cpu_dnnl_widened.  0 or negative. */
int cpu_dnnl_gemm(be_t *be, const be_gemm_t *g);

/* g at bf16 by widening: A and B rounded to bf16 (a_bf16 / b_bf16 data
 * taken as they are) into fp32 copies, then be->gemm on them at
 * BE_PREC_FP32.  0 or negative (STATUS_OOM). */
int cpu_dnnl_widened(be_t *be, const be_gemm_t *g);

#endif
