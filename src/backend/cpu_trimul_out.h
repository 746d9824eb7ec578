/* cpu_trimul_out.h (prefix cpu_) - the CPU backend's fused
 * triangle-multiplication output side (be->trimul_out; see backend.h),
 * composed of the backend's own entries on row tiles. */
#ifndef ESMBATCH_BACKEND_CPU_TRIMUL_OUT_H
#define ESMBATCH_BACKEND_CPU_TRIMUL_OUT_H

#include "backend/backend.h"

/* z rows += (LayerNorm(x) W^T + b) * sigmoid(gv), as be_trimul_out_t
 * says; -ENOMEM where the tiles cannot be had */
int cpu_trimul_out(be_t *be, const be_trimul_out_t *t);

#endif
