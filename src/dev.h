/* dev.h - devices: the backend a device specification names.
 *
 *   NULL     the first CUDA device when there is one, else the CPU
 *   "cpu"    the CPU backend
 *   "cuda", "cuda:N"   CUDA device N (0 by default); an error without one
 */
#ifndef ESMBATCH_DEV_H
#define ESMBATCH_DEV_H

#include "be.h"

/* The backend for spec (threads: CPU threads, 0 = auto), logged; NULL
 * after one logged line. */
be_t *dev_open(const char *spec, int threads);

#endif
