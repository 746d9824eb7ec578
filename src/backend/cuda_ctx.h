/* cuda_ctx.h (prefix be_cuda_) - what the CUDA backend's two files share:
 * its workspace sizes, its per-device context and the calls that turn a
 * CUDA, cuBLAS or kernel failure into a logged status.  cuda.c holds the
 * device, memory, copies, kernel launches and graphs; cuda_blas.c the
 * products on cuBLAS and cuBLASLt.  Private to them: nothing else
 * includes it. */
#ifndef ESMBATCH_BACKEND_CUDA_CTX_H
#define ESMBATCH_BACKEND_CUDA_CTX_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "backend/backend.h"

#define BE_CUDA_BLAS_WS (32u << 20)   /* cuBLAS workspace bytes */
#define BE_CUDA_IDX_ROWS (1 << 16)     /* gather indices a worker holds at once (256 KiB) */
#define BE_CUDA_STAGE (8 << 20)        /* bf16 elements of a GEMM operand staged at once (16 MiB) */
#define BE_CUDA_PIN (2u << 20)         /* bytes of each pinned staging half (host memory) */
/* a worker's one allocation outside the arenas (be->workspace): the cuBLAS
 * workspace, the gather indices, then the bf16 stage (where the weights
 * are bf16: be->weights_bf16) */
#define BE_CUDA_WS_F32 (BE_CUDA_BLAS_WS + sizeof(int32_t) * BE_CUDA_IDX_ROWS)
#define BE_CUDA_WS_BF16 (BE_CUDA_WS_F32 + sizeof(uint16_t) * BE_CUDA_STAGE)

/* one pinned staging half: host data on its way to the device */
typedef struct {
	void       *buf;    /* [BE_CUDA_PIN] bytes of pinned host memory */
	cudaEvent_t done;   /* recorded after the last copy out of buf */
} be_cuda_pin_t;

typedef struct {
	int                 device;
	char                name[16];     /* "cuda:N", the backend's name */
	char                numerics[320]; /* be->numerics: arch, card, kernels'
	                                      revision, runtime, cuBLAS */
	cudaStream_t        stream;
	cudaStream_t        copy;         /* fetches (be->fetch) */
	cudaEvent_t         fetch_from;   /* on stream: where the last fetch starts */
	cudaEvent_t         fetched;      /* on copy: after the last fetch */
	cublasHandle_t      blas;
	cublasLtHandle_t    lt;           /* products with an epilogue (be_cuda_lt) */
	atomic_int          lt_refused;   /* 1: cuBLASLt had no algo once (logged) */
	void               *ws;           /* [be->workspace] bytes: cuBLAS's, idx, stage */
	int32_t            *idx;          /* [BE_CUDA_IDX_ROWS] gather indices, in ws */
	pthread_mutex_t     idx_lock;     /* held by the gather using idx */
	uint16_t           *stage;        /* [BE_CUDA_STAGE] bf16 operand, in ws; NULL
	                                     where the weights are fp32 */
	pthread_mutex_t     stage_lock;   /* held by the GEMM using stage */
	be_cuda_pin_t       pin[2];       /* used in turn, pin_next first */
	int                 pin_next;
	pthread_mutex_t     pin_lock;     /* held by the op filling a half */
	cublasComputeType_t compute;      /* of every GEMM of fp32 operands */
	int                 recording;    /* between graph_begin and graph_end */
	atomic_int          shared;       /* 1: a worker could not be made and shares
	                                     this backend's stream: no graphs (a
	                                     capture would take in the other
	                                     thread's work) */
} be_cuda_ctx_t;

/* the context of be with its device made current on this thread */
be_cuda_ctx_t *be_cuda_ctx(be_t *be);

/* a cuBLAS status on c's device as a status, logged; a failure through a
 * sticky error of the device is that error's */
int be_cuda_blas(const be_cuda_ctx_t *c, cublasStatus_t st, const char *what);

/* a kernel launcher's status on c's device, logged */
int be_cuda_k(const be_cuda_ctx_t *c, int rc, const char *what);

/* the backend's gemm and transition ops (cuda_blas.c) */
int be_cuda_gemm(be_t *be, const be_gemm_t *g);
int be_cuda_transition(be_t *be, const be_transition_t *t);

#endif
