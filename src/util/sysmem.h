/* sysmem.h (prefix sysmem_) - the process's memory as Linux reports it
 * (/proc/self/status, /proc/meminfo, its cgroup's memory limit) and the
 * malloc policy for measuring. */
#ifndef ESMBATCH_UTIL_SYSMEM_H
#define ESMBATCH_UTIL_SYSMEM_H

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
/* The memory this process may still take, in bytes: MemAvailable of
 * /proc/meminfo, or less where its cgroup leaves less
 * (sysmem_cgroup_available of /sys/fs/cgroup and /proc/self/cgroup: a
 * Slurm job's --mem, a container's limit); -1 where neither is known. */
int64_t sysmem_available(void);
/* What the memory limits of the cgroup that self_cgroup (a
 * /proc/PID/cgroup file) names, under the cgroup mount root, leave: the
 * least over that cgroup and each parent below root of limit - (usage -
 * inactive file cache), 0 where usage is over the limit.  cgroup v2:
 * memory.max, memory.current, memory.stat's inactive_file, under root;
 * v1: memory.limit_in_bytes, memory.usage_in_bytes, memory.stat's
 * total_inactive_file, under root/memory.  -1 where no level has a limit
 * (or none can be read). */
int64_t sysmem_cgroup_available(const char *root, const char *self_cgroup);

#endif
