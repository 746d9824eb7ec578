/* cuemu_rt.h - the emulator's internal C interface: one kernel launch as
 * the runtime queues it, the fiber scheduler that runs it, and the hooks
 * the cuBLAS and cuBLASLt subsets use to queue work on a stream.
 * Test-only (see tests/cuemu/README). */
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

/* warp operations of cuemu_warp_op (CUEMU_COLLECTIVE: cuemu_warp_collective's) */
enum { CUEMU_SYNCWARP, CUEMU_SHFL_IDX, CUEMU_SHFL_UP, CUEMU_SHFL_DOWN, CUEMU_SHFL_XOR,
       CUEMU_COLLECTIVE };

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
/* a warp-collective operation (wmma): all 32 lanes of the warp must call
 * it at the same site with the same fn; once they have, fn(args) runs once
 * in the scheduler, args[lane] being each lane's arg.  It orders no memory
 * among the lanes, like a shuffle. */
void cuemu_warp_collective(void (*fn)(void *const args[32]), void *arg);
/* the cp.async copies of one CUDA thread not yet waited for (cuemu_ptx.h):
 * c[0 .. n) in issue order, each of size bytes (data read at issue, the
 * rest of 16 zero), group -1 until committed, then the group's serial;
 * committed groups so far.  Empty at the start of every block; a thread
 * that ends with copies in flight ends the process. */
typedef struct {
	void         *dst;
	unsigned char data[16];
	int           size, group;
} cuemu_async_copy_t;
typedef struct {
	cuemu_async_copy_t *c;   /* [cap] */
	int                 n, cap, committed;
} cuemu_async_t;
/* the running fiber's cp.async state */
cuemu_async_t *cuemu_thread_async(void);
/* 1 when [p, p + n) lies in the running block's shared memory (static or
 * dynamic), else 0 */
int cuemu_in_shared(const void *p, size_t n);
/* ends the process with a message naming the running kernel and block */
void cuemu_fail(const char *what) __attribute__((noreturn));
/* the running block's dynamic shared memory: [g->smem] bytes, NaN-filled */
void *cuemu_dyn_shared(void);

/* --- cuemu_rt.c --- */
/* queue g (copied; g->closure is dropped once run) on stream s, or set the
 * host thread's last error (invalid configuration, sticky error) */
void cuemu_launch(const cuemu_grid_t *g, cudaStream_t s);
/* queue run(arg) on stream s, drop(arg) afterwards; 0, or a runtime error
 * (invalid stream, sticky error) with drop(arg) called.  It runs at a
 * synchronising call, like a kernel, in the early-copies schedule too
 * (CUEMU_COPIES_EARLY: a copy behind it waits for it) */
cudaError_t cuemu_enqueue(cudaStream_t s, void (*run)(void *), void (*drop)(void *), void *arg);
/* the emulated device of stream s (0: the current device's), or -1 */
int cuemu_stream_device(cudaStream_t s);
/* cudaStreamSynchronize and cudaSetDevice calls so far in the process
 * (tests count the host's waits and device switches with them) */
long cuemu_stream_syncs(void);
long cuemu_set_devices(void);
/* cudaGraphLaunch calls, and kernel launches queued from the host (a
 * graph's replayed kernels not counted), of the process so far */
long cuemu_graph_launches(void);
long cuemu_kernel_launches(void);
/* events created and not yet freed (cudaEventDestroy frees one once no
 * queued marker or wait holds it) */
long cuemu_events_live(void);
/* 0 when [p, p + n) lies inside one allocation of device dev, else -1 */
int cuemu_check_range(const void *p, size_t n, int dev);
/* 0 when [p, p + n) lies inside one allocation of any device, else -1 (a
 * kernel's global reads, cp.async's) */
int cuemu_in_alloc(const void *p, size_t n);
/* the kernels' expf (cuemu.h): the host's, moved CUEMU_EXPF_ULP ulp up
 * (default 0), to show that a test holds a card's expf (within 2 ulp) to
 * a bound rather than to the host's bits */
float cuemu_expf(float x);

/* --- cuemu_blas.c --- */
/* *h a new zeroed handle of size bytes (cublasCreate, cublasLtCreate), or
 * NULL; the cublasStatus_t: NOT_INITIALIZED without a device, ALLOC_FAILED */
int cuemu_handle_new(void **h, size_t size);
/* one line "m n k batch inputs operands lda ldb" appended to the file
 * CUEMU_GEMM_LOG names, where it is set (see cuemu_blas.c); bf16: A and B
 * are bfloat16; compute: the cublasComputeType_t (an int here, so that
 * this header needs no cuBLAS header) */
void cuemu_gemm_log(int m, int n, int k, int batch, int bf16, int compute, int lda, int ldb);

/* --- cuemu_wmma.c (the scheduler's side of cuemu_mma.h) --- */
/* bfloat16 / float16 bits of f rounded to nearest even (NaN stays a quiet
 * NaN, overflow goes to infinity), and back */
uint16_t cuemu_f2bf(float f);
float    cuemu_bf2f(uint16_t h);
uint16_t cuemu_f2h(float f);
float    cuemu_h2f(uint16_t h);
/* one lane's part of a wmma collective (cuemu_mma.h) */
typedef struct {
	uint64_t    key[3];       /* what every lane must pass alike */
	int         m, n, k;      /* mma: the shape */
	int         half;         /* mma: a, b are float16 (else bfloat16) */
	float      *d;            /* mma: [m*n/32] this lane's elements */
	const void *a, *b;        /* mma: [m*k/32], [k*n/32] */
	const float *c;           /* mma: [m*n/32] */
} cuemu_wmma_lane_t;
/* the collectives' fn (args: cuemu_wmma_lane_t *): the lanes' keys must
 * match (else cuemu_fail naming what); cuemu_wmma_mma also computes
 * d = a b + c over the whole warp (fp32 sums of exact products) */
void cuemu_wmma_uniform(void *const args[32]);
void cuemu_wmma_mma(void *const args[32]);
/* the matrix position (row-major index into rows x cols, n = rows * cols,
 * a multiple of 32) of element e of lane l of a fragment: a bijection that
 * kernels must not rely on */
static inline int cuemu_wmma_pos(int l, int e, int n)
{
	return (32 * e + 7 * l) % n;
}

/* --- cuemu_ptx.c (the scheduler's side of cuemu_ptx.h) --- */
/* one lane's part of mma.m16n8k16 (bf16 inputs, f32 accumulators): its
 * registers a[4], b[2] (two bf16 each, the lower index in the low half)
 * and c[4]; d[4] receives its part of d = a b + c (d may be c) */
typedef struct {
	const uint32_t *a, *b;
	const float    *c;
	float          *d;
} cuemu_mma_lane_t;
void cuemu_mma_16816(void *const args[32]);
/* one lane's part of ldmatrix.m8n8.xN(.trans).b16: the 8 elements of the
 * row it addressed (lanes 8 i .. 8 i + 7: rows 0..7 of matrix i < n),
 * n, trans (alike in every lane), out[n] its registers */
typedef struct {
	uint16_t  row[8];
	int       n, trans;
	uint32_t *out;
} cuemu_ldm_lane_t;
void cuemu_ldmatrix(void *const args[32]);

#ifdef __cplusplus
}
#endif

#endif
