/* transition.cu - the transition (be_transition_t, backend.h) in one kernel:
 *   x: [R, d] += relu(LN(x) w1^T + b1) w2^T + b2,  w1: [h, d], w2: [d, h]
 * reading x once and writing it once; the hidden layer [R, h] is held a
 * tile of it at a time in shared memory, never in global memory.
 *
 * bf16, d 16, 32 or 128 (the pair transition, c_z; the test models'
 * widths), h a multiple of TR_HS: k_transition_bf16, persistent blocks of TR_WARPS warps over
 * 128-row tiles (tile b, b + gridDim.x, ...; TR_GRID blocks, 2 per SM),
 * warp w on rows 16 w.. of the tile throughout.  The weights (256 KiB at
 * c_z 128, more than a block's shared memory) pass through it in slices
 * of TR_HS hidden units, double-buffered: while the warps multiply by
 * slice s, cp.async (16 bytes where w1 and w2 are on 16 bytes, else 4)
 * brings slice s + 1, or the next tile's slice 0; so the weights cross
 * L2 once per 128 rows (2 KiB a row, against the 4x-per-64-rows global
 * fragment loads before).  In shared memory (83 KiB at d 128):
 *   W1s: [2][TR_HS, d + 8] bf16    w1[h0.., :]
 *   W2s: [2][d, TR_HS + 8] bf16    w2[:, h0..]
 *   As:  [128, d + 8] bf16         the tile's rows normed (each row read
 *                                  once into registers, fp32 statistics,
 *                                  the CPU's formula), rounded to bf16
 *   Hs:  [128, TR_HS + 8] bf16     relu(As w1[h0..]^T + b1) of the slice
 * all fragments by ldmatrix, the products by mma.sync (fp32
 * accumulation); a warp's As and Hs rows are its own (no block barrier
 * but the one per slice for the weights).  The output, [16, d] per warp,
 * stays in registers across the slices; the epilogue writes x = (x + b2)
 * + acc (the order of a cuBLAS product with beta 1 after the bias
 * prologue) from the fragments, two channels per 8-byte access, 32-bit
 * row indices (the launcher refuses R over 2^31 - 129).
 *
 * bf16, other multiples of 16 up to 1024 (the sequence transition, c_s
 * 1024; other h): k_transition_wide, a block of TR_WARPS warps per bm = 16 mt rows
 * (mt = 1, 2 or 4 row tiles, as many as keep each warp's share of the
 * [bm, d] output at TR_MAXF fragments).  In shared memory:
 *   As: [bm, d + 8] bf16        the rows normed, rounded to bf16
 *   Hs: [bm, TR_HC + 8] bf16    one slice of TR_HC hidden columns:
 *                                 relu(As w1^T + b1), fp32 then bf16
 *   Ws: [TR_WARPS, 16, 20] fp32 each warp's staging of one fragment
 * For each slice of the hidden layer the warps compute its 16x16 tiles
 * (mma.sync, fp32 accumulation; the weights' fragments read from global
 * memory), then every warp adds Hs w2[:, slice]^T into
 * its output fragments, held in registers across the slices.  The
 * epilogue as above.  At c_s 1024 that is L / 16 blocks, each streaming
 * all 16 MiB of weights: latency-bound, ~0.4 ms a call at any L
 * (bench/gpu_model) where the FLOPs take ~20 us.  More blocks need the
 * hidden layer [L, h] in global memory (a split over h into one kernel,
 * then over the output columns into another, or cuBLAS with a bias-ReLU
 * epilogue and then beta 1), a buffer this op's interface does not give;
 * not done yet.
 *
 * fp32 (fp32 weights), and bf16 where d or h is no multiple of 16 (the
 * small test models): the same tiles on CUDA cores, shared memory fp32:
 * As: [bm, d], Hs: [bm, TR_HC], Os: [bm, d] the output accumulated over
 * the slices; bm rows as fit in TR_F32_SMEM bytes (at most 32).  Each
 * thread computes whole dot products in order (no split sums).  At bf16
 * As and Hs are rounded to bf16 as the tensor-core kernel rounds them.
 */
#include "common.cuh"
#include "mma.cuh"

#ifdef __CUDACC__
#include <cuda_bf16.h>
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "transition.cu: bf16 mma.sync needs sm_80 or newer (configure --with-cuda-arch)"
#endif
#endif

typedef __nv_bfloat16 bf16;

#define TR_WARPS 8
#define TR_NT (TR_WARPS * 32)
#define TR_TM (16 * TR_WARPS)   /* rows per tile (bf16, d <= TR_DMAX): 16 a warp */
#define TR_HS 32           /* hidden units per staged weight slice (bf16, d <= TR_DMAX) */
#define TR_DMAX 128        /* widest d of the staged-weight kernel */
#define TR_GRID 264        /* its blocks: resident on a 132-SM card (2 per SM) */
#define TR_HC 128          /* hidden columns per slice (bf16 and fp32) */
#define TR_MAXF 8          /* most output fragments per warp (bf16): d <= 1024 */
#define TR_LDW 20          /* leading dimension of a warp's staging tile */
#define TR_F32_SMEM (46 * 1024)

/* ---- the layer norm of one row, by one warp --------------------------- */

static __device__ __forceinline__ void tr_put(float *p, float v) { *p = v; }
static __device__ __forceinline__ void tr_put(bf16 *p, float v) { *p = __float2bfloat16(v); }

/* v rounded to bf16 and back */
static __device__ __forceinline__ float tr_bf(float v) { return __bfloat162float(__float2bfloat16(v)); }

/* weight i as a float */
static __device__ __forceinline__ float tr_w(const float *w, int64_t i) { return w[i]; }
static __device__ __forceinline__ float tr_w(const bf16 *w, int64_t i) { return __bfloat162float(w[i]); }

/* y: [d] = LN(x: [d]) with the CPU's formula (two passes, mean then
 * variance, 1 / sqrtf(var / d + eps)); b may be NULL */
template <typename T>
static __device__ void tr_ln_row(T *y, const float *x, int d, const float *w, const float *b,
                                 float eps, int lane)
{
	float mean = 0.0f, var = 0.0f;
	for (int c = lane; c < d; c += 32) mean += x[c];
	mean = cu_warp_sum(mean) / (float)d;
	for (int c = lane; c < d; c += 32) { float u = x[c] - mean; var += u * u; }
	float inv = 1.0f / sqrtf(cu_warp_sum(var) / (float)d + eps);
	for (int c = lane; c < d; c += 32) tr_put(y + c, (x[c] - mean) * inv * w[c] + (b ? b[c] : 0.0f));
}

/* rows r0.. of x normed into ys: [nr, ld] (zeros past the last row of x),
 * one warp per row */
template <typename T>
static __device__ void tr_ln_tile(T *ys, int ld, const be_transition_t &t, int64_t r0, int nr)
{
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
	for (int r = warp; r < nr; r += nw) {
		if (r0 + r < t.rows) tr_ln_row<T>(ys + r * ld, t.x + (r0 + r) * t.d, t.d, t.ln_w, t.ln_b, t.eps, lane);
		else for (int c = lane; c < t.d; c += 32) tr_put(ys + r * ld + c, 0.0f);
	}
}

/* ---- bf16, d <= TR_DMAX (the pair transition): mma.sync, staged weights -- */

typedef struct {
	int w1, w2, a, h, bytes;   /* byte offsets of W1s, W2s, As, Hs (on 128 bytes); size to ask */
} tr_layout_t;

static __host__ __device__ int tr_up(int n) { return (n + 127) & ~127; }

static __host__ __device__ tr_layout_t tr_layout(int d)
{
	tr_layout_t y;
	y.w1 = 0;
	y.w2 = y.w1 + tr_up(2 * TR_HS * (d + 8) * 2);
	y.a = y.w2 + tr_up(2 * d * (TR_HS + 8) * 2);
	y.h = y.a + tr_up(TR_TM * (d + 8) * 2);
	y.bytes = y.h + tr_up(TR_TM * (TR_HS + 8) * 2);
	return y;
}

/* 16 bytes (8 bf16) from src to shared dst: one cp.async, or four of 4
 * bytes where the weights are not on 16 bytes */
static __device__ __forceinline__ void tr_copy(bf16 *dst, const bf16 *src, int v16)
{
	if (v16) {
		cu_cp_async_16(dst, src, 16);
		return;
	}
	for (int i = 0; i < 4; i++) cu_cp_async_4(dst + 2 * i, src + 2 * i, 4);
}

/* weight slice h0.. into shared memory, asynchronously (one group):
 * W1s: [TR_HS, d + 8] = w1[h0.., :], W2s: [d, TR_HS + 8] = w2[:, h0..] */
static __device__ void tr_stage(bf16 *W1s, bf16 *W2s, const bf16 *w1, const bf16 *w2, int d, int h, int h0,
                                int v16)
{
	const int cpr = d / 8;
	for (int q = threadIdx.x; q < TR_HS * cpr; q += TR_NT) {
		const int r = q / cpr, c = q % cpr * 8;
		tr_copy(W1s + r * (d + 8) + c, w1 + (size_t)(h0 + r) * d + c, v16);
	}
	for (int q = threadIdx.x; q < d * (TR_HS / 8); q += TR_NT) {
		const int r = q / (TR_HS / 8), c = q % (TR_HS / 8) * 8;
		tr_copy(W2s + r * (TR_HS + 8) + c, w2 + (size_t)r * h + h0 + c, v16);
	}
	cu_cp_async_commit();
}

/* rows r0..r0 + 15 of x normed into As: [16, d + 8] bf16 by one warp, each
 * row read once into registers (lane: channels lane + 32 i), statistics
 * as tr_ln_row's but by fast divisions and rsqrtf (as ln_linear.cu); rows
 * past R zero */
template <int DT>
static __device__ void tr_ln16(bf16 *As, const be_transition_t &t, int r0, int lane)
{
	const int d = DT * 16, nv = (d + 31) / 32;
	for (int r = 0; r < 16; r++) {
		const int row = r0 + r;
		float v[nv], mean = 0.0f, var = 0.0f;
		if (row >= t.rows) {
			for (int i = 0; i < nv; i++)
				if (lane + 32 * i < d) As[r * (d + 8) + lane + 32 * i] = __float2bfloat16(0.0f);
			continue;
		}
		const float *xr = t.x + (size_t)row * d;
		for (int i = 0; i < nv; i++) {
			v[i] = lane + 32 * i < d ? xr[lane + 32 * i] : 0.0f;
			mean += v[i];
		}
		mean = __fdividef(cu_warp_sum(mean), (float)d);
		for (int i = 0; i < nv; i++)
			if (lane + 32 * i < d) { float u = v[i] - mean; var += u * u; }
		const float inv = rsqrtf(__fdividef(cu_warp_sum(var), (float)d) + t.eps);
		for (int i = 0; i < nv; i++) {
			const int c = lane + 32 * i;
			if (c < d) As[r * (d + 8) + c] = __float2bfloat16((v[i] - mean) * inv * t.ln_w[c] + (t.ln_b ? t.ln_b[c] : 0.0f));
		}
	}
}

/* persistent: block b over the row tiles b, b + gridDim.x, ...; x: [R, d],
 * w1: [h, d], w2: [d, h] bf16, d = 16 DT, h a multiple of TR_HS; v16: w1
 * and w2 on 16 bytes */
template <int DT>
static __global__ void __launch_bounds__(TR_NT, 2)
k_transition_bf16(be_transition_t t, int v16)
{
	CU_DYN_SHARED(char, sm);
	const int d = DT * 16, h = t.h, LDA = d + 8, LDW = TR_HS + 8;
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
	const int rows = (int)t.rows, ntiles = (rows + TR_TM - 1) / TR_TM, nsl = h / TR_HS;
	const tr_layout_t y = tr_layout(d);
	bf16 *W1b = (bf16 *)(sm + y.w1), *W2b = (bf16 *)(sm + y.w2);
	bf16 *As = (bf16 *)(sm + y.a) + warp * 16 * LDA, *Hs = (bf16 *)(sm + y.h) + warp * 16 * LDW;
	const bf16 *w1 = (const bf16 *)t.w1, *w2 = (const bf16 *)t.w2;
	int it = 0;

	if ((int)blockIdx.x >= ntiles) return;
	tr_stage(W1b, W2b, w1, w2, d, h, 0, v16);
	for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
		const int r0 = tile * TR_TM + warp * 16;
		float acc[DT][2][4] = {};

		__syncwarp();   /* As read by the last tile's products */
		tr_ln16<DT>(As, t, r0, lane);
		__syncwarp();
		for (int s = 0; s < nsl; s++, it++) {
			const int b = it & 1, h0 = s * TR_HS;
			const int nt = s + 1 < nsl ? tile : tile + gridDim.x;
			const bf16 *W1s = W1b + b * TR_HS * LDA, *W2s = W2b + b * d * LDW;
			float hf[TR_HS / 16][2][4] = {};

			cu_cp_async_wait<0>();
			__syncthreads();   /* slice s in; the other buffer read by all */
			if (nt < ntiles)
				tr_stage(W1b + (b ^ 1) * TR_HS * LDA, W2b + (b ^ 1) * d * LDW, w1, w2, d, h,
				         s + 1 < nsl ? h0 + TR_HS : 0, v16);
			/* hf = As W1s^T: [16, d] x [d, TR_HS] */
#pragma unroll
			for (int k = 0; k < DT; k++) {
				uint32_t af[4];
				cu_tile_a(af, As + k * 16, LDA, lane);
#pragma unroll
				for (int n = 0; n < TR_HS / 16; n++) {
					uint32_t bf[4];
					cu_tile_bt(bf, W1s + n * 16 * LDA + k * 16, LDA, lane);
					cu_tile_mma(hf[n], af, bf);
				}
			}
			/* Hs = bf16(relu(hf + b1)), the warp's own rows */
#pragma unroll
			for (int n = 0; n < TR_HS / 16; n++)
#pragma unroll
				for (int j = 0; j < 2; j++) {
					const int c = n * 16 + j * 8 + 2 * tq;
					const float b0 = t.b1 ? t.b1[h0 + c] : 0.0f, b1 = t.b1 ? t.b1[h0 + c + 1] : 0.0f;
					const float v0 = hf[n][j][0] + b0, v1 = hf[n][j][1] + b1;
					const float v2 = hf[n][j][2] + b0, v3 = hf[n][j][3] + b1;
					*(uint32_t *)(Hs + g * LDW + c) = cu_bf16x2(v0 > 0.0f ? v0 : 0.0f, v1 > 0.0f ? v1 : 0.0f);
					*(uint32_t *)(Hs + (g + 8) * LDW + c) = cu_bf16x2(v2 > 0.0f ? v2 : 0.0f, v3 > 0.0f ? v3 : 0.0f);
				}
			__syncwarp();
			/* acc += Hs W2s^T: [16, TR_HS] x [TR_HS, d] */
#pragma unroll
			for (int k = 0; k < TR_HS / 16; k++) {
				uint32_t af[4];
				cu_tile_a(af, Hs + k * 16, LDW, lane);
#pragma unroll
				for (int n = 0; n < DT; n++) {
					uint32_t bf[4];
					cu_tile_bt(bf, W2s + n * 16 * LDW + k * 16, LDW, lane);
					cu_tile_mma(acc[n], af, bf);
				}
			}
			__syncwarp();   /* Hs read before the next slice writes it */
		}
		/* x = (x + b2) + acc: rows r0 + g, r0 + g + 8, two channels a lane */
#pragma unroll
		for (int n = 0; n < DT; n++)
#pragma unroll
			for (int j = 0; j < 2; j++) {
				const int c = n * 16 + j * 8 + 2 * tq;
				const float b0 = t.b2 ? t.b2[c] : 0.0f, b1 = t.b2 ? t.b2[c + 1] : 0.0f;
#pragma unroll
				for (int e = 0; e < 2; e++) {
					const int row = r0 + g + 8 * e;
					if (row >= rows) continue;
					float2 *xp = (float2 *)(t.x + (size_t)row * d + c), v = *xp;
					v.x = (v.x + b0) + acc[n][j][2 * e];
					v.y = (v.y + b1) + acc[n][j][2 * e + 1];
					*xp = v;
				}
			}
	}
}

template <int DT>
static int tr_launch_bf16(cudaStream_t s, const be_transition_t *t)
{
	const int64_t ntiles = (t->rows + TR_TM - 1) / TR_TM;
	const int v16 = ((uintptr_t)t->w1 | (uintptr_t)t->w2) % 16 == 0;

	CU_LAUNCH((unsigned)(ntiles < TR_GRID ? ntiles : TR_GRID), TR_NT, (size_t)tr_layout(t->d).bytes, s,
	          k_transition_bf16<DT>)(*t, v16);
	return cu_launched();
}

/* ---- bf16, d > TR_DMAX (the sequence transition): mma.sync, 16 mt rows a block */

typedef struct {
	int a, h, w, bytes;   /* byte offsets of As, Hs, Ws (the base on 128 bytes); size to ask */
} trw_layout_t;

static __host__ __device__ trw_layout_t trw_layout(int d, int mt)
{
	trw_layout_t y;
	y.a = 0;
	y.h = y.a + tr_up(16 * mt * (d + 8) * 2);
	y.w = y.h + tr_up(16 * mt * (TR_HC + 8) * 2);
	y.bytes = y.w + tr_up(TR_WARPS * 16 * TR_LDW * 4);
	return y;
}

/* grid: one block per 16 mt rows; x: [R, d], w1: [h, d] bf16, w2: [d, h]
 * bf16; NF: output fragments per warp, TR_WARPS NF >= mt d / 16 */
template <int NF>
static __global__ void __launch_bounds__(TR_WARPS * 32)
k_transition_wide(be_transition_t t, int mt)
{
	CU_DYN_SHARED(char, sm);
	const int d = t.d, h = t.h, LDA = d + 8, LDH = TR_HC + 8, dt = d / 16, nout = mt * dt;
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	const int64_t r0 = (int64_t)blockIdx.x * 16 * mt;
	const trw_layout_t y = trw_layout(d, mt);
	bf16 *As = (bf16 *)(sm + y.a), *Hs = (bf16 *)(sm + y.h);
	float *Ws = (float *)(sm + y.w) + warp * 16 * TR_LDW;
	const bf16 *w1 = (const bf16 *)t.w1, *w2 = (const bf16 *)t.w2;
	float acc[NF][2][4] = {};

	tr_ln_tile<bf16>(As, LDA, t, r0, 16 * mt);
	__syncthreads();

	for (int h0 = 0; h0 < h; h0 += TR_HC) {
		const int hc = h - h0 < TR_HC ? (h - h0) / 16 : TR_HC / 16;   /* column tiles of this slice */
		/* Hs = relu(As w1[h0.., :]^T + b1): [16 mt, d] x [d, 16 hc] */
		for (int e = warp; e < mt * hc; e += TR_WARPS) {
			const int m = e / hc, n = e % hc;
			float hf[2][4] = {};
			for (int k0 = 0; k0 < d; k0 += 16) {
				uint32_t af[4], bf[4];
				cu_tile_a(af, As + m * 16 * LDA + k0, LDA, lane);
				cu_tile_bt_global(bf, w1 + (int64_t)(h0 + n * 16) * d + k0, d, lane);
				cu_tile_mma(hf, af, bf);
			}
			cu_tile_store(Ws, TR_LDW, hf, lane);
			__syncwarp();
			for (int q = lane; q < 256; q += 32) {
				int r = q / 16, c = q % 16, j = h0 + n * 16 + c;
				float v = Ws[r * TR_LDW + c] + (t.b1 ? t.b1[j] : 0.0f);
				Hs[(m * 16 + r) * LDH + n * 16 + c] = __float2bfloat16(v > 0.0f ? v : 0.0f);
			}
			__syncwarp();   /* Ws read before the next tile overwrites it */
		}
		__syncthreads();
		/* acc += Hs w2[:, h0..]^T: [16 mt, 16 hc] x [16 hc, d] */
		for (int i = 0; i < NF; i++) {
			const int e = warp + i * TR_WARPS, m = e / dt, n = e % dt;
			if (e >= nout) break;
			for (int k = 0; k < hc; k++) {
				uint32_t af[4], bf[4];
				cu_tile_a(af, Hs + m * 16 * LDH + k * 16, LDH, lane);
				cu_tile_bt_global(bf, w2 + (int64_t)n * 16 * h + h0 + k * 16, h, lane);
				cu_tile_mma(acc[i], af, bf);
			}
		}
		__syncthreads();   /* Hs read before the next slice overwrites it */
	}

	/* x = (x + b2) + acc, rows past R left alone */
	for (int i = 0; i < NF; i++) {
		const int e = warp + i * TR_WARPS, m = e / dt, n = e % dt;
		if (e >= nout) break;
		cu_tile_store(Ws, TR_LDW, acc[i], lane);
		__syncwarp();
		for (int q = lane; q < 256; q += 32) {
			int r = q / 16, c = n * 16 + q % 16;
			int64_t row = r0 + m * 16 + r;
			if (row < t.rows) {
				float *xp = t.x + row * d + c;
				*xp = (*xp + (t.b2 ? t.b2[c] : 0.0f)) + Ws[r * TR_LDW + q % 16];
			}
		}
		__syncwarp();
	}
}

template <int NF>
static int trw_launch(cudaStream_t s, const be_transition_t *t, int mt)
{
	int64_t nblocks = (t->rows + 16 * mt - 1) / (16 * mt);
	size_t smem = (size_t)trw_layout(t->d, mt).bytes;

	if (nblocks > 0x7fffffff) return -EINVAL;
	CU_LAUNCH((unsigned)nblocks, TR_WARPS * 32, smem, s, k_transition_wide<NF>)(*t, mt);
	return cu_launched();
}

/* ---- on CUDA cores: fp32, or bf16 where the tensor cores do not fit ---- */

/* grid: one block per bm rows; x: [R, d], w1: [h, d], w2: [d, h] of W
 * (float, or bf16: then the normed and the hidden rows are rounded to
 * bf16 as the tensor-core kernel rounds them) */
template <typename W>
static __global__ void __launch_bounds__(TR_WARPS * 32)
k_transition_simt(be_transition_t t, int bm)
{
	CU_DYN_SHARED(float, tr_smemf);
	const int d = t.d, h = t.h, nt = blockDim.x, rb = sizeof(W) == 2;
	const int64_t r0 = (int64_t)blockIdx.x * bm;
	const W *w1 = (const W *)t.w1, *w2 = (const W *)t.w2;
	float *As = tr_smemf, *Hs = As + bm * d, *Os = Hs + bm * TR_HC;

	tr_ln_tile<float>(As, d, t, r0, bm);
	for (int e = threadIdx.x; e < bm * d; e += nt) Os[e] = 0.0f;
	__syncthreads();
	if (rb) {
		for (int e = threadIdx.x; e < bm * d; e += nt) As[e] = tr_bf(As[e]);
		__syncthreads();
	}
	for (int h0 = 0; h0 < h; h0 += TR_HC) {
		const int hc = h - h0 < TR_HC ? h - h0 : TR_HC;
		for (int e = threadIdx.x; e < bm * hc; e += nt) {
			const int r = e / hc, j = h0 + e % hc;
			const float *a = As + r * d;
			float v = 0.0f;
			for (int k = 0; k < d; k++) v += a[k] * tr_w(w1, (int64_t)j * d + k);
			v += t.b1 ? t.b1[j] : 0.0f;
			v = v > 0.0f ? v : 0.0f;
			Hs[r * TR_HC + e % hc] = rb ? tr_bf(v) : v;
		}
		__syncthreads();
		for (int e = threadIdx.x; e < bm * d; e += nt) {
			const int r = e / d, c = e % d;
			const float *a = Hs + r * TR_HC;
			float v = 0.0f;
			for (int k = 0; k < hc; k++) v += a[k] * tr_w(w2, (int64_t)c * h + h0 + k);
			Os[e] += v;
		}
		__syncthreads();
	}
	for (int e = threadIdx.x; e < bm * d; e += nt) {
		const int64_t row = r0 + e / d;
		const int c = e % d;
		if (row < t.rows) {
			float *xp = t.x + row * d + c;
			*xp = (*xp + (t.b2 ? t.b2[c] : 0.0f)) + Os[e];
		}
	}
}

/* the instances cu_transition launches */
extern "C" int cu_transition_smem_init(int bytes)
{
	int rc = cu_smem_allow((const void *)k_transition_bf16<1>, bytes);
	if (!rc) rc = cu_smem_allow((const void *)k_transition_bf16<2>, bytes);
	if (!rc) rc = cu_smem_allow((const void *)k_transition_bf16<TR_DMAX / 16>, bytes);
	if (!rc) rc = cu_smem_allow((const void *)k_transition_wide<1>, bytes);
	if (!rc) rc = cu_smem_allow((const void *)k_transition_wide<2>, bytes);
	if (!rc) rc = cu_smem_allow((const void *)k_transition_wide<4>, bytes);
	if (!rc) rc = cu_smem_allow((const void *)k_transition_wide<TR_MAXF>, bytes);
	if (!rc) rc = cu_smem_allow((const void *)k_transition_simt<bf16>, bytes);
	if (!rc) rc = cu_smem_allow((const void *)k_transition_simt<float>, bytes);
	return rc;
}

extern "C" int cu_transition(cudaStream_t s, const be_transition_t *t)
{
	if (t->rows < 0 || t->d <= 0 || t->h <= 0) return -EINVAL;
	if (t->rows == 0) return 0;
	if (t->bf16 && t->h % TR_HS == 0 && (uintptr_t)t->x % 8 == 0 &&
	    (t->d == 16 || t->d == 32 || t->d == TR_DMAX)) {
		if (t->rows > 0x7fffffff - TR_TM) return -EINVAL;
		if (t->d == 16) return tr_launch_bf16<1>(s, t);
		if (t->d == 32) return tr_launch_bf16<2>(s, t);
		return tr_launch_bf16<TR_DMAX / 16>(s, t);
	}
	if (t->bf16 && t->d % 16 == 0 && t->h % 16 == 0 && t->d <= 16 * TR_WARPS * TR_MAXF) {
		const int dt = t->d / 16, mt = dt >= 32 ? 1 : dt >= 16 ? 2 : 4;
		const int nf = (mt * dt + TR_WARPS - 1) / TR_WARPS;
		if (nf <= 1) return trw_launch<1>(s, t, mt);
		if (nf <= 2) return trw_launch<2>(s, t, mt);
		if (nf <= 4) return trw_launch<4>(s, t, mt);
		return trw_launch<TR_MAXF>(s, t, mt);
	}
	int64_t per = (int64_t)(2 * t->d + TR_HC) * 4;
	int bm = (int)(TR_F32_SMEM / per < 32 ? TR_F32_SMEM / per : 32);
	int64_t nblocks;
	if (bm < 1) return -EINVAL;
	nblocks = (t->rows + bm - 1) / bm;
	if (nblocks > 0x7fffffff) return -EINVAL;
	if (t->bf16)
		CU_LAUNCH((unsigned)nblocks, TR_WARPS * 32, (size_t)(bm * per), s, k_transition_simt<bf16>)(*t, bm);
	else
		CU_LAUNCH((unsigned)nblocks, TR_WARPS * 32, (size_t)(bm * per), s, k_transition_simt<float>)(*t, bm);
	return cu_launched();
}
