/* transition.cu - the transition (be_transition_t, backend.h) in one kernel or two:
 *   x: [R, d] += relu(LN(x) w1^T + b1) w2^T + b2,  w1: [h, d], w2: [d, h]
 * reading x once and writing it once; the pair transition's hidden layer
 * [R, h] is held a tile of it at a time in shared memory, never in global
 * memory, the sequence transition's goes through a buffer (below).
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
 * bf16, other multiples of 16 up to CU_SEQTR_DMAX (the sequence
 * transition, c_s 1024, and the test models' c_s 64; h a multiple of 16):
 * only its layer norm is here, k_seqtr_ln<NV>: xn = LN(x), a warp per row
 * (tr_ln_reg: the pair kernel's formula, one read of x), into a buffer of
 * the caller's; the two products are cuBLASLt's (src/backend/cuda_blas.c:
 * hid = bf16(relu(xn w1^T + b1)) by its RELU_BIAS epilogue, b1 rounded to
 * bf16 first as that epilogue takes it, then x += hid w2^T + b2 by beta 1
 * and its BIAS epilogue, in place).  Not our own kernels
 * because they cannot beat it: a block holds at most a 128 x 256 fp32
 * tile in registers under mma.sync, so every block re-reads its operands
 * from L2 (1 / 128 + 1 / 256 bytes a FLOP), and at L = 512 the output
 * product has 16 such tiles for 132 SMs (split over k, its partial sums
 * through memory once more): our kernels of that design were predicted
 * 3.4x / 2.2x their floor at L = 512 / 1024 (bench/gpu_model, bound by L2
 * traffic).  cuBLAS's sm_90 kernels load their tiles by TMA and multiply
 * by wgmma (which mma.sync cannot match on Hopper); its epilogues do what ours did (bias, ReLU, bf16 output;
 * the residual by beta 1), so nothing passes over [R, h] twice.
 *
 * fp32 (fp32 weights), bf16 where d or h is no multiple of 16 (the small
 * test models), and bf16 where cuBLASLt refuses the products (the CUDA
 * backend falls back to it): the same tiles on CUDA cores, shared memory fp32:
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
#define TR_F32_SMEM (46 * 1024)

/* ---- the layer norm of one row, by one warp --------------------------- */

/* v rounded to bf16 and back */
static __device__ __forceinline__ float tr_bf(float v) { return __bfloat162float(__float2bfloat16(v)); }

/* weight i as a float */
static __device__ __forceinline__ float tr_w(const float *w, int64_t i) { return w[i]; }
static __device__ __forceinline__ float tr_w(const bf16 *w, int64_t i) { return __bfloat162float(w[i]); }

/* y: [d] = LN(x: [d]) with the CPU's formula (two passes, mean then
 * variance, 1 / sqrtf(var / d + eps)); b may be NULL */
static __device__ void tr_ln_row(float *y, const float *x, int d, const float *w, const float *b,
                                 float eps, int lane)
{
	float mean = 0.0f, var = 0.0f;
	for (int c = lane; c < d; c += 32) mean += x[c];
	mean = cu_warp_sum(mean) / (float)d;
	for (int c = lane; c < d; c += 32) { float u = x[c] - mean; var += u * u; }
	float inv = 1.0f / sqrtf(cu_warp_sum(var) / (float)d + eps);
	for (int c = lane; c < d; c += 32) y[c] = (x[c] - mean) * inv * w[c] + (b ? b[c] : 0.0f);
}

/* rows r0.. of x normed into ys: [nr, ld] (zeros past the last row of x),
 * one warp per row */
static __device__ void tr_ln_tile(float *ys, int ld, const be_transition_t &t, int64_t r0, int nr)
{
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
	for (int r = warp; r < nr; r += nw) {
		if (r0 + r < t.rows) tr_ln_row(ys + r * ld, t.x + (r0 + r) * t.d, t.d, t.ln_w, t.ln_b, t.eps, lane);
		else for (int c = lane; c < t.d; c += 32) ys[r * ld + c] = 0.0f;
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
 * bytes where the weights are not on 16 bytes; ok 0: dst zero-filled,
 * src not read */
static __device__ __forceinline__ void tr_copy(bf16 *dst, const bf16 *src, int v16, int ok = 1)
{
	if (v16) {
		cu_cp_async_16(dst, src, ok ? 16 : 0);
		return;
	}
	for (int i = 0; i < 4; i++) cu_cp_async_4(dst + 2 * i, src + 2 * i, ok ? 4 : 0);
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

/* dst: [n] bf16 = LN(xr: [d]) by one warp, columns d..n - 1 zero (xr
 * NULL: all zero); xr read once into registers (lane: channels lane +
 * 32 i, i < NV, d <= 32 NV), the statistics as tr_ln_row's but by fast
 * divisions and rsqrtf (as ln_linear.cu) */
template <int NV>
static __device__ __forceinline__ void tr_ln_reg(bf16 *dst, const float *xr, int d, int n, const be_transition_t &t,
                                                 int lane)
{
	float v[NV], mean = 0.0f, var = 0.0f;
	if (!xr) {
		for (int c = lane; c < n; c += 32) dst[c] = __float2bfloat16(0.0f);
		return;
	}
#pragma unroll
	for (int i = 0; i < NV; i++) {
		v[i] = lane + 32 * i < d ? xr[lane + 32 * i] : 0.0f;
		mean += v[i];
	}
	mean = __fdividef(cu_warp_sum(mean), (float)d);
#pragma unroll
	for (int i = 0; i < NV; i++)
		if (lane + 32 * i < d) { float u = v[i] - mean; var += u * u; }
	const float inv = rsqrtf(__fdividef(cu_warp_sum(var), (float)d) + t.eps);
#pragma unroll
	for (int i = 0; i < NV; i++) {
		const int c = lane + 32 * i;
		if (c < d) dst[c] = __float2bfloat16((v[i] - mean) * inv * t.ln_w[c] + (t.ln_b ? t.ln_b[c] : 0.0f));
	}
	for (int c = d + lane; c < n; c += 32) dst[c] = __float2bfloat16(0.0f);
}

/* rows r0..r0 + 15 of x normed into As: [16, d + 8] bf16 by one warp
 * (tr_ln_reg); rows past R zero */
template <int DT>
static __device__ void tr_ln16(bf16 *As, const be_transition_t &t, int r0, int lane)
{
	const int d = DT * 16;
	for (int r = 0; r < 16; r++)
		tr_ln_reg<(d + 31) / 32>(As + r * (d + 8), r0 + r < t.rows ? t.x + (size_t)(r0 + r) * d : NULL, d, d,
		                         t, lane);
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

/* ---- bf16, other d (the sequence transition): its layer norm ---------- */

/* grid R / TR_WARPS rounded up, a warp per row: xn: [R, d] bf16 = LN(x:
 * [R, d]) (tr_ln_reg: the pair kernel's formula), d <= 32 NV */
template <int NV>
static __global__ void __launch_bounds__(TR_NT)
k_seqtr_ln(be_transition_t t, bf16 *xn)
{
	const int row = blockIdx.x * TR_WARPS + threadIdx.x / 32;

	if (row < (int)t.rows)
		tr_ln_reg<NV>(xn + (unsigned)row * (unsigned)t.d, t.x + (unsigned)row * (unsigned)t.d, t.d, t.d, t,
		              threadIdx.x % 32);
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

	tr_ln_tile(As, d, t, r0, bm);
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
	if (!rc) rc = cu_smem_allow((const void *)k_transition_simt<bf16>, bytes);
	if (!rc) rc = cu_smem_allow((const void *)k_transition_simt<float>, bytes);
	return rc;
}

/* the pair kernel's shapes: bf16, d 16, 32 or 128, h a multiple of TR_HS */
static int tr_pair_fits(const be_transition_t *t)
{
	return t->bf16 && t->h % TR_HS == 0 && (uintptr_t)t->x % 8 == 0 && (t->d == 16 || t->d == 32 || t->d == TR_DMAX);
}

extern "C" int cu_seqtr_fits(const be_transition_t *t)
{
	return t->bf16 && t->d > 0 && t->h > 0 && t->d % 16 == 0 && t->h % 16 == 0 && t->d <= CU_SEQTR_DMAX &&
	       !tr_pair_fits(t);
}

extern "C" int cu_seqtr_ln(cudaStream_t s, const be_transition_t *t, uint16_t *xn)
{
	const int64_t nb = (t->rows + TR_WARPS - 1) / TR_WARPS;

	if (!cu_seqtr_fits(t) || t->rows < 0 || (int64_t)t->rows * t->d > 0x7fffffff || (uintptr_t)xn % 16)
		return -EINVAL;   /* 32-bit indices */
	if (!nb) return 0;
	if (t->d <= 128) CU_LAUNCH((unsigned)nb, TR_NT, 0, s, k_seqtr_ln<4>)(*t, (bf16 *)xn);
	else CU_LAUNCH((unsigned)nb, TR_NT, 0, s, k_seqtr_ln<CU_SEQTR_DMAX / 32>)(*t, (bf16 *)xn);
	return cu_launched();
}

extern "C" int cu_transition(cudaStream_t s, const be_transition_t *t)
{
	if (t->rows < 0 || t->d <= 0 || t->h <= 0) return -EINVAL;
	if (t->rows == 0) return 0;
	if (tr_pair_fits(t)) {
		if (t->rows > 0x7fffffff - TR_TM) return -EINVAL;
		if (t->d == 16) return tr_launch_bf16<1>(s, t);
		if (t->d == 32) return tr_launch_bf16<2>(s, t);
		return tr_launch_bf16<TR_DMAX / 16>(s, t);
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
