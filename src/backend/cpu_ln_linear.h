/* cpu_ln_linear.h (prefix cpu_) - the CPU backend's layer norm fused into
 * the linears that consume it (be->ln_linear), and the per-thread scratch
 * of cpu.c it shares. */
#ifndef ESMBATCH_BACKEND_CPU_LN_LINEAR_H
#define ESMBATCH_BACKEND_CPU_LN_LINEAR_H

#include <stddef.h>

#include "backend/backend.h"

/* be_ln_linear_t (backend.h); bf16 weights (w_bf16, a sim: card at
 * bf16) as a card's tensor cores take them: the normed rows rounded to
 * bf16, fp32 accumulation */
int cpu_ln_linear(be_t *be, const be_ln_linear_t *p);

/* this thread's scratch of at least n floats, 64-byte aligned, kept for
 * the thread's life (cpu.c owns it; a later call may replace it), or NULL */
float *cpu_scratch(size_t n);

/* 1 where the backend's products run on the own AVX-512 kernel
 * (cpu_avx512.c: the CPU has AVX-512F and ESMBATCH_CPU_BLAS is unset;
 * decided at be_cpu_init), else 0 (CBLAS) */
int cpu_own_gemm(void);

#endif
