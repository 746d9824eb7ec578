/* cpu_relpos.c - the trunk's relative-position embedding added to the
 * pair tensor on the CPU (be_t.relpos; see cpu_relpos.h, backend.h). */
#include "backend/cpu_relpos.h"

int cpu_relpos(be_t *be, const be_relpos_t *p)
{
	float *z = p->z;
	const float *table = p->table, *residx = p->residx;
	int i0 = p->i0, ni = p->ni, L = p->L, c = p->c, bins = p->bins;

	#pragma omp parallel for schedule(static)
	for (int64_t r = 0; r < (int64_t)ni * L; r++) {
		int i = (int)(r / L), j = (int)(r % L);
		float d = residx[j] - residx[i0 + i];
		int k = d < -bins ? 0 : d > bins ? 2 * bins : (int)d + bins;
		const float *t = table + (int64_t)(k + 1) * c;
		float *y = z + r * c;
		for (int e = 0; e < c; e++) y[e] += t[e];
	}
	return 0;
}
