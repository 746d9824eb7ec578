/* sysmem.c - the process's memory from /proc, and the malloc policy (see sysmem.h). */
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "util/lines.h"
#include "util/sysmem.h"

/* a "Key:   N kB" line of /proc/self/status, in bytes; -1 if absent */
static int64_t sysmem_status(const char *key)
{
	FILE *f = fopen("/proc/self/status", "r");
	size_t n = strlen(key);
	long long kb = -1;
	lines_t ln;

	if (!f) return -1;
	lines_init(&ln, f, "/proc/self/status", NULL);
	while (lines_next(&ln) > 0)
		if (ln.n > n && !strncmp(ln.s, key, n) && ln.s[n] == ':') {
			if (sscanf(ln.s + n + 1, "%lld", &kb) != 1) kb = -1;
			break;
		}
	lines_free(&ln);
	fclose(f);
	return kb < 0 ? -1 : (int64_t)kb * 1024;
}

int64_t sysmem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	long long kb = -1;
	lines_t ln;

	if (!f) return -1;
	lines_init(&ln, f, "/proc/meminfo", NULL);
	while (lines_next(&ln) > 0)
		if (sscanf(ln.s, "MemAvailable: %lld kB", &kb) == 1) break;
	lines_free(&ln);
	fclose(f);
	return kb < 0 ? -1 : (int64_t)kb * 1024;
}

int64_t sysmem_rss(void) { return sysmem_status("VmRSS"); }
int64_t sysmem_rss_peak(void) { return sysmem_status("VmHWM"); }
int64_t sysmem_rss_anon(void) { return sysmem_status("RssAnon"); }

int sysmem_peak_reset(void)
{
	FILE *f = fopen("/proc/self/clear_refs", "w");
	int rc;

	if (!f) return -1;
	rc = fputs("5", f) < 0;
	rc |= fclose(f) != 0;
	return rc ? -1 : 0;
}

void sysmem_policy(void)
{
	mallopt(M_MMAP_THRESHOLD, 256 * 1024);
}
