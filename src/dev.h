/* dev.h - devices: the backend a device specification names.
 *
 *   NULL     the first CUDA device when there is one, else the CPU
 *   "cpu"    the CPU backend
 *   "cuda", "cuda:N"   CUDA device N (0 by default); an error without one
 */
#ifndef ESMBATCH_DEV_H
#define ESMBATCH_DEV_H

#include "be.h"
#include "opt.h"

/* The backend for spec (threads: CPU threads, 0 = auto), logged; NULL
 * after one logged line. */
be_t *dev_open(const char *spec, int threads);

/* Apply --precision to a backend from dev_open and log what it computes
 * with (be->precision).  CUDA: auto = bf16 GEMM inputs, else fp32 or fp16;
 * every GEMM accumulates in fp32, and every other op (norms, softmax
 * statistics, attention, the structure module's geometry) is fp32.  Other
 * backends compute in fp32 only: auto and fp32 are accepted, anything else
 * is one logged line and -1.  0 otherwise. */
int   dev_precision(be_t *be, opt_prec_t prec);

#endif
