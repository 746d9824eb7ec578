/* cpu_ipa.h (prefix cpu_ipa_) - the CPU backend's bodies of the structure
 * module's point ops (be_t.ipa_in, ipa_out, ipa_rigid; see backend.h), in
 * cpu_ipa.c. */
#ifndef ESMBATCH_BACKEND_CPU_IPA_H
#define ESMBATCH_BACKEND_CPU_IPA_H

#include "backend/backend.h"

int cpu_ipa_in(be_t *be, const be_ipa_in_t *a);
int cpu_ipa_out(be_t *be, const be_ipa_out_t *a);
int cpu_ipa_rigid(be_t *be, const be_ipa_rigid_t *a);

#endif
