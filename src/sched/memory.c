/* memory.c - the memory figures of one job (see memory.h). */
#include <string.h>

#include "sched/memory.h"
#include "util/sysmem.h"

int mem_fold(const model_t *m, const tok_t *t, const model_run_t *r, const model_plan_t *p,
             model_out_t *out, mem_fig_t *fig, char *err, size_t errcap)
{
	int cpu = !m->be->mem_info, rc;
	int64_t before = -1;

	memset(fig, 0, sizeof *fig);
	fig->device_used = fig->growth = -1;
	if (cpu && sysmem_peak_reset() == 0) before = sysmem_rss_anon();
	rc = model_fold(m, t, r, p, out, err, errcap);
	if (rc < 0) return rc;
	fig->predicted = out->arena + m->be->workspace;
	fig->allocated = out->exec_peak_live;
	fig->reserved = out->exec_arena + m->be->workspace;
	if (cpu) {
		/* peak - (rss - anon) = the anonymous part at the peak */
		int64_t peak = sysmem_rss_peak(), rss = sysmem_rss(), anon = sysmem_rss_anon();
		fig->device_used = peak;
		if (peak >= 0 && rss >= 0 && anon >= 0 && before >= 0)
			fig->growth = peak - (rss - anon) - before;
	} else {
		fig->device_used = out->device_used;
	}
	return 0;
}
