/* trimul_out.cu - the triangle multiplication's output side in one kernel
 * (be_trimul_out_t, backend.h): a layer norm prologue, the product with
 * linear_z and a gated residual epilogue,
 *   z[row r] += (LayerNorm(x[r]) W^T + b) * sigmoid(gv[r]),
 * on rows of c <= CU_TRIMUL_OUT_CMAX channels; x channel-last or
 * channel-major (its strides), z's rows at two strides (be_rows_t: a block
 * of z or of z^T, written in place).  x, gv and z are read once and z
 * written once.
 *
 * Both kernels take tiles of TO_TM rows.  A tile of x is staged into
 * shared memory channel-major, Xf: [cp, TO_LDF] fp32 (cp = c rounded up to
 * 16), by cp.async: channel-major x (x_rs = 1) by 16 lanes per channel
 * over the tile's 64 consecutive rows (16-byte copies where x_cs and x are
 * on 4 floats, else 4-byte ones: every warp load whole 32-byte sectors),
 * any other x by one thread per element, consecutive threads on
 * consecutive channels.  Then 4 threads per row (lanes 4 i.. on row i of
 * the warp's 8, channels q, q + 4, ... for lane q = lane % 4; TO_LDF = 72
 * keeps the 32 lanes on 32 banks) take the row into registers once: the
 * mean (a 2-step shuffle), the centred sum of squares from the registers,
 * both divided by c in a fast division, and the normalised row, written
 * back channel-major.  Row indices are 32-bit (the launcher refuses more
 * than 2^31 - 1 rows), z's row offset a 32-bit division by zr.n2; only
 * addresses are 64-bit.
 *
 * bf16 (k_trimul_out_bf16, W as bf16): TO_WARPS warps, persistent blocks
 * (about TO_GRID, each over row tiles blockIdx.x, + gridDim.x, ...) that
 * stage W once (16-byte cp.async where W is bf16 on 8 elements); shared:
 *   Ws: [cp, cp + 8] bf16     W (out, in), zero-padded
 *   Xf: [cp, TO_LDF] fp32     the tile of x; the normalised tile, rounded,
 *                             over it as Xs: [cp, TO_LDX] bf16 (A^T: the
 *                             A fragments by ldmatrix .trans)
 *   Gs: [2, cp] fp32          ln_w, ln_b (0 past c)
 * Warp w multiplies rows 16 (w % 4).. of the tile by the 16-column tiles
 * w / 4, + 2, ... of W^T in batches of up to 4 (one A fragment per 16 k
 * for the batch's 8 mma, B by ldmatrix), and the epilogue runs on the
 * accumulator fragments: bias, gate (cu_gate: ex2 and an approximate
 * reciprocal), residual, by 16-byte loads and stores of z and gv (two
 * lanes trade halves so each holds 4 consecutive channels of a row) where
 * c, z's strides, z, gv and b are on 4 floats, else 4-byte ones.
 * fp32 (k_trimul_out_f32): one block per tile, Xf normalised in place,
 * one thread per (row, output channel), 32 consecutive rows per warp, W
 * read from global memory (the same element by a whole warp), the same
 * epilogue arithmetic by 4-byte accesses: the checking path of
 * --precision fp32.
 */
#include "common.cuh"
#include "mma.cuh"

#ifdef __CUDACC__
#include <cuda_bf16.h>
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "trimul_out.cu: bf16 mma.sync needs sm_80 or newer (configure --with-cuda-arch)"
#endif
#endif

typedef __nv_bfloat16 bf16;

#define TO_WARPS 8
#define TO_NT (TO_WARPS * 32)
#define TO_TM 64        /* rows per tile: 4 groups of 16 */
#define TO_LDF 72       /* Xf's leading dimension (fp32) */
#define TO_LDX 72       /* Xs's (bf16): 144 bytes, rows on 16 bytes */
#define TO_GRID 396     /* blocks resident on a 132-SM card (3 per SM at c 128) */

/* element i of W: [c, c], fp32 or bfloat16 data (wbf) */
static __device__ __forceinline__ float to_w(const float *w, int i, int wbf)
{
	return wbf ? __bfloat162float(((const bf16 *)w)[i]) : w[i];
}

/* offset of row r of z (32-bit division) */
static __device__ __forceinline__ int64_t to_zrow(const be_trimul_out_t &t, int r)
{
	unsigned i = (unsigned)r / (unsigned)t.zr.n2, j = (unsigned)r - i * (unsigned)t.zr.n2;
	return (int64_t)i * t.zr.s1 + (int64_t)j * t.zr.s2;
}

/* the epilogue's value: z + (u + b) sigmoid(g) (cu_gate) */
static __device__ __forceinline__ float to_gate(float z, float u, float g)
{
	return z + cu_gate(u, g);
}

/* Xf: [cp, TO_LDF] fp32 = rows r0.. of x, channel-major (rows past the
 * end and channels past c unread: zero or stale), by cp.async; waited for
 * and made visible to the block */
static __device__ void to_stage_x(const be_trimul_out_t &t, int r0, int rows, float *Xf)
{
	const int c = t.c, nr = rows - r0 < TO_TM ? rows - r0 : TO_TM;

	if (t.x_rs == 1) {
		const bool vec = (t.x_cs & 3) == 0 && ((uintptr_t)t.x & 15) == 0;
		for (int e = threadIdx.x; e < c * (TO_TM / 4); e += TO_NT) {
			const int ch = e / (TO_TM / 4), rr = e % (TO_TM / 4) * 4, n = nr - rr;
			const float *src = t.x + (int64_t)ch * t.x_cs + r0 + rr;
			float *dst = Xf + ch * TO_LDF + rr;
			if (vec) {
				cu_cp_async_16(dst, n > 0 ? src : t.x, n >= 4 ? 16 : n > 0 ? 4 * n : 0);
			} else {
#pragma unroll
				for (int i = 0; i < 4; i++) cu_cp_async_4(dst + i, i < n ? src + i : t.x, i < n ? 4 : 0);
			}
		}
	} else {
		for (int e = threadIdx.x; e < c * nr; e += TO_NT) {
			const int rr = e / c, ch = e - rr * c;
			cu_cp_async_4(Xf + ch * TO_LDF + rr, t.x + (int64_t)(r0 + rr) * t.x_rs + (int64_t)ch * t.x_cs, 4);
		}
	}
	cu_cp_async_commit();
	cu_cp_async_wait<0>();
	__syncthreads();
}

/* row rr = threadIdx.x / 4 of the staged tile Xf, channels q + 4 i (q =
 * threadIdx.x % 4, i < CH; c <= 4 CH) into v, normalised with Gs's ln_w,
 * ln_b (0 past c) */
template <int CH>
static __device__ __forceinline__ void to_norm(const be_trimul_out_t &t, const float *Xf, const float *Gs, int cp,
                                               float v[CH])
{
	const int rr = threadIdx.x / 4, q = threadIdx.x % 4, c = t.c;
	float sum = 0.0f, sq = 0.0f;

#pragma unroll
	for (int i = 0; i < CH; i++) {
		const int ch = q + 4 * i;
		v[i] = ch < c ? Xf[ch * TO_LDF + rr] : 0.0f;
		sum += v[i];
	}
	sum += __shfl_xor_sync(0xffffffffu, sum, 1);
	sum += __shfl_xor_sync(0xffffffffu, sum, 2);
	const float mean = __fdividef(sum, (float)c);
#pragma unroll
	for (int i = 0; i < CH; i++) {
		const float d = q + 4 * i < c ? v[i] - mean : 0.0f;
		sq += d * d;
	}
	sq += __shfl_xor_sync(0xffffffffu, sq, 1);
	sq += __shfl_xor_sync(0xffffffffu, sq, 2);
	const float inv = rsqrtf(__fdividef(sq, (float)c) + t.eps);
#pragma unroll
	for (int i = 0; i < CH; i++) {
		const int ch = q + 4 * i;
		if (ch < cp) v[i] = (v[i] - mean) * inv * Gs[ch] + Gs[cp + ch];
	}
}

/* Gs: [2, cp] = ln_w, ln_b, 0 past c */
static __device__ void to_stage_g(const be_trimul_out_t &t, float *Gs, int cp)
{
	for (int i = threadIdx.x; i < 2 * cp; i += TO_NT) {
		const int ch = i % cp;
		Gs[i] = ch >= t.c ? 0.0f : i < cp ? t.ln_w[ch] : t.ln_b[ch];
	}
}

static __device__ __forceinline__ float4 to_f4(float a, float b, float c, float d)
{
	float4 r;
	r.x = a; r.y = b; r.z = c; r.w = d;
	return r;
}

/* the epilogue of a 16-column tile j (fragments a) of rows rb.. (absolute,
 * this warp's 16): z += (a + b) sigmoid(gv) */
static __device__ __forceinline__ void to_epi(const be_trimul_out_t &t, const float a[2][4], int j, int rb,
                                              int rows, bool vec, int lane)
{
	const int tq = lane % 4, ra = rb + lane / 4, c = t.c;

	if (vec) {
		/* even lanes: row ra, channels 2tq..2tq+3; odd: row ra + 8, 2tq-2.. */
		const int odd = tq & 1, r = ra + 8 * odd;
		const int64_t zo = r < rows ? to_zrow(t, r) : 0, go = (int64_t)(r < rows ? r : 0) * c;
#pragma unroll
		for (int jj = 0; jj < 2; jj++) {
			float s[4];
#pragma unroll
			for (int e = 0; e < 4; e++) s[e] = __shfl_xor_sync(0xffffffffu, a[jj][e], 1);
			const int f = 16 * j + 8 * jj + 4 * (tq / 2);
			float4 u = odd ? to_f4(s[2], s[3], a[jj][2], a[jj][3]) : to_f4(a[jj][0], a[jj][1], s[0], s[1]);
			if (r < rows && f < c) {
				const float4 b = *(const float4 *)(t.b + f), g = *(const float4 *)(t.gv + go + f);
				float4 *zp = (float4 *)(t.z + zo + f), z = *zp;
				*zp = to_f4(to_gate(z.x, u.x + b.x, g.x), to_gate(z.y, u.y + b.y, g.y),
				            to_gate(z.z, u.z + b.z, g.z), to_gate(z.w, u.w + b.w, g.w));
			}
		}
		return;
	}
#pragma unroll
	for (int h = 0; h < 2; h++) {
		const int r = ra + 8 * h;
		if (r >= rows) continue;
		const int64_t zo = to_zrow(t, r), go = (int64_t)r * c;
#pragma unroll
		for (int jj = 0; jj < 2; jj++)
#pragma unroll
			for (int e = 0; e < 2; e++) {
				const int f = 16 * j + 8 * jj + 2 * tq + e;
				if (f < c) t.z[zo + f] = to_gate(t.z[zo + f], a[jj][2 * h + e] + t.b[f], t.gv[go + f]);
			}
	}
}

/* Ws: [cp, cp + 8] bf16 = W, zero-padded (16-byte cp.async where W is
 * bf16 on 8 elements), waited for (the caller's barrier shows it) */
static __device__ void to_stage_w(const be_trimul_out_t &t, bf16 *Ws, int cp)
{
	const int c = t.c, ldw = cp + 8, kc = cp / 8;
	const bf16 *w = (const bf16 *)t.w;
	const bool vec = t.w_bf16 && c % 8 == 0 && ((uintptr_t)w & 15) == 0;

	if (vec) {
		for (int e = threadIdx.x; e < cp * kc; e += TO_NT) {
			const int o = e / kc, k = e % kc * 8, ok = o < c && k < c;
			cu_cp_async_16(Ws + o * ldw + k, ok ? w + o * c + k : w, ok ? 16 : 0);
		}
	} else {
		for (int e = threadIdx.x; e < cp * cp; e += TO_NT) {
			const int o = e / cp, k = e - o * cp;
			Ws[o * ldw + k] = __float2bfloat16(o < c && k < c ? to_w(t.w, o * c + k, t.w_bf16) : 0.0f);
		}
	}
	cu_cp_async_commit();
	cu_cp_async_wait<0>();
}

/* rows rb.. (this warp's 16; Xw: their A^T in Xs) times the 16-column
 * tiles j0, j0 + 2, j0 + 4, j0 + 6 of W^T (those past nj: the last one's
 * product, not written), then their epilogues */
template <int U>
static __device__ void to_batch(const be_trimul_out_t &t, const bf16 *Xw, const bf16 *Ws, int cp, int j0, int nj,
                                int rb, int rows, bool vec, int lane)
{
	const int ldw = cp + 8;
	float acc[4][2][4];
	const bf16 *wb[4];

#pragma unroll
	for (int b = 0; b < 4; b++) {
		const int j = j0 + 2 * b < nj ? j0 + 2 * b : nj - 1;
		wb[b] = Ws + j * 16 * ldw;
#pragma unroll
		for (int i = 0; i < 8; i++) acc[b][i / 4][i % 4] = 0.0f;
	}
	/* lane l: row l % 8 + 8 (l / 16) of k, columns 8 (l / 8 % 2).. of the rows */
	const bf16 *xa = Xw + (lane % 8 + lane / 16 * 8) * TO_LDX + lane / 8 % 2 * 8;
#pragma unroll U
	for (int kt = 0; kt < cp; kt += 16) {
		uint32_t a[4];
		cu_ldmatrix_x4_trans(a, xa + kt * TO_LDX);
#pragma unroll
		for (int b = 0; b < 4; b++) {
			uint32_t w[4];
			cu_tile_bt(w, wb[b] + kt, ldw, lane);
			cu_tile_mma(acc[b], a, w);
		}
	}
#pragma unroll
	for (int b = 0; b < 4; b++)
		if (j0 + 2 * b < nj) to_epi(t, acc[b], j0 + 2 * b, rb, rows, vec, lane);
}

/* z rows: [rows, c] at t.zr += (LayerNorm(x) W^T + b) sigmoid(gv), x:
 * [rows, c] at its strides, gv: [rows, c], W: [c, c] bf16 (t.w_bf16) or
 * fp32 rounded; cp = c rounded up to 16 <= 4 CH; grid: persistent blocks
 * over the row tiles */
template <int CH>
static __global__ void __launch_bounds__(TO_NT) k_trimul_out_bf16(be_trimul_out_t t, int rows, int cp)
{
	CU_DYN_SHARED(char, sm);
	const int ldw = cp + 8, warp = threadIdx.x / 32, lane = threadIdx.x % 32, nj = cp / 16;
	const int ntiles = (rows + TO_TM - 1) / TO_TM, rr = threadIdx.x / 4, q = threadIdx.x % 4;
	const bool vec = t.c % 4 == 0 && ((t.zr.s1 | t.zr.s2) & 3) == 0 &&
	                 (((uintptr_t)t.z | (uintptr_t)t.gv | (uintptr_t)t.b) & 15) == 0;
	bf16 *Ws = (bf16 *)sm;
	float *Xf = (float *)(Ws + cp * ldw), *Gs = Xf + cp * TO_LDF;
	bf16 *Xs = (bf16 *)Xf;

	to_stage_w(t, Ws, cp);
	to_stage_g(t, Gs, cp);
	for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
		const int r0 = tile * TO_TM;
		float v[CH];
		__syncthreads();   /* Ws and Gs staged, the previous tile's Xs consumed */
		to_stage_x(t, r0, rows, Xf);
		to_norm<CH>(t, Xf, Gs, cp, v);
		__syncthreads();   /* Xf read before Xs overwrites it */
#pragma unroll
		for (int i = 0; i < CH; i++)
			if (q + 4 * i < cp) Xs[(q + 4 * i) * TO_LDX + rr] = __float2bfloat16(v[i]);
		__syncthreads();
		const int rb = 16 * (warp % 4);
		for (int j0 = warp / 4; j0 < nj; j0 += 8)
			to_batch<CH / 32 == 1 ? 2 : 1>(t, Xs + rb, Ws, cp, j0, nj, r0 + rb, rows, vec, lane);
	}
}

/* the same in fp32 (shapes as k_trimul_out_bf16); grid: one block per
 * tile; c <= 4 CH */
template <int CH>
static __global__ void __launch_bounds__(TO_NT) k_trimul_out_f32(be_trimul_out_t t, int rows, int cp)
{
	CU_DYN_SHARED(float, Xf);
	float *Gs = Xf + cp * TO_LDF;
	const int r0 = blockIdx.x * TO_TM, c = t.c, q = threadIdx.x % 4, rr = threadIdx.x / 4;
	float v[CH];

	to_stage_g(t, Gs, cp);
	__syncthreads();
	to_stage_x(t, r0, rows, Xf);
	to_norm<CH>(t, Xf, Gs, cp, v);
#pragma unroll
	for (int i = 0; i < CH; i++)   /* in place: each thread's own elements */
		if (q + 4 * i < c) Xf[(q + 4 * i) * TO_LDF + rr] = v[i];
	__syncthreads();
	for (int e = threadIdx.x; e < c * TO_TM; e += TO_NT) {
		const int o = e / TO_TM, rl = e % TO_TM, r = r0 + rl;
		if (r >= rows) continue;
		float u = 0.0f;
		for (int k = 0; k < c; k++) u += Xf[k * TO_LDF + rl] * to_w(t.w, o * c + k, t.w_bf16);
		const int64_t zo = to_zrow(t, r) + o;
		t.z[zo] = to_gate(t.z[zo], u + t.b[o], t.gv[(int64_t)r * c + o]);
	}
}

typedef void (*to_kernel_t)(be_trimul_out_t, int, int);
static to_kernel_t to_kernel(int bf16, int cp)
{
	static const to_kernel_t ks[2][2] = {
		{ k_trimul_out_f32<32>, k_trimul_out_f32<64> },
		{ k_trimul_out_bf16<32>, k_trimul_out_bf16<64> },
	};
	return ks[bf16][cp > 128];
}

extern "C" int cu_trimul_out_smem_init(int bytes)
{
	int rc = 0;
	for (int i = 0; !rc && i < 4; i++) rc = cu_smem_allow((const void *)to_kernel(i / 2, 128 + 128 * (i % 2)), bytes);
	return rc;
}

extern "C" int cu_trimul_out(cudaStream_t s, const be_trimul_out_t *t, int bf16)
{
	int64_t rows = t->zr.n1 * t->zr.n2;
	int cp = (t->c + 15) / 16 * 16;

	if (t->c <= 0 || t->c > CU_TRIMUL_OUT_CMAX || t->zr.n1 < 0 || t->zr.n2 < 0 || rows > 0x7fffffff)
		return -EINVAL;
	if (rows == 0) return 0;
	int64_t ntiles = (rows + TO_TM - 1) / TO_TM;
	size_t smem = (size_t)cp * TO_LDF * 4 + (size_t)2 * cp * 4;
	if (bf16) {
		smem += (size_t)cp * (cp + 8) * 2;
		CU_LAUNCH((unsigned)(ntiles < TO_GRID ? ntiles : TO_GRID), TO_NT, smem, s, to_kernel(1, cp))(*t, (int)rows,
		                                                                                          cp);
	} else {
		CU_LAUNCH((unsigned)ntiles, TO_NT, smem, s, to_kernel(0, cp))(*t, (int)rows, cp);
	}
	return cu_launched();
}
