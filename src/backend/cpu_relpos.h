/* cpu_relpos.h (prefix cpu_relpos) - the CPU backend's body of
 * be_t.relpos (backend.h), in cpu_relpos.c. */
#ifndef ESMBATCH_BACKEND_CPU_RELPOS_H
#define ESMBATCH_BACKEND_CPU_RELPOS_H

#include "backend/backend.h"

int cpu_relpos(be_t *be, const be_relpos_t *p);

#endif
