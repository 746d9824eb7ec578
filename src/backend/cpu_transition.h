/* cpu_transition.h (prefix cpu_transition) - the CPU backend's transition
 * (be_transition_t, backend.h): layer norm, two Linears and the residual add on
 * tiles of rows, the hidden layer held one tile per thread. */
#ifndef ESMBATCH_BACKEND_CPU_TRANSITION_H
#define ESMBATCH_BACKEND_CPU_TRANSITION_H

#include "backend/backend.h"

/* be->transition for the CPU backend be (its layernorm and gemm entries
 * do the arithmetic); 0 or negative */
int cpu_transition(be_t *be, const be_transition_t *t);

#endif
