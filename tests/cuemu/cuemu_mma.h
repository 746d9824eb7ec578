/* cuemu_mma.h - what cuda_bf16.h, cuda_fp16.h and mma.h give the kernels,
 * for the emulator (included by cuemu.h): the __nv_bfloat16 and __half
 * storage types with their conversions (round to nearest even), and
 * nvcuda::wmma: fragments of the shapes m16n16k16, m32n8k16 and m8n32k16
 * (matrix_a / matrix_b of __nv_bfloat16 or __half, row_major or col_major;
 * accumulator of float), fill_fragment, load_matrix_sync,
 * store_matrix_sync, mma_sync and elementwise access (num_elements, x[]).
 *
 * As on the hardware each lane holds num_elements = rows * cols / 32
 * elements of the warp's matrix; which ones (cuemu_wmma_pos) is
 * unspecified to kernels, so that x[i] is only meaningful when applied
 * alike to every element.  Every wmma function is a warp collective: all
 * 32 lanes must call it at the same place with the same arguments
 * (pointer, ldm, layout, fill value), else the process ends with a message
 * (cuemu_warp_collective).  Each lane loads and stores its own elements
 * itself, so a load from shared memory that another lane wrote without a
 * barrier is a data race under ThreadSanitizer, as on a card; mma_sync
 * exchanges the lanes' registers in the scheduler (cuemu_wmma.c) and
 * orders no memory.  load/store check CUDA's documented alignment: the
 * pointer on 32 bytes, ldm a multiple of 16 bytes. */
#ifndef CUEMU_MMA_H
#define CUEMU_MMA_H

#include <stdint.h>

#include <type_traits>

#include "cuemu_rt.h"

#define CUEMU_ALWAYS static inline __attribute__((always_inline))

struct __nv_bfloat16 { uint16_t x; };
struct __half { uint16_t x; };

CUEMU_ALWAYS __nv_bfloat16 __float2bfloat16(float f) { return { cuemu_f2bf(f) }; }
CUEMU_ALWAYS __nv_bfloat16 __float2bfloat16_rn(float f) { return { cuemu_f2bf(f) }; }
CUEMU_ALWAYS float __bfloat162float(__nv_bfloat16 h) { return cuemu_bf2f(h.x); }
CUEMU_ALWAYS __half __float2half(float f) { return { cuemu_f2h(f) }; }
CUEMU_ALWAYS __half __float2half_rn(float f) { return { cuemu_f2h(f) }; }
CUEMU_ALWAYS float __half2float(__half h) { return cuemu_h2f(h.x); }

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

/* rows x cols of a Use operand of the shape m x n x k */
template <class Use, int M, int N, int K> struct cuemu_dims;
template <int M, int N, int K>
struct cuemu_dims<matrix_a, M, N, K> { enum { rows = M, cols = K }; };
template <int M, int N, int K>
struct cuemu_dims<matrix_b, M, N, K> { enum { rows = K, cols = N }; };
template <int M, int N, int K>
struct cuemu_dims<accumulator, M, N, K> { enum { rows = M, cols = N }; };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
	static_assert((M == 16 && N == 16 && K == 16) || (M == 32 && N == 8 && K == 16) ||
	              (M == 8 && N == 32 && K == 16), "wmma shape not emulated");
	static_assert(std::is_same<Use, accumulator>::value
	              ? std::is_same<T, float>::value && std::is_same<Layout, void>::value
	              : (std::is_same<T, __nv_bfloat16>::value || std::is_same<T, __half>::value) &&
	                (std::is_same<Layout, row_major>::value ||
	                 std::is_same<Layout, col_major>::value),
	              "wmma fragment type not emulated");
	enum { rows = cuemu_dims<Use, M, N, K>::rows, cols = cuemu_dims<Use, M, N, K>::cols,
	       num_elements = rows * cols / 32 };
	typedef T element_type;
	T x[num_elements];
};

/* this lane of its warp */
CUEMU_ALWAYS int cuemu_lane(void)
{
	const cuemu_ids_t *i = cuemu_ids;
	return (int)((i->thread_idx.z * i->block_dim.y + i->thread_idx.y) * i->block_dim.x +
	             i->thread_idx.x) % 32;
}

/* the warp meets with its uniform arguments; p, ldm of elements of bytes es
 * checked as CUDA documents */
CUEMU_ALWAYS void cuemu_meet(const void *p, unsigned ldm, size_t es, uint64_t what)
{
	cuemu_wmma_lane_t me = { { (uint64_t)(uintptr_t)p, ldm, what } };
	if (p && ((uintptr_t)p % 32 || ldm * es % 16))
		cuemu_fail("wmma: pointer not on 32 bytes or ldm not a multiple of 16 bytes");
	cuemu_warp_collective(cuemu_wmma_uniform, &me);
}

template <class Use, int M, int N, int K, class T, class Layout>
CUEMU_ALWAYS void fill_fragment(fragment<Use, M, N, K, T, Layout> &f, T v)
{
	uint64_t bits = 0;
	memcpy(&bits, &v, sizeof v);
	cuemu_meet(NULL, 0, 0, bits);
	for (int e = 0; e < f.num_elements; e++) f.x[e] = v;
}

/* element (r, c) of a rows x cols matrix at p, row- or column-major */
template <class T>
CUEMU_ALWAYS T &cuemu_at(T *p, unsigned ldm, int r, int c, bool rowmaj)
{
	return rowmaj ? p[(size_t)r * ldm + c] : p[(size_t)c * ldm + r];
}

template <class Use, int M, int N, int K, class T, class Layout>
CUEMU_ALWAYS void load_matrix_sync(fragment<Use, M, N, K, T, Layout> &f, const T *p, unsigned ldm)
{
	typedef fragment<Use, M, N, K, T, Layout> F;
	static_assert(!std::is_same<Use, accumulator>::value, "an accumulator loads with a layout_t");
	cuemu_meet(p, ldm, sizeof(T), std::is_same<Layout, row_major>::value);
	for (int e = 0; e < F::num_elements; e++) {
		int pos = cuemu_wmma_pos(cuemu_lane(), e, F::rows * F::cols);
		f.x[e] = cuemu_at(p, ldm, pos / F::cols, pos % F::cols,
		                  std::is_same<Layout, row_major>::value);
	}
}

template <int M, int N, int K>
CUEMU_ALWAYS void load_matrix_sync(fragment<accumulator, M, N, K, float> &f, const float *p,
                                   unsigned ldm, layout_t lay)
{
	typedef fragment<accumulator, M, N, K, float> F;
	cuemu_meet(p, ldm, sizeof(float), lay);
	for (int e = 0; e < F::num_elements; e++) {
		int pos = cuemu_wmma_pos(cuemu_lane(), e, F::rows * F::cols);
		f.x[e] = cuemu_at(p, ldm, pos / F::cols, pos % F::cols, lay == mem_row_major);
	}
}

template <int M, int N, int K>
CUEMU_ALWAYS void store_matrix_sync(float *p, const fragment<accumulator, M, N, K, float> &f,
                                    unsigned ldm, layout_t lay)
{
	typedef fragment<accumulator, M, N, K, float> F;
	cuemu_meet(p, ldm, sizeof(float), lay);
	for (int e = 0; e < F::num_elements; e++) {
		int pos = cuemu_wmma_pos(cuemu_lane(), e, F::rows * F::cols);
		cuemu_at(p, ldm, pos / F::cols, pos % F::cols, lay == mem_row_major) = f.x[e];
	}
}

/* d = a b + c (d may be c) */
template <int M, int N, int K, class T, class LA, class LB>
CUEMU_ALWAYS void mma_sync(fragment<accumulator, M, N, K, float> &d,
                           const fragment<matrix_a, M, N, K, T, LA> &a,
                           const fragment<matrix_b, M, N, K, T, LB> &b,
                           const fragment<accumulator, M, N, K, float> &c)
{
	cuemu_wmma_lane_t me = { { (uint64_t)M, (uint64_t)N, (uint64_t)K }, M, N, K,
	                         std::is_same<T, __half>::value, d.x, a.x, b.x, c.x };
	cuemu_warp_collective(cuemu_wmma_mma, &me);
}

} /* namespace wmma */
} /* namespace nvcuda */

#undef CUEMU_ALWAYS

#endif
