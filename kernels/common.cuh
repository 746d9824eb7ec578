/* common.cuh - what the kernel files share: the launch check, the rotary
 * embedding of an attention's q and k rows, and warp reductions.  CUDA
 * C++, included by kernels/*.cu only. */
#ifndef ESMBATCH_COMMON_CUH
#define ESMBATCH_COMMON_CUH

#include <errno.h>

#include "kernels.h"

/* CU_LAUNCH(grid, block, smem, stream, kernel)(args): kernel<<<...>>>(args)
 * under nvcc, the CPU emulator's launcher (tests/cuemu) otherwise;
 * CU_DYN_SHARED(type, name): the block's dynamic shared memory as type
 * name[], on 128 bytes (extern __shared__ __align__(128): a kernel takes
 * its arrays at offsets from it, so that the compiler keeps the shared
 * state space, LDS / STS / LDSM, never an address rebuilt from an integer,
 * which it can only reach by generic LD / ST) */
#ifdef __CUDACC__
#define CU_LAUNCH(grid, block, smem, stream, ...) __VA_ARGS__<<<grid, block, smem, stream>>>
#define CU_DYN_SHARED(type, name) extern __shared__ __align__(128) type name[]
#else
#define CU_LAUNCH(grid, block, smem, stream, ...) \
	cuemu_launch_of(#__VA_ARGS__, __VA_ARGS__, grid, block, smem, stream)
#define CU_DYN_SHARED(type, name) type *name = (type *)cuemu_dyn_shared()
#endif

/* 0 when e is cudaSuccess; otherwise -EIO, keeping e for cu_last_error()
 * and clearing the thread's last error (elementwise.cu) */
int cu_check(cudaError_t e);
/* cu_check of the last launch of this host thread */
int cu_launched(void);
/* kernel func may take up to bytes of shared memory, its static shared
 * memory included (cudaFuncSetAttribute's MaxDynamicSharedMemorySize:
 * bytes less the static part); on the current device (elementwise.cu) */
int cu_smem_allow(const void *func, int bytes);

/* element c < D of a q or k row x: [D] at position p with ESM-2's rotary
 * embedding from rope: [*, D/2, 2] (be_attn_t.rope), D even: each product
 * and sum rounded on its own (no fused multiply-add), as the CPU backend
 * rotates, so that the rotation is the same bit for bit */
static __device__ __forceinline__ float cu_rope(const float *x, int c, int D, const float *rope,
                                                int64_t p)
{
	int half = D / 2, d = c < half ? c : c - half;
	float cs = rope[(p * half + d) * 2], sn = rope[(p * half + d) * 2 + 1];
	return c < half ? __fsub_rn(__fmul_rn(x[c], cs), __fmul_rn(x[c + half], sn))
	                : __fadd_rn(__fmul_rn(x[c], cs), __fmul_rn(x[c - half], sn));
}

/* the sum / maximum of v over the 32 lanes of a warp, in every lane */
static __device__ __forceinline__ float cu_warp_sum(float v)
{
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

static __device__ __forceinline__ float cu_warp_max(float v)
{
	for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

#endif
