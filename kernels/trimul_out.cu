/* trimul_out.cu - the triangle multiplication's output side in one kernel
 * (be_trimul_out_t, backend.h): a layer norm prologue, the product with
 * linear_z and a gated residual epilogue,
 *   z[row r] += (LayerNorm(x[r]) W^T + b) * sigmoid(gv[r]),
 * on rows of c <= CU_TRIMUL_OUT_CMAX channels; x channel-last or
 * channel-major (its strides), z's rows at two strides (be_rows_t: a block
 * of z or of z^T, written in place).  Each block takes a tile of rows: the
 * layer norm of each row (one warp per row, two-pass fp32 statistics as
 * in norm.cu) into shared memory, the product, and the epilogue as each
 * block of the product is done; x, gv and z are read once and z written
 * once.
 *
 * bf16 (k_trimul_out_bf16): TO_WARPS warps; W is loaded once per block,
 * then each warp takes TO_TILES tiles of 16 rows in turn; shared memory
 *   Xs: [TO_WARPS * 16, CP + 8] bf16   the normalised tile, rounded
 *   Ws: [CP, CP + 8] bf16              W (out, in), zero-padded
 *   Cs: [TO_WARPS, 16, 20] fp32        each warp's 16 x 16 block of the
 *                                      product (mma.sync, fp32 accumulation)
 * with CP = c rounded up to 16; the leading dimensions keep every
 * ldmatrix row address on 16 bytes (kernels/mma.cuh's tiles).
 * fp32 (k_trimul_out_f32): TO_F32_ROWS rows per block, the normalised
 * tile in shared memory as fp32, one thread per output channel.
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

#define TO_WARPS 4
#define TO_TILES 4      /* 16-row tiles per warp (bf16 kernel) */
#define TO_F32_ROWS 16
#define TO_LDC 20

/* element i of W: [c, c], fp32 or bfloat16 data (wbf) */
static __device__ __forceinline__ float to_w(const float *w, int64_t i, int wbf)
{
	return wbf ? __bfloat162float(((const bf16 *)w)[i]) : w[i];
}

/* offset of row r of z */
static __device__ __forceinline__ int64_t to_row(be_rows_t zr, int64_t r)
{
	return r / zr.n2 * zr.s1 + r % zr.n2 * zr.s2;
}

/* mean and 1 / sqrt(var + eps) of row r of x over c channels, by one warp
 * (the value in every lane) */
static __device__ void to_stats(const be_trimul_out_t &t, int64_t r, int lane, float *mean, float *inv)
{
	const float *xr = t.x + r * t.x_rs;
	float sum = 0.0f, sq = 0.0f;
	for (int i = lane; i < t.c; i += 32) sum += xr[i * t.x_cs];
	*mean = cu_warp_sum(sum) / t.c;
	for (int i = lane; i < t.c; i += 32) { float d = xr[i * t.x_cs] - *mean; sq += d * d; }
	*inv = rsqrtf(cu_warp_sum(sq) / t.c + t.eps);
}

/* z[row] += (u + b[o]) * sigmoid(gv[row, o]): the BE_GATE formula */
static __device__ __forceinline__ void to_epilogue(const be_trimul_out_t &t, int64_t row, int o, float u)
{
	float g = t.gv[row * t.c + o];
	t.z[to_row(t.zr, row) + o] += (u + t.b[o]) / (1.0f + expf(-g));
}

/* one warp's 16 rows from r0 (xw: their normalised, rounded tile):
 * z += (xw W^T + b) * sigmoid(gv), a 16 x 16 block of the product at a time
 * through Cs */
static __device__ void to_mma_tile(const be_trimul_out_t &t, int cp, int64_t r0, bf16 *xw, const bf16 *Ws,
                                    float *Cs, int lane)
{
	const int ldx = cp + 8, c = t.c;
	const int64_t rows = t.zr.n1 * t.zr.n2;

	for (int rr = 0; rr < 16; rr++) {
		int64_t r = r0 + rr;
		float mean = 0.0f, inv = 0.0f;
		if (r < rows) to_stats(t, r, lane, &mean, &inv);
		for (int i = lane; i < cp; i += 32) {
			float v = r < rows && i < c ? (t.x[r * t.x_rs + i * t.x_cs] - mean) * inv * t.ln_w[i] + t.ln_b[i]
			                             : 0.0f;
			xw[rr * ldx + i] = __float2bfloat16(v);
		}
	}
	__syncwarp();
	for (int nt = 0; nt < cp / 16; nt++) {
		float acc[2][4] = {};
		for (int kt = 0; kt < cp / 16; kt++) {
			uint32_t xf[4], wf[4];
			cu_tile_a(xf, xw + kt * 16, ldx, lane);
			cu_tile_bt(wf, Ws + nt * 16 * ldx + kt * 16, ldx, lane);   /* W^T */
			cu_tile_mma(acc, xf, wf);
		}
		cu_tile_store(Cs, TO_LDC, acc, lane);
		__syncwarp();
		for (int e = lane; e < 256; e += 32) {
			int64_t r = r0 + e / 16;
			int o = nt * 16 + e % 16;
			if (r < rows && o < c) to_epilogue(t, r, o, Cs[e / 16 * TO_LDC + e % 16]);
		}
		__syncwarp();   /* Cs (and, after the last block, xw) read before they are written again */
	}
}

/* grid: one block per TO_WARPS * TO_TILES * 16 rows; cp: c rounded up to 16 */
static __global__ void __launch_bounds__(TO_WARPS * 32) k_trimul_out_bf16(be_trimul_out_t t, int cp)
{
	CU_DYN_SHARED(char, sm);
	const int ldx = cp + 8, warp = threadIdx.x / 32, lane = threadIdx.x % 32, c = t.c;
	const int64_t b0 = (int64_t)blockIdx.x * TO_WARPS * TO_TILES * 16;
	bf16 *Xs = (bf16 *)sm, *Ws = Xs + TO_WARPS * 16 * ldx;
	float *Cs = (float *)(Ws + cp * ldx) + warp * 16 * TO_LDC;
	bf16 *xw = Xs + warp * 16 * ldx;

	for (int e = threadIdx.x; e < cp * cp; e += TO_WARPS * 32) {
		int o = e / cp, k = e % cp;
		Ws[o * ldx + k] = __float2bfloat16(o < c && k < c ? to_w(t.w, (int64_t)o * c + k, t.w_bf16) : 0.0f);
	}
	__syncthreads();
	/* the warps' tiles interleaved, so that a short last block keeps them all busy */
	for (int k = 0; k < TO_TILES; k++) {
		int64_t r0 = b0 + (int64_t)(k * TO_WARPS + warp) * 16;
		if (r0 < t.zr.n1 * t.zr.n2) to_mma_tile(t, cp, r0, xw, Ws, Cs, lane);
	}
}

/* grid: one block per TO_F32_ROWS rows; Ts: [TO_F32_ROWS, c] fp32 */
static __global__ void __launch_bounds__(TO_WARPS * 32) k_trimul_out_f32(be_trimul_out_t t)
{
	CU_DYN_SHARED(float, Ts);
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, c = t.c;
	const int64_t rows = t.zr.n1 * t.zr.n2, r0 = (int64_t)blockIdx.x * TO_F32_ROWS;
	const int nr = rows - r0 < TO_F32_ROWS ? (int)(rows - r0) : TO_F32_ROWS;

	for (int rr = warp; rr < nr; rr += TO_WARPS) {
		float mean, inv;
		to_stats(t, r0 + rr, lane, &mean, &inv);
		for (int i = lane; i < c; i += 32)
			Ts[rr * c + i] = (t.x[(r0 + rr) * t.x_rs + i * t.x_cs] - mean) * inv * t.ln_w[i] + t.ln_b[i];
	}
	__syncthreads();
	for (int o = threadIdx.x; o < c; o += TO_WARPS * 32)
		for (int rr = 0; rr < nr; rr++) {
			float u = 0.0f;
			for (int k = 0; k < c; k++) u += Ts[rr * c + k] * to_w(t.w, (int64_t)o * c + k, t.w_bf16);
			to_epilogue(t, r0 + rr, o, u);
		}
}

extern "C" int cu_trimul_out_smem_init(int bytes)
{
	int rc = cu_smem_allow((const void *)k_trimul_out_bf16, bytes);
	return rc ? rc : cu_smem_allow((const void *)k_trimul_out_f32, bytes);
}

extern "C" int cu_trimul_out(cudaStream_t s, const be_trimul_out_t *t, int bf16)
{
	int64_t rows = t->zr.n1 * t->zr.n2;

	if (t->c <= 0 || t->c > CU_TRIMUL_OUT_CMAX || t->zr.n1 < 0 || t->zr.n2 < 0) return -EINVAL;
	if (rows == 0) return 0;
	if (bf16) {
		int cp = (t->c + 15) / 16 * 16;
		int64_t nb = (rows + TO_WARPS * TO_TILES * 16 - 1) / (TO_WARPS * TO_TILES * 16);
		size_t smem = (size_t)(TO_WARPS * 16 + cp) * (cp + 8) * 2 + TO_WARPS * 16 * TO_LDC * 4;
		if (nb > 0x7fffffff) return -EINVAL;
		CU_LAUNCH((unsigned)nb, TO_WARPS * 32, smem, s, k_trimul_out_bf16)(*t, cp);
	} else {
		int64_t nb = (rows + TO_F32_ROWS - 1) / TO_F32_ROWS;
		size_t smem = (size_t)TO_F32_ROWS * t->c * 4;
		if (nb > 0x7fffffff) return -EINVAL;
		CU_LAUNCH((unsigned)nb, TO_WARPS * 32, smem, s, k_trimul_out_f32)(*t);
	}
	return cu_launched();
}
