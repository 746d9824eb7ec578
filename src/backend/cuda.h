/* cuda.h (prefix be_cuda_) - options of the CUDA backend beyond the be_t contract. */
#ifndef ESMBATCH_BE_CUDA_H
#define ESMBATCH_BE_CUDA_H

#include "backend/backend.h"

/* What the GEMMs compute with; inputs and outputs stay float32 either way,
 * and so do every other op (norms, softmax, attention, elementwise). */
typedef enum {
	BE_CUDA_FP32,   /* float32 (default) */
	BE_CUDA_TF32,   /* tensor-core TF32 inputs, float32 accumulation */
	BE_CUDA_BF16,   /* tensor-core bfloat16 inputs, float32 accumulation */
	BE_CUDA_FP16,   /* tensor-core float16 inputs, float32 accumulation */
} be_cuda_prec_t;

/* Number of CUDA devices this process sees (CUDA_VISIBLE_DEVICES applies;
 * they are numbered 0..n-1 as cuda:N); 0 without a driver, a device or a
 * CUDA build. */
int be_cuda_count(void);

/* Set the GEMM precision of a backend made by be_cuda_init (and its
 * be->precision).  Returns 0, or negative for another backend (or a build
 * without CUDA). */
int be_cuda_set_precision(be_t *be, be_cuda_prec_t prec);

/* 0 when this binary's kernels run on CUDA device `device` (or there is no
 * such device: be_cuda_init reports that); -1, with one log line naming the
 * device and the configure option to rebuild with, when its compute
 * capability is neither among the architectures built (ESMBATCH_CUDA_ARCHS)
 * nor at or above the PTX carried (ESMBATCH_CUDA_PTX). */
int be_cuda_check_arch(int device);

#endif
