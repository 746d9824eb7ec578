/* devices.h (prefix dev_) - devices: what a --devices list names, each with its backend.
 *
 *   NULL        the first CUDA device when there is one, else the CPU
 *   "cpu"       the CPU backend
 *   "cuda", "cuda:N"   CUDA device N (0 by default); an error without one
 *   "sim:SIZE"  a simulated card of SIZE bytes (suffix K, M, G: powers of
 *               1024) running on the CPU backend: every allocation (weights,
 *               arenas) counts against SIZE and one beyond it is refused,
 *               exactly as a card's driver would; mem_info reports it
 * A list is comma-separated: "sim:32G,sim:24G", "cuda:0,cuda:1".
 */
#ifndef ESMBATCH_BACKEND_DEVICES_H
#define ESMBATCH_BACKEND_DEVICES_H

#include <stdint.h>

#include "backend/backend.h"

/* 0 when spec (NULL, or one element of a --devices list) has one of the
 * forms above, else -1 after one logged line; opens nothing. */
int dev_check(const char *spec);

/* The backend for one spec (threads: CPU threads, 0 = auto), logged; NULL
 * after one logged line. */
be_t *dev_open(const char *spec, int threads);

/* 0 when device spec can run this binary's kernels (always, but for a CUDA
 * card whose compute capability the build lacks: -1, logged in one line
 * naming it and what to rebuild with) */
int dev_runnable(const char *spec);

/* Apply --precision to a backend from dev_open and log what it computes
 * with (be->precision).  CUDA: auto = bf16 GEMM inputs and Linear weights
 * held in bf16 (be_cuda_set_precision), else fp32 or fp16; every GEMM
 * accumulates in fp32, and every other op (norms, softmax statistics,
 * attention, the structure module's geometry) is fp32.  A sim: card at
 * bf16 holds and multiplies its weights as a card at bf16 does (its GEMMs
 * round both operands to bf16 on the CPU); at auto it computes in fp32.
 * Other backends compute in fp32 only: auto and fp32 are accepted,
 * anything else is one logged line and -1.  0 otherwise.  Call it before
 * loading weights. */
int   dev_precision(be_t *be, be_prec_t prec);

/* Split a --devices list into *specs (malloc'ed array of malloc'ed
 * strings; NULL list: one NULL spec).  The count, or -1 after logging. */
int  dev_split(const char *list, char ***specs);
void dev_split_free(char **specs, int n);

/* 0 when every spec of a --devices list (NULL: the default) is cpu, cuda,
 * cuda:N or sim:SIZE and no physical device is named twice (cpu twice, or
 * one CUDA ordinal twice, "cuda" being cuda:0: each would take the whole of
 * one memory as its budget); -1 after one logged line.  sim: cards are
 * separate simulated cards: "sim:8G,sim:8G" is two of them. */
int  dev_list_check(const char *list);

/* What the CPU device may hold, weights included: cpu_memory (--cpu-memory)
 * when > 0, else 90% of sysmem_available() now: MemAvailable or the
 * cgroup limit's room, the less (call it before loading). */
int64_t dev_cpu_memory(int64_t cpu_memory);
/* Bytes the jobs on a device may hold at once (never negative).  A device
 * with mem_info: its free memory, less the weights (`weights` bytes) when
 * they are not loaded on it yet, less a card's reserve (5%, at most
 * 512 MiB; a sim: device keeps none).  The CPU: cpu_total (from
 * dev_cpu_memory) less the weights. */
int64_t dev_budget(be_t *be, const char *spec, int64_t cpu_total, int64_t weights, int loaded);

/* the largest size a sim: card or --cpu-memory may have: 1 PiB */
#define DEV_SIZE_MAX ((int64_t)1 << 50)

/* "32G" -> bytes (a number, perhaps fractional, then K, M or G); -1 when
 * malformed, not finite, negative or above DEV_SIZE_MAX */
int64_t dev_parse_size(const char *s);

#endif
