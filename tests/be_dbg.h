/* be_dbg.h - test helper: a backend whose memory the host cannot touch.
 *
 * It computes with the CPU backend, but everything it allocates lies in one
 * mmap'd region of its own that stays PROT_NONE except inside its own
 * entries (ops, upload, download, free).  Model code that dereferences a
 * tensor or weight pointer on the host, as it would by mistake on a GPU,
 * gets SIGSEGV in the test instead of a silently right answer.
 *
 * Every entry also checks the backend.h contract on its pointers, as a device
 * would need it, and fails with -EFAULT (one logged line, counted) when it
 * is broken:
 *   - every tensor and weight lies wholly inside one live allocation of
 *     this backend (no host arrays, nothing freed, nothing past the end);
 *   - host-side pointers (upload source, download target, gather's idx)
 *     lie outside the region;
 *   - outputs do not overlap inputs, except the exact aliasing backend.h allows
 *     (layernorm y = x, binary y = a or b).
 * Freed memory is never handed out again, so a stale pointer is caught.
 */
#ifndef ESMBATCH_BE_DBG_H
#define ESMBATCH_BE_DBG_H

#include <stddef.h>

#include "backend/backend.h"

/* A debug backend over be_cpu_init(threads) with a region of capacity
 * bytes (address space; pages are committed when used).  NULL on error. */
be_t *be_dbg_init(int threads, size_t capacity);
/* the number of contract violations it has refused (each one logged) */
long  be_dbg_violations(const be_t *be);

#endif
