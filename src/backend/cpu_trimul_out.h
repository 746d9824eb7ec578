/* cpu_trimul_out.h (prefix cpu_) - the CPU backend's strided-rows layer norm
 * and fused triangle-multiplication output side (be->layernorm_rows,
 * be->trimul_out; see backend.h), composed of the backend's own entries
 * on row tiles. */
#ifndef ESMBATCH_CPU_TRIMUL_OUT_H
#define ESMBATCH_CPU_TRIMUL_OUT_H

#include "backend/backend.h"

/* y: [xr.n1 * xr.n2, d] = LayerNorm of x's rows at xr's strides */
int cpu_layernorm_rows(be_t *be, float *y, const float *x, be_rows_t xr, int d,
                       const float *w, const float *b, float eps);
/* z rows += (LayerNorm(x) W^T + b) * sigmoid(gv), as be_trimul_out_t
 * says; -ENOMEM where the tiles cannot be had */
int cpu_trimul_out(be_t *be, const be_trimul_out_t *t);

#endif
