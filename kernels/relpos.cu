/* relpos.cu - the trunk's relative-position embedding added to the pair
 * tensor (be_t.relpos, backend.h): the bin of each pair from the residue
 * indices on the device, no index list from the host. */
#include "common.cuh"

#define RP_THREADS 256
#define RP_MAX_BLOCKS 65535

/* one element of z: [ni, L, c] per thread (grid-stride): z[i, j, e] +=
 * table[bin(i0 + i, j) + 1, e]; residx: [L] */
static __global__ void k_relpos(float *z, const float *table, const float *residx, int i0, int ni,
                                int L, int c, int bins)
{
	for (int64_t x = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; x < (int64_t)ni * L * c;
	     x += (int64_t)gridDim.x * blockDim.x) {
		int64_t r = x / c;
		int i = (int)(r / L), j = (int)(r % L), e = (int)(x - r * c);
		float d = residx[j] - residx[i0 + i];
		int k = d < -bins ? 0 : d > bins ? 2 * bins : (int)d + bins;
		z[x] += table[(int64_t)(k + 1) * c + e];
	}
}

extern "C" int cu_relpos(cudaStream_t s, float *z, const float *table, const float *residx, int i0,
                         int ni, int L, int c, int bins)
{
	if (ni < 0 || L < 0 || c < 0 || bins < 0 || i0 < 0) return -EINVAL;
	int64_t n = (int64_t)ni * L * c, b = (n + RP_THREADS - 1) / RP_THREADS;
	if (n == 0) return 0;
	CU_LAUNCH((unsigned)(b < RP_MAX_BLOCKS ? b : RP_MAX_BLOCKS), RP_THREADS, 0, s, k_relpos)(
		z, table, residx, i0, ni, L, c, bins);
	return cu_launched();
}
