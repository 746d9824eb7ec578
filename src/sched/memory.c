/* memory.c - the memory figures of one job (see memory.h). */
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "sched/memory.h"

/* a "Key:   N kB" line of /proc/self/status, in bytes; -1 if absent */
static int64_t mem_status(const char *key)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	size_t n = strlen(key);
	long long kb = -1;

	if (!f) return -1;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, key, n) && line[n] == ':') {
			if (sscanf(line + n + 1, "%lld", &kb) != 1) kb = -1;
			break;
		}
	fclose(f);
	return kb < 0 ? -1 : (int64_t)kb * 1024;
}

int64_t mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	long long kb = -1;

	if (!f) return -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
	fclose(f);
	return kb < 0 ? -1 : (int64_t)kb * 1024;
}

int64_t mem_rss(void) { return mem_status("VmRSS"); }
int64_t mem_rss_peak(void) { return mem_status("VmHWM"); }
int64_t mem_rss_anon(void) { return mem_status("RssAnon"); }

int mem_peak_reset(void)
{
	FILE *f = fopen("/proc/self/clear_refs", "w");
	int rc;

	if (!f) return -1;
	rc = fputs("5", f) < 0;
	rc |= fclose(f) != 0;
	return rc ? -1 : 0;
}

void mem_policy(void)
{
	mallopt(M_MMAP_THRESHOLD, 256 * 1024);
}

int mem_fold(const model_t *m, const tok_t *t, const model_run_t *r, model_out_t *out,
             mem_fig_t *fig, char *err, size_t errcap)
{
	int cpu = !m->be->mem_info, rc;
	int64_t before = -1;

	memset(fig, 0, sizeof *fig);
	fig->device_used = fig->growth = -1;
	if (cpu && mem_peak_reset() == 0) before = mem_rss_anon();
	rc = model_fold(m, t, r, out, err, errcap);
	if (rc < 0) return rc;
	fig->predicted = out->arena + m->be->workspace;
	fig->allocated = out->exec_peak_live;
	fig->reserved = out->exec_arena + m->be->workspace;
	if (cpu) {
		/* peak - (rss - anon) = the anonymous part at the peak */
		int64_t peak = mem_rss_peak(), rss = mem_rss(), anon = mem_rss_anon();
		fig->device_used = peak;
		if (peak >= 0 && rss >= 0 && anon >= 0 && before >= 0)
			fig->growth = peak - (rss - anon) - before;
	} else {
		fig->device_used = out->device_used;
	}
	return 0;
}
