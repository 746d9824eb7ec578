/* cuda.h (prefix be_cuda_) - options of the CUDA backend beyond the be_t contract. */
#ifndef ESMBATCH_BACKEND_CUDA_H
#define ESMBATCH_BACKEND_CUDA_H

#include "backend/backend.h"

/* Number of CUDA devices this process sees (CUDA_VISIBLE_DEVICES applies;
 * they are numbered 0..n-1 as cuda:N); 0 without a driver, a device or a
 * CUDA build. */
int be_cuda_count(void);

/* Set the precision of a backend made by be_cuda_init (and its
 * be->precision): the GEMMs of fp32 operands compute with prec's inputs
 * (BE_PREC_AUTO: bf16), accumulating in fp32; at bf16 the Linear weight
 * matrices are held as bf16 too (be->weights_bf16) and the workspace grows
 * by the bf16 stage (be->workspace).  Every other op stays fp32.  Call it
 * before loading weights.  Returns 0, or negative for another backend (or
 * a build without CUDA). */
int be_cuda_set_precision(be_t *be, be_prec_t prec);

/* 1 when this backend's transition op runs t as the sequence transition,
 * its two products on cuBLASLt, whose bias epilogue takes b1 rounded to
 * bf16 first; 0 otherwise (and in a build without CUDA). */
int be_cuda_seqtr_fits(const be_transition_t *t);

/* 0 when this binary's kernels run on CUDA device `device` (or there is no
 * such device: be_cuda_init reports that); -1, with one log line naming the
 * device and the configure option to rebuild with, when its compute
 * capability is neither among the architectures built (ESMBATCH_CUDA_ARCHS)
 * nor at or above the PTX carried (ESMBATCH_CUDA_PTX). */
int be_cuda_check_arch(int device);

#endif
