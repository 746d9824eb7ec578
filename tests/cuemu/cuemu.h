/* cuemu.h - what nvcc would provide to the kernels (kernels/NAME.cu), for compiling them as
 * C++ with g++ (-include tests/cuemu/cuemu.h): the execution-space
 * qualifiers, the index built-ins (per fiber), shared memory (one copy per
 * block, NaN-filled), barriers, warp shuffles, the math intrinsics the
 * kernels use, the bfloat16 / half types and nvcuda::wmma (cuemu_mma.h), the
 * PTX primitives of kernels/mma.cuh (cuemu_ptx.h), and the launcher behind
 * CU_LAUNCH (kernels/common.cuh). */
#ifndef CUEMU_H
#define CUEMU_H

#ifndef __cplusplus
#error "cuemu.h is for the kernels compiled as C++"
#endif

#define __global__
#define __device__
#define __host__
#define __launch_bounds__(...)
/* static __shared__ arrays live in one section, refilled with NaN before
 * every block (cuemu_fiber.c); blocks run one at a time */
#define __shared__ static __attribute__((section("cuemu_shared"), aligned(16)))

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <new>

#include <cuda_runtime_api.h>

#include "cuemu_rt.h"
#include "cuemu_mma.h"
#include "cuemu_ptx.h"

/* the kernels' expf: the host's, or CUEMU_EXPF_ULP ulp off (cuemu_rt.h) */
#define expf cuemu_expf

#define threadIdx (cuemu_ids->thread_idx)
#define blockIdx  (cuemu_ids->block_idx)
#define blockDim  (cuemu_ids->block_dim)
#define gridDim   (cuemu_ids->grid_dim)
#define warpSize 32

/* x > 0: 1 / sqrt(x) */
static inline float rsqrtf(float x)
{
	return 1.0f / sqrtf(x);
}

/* a card's fast exp (ex2.approx of x log2 e), here the kernels' expf */
#define __expf cuemu_expf

/* x / y to about 2 ulp on a card (an approximate reciprocal); exact here */
static inline float __fdividef(float x, float y)
{
	return x / y;
}

/* single operations rounded to nearest that nvcc never contracts into an
 * fma; here each result goes through memory, so g++ cannot fuse either */
static inline float __fmul_rn(float a, float b)
{
	volatile float r = a * b;
	return r;
}

static inline float __fadd_rn(float a, float b)
{
	volatile float r = a + b;
	return r;
}

static inline float __fsub_rn(float a, float b)
{
	volatile float r = a - b;
	return r;
}

static inline __attribute__((always_inline)) void __syncthreads(void)
{
	cuemu_syncthreads();
}

static inline __attribute__((always_inline)) void __syncwarp(unsigned mask = 0xffffffffu)
{
	cuemu_warp_op(mask, 0, CUEMU_SYNCWARP, 0, 32);
}

/* v: a value of up to 8 bytes, exchanged among the lanes of mask */
template <class T>
static inline __attribute__((always_inline)) T cuemu_shfl(unsigned mask, T v, int kind, int arg,
                                                          int width)
{
	static_assert(sizeof(T) <= 8, "shuffle of more than 8 bytes");
	uint64_t b = 0;
	memcpy(&b, &v, sizeof v);
	b = cuemu_warp_op(mask, b, kind, arg, width);
	memcpy(&v, &b, sizeof v);
	return v;
}

/* the shuffles of CUDA: v of this lane; the value of lane src (idx), of
 * lane - delta / lane + delta within the width-lane segment (up / down,
 * else v), of lane ^ lane_mask (xor); every lane of mask must call */
template <class T>
static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32)
{
	return cuemu_shfl(mask, v, CUEMU_SHFL_IDX, src, width);
}

template <class T>
static inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
	return cuemu_shfl(mask, v, CUEMU_SHFL_UP, (int)delta, width);
}

template <class T>
static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
	return cuemu_shfl(mask, v, CUEMU_SHFL_DOWN, (int)delta, width);
}

template <class T>
static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32)
{
	return cuemu_shfl(mask, v, CUEMU_SHFL_XOR, lane_mask, width);
}

/* the vote of CUDA: non-zero in every lane of mask if pred is in any of
 * them (an OR over the lanes by xor shuffles, so the same checks: every
 * lane of mask must call) */
static inline int __any_sync(unsigned mask, int pred)
{
	int v = pred != 0;
	for (int o = 1; o < 32; o <<= 1)
		if (mask == 0xffffffffu) v |= __shfl_xor_sync(mask, v, o);
		else cuemu_fail("__any_sync: only over the whole warp");
	return v;
}

/* the typed overload of cuda_runtime.h (nvcc includes it implicitly) */
template <class T>
static inline cudaError_t cudaFuncSetAttribute(T *f, enum cudaFuncAttribute attr, int value)
{
	return cudaFuncSetAttribute((const void *)f, attr, value);
}

/* CU_LAUNCH(grid, block, smem, stream, kernel)(args...): the arguments are
 * converted to the kernel's parameter types and copied; the launch is
 * queued on the stream like a <<<...>>> launch */
template <class... P>
struct cuemu_launcher {
	const char *name;
	void      (*k)(P...);
	dim3        grid, block;
	size_t      smem;
	cudaStream_t stream;

	void operator()(P... a) const
	{
		void (*kern)(P...) = k;
		auto run = [kern, a...]() { kern(a...); };
		typedef decltype(run) run_t;
		void *mem = malloc(sizeof(run_t));
		if (!mem) abort();
		cuemu_grid_t g = {
			name, (const void *)k, grid, block, smem,
			[](void *c) { (*(run_t *)c)(); },
			[](void *c) { ((run_t *)c)->~run_t(); free(c); },
			new (mem) run_t(run),
		};
		cuemu_launch(&g, stream);
	}
};

template <class... P>
static inline cuemu_launcher<P...> cuemu_launch_of(const char *name, void (*k)(P...), dim3 grid,
                                                   dim3 block, size_t smem, cudaStream_t s)
{
	return cuemu_launcher<P...>{name, k, grid, block, smem, s};
}

#endif
