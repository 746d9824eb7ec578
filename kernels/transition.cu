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
 * bf16, other multiples of 16 up to TS_DMAX (the sequence transition,
 * c_s 1024, and the test models' c_s 64; h a multiple of 16): three or
 * four kernels over a buffer of the caller's (the CUDA backend's bf16
 * stage), xn: [R, d] and hid: [R, h] bf16 (13.8 MB at L 1344), a chunk
 * of rows at a time, and the fp32 partial sums of a split product in a
 * second one (part: the backend's cuBLAS workspace, 32 MiB; 22 MB at L
 * 1344):
 *   k_seqtr_ln<NV>: xn = LN(x), a warp per row (tr_ln_reg: the pair
 *     kernel's formula, one read of x);
 *   k_seqtr_hidden<MT, NT>: hid = bf16(relu(xn w1^T + b1)) of 32 MT rows
 *     x 128 NT hidden units a block, K = d;
 *   k_seqtr_out<MT, NT>: of 32 MT rows x 128 NT outputs a block, hid
 *     w2^T over a k slice (K = h cut into S slices, grid z; S 1: all of
 *     it): unsplit, x = (x + b2) + acc in the pair kernel's order from
 *     the fragments (8-byte accesses); split, slice z's acc to part[z]:
 *     [S, R, d] fp32;
 *   k_seqtr_reduce: x = (x + b2) + (((p0 + p1) + p2) ...), the slices in
 *     slice order (a fixed order: no atomics, the same bits every run);
 * both products by ts_gemm: a TS_STAGES-deep cp.async pipeline of both
 * operands, As: [32 MT, TS_BK + 8], Bs: [128 NT, TS_BK + 8] a stage,
 * ldmatrix + mma.sync, warp w on rows 16 MT (w / 4).., columns 32 NT (w
 * % 4)...  The tiles (ts_hidden, ts_out, by N = h or d): 128 x 256 (<4,
 * 2>: 64 x 64 a warp, 128 accumulators a lane, ~220 registers, one
 * block an SM, 90 KiB of shared memory) where N is a multiple of 256 and
 * the chunk over 64 rows: the products were L2-bound on 32 / 64 x 128
 * tiles (every block re-reads its A and B rows from L2: bytes per FLOP
 * 1 / BM + 1 / BN, 0.039 at 32 x 128 against 0.012 at 128 x 256);
 * else 64 x 128 (<2, 1>) where that gives TR_GRID blocks, else 32 x 128
 * (<1, 1>).  k_seqtr_out's split (ts_split): the smallest power of two
 * S up to TS_SPLIT whose grid holds 3/4 of TS_SMS blocks (at c_s 1024:
 * 8 tiles at L 256, S 16; 16 at 512, S 8; 32 at 1024 and 44 at 1344, S
 * 4), within the partials' room.  k_seqtr_hidden adds bias and ReLU on
 * the fragments, rounds to bf16 into a tile in shared memory (over As
 * and Bs) and stores 16 bytes a lane.  Index math in 32 bits (the
 * launcher refuses a buffer or d h over 2^31 elements).  The layer norm
 * is a kernel of its own, not a prologue of k_seqtr_hidden: there each
 * row would be normed once per hidden slice (16 times at h 4096, ~380
 * warp instructions a row each: more issue time than the slice's
 * products) where the extra pass costs 6 bytes an element.  Custom
 * products rather than cuBLAS: cublasGemmEx has no bias-ReLU epilogue
 * (a bias prologue, beta 1 and a ReLU pass: 3 more passes over [R, h]),
 * and ts_gemm's epilogues write hid in bf16 and x in place.  No
 * atomics: every output is written by one lane, its sums in a fixed
 * order.
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
#define TS_BN 128          /* columns per block of the two-phase kernels */
#define TS_BK 32           /* their k per pipeline stage */
#define TS_LDB (TS_BK + 8) /* leading dimension of a stage's rows (80 bytes) */
#define TS_STAGES 3        /* their cp.async pipeline's depth */
#define TS_DMAX 1024       /* widest d of the two-phase kernels */
#define TS_SPLIT 16        /* most k slices of k_seqtr_out */
#define TS_SMS 132         /* the SMs ts_split fills (an H100 / H200) */
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

/* ---- bf16, other d (the sequence transition): three kernels over a buffer */

/* shared memory of the products of 32 MT x 128 NT tiles: As:
 * [TS_STAGES][32 MT, TS_LDB], then Bs: [TS_STAGES][128 NT, TS_LDB] bf16
 * at the offset ts_bs returns (on 128 bytes); k_seqtr_hidden's output
 * tile Cs: [32 MT, 128 NT + 8] bf16 over both after the products */
static __host__ __device__ int ts_bs(int mt) { return tr_up(TS_STAGES * 32 * mt * TS_LDB * 2); }

static __host__ __device__ int ts_smem(int mt, int nt)
{
	const int ab = ts_bs(mt) + tr_up(TS_STAGES * TS_BN * nt * TS_LDB * 2), c = 32 * mt * (TS_BN * nt + 8) * 2;
	return ab > c ? ab : c;
}

/* dst: [N, TS_LDB] bf16 = src[row0 + r, k0 + c] (src: [nrows, K] bf16,
 * nrows K < 2^31), asynchronously (no commit), zero past row nrows or
 * column K */
template <int N>
static __device__ __forceinline__ void ts_load(bf16 *dst, const bf16 *src, int row0, int nrows, int k0, int K,
                                               int v16)
{
#pragma unroll
	for (int q = threadIdx.x; q < N * (TS_BK / 8); q += TR_NT) {
		const int r = q / (TS_BK / 8), c = q % (TS_BK / 8) * 8;
		const int ok = row0 + r < nrows && k0 + c < K;
		tr_copy(dst + r * TS_LDB + c, ok ? src + (unsigned)(row0 + r) * (unsigned)K + k0 + c : src, v16, ok);
	}
}

/* acc += A B^T over TS_BK: A the warp's 16 MT rows, B its 32 NT weight
 * rows of a stage */
template <int MT, int NT>
static __device__ __forceinline__ void ts_step(float acc[MT][2 * NT][2][4], const bf16 *A, const bf16 *B, int lane)
{
#pragma unroll
	for (int kk = 0; kk < TS_BK; kk += 16) {
		uint32_t af[MT][4], bfr[2 * NT][4];
#pragma unroll
		for (int m = 0; m < MT; m++) cu_tile_a(af[m], A + m * 16 * TS_LDB + kk, TS_LDB, lane);
#pragma unroll
		for (int n = 0; n < 2 * NT; n++) cu_tile_bt(bfr[n], B + n * 16 * TS_LDB + kk, TS_LDB, lane);
#pragma unroll
		for (int m = 0; m < MT; m++)
#pragma unroll
			for (int n = 0; n < 2 * NT; n++) cu_tile_mma(acc[m][n], af[m], bfr[n]);
	}
}

/* acc = A[r0.., k] B[n0.., k]^T over the k stages kb..ke - 1 (TS_BK
 * each) of the block's 32 MT x 128 NT tile (warp w: rows 16 MT (w / 4)..,
 * columns 32 NT (w % 4)..): A: [rows, K], B: [N, K] bf16 (A on 16
 * bytes, B where v16), a TS_STAGES-deep cp.async pipeline through sm
 * (ts_smem), ldmatrix + mma.sync; no copy in flight on return, the last
 * stage still being read by other warps */
template <int MT, int NT>
static __device__ __forceinline__ void ts_gemm(float acc[MT][2 * NT][2][4], char *sm, const bf16 *A, int rows,
                                               int r0, const bf16 *B, int N, int n0, int K, int kb, int ke,
                                               int v16)
{
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, BM = 32 * MT, BN = TS_BN * NT;
	bf16 *As = (bf16 *)sm, *Bs = (bf16 *)(sm + ts_bs(MT));
	const bf16 *Aw = As + warp / 4 * 16 * MT * TS_LDB, *Bw = Bs + warp % 4 * 32 * NT * TS_LDB;

	for (int s = 0; s < TS_STAGES - 1; s++) {
		if (kb + s < ke) {
			ts_load<32 * MT>(As + s * BM * TS_LDB, A, r0, rows, (kb + s) * TS_BK, K, 1);
			ts_load<TS_BN * NT>(Bs + s * BN * TS_LDB, B, n0, N, (kb + s) * TS_BK, K, v16);
		}
		cu_cp_async_commit();
	}
	for (int kt = 0; kb + kt < ke; kt++) {
		const int kp = kb + kt + TS_STAGES - 1, sr = kt % TS_STAGES, sw = (kt + TS_STAGES - 1) % TS_STAGES;
		cu_cp_async_wait<TS_STAGES - 2>();
		__syncthreads();   /* stage kt in; stage kt - 1 read by all */
		if (kp < ke) {
			ts_load<32 * MT>(As + sw * BM * TS_LDB, A, r0, rows, kp * TS_BK, K, 1);
			ts_load<TS_BN * NT>(Bs + sw * BN * TS_LDB, B, n0, N, kp * TS_BK, K, v16);
		}
		cu_cp_async_commit();
		ts_step<MT, NT>(acc, Aw + sr * BM * TS_LDB, Bw + sr * BN * TS_LDB, lane);
	}
	cu_cp_async_wait<0>();   /* the empty groups */
}

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

/* MT 4, NT 2 (128 x 256 tiles, 128 accumulators a lane): one block an SM;
 * the smaller tiles two */
#define TS_MINB(MT, NT) ((MT) * (NT) >= 8 ? 1 : 2)

/* grid (R / (32 MT), h / (128 NT)) rounded up: hid: [R, h] bf16 =
 * bf16(relu(xn w1^T + b1)) of rows 32 MT bx.., columns 128 NT by..;
 * xn: [R, d], w1: [h, d] bf16; v16: w1 on 16 bytes */
template <int MT, int NT>
static __global__ void __launch_bounds__(TR_NT, TS_MINB(MT, NT))
k_seqtr_hidden(be_transition_t t, const bf16 *xn, bf16 *hid, int v16)
{
	CU_DYN_SHARED(char, sm);
	const int h = t.h, rows = (int)t.rows, BN = TS_BN * NT, r0 = blockIdx.x * 32 * MT, n0 = blockIdx.y * BN;
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
	const int wm = warp / 4, wn = warp % 4, ldc = BN + 8;
	bf16 *Cs = (bf16 *)sm;   /* [32 MT, BN + 8] over As and Bs, after the products */
	float acc[MT][2 * NT][2][4] = {};

	ts_gemm<MT, NT>(acc, sm, xn, rows, r0, (const bf16 *)t.w1, h, n0, t.d, 0, (t.d + TS_BK - 1) / TS_BK, v16);
	__syncthreads();   /* As and Bs read by all */
	/* Cs = bf16(relu(acc + b1)), then 16-byte stores of the rows below R,
	 * the columns below h */
#pragma unroll
	for (int m = 0; m < MT; m++)
#pragma unroll
		for (int n = 0; n < 2 * NT; n++)
#pragma unroll
			for (int j = 0; j < 2; j++) {
				const int c = wn * 32 * NT + n * 16 + j * 8 + 2 * tq, hc = n0 + c, r = (wm * MT + m) * 16 + g;
				const float b0 = t.b1 && hc < h ? t.b1[hc] : 0.0f, b1 = t.b1 && hc < h ? t.b1[hc + 1] : 0.0f;
				const float *a = acc[m][n][j];
				*(uint32_t *)(Cs + r * ldc + c) = cu_bf16x2(fmaxf(a[0] + b0, 0.0f), fmaxf(a[1] + b1, 0.0f));
				*(uint32_t *)(Cs + (r + 8) * ldc + c) = cu_bf16x2(fmaxf(a[2] + b0, 0.0f), fmaxf(a[3] + b1, 0.0f));
			}
	__syncthreads();
#pragma unroll
	for (int q = threadIdx.x; q < 32 * MT * (BN / 8); q += TR_NT) {
		const int r = q / (BN / 8), c = q % (BN / 8) * 8;
		if (r0 + r < rows && n0 + c < h)
			*(uint4 *)(hid + (unsigned)(r0 + r) * (unsigned)h + n0 + c) = *(const uint4 *)(Cs + r * ldc + c);
	}
}

/* grid (R / (32 MT), d / (128 NT), S) rounded up: of rows 32 MT bx..,
 * columns 128 NT by.., the product hid w2^T over the k stages kper bz..
 * kper (bz + 1) - 1 (hid: [R, h] bf16, w2: [d, h] bf16; v16: w2 on 16
 * bytes); part NULL (S 1): x: [R, d] = (x + b2) + the product, the
 * epilogue in the pair kernel's order from the fragments (8-byte
 * accesses); else part: [S, R, d] fp32, slice bz = the product
 * (k_seqtr_reduce adds the slices) */
template <int MT, int NT>
static __global__ void __launch_bounds__(TR_NT, TS_MINB(MT, NT))
k_seqtr_out(be_transition_t t, const bf16 *hid, float *part, int kper, int v16)
{
	CU_DYN_SHARED(char, sm);
	const int d = t.d, rows = (int)t.rows, r0 = blockIdx.x * 32 * MT, n0 = blockIdx.y * TS_BN * NT;
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
	const int wm = warp / 4, wn = warp % 4, nk = (t.h + TS_BK - 1) / TS_BK, kb = blockIdx.z * kper;
	float *pz = part ? part + blockIdx.z * (unsigned)rows * (unsigned)d : NULL;
	float acc[MT][2 * NT][2][4] = {};

	ts_gemm<MT, NT>(acc, sm, hid, rows, r0, (const bf16 *)t.w2, d, n0, t.h, kb, kb + kper < nk ? kb + kper : nk,
	                v16);
	/* two channels a lane, rows below R, columns below d; fragment f:
	 * m-tile f / (4 NT), n-tile f / 2 % (2 NT), half f % 2 */
#pragma unroll
	for (int f = 0; f < 4 * MT * NT; f++) {
		const int m = f / (4 * NT), n = f / 2 % (2 * NT), j = f % 2, c = n0 + wn * 32 * NT + n * 16 + j * 8 + 2 * tq;
		if (c >= d) continue;
		const float b0 = t.b2 ? t.b2[c] : 0.0f, b1 = t.b2 ? t.b2[c + 1] : 0.0f;
#pragma unroll
		for (int e = 0; e < 2; e++) {
			const int row = r0 + (wm * MT + m) * 16 + g + 8 * e;
			const unsigned i = (unsigned)row * (unsigned)d + c;
			if (row >= rows) continue;
			if (pz) {
				float2 *pp = (float2 *)(pz + i);
				pp->x = acc[m][n][j][2 * e];
				pp->y = acc[m][n][j][2 * e + 1];
				continue;
			}
			float2 *xp = (float2 *)(t.x + i), v = *xp;
			v.x = (v.x + b0) + acc[m][n][j][2 * e];
			v.y = (v.y + b1) + acc[m][n][j][2 * e + 1];
			*xp = v;
		}
	}
}

/* grid R d / (2 TR_NT) rounded up: x: [R, d] = (x + b2) + the slices of
 * part: [S, R, d] summed in slice order (((p0 + p1) + p2) ..., fixed:
 * no atomics), two channels a thread (8-byte accesses), R d < 2^31 */
static __global__ void __launch_bounds__(TR_NT)
k_seqtr_reduce(be_transition_t t, const float *part, int S)
{
	const unsigned n = (unsigned)t.rows * (unsigned)t.d, i = 2 * (blockIdx.x * TR_NT + threadIdx.x);

	if (i >= n) return;
	const unsigned c = i % (unsigned)t.d;
	float2 s = *(const float2 *)(part + i), v = *(float2 *)(t.x + i);
	for (int z = 1; z < S; z++) {
		const float2 p = *(const float2 *)(part + z * n + i);
		s.x += p.x;
		s.y += p.y;
	}
	v.x = (v.x + (t.b2 ? t.b2[c] : 0.0f)) + s.x;
	v.y = (v.y + (t.b2 ? t.b2[c + 1] : 0.0f)) + s.y;
	*(float2 *)(t.x + i) = v;
}

/* k_seqtr_out's k slices of a chunk of nr rows: the smallest power of
 * two up to TS_SPLIT whose grid (blocks of its tile before the split)
 * holds 3/4 of the SMs' worth of blocks, within nk stages and the
 * part_elems floats of the partials; 1: no split */
static int ts_split(int blocks, int nr, int d, int nk, int64_t part_elems)
{
	int S = 1;

	while (S < TS_SPLIT && blocks * S < TS_SMS * 3 / 4 && 2 * S <= nk && 2 * S * (int64_t)nr * d <= part_elems)
		S *= 2;
	return S;
}

/* the hidden product of a chunk c: 128 x 256 tiles where h is a multiple
 * of 256 and the chunk more than 64 rows, else 64 x 128 where that
 * still gives TR_GRID blocks, else 32 x 128 */
static int ts_hidden(cudaStream_t s, const be_transition_t *c, const bf16 *xn, bf16 *hid, int v1)
{
	const unsigned nr = (unsigned)c->rows, ny = (unsigned)((c->h + TS_BN - 1) / TS_BN);

	if (c->h % 256 == 0 && nr > 64)
		CU_LAUNCH(dim3((nr + 127) / 128, (unsigned)(c->h / 256)), TR_NT, (size_t)ts_smem(4, 2), s,
		          k_seqtr_hidden<4, 2>)(*c, xn, hid, v1);
	else if ((nr + 63) / 64 * ny >= TR_GRID)
		CU_LAUNCH(dim3((nr + 63) / 64, ny), TR_NT, (size_t)ts_smem(2, 1), s, k_seqtr_hidden<2, 1>)(*c, xn, hid, v1);
	else
		CU_LAUNCH(dim3((nr + 31) / 32, ny), TR_NT, (size_t)ts_smem(1, 1), s, k_seqtr_hidden<1, 1>)(*c, xn, hid, v1);
	return cu_launched();
}

/* the output product of a chunk c (tiles as ts_hidden picks them, by d),
 * split over k (ts_split) into part, then k_seqtr_reduce */
static int ts_out(cudaStream_t s, const be_transition_t *c, const bf16 *hid, float *part, int64_t part_elems,
                  int v2)
{
	const int nr = (int)c->rows, d = c->d, nk = (c->h + TS_BK - 1) / TS_BK, ny = (d + TS_BN - 1) / TS_BN;
	const int big = d % 256 == 0 && nr > 64, mid = !big && (nr + 63) / 64 * ny >= TR_GRID;
	const int mb = big ? (nr + 127) / 128 : mid ? (nr + 63) / 64 : (nr + 31) / 32, nb = big ? d / 256 : ny;
	const int S = part ? ts_split(mb * nb, nr, d, nk, part_elems) : 1, kper = (nk + S - 1) / S;
	float *p = S > 1 ? part : NULL;
	const dim3 grid((unsigned)mb, (unsigned)nb, (unsigned)((nk + kper - 1) / kper));
	int rc;

	if (big) CU_LAUNCH(grid, TR_NT, (size_t)ts_smem(4, 2), s, k_seqtr_out<4, 2>)(*c, hid, p, kper, v2);
	else if (mid) CU_LAUNCH(grid, TR_NT, (size_t)ts_smem(2, 1), s, k_seqtr_out<2, 1>)(*c, hid, p, kper, v2);
	else CU_LAUNCH(grid, TR_NT, (size_t)ts_smem(1, 1), s, k_seqtr_out<1, 1>)(*c, hid, p, kper, v2);
	if ((rc = cu_launched()) || !p) return rc;
	CU_LAUNCH((unsigned)(((unsigned)nr * (unsigned)d / 2 + TR_NT - 1) / TR_NT), TR_NT, 0, s, k_seqtr_reduce)(
		*c, p, (int)grid.z);
	return cu_launched();
}

/* the kernels on rows of t, chunk rows at a time (buf: [chunk, d + h]
 * bf16: xn, then hid on 16 bytes; part: [part_elems] fp32 on 16 bytes,
 * k_seqtr_out's partial sums, or NULL: no split) */
static int ts_launch(cudaStream_t s, const be_transition_t *t, bf16 *buf, int64_t chunk, float *part,
                     int64_t part_elems)
{
	const int v1 = (uintptr_t)t->w1 % 16 == 0, v2 = (uintptr_t)t->w2 % 16 == 0;
	bf16 *xn = buf, *hid = buf + chunk * t->d;
	int rc = 0;

	for (int64_t r0 = 0; r0 < t->rows && !rc; r0 += chunk) {
		be_transition_t c = *t;
		c.x = t->x + r0 * t->d;
		c.rows = t->rows - r0 < chunk ? t->rows - r0 : chunk;
		const unsigned nr = (unsigned)c.rows;
		if (t->d <= 128) CU_LAUNCH((nr + TR_WARPS - 1) / TR_WARPS, TR_NT, 0, s, k_seqtr_ln<4>)(c, xn);
		else CU_LAUNCH((nr + TR_WARPS - 1) / TR_WARPS, TR_NT, 0, s, k_seqtr_ln<TS_DMAX / 32>)(c, xn);
		if ((rc = cu_launched()) || (rc = ts_hidden(s, &c, xn, hid, v1))) break;
		rc = ts_out(s, &c, hid, part, part_elems, v2);
	}
	return rc;
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
	if (!rc) rc = cu_smem_allow((const void *)k_seqtr_hidden<1, 1>, bytes);
	if (!rc) rc = cu_smem_allow((const void *)k_seqtr_hidden<2, 1>, bytes);
	if (!rc) rc = cu_smem_allow((const void *)k_seqtr_hidden<4, 2>, bytes);
	if (!rc) rc = cu_smem_allow((const void *)k_seqtr_out<1, 1>, bytes);
	if (!rc) rc = cu_smem_allow((const void *)k_seqtr_out<2, 1>, bytes);
	if (!rc) rc = cu_smem_allow((const void *)k_seqtr_out<4, 2>, bytes);
	if (!rc) rc = cu_smem_allow((const void *)k_transition_simt<bf16>, bytes);
	if (!rc) rc = cu_smem_allow((const void *)k_transition_simt<float>, bytes);
	return rc;
}

extern "C" int cu_transition(cudaStream_t s, const be_transition_t *t, void *hidden, int64_t hidden_elems,
                             float *part, int64_t part_elems)
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
	if (t->bf16 && t->d % 16 == 0 && t->h % 16 == 0 && t->d <= TS_DMAX && (uintptr_t)t->x % 8 == 0) {
		const int64_t chunk = hidden_elems / (t->d + t->h) / 64 * 64;   /* rows a pass */
		if (!hidden || chunk < 64 || (uintptr_t)hidden % 16 || (uintptr_t)part % 16) return -EINVAL;
		if (hidden_elems > 0x7fffffff || (int64_t)t->d * t->h > 0x7fffffff) return -EINVAL;   /* 32-bit indices */
		return ts_launch(s, t, (bf16 *)hidden, chunk, part, part_elems < 0x7fffffff ? part_elems : 0x7fffffff);
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
