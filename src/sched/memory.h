/* memory.h (prefix mem_) - the memory figures of one job, as a PyTorch user knows them.
 *
 *   predicted    the planner's arena before the job runs, plus the
 *                backend's per-worker workspace (bytes); on the CPU the
 *                arena holds the fold's host buffers too (fwd_host)
 *   allocated    peak bytes of live tensors, from the executing pass's own
 *                placement state (torch.cuda.max_memory_allocated)
 *   reserved     the arena the executing pass reserved, plus the backend
 *                workspace (torch.cuda.max_memory_reserved)
 *   device_used  CUDA: driver total - free with the arena still held (the
 *                context, weights and every other worker included);
 *                CPU: the process's peak resident set during the fold
 *   growth       CPU: the anonymous memory the fold added at its peak: the
 *                peak resident set, less its file-backed part, less the
 *                anonymous resident set just before the fold (arena pages
 *                touched, and whatever else the fold allocated); -1 on CUDA
 *
 * On one CPU worker, growth is the measurement the prediction is held to.
 * Per-worker memory (BLAS buffers, attention scratch, thread stacks and
 * allocator arenas) is not the fold's: it reaches its size on the worker's
 * first folds and is measured once as calibrate's worker overhead.
 * File-backed pages are left out because the kernel may drop and refault
 * them at will; the weights' pages leave the resident set once copied
 * (safetensors_release), so the file-backed part is the binary and its libraries,
 * taken to be the same at the peak as after the fold.  RSS is per process:
 * with several CPU workers device_used and growth cover all of them.
 * A worker measures them around each fold (sched_fold, scheduler.c).
 */
#ifndef ESMBATCH_SCHED_MEMORY_H
#define ESMBATCH_SCHED_MEMORY_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
	size_t  predicted;
	size_t  allocated;
	size_t  reserved;
	int64_t device_used;   /* -1 unknown */
	int64_t growth;        /* -1 unknown */
} mem_fig_t;

#endif
