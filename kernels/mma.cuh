/* mma.cuh - the warp-level PTX primitives of the tensor-core kernels, as
 * inline PTX under nvcc (sm_80 or newer) and as the CUDA emulator's exact
 * functions otherwise (tests/cuemu/cuemu_ptx.h, force-included there).
 * CUDA C++, included by kernels/*.cu only.
 *
 * Layouts (PTX ISA, "Matrix fragments for mma.m16n8k16 with floating
 * point type" and "ldmatrix"), with g = lane / 4 and t = lane % 4; a
 * register of two bf16 holds the lower-indexed one in its low half:
 *   cu_mma_16816_bf16(d, a, b, c): d = a b + c over the warp, a: [16, 16]
 *     bf16 row-major, b: [16, 8] bf16 column-major, c, d: [16, 8] fp32;
 *     a[i] = (A[r][k], A[r][k + 1]) with r = g + 8 (i % 2),
 *            k = 2 t + 8 (i / 2);
 *     b[i] = (B[k][g], B[k + 1][g]) with k = 2 t + 8 i;
 *     c[e] = C[g + 8 (e / 2)][2 t + e % 2]
 *   cu_ldmatrix_xN(r, p): N (2 or 4) 8 x 8 matrices of b16 from shared
 *     memory, row i of matrix m at the address p of lane 8 m + i (on 16
 *     bytes; the other lanes' p unused); r[m] = (M_m[g][2 t], M_m[g][2 t
 *     + 1]), _trans: (M_m[2 t][g], M_m[2 t + 1][g])
 *   cu_cp_async_16 / _4(dst, src, n): an asynchronous copy of 16 / 4 bytes
 *     from global src to shared dst (both on the size), of which the first
 *     n bytes are read and the rest zero-filled (n = 0: src is not read);
 *     cu_cp_async_commit() closes the copies issued so far into a group;
 *     cu_cp_async_wait<N>() waits until at most the N latest groups are in
 *     flight (the data is then visible to this thread; a __syncthreads
 *     makes it visible to the block)
 * All of mma and ldmatrix are warp-collective: the 32 lanes take part.
 * Besides: cu_bf16x2(lo, hi), two floats rounded to bf16 (nearest even)
 * in one register, cu_exp2(x), 2^x to about 2 ulp (ex2.approx; -inf
 * gives 0), cu_rcp(x), 1 / x to 1 ulp (rcp.approx; a subnormal result
 * 0), and cu_gate(v, u), BE_GATE's v / (1 + exp(-u)) as v times the
 * reciprocal of 1 + 2^(-u log2 e) (the exponential as __expf computes
 * it; 0 where 1 + exp(-u) >= 2^126).
 *
 * On these, the 16 x 16 tiles of the GEMM kernels (ln_linear, transition,
 * trimul_out), warp-collective, lane = the caller's lane: a tile's
 * accumulators float c[2][4] are two m16n8 ones (c[j]: columns 8 j on);
 *   cu_tile_a(a, A, lda, lane): the A fragment of A: [16, 16] bf16
 *     row-major in shared memory (ldmatrix x4; lda a multiple of 8)
 *   cu_tile_bt(b, Bt, ldb, lane): the B fragments of B = Bt^T, Bt:
 *     [16, 16] bf16 row-major (a weight's rows) in shared memory
 *   cu_tile_bt_global(b, Bt, ldb, lane): the same from global memory, by
 *     32-bit loads (ldb even)
 *   cu_tile_mma(c, a, b): c += A B (two mma)
 *   cu_tile_store(C, ldc, c, lane): C: [16, 16] fp32 row-major = c */
#ifndef ESMBATCH_MMA_CUH
#define ESMBATCH_MMA_CUH

#include <stdint.h>

#ifdef __CUDACC__
#include <cuda_bf16.h>

static __device__ __forceinline__ void cu_mma_16816_bf16(float d[4], const uint32_t a[4],
                                                         const uint32_t b[2], const float c[4])
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
	             "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
	             : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
	               "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

static __device__ __forceinline__ uint32_t cu_smem_addr(const void *p)
{
	return (uint32_t)__cvta_generic_to_shared(p);
}

static __device__ __forceinline__ void cu_ldmatrix_x2(uint32_t r[2], const void *p)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
	             : "=r"(r[0]), "=r"(r[1]) : "r"(cu_smem_addr(p)));
}

static __device__ __forceinline__ void cu_ldmatrix_x4(uint32_t r[4], const void *p)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(cu_smem_addr(p)));
}

static __device__ __forceinline__ void cu_ldmatrix_x2_trans(uint32_t r[2], const void *p)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
	             : "=r"(r[0]), "=r"(r[1]) : "r"(cu_smem_addr(p)));
}

static __device__ __forceinline__ void cu_ldmatrix_x4_trans(uint32_t r[4], const void *p)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(cu_smem_addr(p)));
}

static __device__ __forceinline__ void cu_cp_async_16(void *dst, const void *src, int n)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
	             :: "r"(cu_smem_addr(dst)), "l"(src), "r"(n) : "memory");
}

static __device__ __forceinline__ void cu_cp_async_4(void *dst, const void *src, int n)
{
	asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
	             :: "r"(cu_smem_addr(dst)), "l"(src), "r"(n) : "memory");
}

static __device__ __forceinline__ void cu_cp_async_commit(void)
{
	asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N>
static __device__ __forceinline__ void cu_cp_async_wait(void)
{
	asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}

static __device__ __forceinline__ uint32_t cu_bf16x2(float lo, float hi)
{
	uint32_t r;
	asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
	return r;
}

static __device__ __forceinline__ float cu_exp2(float x)
{
	float y;
	asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
	return y;
}

static __device__ __forceinline__ float cu_rcp(float x)
{
	float y;
	asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
	return y;
}
#else
static inline uint32_t cu_bf16x2(float lo, float hi)
{
	return (uint32_t)cuemu_f2bf(lo) | (uint32_t)cuemu_f2bf(hi) << 16;
}

static inline float cu_exp2(float x)
{
	return exp2f(x);
}

static inline float cu_rcp(float x)
{
	return 1.0f / x;
}
#endif

#define CU_LOG2E 1.44269504088896341f   /* log2 e, as a float */

static __device__ __forceinline__ float cu_gate(float v, float u)
{
	return v * cu_rcp(1.0f + cu_exp2(u * -CU_LOG2E));
}

static __device__ __forceinline__ void cu_tile_a(uint32_t a[4], const __nv_bfloat16 *A, int lda, int lane)
{
	cu_ldmatrix_x4(a, A + lane % 16 * lda + lane / 16 * 8);
}

static __device__ __forceinline__ void cu_tile_bt(uint32_t b[4], const __nv_bfloat16 *Bt, int ldb, int lane)
{
	cu_ldmatrix_x4(b, Bt + (lane % 8 + lane / 16 * 8) * ldb + lane / 8 % 2 * 8);
}

static __device__ __forceinline__ void cu_tile_bt_global(uint32_t b[4], const __nv_bfloat16 *Bt, int64_t ldb,
                                                         int lane)
{
	const __nv_bfloat16 *p = Bt + lane / 4 * ldb + lane % 4 * 2;
	for (int i = 0; i < 4; i++) b[i] = *(const uint32_t *)(p + i / 2 * 8 * ldb + i % 2 * 8);
}

static __device__ __forceinline__ void cu_tile_mma(float c[2][4], const uint32_t a[4], const uint32_t b[4])
{
	cu_mma_16816_bf16(c[0], a, b, c[0]);
	cu_mma_16816_bf16(c[1], a, b + 2, c[1]);
}

static __device__ __forceinline__ void cu_tile_store(float *C, int ldc, const float c[2][4], int lane)
{
	float *p = C + lane / 4 * ldc + lane % 4 * 2;
	for (int e = 0; e < 8; e++) p[e % 4 / 2 * 8 * ldc + e / 4 * 8 + e % 2] = c[e / 4][e % 4];
}

#endif
