/* elementwise.cu - pointwise and data-movement kernels: activations, binary
 * ops, the gate with a residual add, the row-biased gate, axpby, fill, gather, transpose, the sequence-to-pair
 * outer features, the GEMM prologue (beta * C + bias), the GEMM epilogue
 * (bias and ReLU after the product) and the bfloat16
 * conversion of a GEMM's activation operand.
 *
 * Flat kernels use grid-stride loops over int64 indices, so any n fits in a
 * bounded grid.
 */
#include <string.h>

#include "common.cuh"

#define EW_THREADS 256
#define EW_MAX_BLOCKS 65535
#define TR_TILE 32      /* transpose tile edge (a and b) */
#define TR_SMALL_C 8    /* largest C the tiled transpose handles */

static unsigned ew_blocks(int64_t n)
{
	int64_t b = (n + EW_THREADS - 1) / EW_THREADS;
	return (unsigned)(b < EW_MAX_BLOCKS ? b : EW_MAX_BLOCKS);
}

static thread_local cudaError_t cu_last = cudaSuccess;

int cu_check(cudaError_t e)
{
	if (e == cudaSuccess) return 0;
	cu_last = e;
	cudaGetLastError();
	return -EIO;
}

int cu_launched(void)
{
	return cu_check(cudaGetLastError());
}

extern "C" const char *cu_last_error(void)
{
	return cudaGetErrorString(cu_last);
}

int cu_smem_allow(const void *func, int bytes)
{
	struct cudaFuncAttributes fa;
	int rc = cu_check(cudaFuncGetAttributes(&fa, func));
	return rc ? rc : cu_check(cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize,
	                                               bytes - (int)fa.sharedSizeBytes));
}

extern "C" int cu_smem_init(int bytes)
{
	int rc = cu_attn_smem_init(bytes);
	if (!rc) rc = cu_flash_attn_smem_init(bytes);
	if (!rc) rc = cu_ln_linear_smem_init(bytes);
	if (!rc) rc = cu_transition_smem_init(bytes);
	if (!rc) rc = cu_trimul_out_smem_init(bytes);
	return rc;
}

#define GRID_STRIDE(i, n) \
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
	     i += (int64_t)gridDim.x * blockDim.x)

/* x: [n] */
static __global__ void k_act(float *x, int64_t n, be_act_t kind)
{
	GRID_STRIDE(i, n) {
		float v = x[i];
		switch (kind) {
		case BE_RELU:    v = v > 0.0f ? v : 0.0f; break;
		case BE_GELU:    v = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); break;
		case BE_SIGMOID: v = 1.0f / (1.0f + expf(-v)); break;
		}
		x[i] = v;
	}
}

/* y, a, b: [n] */
static __global__ void k_binary(float *y, const float *a, const float *b, int64_t n, be_bin_t kind)
{
	GRID_STRIDE(i, n) {
		float u = a[i], v = b[i];
		switch (kind) {
		case BE_ADD:  u = u + v; break;
		case BE_MUL:  u = u * v; break;
		case BE_GATE: u = u / (1.0f + expf(-v)); break;
		}
		y[i] = u;
	}
}

/* y, x: [n] */
static __global__ void k_axpby(float *y, const float *x, int64_t n, float alpha, float beta)
{
	GRID_STRIDE(i, n) y[i] = alpha * x[i] + (beta == 0.0f ? 0.0f : beta * y[i]);
}

/* x: [n] */
static __global__ void k_fill(float *x, int64_t n, float value)
{
	GRID_STRIDE(i, n) x[i] = value;
}

/* y: [rows, d]; table: [*, d]; idx: [rows] */
static __global__ void k_gather(float *y, const float *table, const int32_t *idx,
                                int64_t rows, int d, float scale)
{
	GRID_STRIDE(e, rows * d) {
		int64_t r = e / d;
		y[e] = scale * table[(int64_t)idx[r] * d + (e - r * d)];
	}
}

/* y: [B, A, C] = x: [A, B, C], C > TR_SMALL_C: each C-run is contiguous in
 * both, so a flat walk over y is coalesced on both sides */
static __global__ void k_transpose_rows(float *y, const float *x, int64_t A, int64_t B, int64_t C)
{
	GRID_STRIDE(e, A * B * C) {
		int64_t c = e % C, t = e / C, a = t % A, b = t / A;
		y[e] = x[(a * B + b) * C + c];
	}
}

/* y: [B, A, C] = x: [A, B, C], C <= TR_SMALL_C: one block moves a
 * [TR_TILE a, TR_TILE b, C] tile through shared memory; grid (tiles of b,
 * tiles of a) */
static __global__ void k_transpose_tile(float *y, const float *x, int64_t A, int64_t B, int C)
{
	__shared__ float t[TR_TILE][TR_TILE * TR_SMALL_C + 1];
	int64_t b0 = (int64_t)blockIdx.x * TR_TILE, a0 = (int64_t)blockIdx.y * TR_TILE;
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
	int nb = (int)(B - b0 < TR_TILE ? B - b0 : TR_TILE);
	int na = (int)(A - a0 < TR_TILE ? A - a0 : TR_TILE);

	for (int r = warp; r < na; r += nw) {          /* rows a of x: nb * C contiguous */
		const float *src = x + ((a0 + r) * B + b0) * C;
		for (int i = lane; i < nb * C; i += 32) t[r][i] = src[i];
	}
	__syncthreads();
	for (int r = warp; r < nb; r += nw) {          /* rows b of y: na * C contiguous */
		float *dst = y + ((b0 + r) * A + a0) * C;
		for (int i = lane; i < na * C; i += 32) dst[i] = t[i / C][r * C + i % C];
	}
}

/* c: batch x [m, n] (row stride ldc, batch stride stride_c); bias: [n] or NULL */
static __global__ void k_gemm_prologue(float *c, int64_t ldc, int64_t stride_c, int batch,
                                       int m, int n, float beta, const float *bias)
{
	GRID_STRIDE(e, (int64_t)batch * m * n) {
		int j = (int)(e % n);
		int64_t t = e / n;
		int i = (int)(t % m), b = (int)(t / m);
		float *p = c + b * stride_c + i * ldc + j;
		*p = (beta == 0.0f ? 0.0f : beta * *p) + (bias ? bias[j] : 0.0f);
	}
}

/* c: batch x [m, n] (row stride ldc, batch stride stride_c); bias: [n] or NULL */
static __global__ void k_gemm_epilogue_relu(float *c, int64_t ldc, int64_t stride_c, int batch,
                                            int m, int n, const float *bias)
{
	GRID_STRIDE(e, (int64_t)batch * m * n) {
		int j = (int)(e % n);
		int64_t t = e / n;
		int i = (int)(t % m), b = (int)(t / m);
		float *p = c + b * stride_c + i * ldc + j;
		float v = *p + (bias ? bias[j] : 0.0f);
		*p = v > 0.0f ? v : 0.0f;
	}
}

/* x rounded to bfloat16, to nearest even (as __float2bfloat16_rn); a NaN
 * stays a NaN */
static __device__ __forceinline__ uint16_t cu_bf16_rne(float x)
{
	uint32_t u;
	memcpy(&u, &x, sizeof u);
	if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

static __device__ __forceinline__ void ew_put(float *y, float v) { *y = v; }
static __device__ __forceinline__ void ew_put(uint16_t *y, float v) { *y = cu_bf16_rne(v); }

/* y: [ni, L, 2c], fp32 (T float) or bf16 rounded to nearest even (T
 * uint16_t); q, k: [L, c] */
template <typename T>
static __global__ void k_outer(T *y, const float *q, const float *k, int i0, int ni, int L, int c)
{
	GRID_STRIDE(e, (int64_t)ni * L * c) {
		int t = (int)(e % c);
		int64_t ij = e / c;
		int j = (int)(ij % L), i = (int)(ij / L);
		float qv = q[(int64_t)j * c + t], kv = k[(int64_t)(i0 + i) * c + t];
		T *yij = y + ij * 2 * c;
		ew_put(yij + t, qv * kv);
		ew_put(yij + c + t, qv - kv);
	}
}

/* y: [rows, cols] packed = bf16(x: [rows, cols] rows of stride ld) */
static __global__ void k_to_bf16(uint16_t *y, const float *x, int64_t rows, int cols, int64_t ld)
{
	GRID_STRIDE(e, rows * cols) {
		int64_t r = e / cols;
		y[e] = cu_bf16_rne(x[r * ld + e % cols]);
	}
}

extern "C" int cu_to_bf16(cudaStream_t s, uint16_t *y, const float *x, int64_t rows, int cols,
                          int64_t ld)
{
	if (rows < 0 || cols < 0 || ld < cols) return -EINVAL;
	if (rows * cols == 0) return 0;
	CU_LAUNCH(ew_blocks(rows * cols), EW_THREADS, 0, s, k_to_bf16)(y, x, rows, cols, ld);
	return cu_launched();
}

extern "C" int cu_act(cudaStream_t s, float *x, int64_t n, be_act_t kind)
{
	if (n <= 0) return n < 0 ? -EINVAL : 0;
	CU_LAUNCH(ew_blocks(n), EW_THREADS, 0, s, k_act)(x, n, kind);
	return cu_launched();
}

extern "C" int cu_binary(cudaStream_t s, float *y, const float *a, const float *b, int64_t n,
                         be_bin_t kind)
{
	if (n <= 0) return n < 0 ? -EINVAL : 0;
	CU_LAUNCH(ew_blocks(n), EW_THREADS, 0, s, k_binary)(y, a, b, n, kind);
	return cu_launched();
}

extern "C" int cu_axpby(cudaStream_t s, float *y, const float *x, int64_t n, float alpha, float beta)
{
	if (n <= 0) return n < 0 ? -EINVAL : 0;
	CU_LAUNCH(ew_blocks(n), EW_THREADS, 0, s, k_axpby)(y, x, n, alpha, beta);
	return cu_launched();
}

extern "C" int cu_fill(cudaStream_t s, float *x, int64_t n, float value)
{
	if (n <= 0) return n < 0 ? -EINVAL : 0;
	CU_LAUNCH(ew_blocks(n), EW_THREADS, 0, s, k_fill)(x, n, value);
	return cu_launched();
}

extern "C" int cu_gather(cudaStream_t s, float *y, const float *table, const int32_t *idx,
                         int64_t rows, int d, float scale)
{
	if (rows <= 0 || d <= 0) return rows < 0 || d < 0 ? -EINVAL : 0;
	CU_LAUNCH(ew_blocks(rows * d), EW_THREADS, 0, s, k_gather)(y, table, idx, rows, d, scale);
	return cu_launched();
}

extern "C" int cu_transpose(cudaStream_t s, float *y, const float *x, int64_t A, int64_t B, int64_t C)
{
	if (A < 0 || B < 0 || C < 0) return -EINVAL;
	if (A * B * C == 0) return 0;
	if (C > TR_SMALL_C) {
		CU_LAUNCH(ew_blocks(A * B * C), EW_THREADS, 0, s, k_transpose_rows)(y, x, A, B, C);
	} else {
		int64_t gb = (B + TR_TILE - 1) / TR_TILE, ga = (A + TR_TILE - 1) / TR_TILE;
		if (gb > 0x7fffffff || ga > 65535) return -EINVAL;
		CU_LAUNCH(dim3((unsigned)gb, (unsigned)ga), 256, 0, s, k_transpose_tile)(y, x, A, B, (int)C);
	}
	return cu_launched();
}

extern "C" int cu_outer(cudaStream_t s, float *y, const float *q, const float *k, int i0, int ni,
                        int L, int c, int bf16)
{
	if (ni < 0 || L < 0 || c < 0) return -EINVAL;
	if ((int64_t)ni * L * c == 0) return 0;
	if (bf16) CU_LAUNCH(ew_blocks((int64_t)ni * L * c), EW_THREADS, 0, s, k_outer<uint16_t>)((uint16_t *)y, q, k, i0, ni, L, c);
	else CU_LAUNCH(ew_blocks((int64_t)ni * L * c), EW_THREADS, 0, s, k_outer<float>)(y, q, k, i0, ni, L, c);
	return cu_launched();
}

extern "C" int cu_gemm_epilogue_relu(cudaStream_t s, float *c, int64_t ldc, int64_t stride_c, int batch,
                                     int m, int n, const float *bias)
{
	if (batch < 0 || m < 0 || n < 0) return -EINVAL;
	if ((int64_t)batch * m * n == 0) return 0;
	CU_LAUNCH(ew_blocks((int64_t)batch * m * n), EW_THREADS, 0, s, k_gemm_epilogue_relu)(
		c, ldc, stride_c, batch, m, n, bias);
	return cu_launched();
}

extern "C" int cu_gemm_prologue(cudaStream_t s, float *c, int64_t ldc, int64_t stride_c, int batch,
                                int m, int n, float beta, const float *bias)
{
	if (batch < 0 || m < 0 || n < 0) return -EINVAL;
	if ((int64_t)batch * m * n == 0) return 0;
	CU_LAUNCH(ew_blocks((int64_t)batch * m * n), EW_THREADS, 0, s, k_gemm_prologue)(
		c, ldc, stride_c, batch, m, n, beta, bias);
	return cu_launched();
}
