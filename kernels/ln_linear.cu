/* ln_linear.cu - layer norm fused into the linears that consume it
 * (be_ln_linear_t, backend.h): every row of x read once, normed in shared
 * memory, multiplied by the concatenated weights of all output groups,
 * each group written through its own strides by the epilogue (bias, gate
 * pair, beta).
 *
 * A block of LL_WARPS warps takes LL_TM = 16 LL_WARPS rows (r = i nj + j);
 * each warp layer-norms rows of the tile (lanes over k, fp32 two-pass
 * statistics as norm.cu) into Xs.  Then, per 16-feature tile of each
 * group (and its gate's 16 features), in shared memory:
 *   bf16 weights (be->weights_bf16), tensor cores (bf16 mma.sync, fp32
 *   accumulation), kp = k rounded up to 16, zero-padded:
 *     Xs: [LL_TM, kp + 8] bf16        the normed rows, rounded once
 *     Ws: [2, 16, kp + 8] bf16        the tile's weight rows (p; g)
 *     Cs: [LL_WARPS, 2, 16, 20] fp32  each warp's 16 x 16 products
 *   fp32 weights: SIMT, one thread per (row, feature), Xs: [LL_TM, k + 1]
 *   fp32, the weights read from global memory (the same row by a whole
 *   warp): the checking path of --precision fp32.
 * The leading dimensions keep every ldmatrix row address on 16 bytes
 * (kernels/mma.cuh's tiles).
 */
#include "common.cuh"
#include "mma.cuh"

#ifdef __CUDACC__
#include <cuda_bf16.h>
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "ln_linear.cu: bf16 mma.sync needs sm_80 or newer (configure --with-cuda-arch)"
#endif
#endif

typedef __nv_bfloat16 bf16;

#define LL_WARPS 4
#define LL_TM (16 * LL_WARPS)
#define LL_LDC 20   /* floats per row of a warp's product tile */

static __device__ __forceinline__ void ll_set(float *p, float v) { *p = v; }
static __device__ __forceinline__ void ll_set(bf16 *p, float v) { *p = __float2bfloat16(v); }

/* Xs: [LL_TM, ldx] = rows r0.. of x, layer-normed where p.ln_w (rows past
 * the end and columns k..kp-1: 0) */
template <typename T>
static __device__ void ll_load(const be_ln_linear_t &p, int64_t r0, int64_t rows, T *Xs, int ldx, int kp)
{
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, k = p.k;

	for (int rr = warp; rr < LL_TM; rr += LL_WARPS) {
		int64_t r = r0 + rr;
		T *xs = Xs + rr * ldx;
		if (r >= rows) {
			for (int c = lane; c < kp; c += 32) ll_set(xs + c, 0.0f);
			continue;
		}
		const float *xr = p.x + r / p.nj * p.x_si + r % p.nj * p.x_sj;
		float mean = 0.0f, inv = 1.0f;
		if (p.ln_w) {
			float sum = 0.0f, sq = 0.0f;
			for (int c = lane; c < k; c += 32) sum += xr[c];
			mean = cu_warp_sum(sum) / k;
			for (int c = lane; c < k; c += 32) { float t = xr[c] - mean; sq += t * t; }
			inv = rsqrtf(cu_warp_sum(sq) / k + p.eps);
		}
		for (int c = lane; c < kp; c += 32) {
			float v = c >= k ? 0.0f : p.ln_w ? (xr[c] - mean) * inv * p.ln_w[c] + p.ln_b[c] : xr[c];
			ll_set(xs + c, v);
		}
	}
}

/* feature f of row r of group q: v = the product, u = its gate's */
static __device__ __forceinline__ void ll_put(const be_ln_linear_t &p, const be_lnlin_out_t &q, int64_t r, int f,
                                              float v, float u)
{
	float *y = q.y + r / p.nj * q.si + r % p.nj * q.sj + (int64_t)f * q.sc;
	v += q.bias ? q.bias[f] : 0.0f;
	if (q.kind == BE_LNLIN_GATE) v /= 1.0f + expf(-(u + (q.bias_g ? q.bias_g[f] : 0.0f)));   /* BE_GATE */
	*y = q.beta != 0.0f ? v + q.beta * *y : v;
}

/* fp32 weights; dynamic shared memory: Xs [LL_TM, k + 1] */
static __global__ void __launch_bounds__(LL_WARPS * 32) k_ln_linear_f32(be_ln_linear_t p, int64_t rows)
{
	CU_DYN_SHARED(float, Xs);
	const int k = p.k, ldx = k + 1;
	const int64_t r0 = (int64_t)blockIdx.x * LL_TM;
	const float *w = p.w;

	ll_load<float>(p, r0, rows, Xs, ldx, k);
	__syncthreads();
	for (int g = 0; g < p.ngroups; g++) {
		const be_lnlin_out_t &q = p.out[g];
		int gate = q.kind == BE_LNLIN_GATE;
		for (int e = threadIdx.x; e < q.n * LL_TM; e += LL_WARPS * 32) {
			int f = e / LL_TM, rr = e % LL_TM;
			if (r0 + rr >= rows) continue;
			const float *xs = Xs + rr * ldx, *wp = w + (int64_t)f * k, *wg = wp + (int64_t)q.n * k;
			float a = 0.0f, b = 0.0f;
			for (int c = 0; c < k; c++) {
				a += xs[c] * wp[c];
				if (gate) b += xs[c] * wg[c];
			}
			ll_put(p, q, r0 + rr, f, a, b);
		}
		w += (int64_t)(gate ? 2 : 1) * q.n * k;
	}
}

/* byte offsets of Xs, Ws, Cs in the dynamic shared memory (on 128 bytes),
 * and the bytes to request */
typedef struct { int w, c, bytes; } ll_layout_t;

static __host__ __device__ int ll_up(int n) { return (n + 127) & ~127; }

static __host__ __device__ ll_layout_t ll_layout(int kp)
{
	ll_layout_t y;
	y.w = ll_up(LL_TM * (kp + 8) * 2);
	y.c = y.w + ll_up(2 * 16 * (kp + 8) * 2);
	y.bytes = y.c + LL_WARPS * 2 * 16 * LL_LDC * 4;
	return y;
}

/* bf16 weights (p.w: [N, k] bf16), kp = k rounded up to 16 */
static __global__ void __launch_bounds__(LL_WARPS * 32) k_ln_linear_bf16(be_ln_linear_t p, int64_t rows, int kp)
{
	CU_DYN_SHARED(char, sm);
	const int k = p.k, ldx = kp + 8, NT = LL_WARPS * 32;
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	const int64_t r0 = (int64_t)blockIdx.x * LL_TM;
	const ll_layout_t y = ll_layout(kp);
	bf16 *Xs = (bf16 *)sm, *Ws = (bf16 *)(sm + y.w);
	float *Cs = (float *)(sm + y.c) + warp * 2 * 16 * LL_LDC;
	const bf16 *w = (const bf16 *)p.w;

	ll_load<bf16>(p, r0, rows, Xs, ldx, kp);
	for (int g = 0; g < p.ngroups; g++) {
		const be_lnlin_out_t &q = p.out[g];
		const int nm = q.kind == BE_LNLIN_GATE ? 2 : 1;
		for (int f0 = 0; f0 < q.n; f0 += 16) {
			__syncthreads();   /* Xs written, the previous tile's Ws consumed */
			for (int e = threadIdx.x; e < nm * 16 * kp; e += NT) {
				int m = e / (16 * kp), ff = e / kp % 16, c = e % kp, f = f0 + ff;
				Ws[(m * 16 + ff) * ldx + c] = f < q.n && c < k ? w[((int64_t)m * q.n + f) * k + c]
				                                               : __float2bfloat16(0.0f);
			}
			__syncthreads();
			for (int m = 0; m < nm; m++) {
				float acc[2][4] = {};
				for (int kt = 0; kt < kp / 16; kt++) {
					uint32_t xf[4], wf[4];
					cu_tile_a(xf, Xs + warp * 16 * ldx + kt * 16, ldx, lane);
					cu_tile_bt(wf, Ws + m * 16 * ldx + kt * 16, ldx, lane);
					cu_tile_mma(acc, xf, wf);
				}
				cu_tile_store(Cs + m * 16 * LL_LDC, LL_LDC, acc, lane);
			}
			__syncwarp();
			/* consecutive lanes on consecutive addresses: features where
			 * they are contiguous (sc == 1), rows otherwise */
			for (int e = lane; e < 256; e += 32) {
				int rr = q.sc == 1 ? e / 16 : e % 16, ff = q.sc == 1 ? e % 16 : e / 16;
				int64_t r = r0 + warp * 16 + rr;
				if (r < rows && f0 + ff < q.n)
					ll_put(p, q, r, f0 + ff, Cs[rr * LL_LDC + ff], nm == 2 ? Cs[(16 + rr) * LL_LDC + ff] : 0.0f);
			}
			__syncwarp();   /* Cs read before the next tile's products */
		}
		w += (int64_t)nm * q.n * k;
	}
}

extern "C" int cu_ln_linear_smem_init(int bytes)
{
	int rc = cu_smem_allow((const void *)k_ln_linear_bf16, bytes);
	return rc ? rc : cu_smem_allow((const void *)k_ln_linear_f32, bytes);
}

extern "C" int cu_ln_linear(cudaStream_t s, const be_ln_linear_t *p)
{
	int64_t rows = (int64_t)p->ni * p->nj, nblocks = (rows + LL_TM - 1) / LL_TM;
	int ok = p->ni >= 0 && p->nj >= 0 && p->k > 0 && p->k <= CU_LNLIN_KMAX && p->ngroups >= 1 &&
	         p->ngroups <= BE_LNLIN_GROUPS && nblocks <= 0x7fffffff;
	int kp = (p->k + 15) / 16 * 16;
	size_t smem;

	for (int g = 0; ok && g < p->ngroups; g++) ok = p->out[g].n > 0;
	if (!ok) return -EINVAL;
	if (!rows) return 0;
	if (p->w_bf16) {
		smem = (size_t)ll_layout(kp).bytes;
		CU_LAUNCH((unsigned)nblocks, LL_WARPS * 32, smem, s, k_ln_linear_bf16)(*p, rows, kp);
	} else {
		smem = sizeof(float) * (size_t)LL_TM * (p->k + 1);
		CU_LAUNCH((unsigned)nblocks, LL_WARPS * 32, smem, s, k_ln_linear_f32)(*p, rows);
	}
	return cu_launched();
}
