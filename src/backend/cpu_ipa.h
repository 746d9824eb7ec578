/* cpu_ipa.h (prefix cpu_ipa_) - the CPU backend's bodies of the structure
 * module's point ops (be_t.ipa_in, ipa_out, ipa_rigid; see backend.h), in
 * cpu_ipa.c. */
#ifndef ESMBATCH_BACKEND_CPU_IPA_H
#define ESMBATCH_BACKEND_CPU_IPA_H

#include "backend/backend.h"

int cpu_ipa_in(be_t *be, float *qa, float *ka, float *vp, float *rig, const float *state,
               const float *qp, const float *kvp, const float *hw, const float *bb,
               int L, int H, int Pq, int Pv);
int cpu_ipa_out(be_t *be, float *cat, int64_t ldc, const float *op, const float *rig,
                int L, int n_pts, float eps);
int cpu_ipa_rigid(be_t *be, float *state, float *frame, const float *upd, int L, float scale);

#endif
