/* sysmem.c - the process's memory from /proc, and the malloc policy (see sysmem.h). */
#include "util/sysmem.h"

#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "util/lines.h"

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

/* MemAvailable of /proc/meminfo in bytes; -1 where unavailable */
static int64_t sysmem_meminfo(void)
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

/* a cgroup file holding one number, in bytes; -1 if absent, "max" or a v1
 * "no limit" (the page-rounded INT64_MAX, or anything from 2^60 up) */
static int64_t sysmem_cg_number(const char *dir, const char *file)
{
	char path[4096];
	long long v = -1;
	FILE *f;

	if (snprintf(path, sizeof path, "%s/%s", dir, file) >= (int)sizeof path) return -1;
	f = fopen(path, "r");
	if (!f) return -1;
	if (fscanf(f, "%lld", &v) != 1 || v < 0 || v >= (1LL << 60)) v = -1;
	fclose(f);
	return v;
}

/* the value of "key N" in dir/memory.stat; 0 if absent */
static int64_t sysmem_cg_stat(const char *dir, const char *key)
{
	char path[4096], line[256];
	size_t n = strlen(key);
	long long v = 0;
	FILE *f;

	if (snprintf(path, sizeof path, "%s/memory.stat", dir) >= (int)sizeof path) return 0;
	f = fopen(path, "r");
	if (!f) return 0;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, key, n) && line[n] == ' ') {
			if (sscanf(line + n + 1, "%lld", &v) != 1 || v < 0) v = 0;
			break;
		}
	fclose(f);
	return v;
}

int64_t sysmem_cgroup_available(const char *root, const char *self_cgroup)
{
	/* v2 file names, then v1's */
	static const char *const names[2][4] = {
		{ "", "memory.max", "memory.current", "inactive_file" },
		{ "/memory", "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file" },
	};
	FILE *f = fopen(self_cgroup, "r");
	char line[4096], dir[4096];
	int64_t best = -1;
	int v = -1;

	if (!f) return -1;
	/* "0::PATH" (v2) or "ID:CONTROLLERS:PATH" with memory among the
	 * controllers (v1); v1's wins where both are there (hybrid) */
	while (fgets(line, sizeof line, f)) {
		char *c = strchr(line, ':'), *p = c ? strchr(c + 1, ':') : NULL;
		int is_v1 = 0;
		if (!p) continue;
		*p++ = '\0';
		p[strcspn(p, "\n")] = '\0';
		for (char *s, *t = strtok_r(c + 1, ",", &s); t; t = strtok_r(NULL, ",", &s))
			if (!strcmp(t, "memory")) is_v1 = 1;
		if (!is_v1 && (line[0] != '0' || c != line + 1 || c[1] != '\0')) continue;
		if (is_v1 || v < 0) {
			v = is_v1;
			if (snprintf(dir, sizeof dir, "%s%s%s", root, names[v][0], p) >= (int)sizeof dir)
				v = -1;
		}
		if (is_v1) break;
	}
	fclose(f);
	if (v < 0) return -1;
	/* the cgroup itself, then each parent down to the mount root */
	size_t top = strlen(root) + strlen(names[v][0]);
	for (;;) {
		int64_t lim = sysmem_cg_number(dir, names[v][1]);
		if (lim >= 0) {
			int64_t used = sysmem_cg_number(dir, names[v][2]);
			int64_t cache = sysmem_cg_stat(dir, names[v][3]);
			int64_t left = used < 0 ? lim : lim - (used > cache ? used - cache : 0);
			if (left < 0) left = 0;
			if (best < 0 || left < best) best = left;
		}
		char *slash = strrchr(dir + top, '/');
		if (!slash) break;
		*slash = '\0';
	}
	return best;
}

int64_t sysmem_available(void)
{
	int64_t mem = sysmem_meminfo();
	int64_t cg = sysmem_cgroup_available("/sys/fs/cgroup", "/proc/self/cgroup");

	if (cg >= 0 && (mem < 0 || cg < mem)) return cg;
	return mem;
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
