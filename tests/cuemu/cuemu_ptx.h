/* cuemu_ptx.h - the PTX primitives of kernels/mma.cuh for the emulator
 * (included by cuemu.h): mma.m16n8k16 (bf16, f32 accumulators), ldmatrix
 * (.x2 / .x4, plain or .trans) and cp.async (4 or 16 bytes, zero-filling,
 * commit_group / wait_group), with the checks a card would punish:
 *   - mma and ldmatrix are warp collectives: all 32 lanes at the same call
 *     (cuemu_warp_collective), else the process ends naming the kernel;
 *   - an ldmatrix row address or a cp.async address off its size, an
 *     ldmatrix row or a cp.async destination outside shared memory, a
 *     cp.async source inside it or the bytes it reads outside every
 *     device allocation, end the process;
 *   - a cp.async destination reads as NaN (all bytes 0xff) from the issue
 *     until a cp_async_wait lets its group complete; then the lane itself
 *     writes the data (read from global memory at the issue), so that
 *     under ThreadSanitizer another lane's read without a barrier after the
 *     wait is a race, as on a card.
 * The per-lane layouts are those of the PTX ISA (cuemu_ptx.c). */
#ifndef CUEMU_PTX_H
#define CUEMU_PTX_H

#include <stdint.h>
#include <string.h>

#include "cuemu_rt.h"
#include "cuemu_mma.h"

#define CUEMU_ALWAYS static inline __attribute__((always_inline))

/* d = a b + c over the warp: [16, 16] x [16, 8] + [16, 8]; d may be c */
CUEMU_ALWAYS void cu_mma_16816_bf16(float d[4], const uint32_t a[4], const uint32_t b[2],
                                    const float c[4])
{
	cuemu_mma_lane_t me = { a, b, c, d };
	cuemu_warp_collective(cuemu_mma_16816, &me);
}

/* r[N]: matrices 0..N-1, row i of matrix m at the address of lane 8 m + i */
template <int N, int T>
CUEMU_ALWAYS void cuemu_ldm(uint32_t *r, const void *p)
{
	cuemu_ldm_lane_t me = { { 0 }, N, T, r };
	if (nvcuda::wmma::cuemu_lane() < 8 * N) {
		if ((uintptr_t)p % 16) cuemu_fail("ldmatrix: row address not on 16 bytes");
		if (!cuemu_in_shared(p, 16)) cuemu_fail("ldmatrix: row address not in shared memory");
		memcpy(me.row, p, 16);
	}
	cuemu_warp_collective(cuemu_ldmatrix, &me);
}

CUEMU_ALWAYS void cu_ldmatrix_x2(uint32_t r[2], const void *p) { cuemu_ldm<2, 0>(r, p); }
CUEMU_ALWAYS void cu_ldmatrix_x4(uint32_t r[4], const void *p) { cuemu_ldm<4, 0>(r, p); }
CUEMU_ALWAYS void cu_ldmatrix_x2_trans(uint32_t r[2], const void *p) { cuemu_ldm<2, 1>(r, p); }
CUEMU_ALWAYS void cu_ldmatrix_x4_trans(uint32_t r[4], const void *p) { cuemu_ldm<4, 1>(r, p); }

/* N bytes to dst (shared) of which the first n from src (global), the rest 0 */
template <int N>
CUEMU_ALWAYS void cuemu_cp_async(void *dst, const void *src, int n)
{
	cuemu_async_t *q = cuemu_thread_async();
	if ((uintptr_t)dst % N || (uintptr_t)src % N) cuemu_fail("cp.async: address off its size");
	if (n < 0 || n > N) cuemu_fail("cp.async: source size over the copy's");
	if (!cuemu_in_shared(dst, N)) cuemu_fail("cp.async: destination not in shared memory");
	if (n && cuemu_in_shared(src, (size_t)n)) cuemu_fail("cp.async: source in shared memory");
	if (n && cuemu_in_alloc(src, (size_t)n)) cuemu_fail("cp.async: source outside every device allocation");
	if (q->n == q->cap) {
		int cap = q->cap ? 2 * q->cap : 64;
		cuemu_async_copy_t *c = (cuemu_async_copy_t *)realloc(q->c, sizeof *c * (size_t)cap);
		if (!c) cuemu_fail("out of host memory for cp.async");
		q->c = c;
		q->cap = cap;
	}
	cuemu_async_copy_t *c = &q->c[q->n++];
	c->dst = dst;
	c->size = N;
	c->group = -1;
	memset(c->data, 0, sizeof c->data);
	if (n) memcpy(c->data, src, (size_t)n);
	memset(dst, 0xff, N);
}

CUEMU_ALWAYS void cu_cp_async_16(void *dst, const void *src, int n) { cuemu_cp_async<16>(dst, src, n); }
CUEMU_ALWAYS void cu_cp_async_4(void *dst, const void *src, int n) { cuemu_cp_async<4>(dst, src, n); }

/* the copies issued since the last commit become the next group */
CUEMU_ALWAYS void cu_cp_async_commit(void)
{
	cuemu_async_t *q = cuemu_thread_async();
	for (int i = 0; i < q->n; i++)
		if (q->c[i].group < 0) q->c[i].group = q->committed;
	q->committed++;
}

/* every committed group but the N most recent complete */
template <int N>
CUEMU_ALWAYS void cu_cp_async_wait(void)
{
	cuemu_async_t *q = cuemu_thread_async();
	int k = 0;
	for (int i = 0; i < q->n; i++) {
		cuemu_async_copy_t *c = &q->c[i];
		if (c->group >= 0 && c->group < q->committed - N) memcpy(c->dst, c->data, (size_t)c->size);
		else q->c[k++] = *c;
	}
	q->n = k;
}

#undef CUEMU_ALWAYS

#endif
