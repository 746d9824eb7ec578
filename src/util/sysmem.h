/* sysmem.h (prefix sysmem_) - the process's memory as Linux reports it
 * (/proc/self/status, /proc/meminfo) and the malloc policy for measuring. */
#ifndef ESMBATCH_SYSMEM_H
#define ESMBATCH_SYSMEM_H

#include <stdint.h>

/* Resident set now / its peak since sysmem_peak_reset() (or process start) /
 * its anonymous part now: bytes from /proc/self/status, -1 where
 * unavailable. */
int64_t sysmem_rss(void);
int64_t sysmem_rss_peak(void);
int64_t sysmem_rss_anon(void);
/* Restart the peak resident set count (/proc/self/clear_refs); 0 or -1. */
int     sysmem_peak_reset(void);
/* Process policy for measuring: large blocks (arenas) come straight from
 * the OS and go back when freed, so a fresh arena starts untouched and the
 * resident set counts exactly the pages a fold touched (glibc's sliding
 * mmap threshold would otherwise serve arenas from a warm heap). */
void    sysmem_policy(void);
/* MemAvailable of /proc/meminfo in bytes; -1 where unavailable. */
int64_t sysmem_available(void);

#endif
