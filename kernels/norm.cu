/* norm.cu - row reductions: LayerNorm and softmax.
 *
 * One warp per row; each lane walks the row with a stride of 32, so any d
 * works and every global access is coalesced.  Statistics are float32:
 * LayerNorm is two-pass (mean, then the centred sum of squares), softmax
 * subtracts the row maximum before exponentiating.
 */
#include "common.cuh"

#define NORM_WARPS 8   /* rows (warps) per block */

/* yr, xr: [d], one row by one warp; yr may alias xr (each element is read
 * before the same lane writes it) */
static __device__ void ln_warp_row(float *yr, const float *xr, int d, const float *w, const float *b, float eps,
                                   int lane)
{
	float sum = 0.0f;
	for (int i = lane; i < d; i += 32) sum += xr[i];
	float mean = cu_warp_sum(sum) / d;
	float sq = 0.0f;
	for (int i = lane; i < d; i += 32) { float t = xr[i] - mean; sq += t * t; }
	float inv = rsqrtf(cu_warp_sum(sq) / d + eps);
	for (int i = lane; i < d; i += 32) yr[i] = (xr[i] - mean) * inv * w[i] + b[i];
}

/* y, x: [rows, d]; w, b: [d]; y may alias x */
static __global__ void k_layernorm(float *y, const float *x, int64_t rows, int d,
                                   const float *w, const float *b, float eps)
{
	int64_t r = (int64_t)blockIdx.x * NORM_WARPS + threadIdx.x / 32;
	if (r < rows) ln_warp_row(y + r * d, x + r * d, d, w, b, eps, threadIdx.x % 32);
}

/* x: [rows, d], softmax over d in place */
static __global__ void k_softmax(float *x, int64_t rows, int d)
{
	int64_t r = (int64_t)blockIdx.x * NORM_WARPS + threadIdx.x / 32;
	int lane = threadIdx.x % 32;
	if (r >= rows) return;
	float *xr = x + r * d;

	float mx = -INFINITY;
	for (int i = lane; i < d; i += 32) mx = fmaxf(mx, xr[i]);
	mx = cu_warp_max(mx);
	float sum = 0.0f;
	for (int i = lane; i < d; i += 32) { float e = expf(xr[i] - mx); xr[i] = e; sum += e; }
	float inv = 1.0f / cu_warp_sum(sum);
	for (int i = lane; i < d; i += 32) xr[i] *= inv;
}

extern "C" int cu_layernorm(cudaStream_t s, float *y, const float *x, int64_t rows, int d,
                            const float *w, const float *b, float eps)
{
	if (rows <= 0 || d <= 0) return rows < 0 || d < 0 ? -EINVAL : 0;
	CU_LAUNCH((unsigned)((rows + NORM_WARPS - 1) / NORM_WARPS), NORM_WARPS * 32, 0, s, k_layernorm)(
		y, x, rows, d, w, b, eps);
	return cu_launched();
}

extern "C" int cu_softmax(cudaStream_t s, float *x, int64_t rows, int d)
{
	if (rows <= 0 || d <= 0) return rows < 0 || d < 0 ? -EINVAL : 0;
	CU_LAUNCH((unsigned)((rows + NORM_WARPS - 1) / NORM_WARPS), NORM_WARPS * 32, 0, s, k_softmax)(
		x, rows, d);
	return cu_launched();
}
