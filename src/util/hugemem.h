/* hugemem.h (prefix hugemem_) - large host buffers on transparent huge pages.
 *
 * A buffer of HUGEMEM_MIN bytes or more is a private anonymous mapping of
 * its own whose data starts on a 2 MiB boundary; its whole 2 MiB pages are
 * advised MADV_HUGEPAGE (the tail, less than 2 MiB, stays on small pages,
 * so no buffer holds more than its size rounded up to 4 KiB).  Where the
 * kernel's transparent huge pages are "always" or "madvise"
 * (/sys/kernel/mm/transparent_hugepage/enabled), the first touch of such a
 * buffer then faults and clears one 2 MiB page where it would fault 512
 * small ones.  THP "never", a kernel without THP, or $ESMBATCH_HUGEPAGES=0:
 * the same buffers on small pages.  Smaller buffers come from malloc.
 * Every buffer is 64-byte aligned and returns to the system when freed.
 */
#ifndef ESMBATCH_UTIL_HUGEMEM_H
#define ESMBATCH_UTIL_HUGEMEM_H

#include <stddef.h>

#define HUGEMEM_PAGE ((size_t)2 << 20)
#define HUGEMEM_MIN  HUGEMEM_PAGE

/* *p = n bytes (n 0 counts as 1), uninitialised; 0, or -1 (*p NULL) when
 * out of memory */
int  hugemem_alloc(size_t n, void **p);
/* frees a hugemem_alloc buffer; NULL is a no-op */
void hugemem_free(void *p);
/* 1: buffers of HUGEMEM_MIN bytes and more are advised huge pages and the
 * kernel grants them on advice; 0: small pages */
int  hugemem_on(void);
/* the kernel's THP mode: "always", "madvise", "never", "absent" (no sysfs
 * file), or "off" where $ESMBATCH_HUGEPAGES=0 */
const char *hugemem_mode(void);

#endif
