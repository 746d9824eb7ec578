/* cuemu_rt.h - the emulator's internal C interface: one kernel launch as
 * the runtime queues it, the fiber scheduler that runs it, and the hooks
 * the cuBLAS subset uses to queue work on a stream.  Test-only (see
 * tests/cuemu/README). */
#ifndef CUEMU_RT_H
#define CUEMU_RT_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* the built-in index variables of one CUDA thread */
typedef struct {
	uint3 thread_idx, block_idx, block_dim, grid_dim;
} cuemu_ids_t;

/* the running fiber's ids (NULL outside a kernel) */
extern __thread cuemu_ids_t *cuemu_ids;

/* one kernel launch: body(closure) runs the kernel with its arguments */
typedef struct {
	const char *name;           /* the kernel, for messages */
	const void *func;           /* the kernel's address (cudaFuncSetAttribute) */
	dim3        grid, block;
	size_t      smem;           /* dynamic shared memory, bytes */
	void      (*body)(void *closure);
	void      (*drop)(void *closure);
	void       *closure;
} cuemu_grid_t;

/* warp operations of cuemu_warp_op */
enum { CUEMU_SYNCWARP, CUEMU_SHFL_IDX, CUEMU_SHFL_UP, CUEMU_SHFL_DOWN, CUEMU_SHFL_XOR };

/* --- cuemu_fiber.c --- */
/* every block of g, each thread a fiber; blocks (and threads between
 * barriers) in reverse order when reverse is set; exits the process with a
 * message naming the kernel on a divergent barrier or shuffle */
void cuemu_grid_run(const cuemu_grid_t *g, int reverse);
/* __syncthreads of the running fiber */
void cuemu_syncthreads(void);
/* __syncwarp (kind CUEMU_SYNCWARP) or a shuffle of the 64-bit value v
 * among the lanes of mask; returns the value received */
uint64_t cuemu_warp_op(unsigned mask, uint64_t v, int kind, int arg, int width);
/* the running block's dynamic shared memory: [g->smem] bytes, NaN-filled */
void *cuemu_dyn_shared(void);

/* --- cuemu_rt.c --- */
/* queue g (copied; g->closure is dropped once run) on stream s, or set the
 * host thread's last error (invalid configuration, sticky error) */
void cuemu_launch(const cuemu_grid_t *g, cudaStream_t s);
/* queue run(arg) on stream s, drop(arg) afterwards; 0, or a runtime error
 * (invalid stream, sticky error) with drop(arg) called */
cudaError_t cuemu_enqueue(cudaStream_t s, void (*run)(void *), void (*drop)(void *), void *arg);
/* the emulated device of stream s (0: the current device's), or -1 */
int cuemu_stream_device(cudaStream_t s);
/* 0 when [p, p + n) lies inside one allocation of device dev, else -1 */
int cuemu_check_range(const void *p, size_t n, int dev);

#ifdef __cplusplus
}
#endif

#endif
