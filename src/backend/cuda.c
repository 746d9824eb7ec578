/* cuda.c - the CUDA backend: host side in C over the runtime API, cuBLAS
 * and the kernels of kernels/.
 *
 * One backend = one device, one non-blocking stream, one cuBLAS handle bound
 * to it with its own workspace, and a small device buffer for gather
 * indices.  Every entry selects the device first (workers may live on other
 * host threads) and queues its work on the stream; only download, sync and
 * the host-memory copies wait for it.  Workers may share a backend: their
 * work then runs in turn on its one stream, and the index buffer is taken
 * by one gather at a time.  Every CUDA and cuBLAS error becomes a
 * negative status with one log line: -ENOMEM for an allocation the device
 * refused (the job can be retried smaller), -EINVAL for a shape the kernels
 * do not support, -EIO otherwise.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "../kernels/kernels.h"
#include "backend/backend.h"
#include "backend/cuda.h"
#include "util/log.h"

#define BE_CUDA_BLAS_WS (32u << 20)   /* cuBLAS workspace bytes */

typedef struct {
	int                 device;
	char                name[16];     /* "cuda:N", the backend's name */
	cudaStream_t        stream;
	cublasHandle_t      blas;
	void               *blas_ws;      /* [BE_CUDA_BLAS_WS] bytes */
	int32_t            *idx;          /* [idx_cap] gather indices */
	int64_t             idx_cap;
	pthread_mutex_t     idx_lock;     /* held by the gather using idx */
	cublasComputeType_t compute;      /* of every GEMM */
} be_cuda_ctx_t;

/* a CUDA runtime result as a status, logged */
static int be_cuda_rt(cudaError_t e, const char *what)
{
	if (e == cudaSuccess) return 0;
	cudaGetLastError();   /* clear it where it is not sticky */
	log_error("cuda backend: %s: %s", what, cudaGetErrorString(e));
	return e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
}

/* a cuBLAS status as a status, logged */
static int be_cuda_blas(cublasStatus_t st, const char *what)
{
	if (st == CUBLAS_STATUS_SUCCESS) return 0;
	log_error("cuda backend: %s: %s", what, cublasGetStatusString(st));
	return st == CUBLAS_STATUS_ALLOC_FAILED ? -ENOMEM : -EIO;
}

/* a kernel launcher's status, logged */
static int be_cuda_k(int rc, const char *what)
{
	if (rc == -EINVAL) log_error("cuda backend: %s: shape not supported", what);
	else if (rc < 0) log_error("cuda backend: %s: %s", what, cu_last_error());
	return rc;
}

/* the context of be with its device made current on this thread */
static be_cuda_ctx_t *be_cuda_ctx(be_t *be)
{
	be_cuda_ctx_t *c = be->ctx;
	cudaSetDevice(c->device);
	return c;
}

static int be_cuda_alloc(be_t *be, size_t n, void **p)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	cudaError_t e = cudaMalloc(p, n ? n : 256);
	if (e != cudaSuccess) {
		*p = NULL;
		cudaGetLastError();
		if (e == cudaErrorMemoryAllocation) {
			log_warn("cuda backend: device %d: out of memory for %zu bytes", c->device, n);
			return -ENOMEM;
		}
		return be_cuda_rt(e, "cudaMalloc");
	}
	return 0;
}

static void be_cuda_free(be_t *be, void *p)
{
	be_cuda_ctx(be);
	if (p) be_cuda_rt(cudaFree(p), "cudaFree");
}

/* Host buffers are the caller's again on return: both copies wait for the
 * stream (the source of an upload may be pageable or pinned memory). */
static int be_cuda_upload(be_t *be, void *dst, const void *src, size_t n)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	int rc = be_cuda_rt(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, c->stream), "upload");
	return rc ? rc : be_cuda_rt(cudaStreamSynchronize(c->stream), "upload");
}

static int be_cuda_download(be_t *be, void *dst, const void *src, size_t n)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	int rc = be_cuda_rt(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, c->stream), "download");
	return rc ? rc : be_cuda_rt(cudaStreamSynchronize(c->stream), "download");
}

/* the device's free and total bytes, as the driver reports them */
static int be_cuda_mem_info(be_t *be, size_t *fr, size_t *total)
{
	be_cuda_ctx(be);
	return be_cuda_rt(cudaMemGetInfo(fr, total), "cudaMemGetInfo");
}

static int be_cuda_sync(be_t *be)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	return be_cuda_rt(cudaStreamSynchronize(c->stream), "sync");
}

/* *ct = the cuBLAS compute type of a GEMM asking for prec (BE_PREC_AUTO:
 * the backend's); -1 for a prec that names none */
static int be_cuda_compute(const be_cuda_ctx_t *c, be_prec_t prec, cublasComputeType_t *ct)
{
	switch (prec) {
	case BE_PREC_AUTO: *ct = c->compute; return 0;
	case BE_PREC_FP32: *ct = CUBLAS_COMPUTE_32F; return 0;
	case BE_PREC_BF16: *ct = CUBLAS_COMPUTE_32F_FAST_16BF; return 0;
	case BE_PREC_FP16: *ct = CUBLAS_COMPUTE_32F_FAST_16F; return 0;
	default: return -1;
	}
}

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the
 * operands swap, the transpose flags stay, m and n swap.  The compute type
 * is the backend's unless g->prec names one. */
static int be_cuda_gemm(be_t *be, const be_gemm_t *g)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	cublasComputeType_t ct;
	float beta = g->beta;
	int rc;

	if (be_cuda_compute(c, g->prec, &ct) < 0) {
		log_error("cuda backend: gemm: no precision %d", (int)g->prec);
		return -EINVAL;
	}
	if (g->batch <= 0 || g->m <= 0 || g->n <= 0) return 0;
	if (g->lda > INT_MAX || g->ldb > INT_MAX || g->ldc > INT_MAX) {
		log_error("cuda backend: gemm: leading dimension over INT_MAX");
		return -EINVAL;
	}
	if (g->bias) {
		rc = be_cuda_k(cu_gemm_prologue(c->stream, g->c, g->ldc, g->stride_c, g->batch,
		                                g->m, g->n, beta, g->bias), "gemm bias");
		if (rc) return rc;
		beta = 1.0f;
	}
	return be_cuda_blas(cublasGemmStridedBatchedEx(c->blas,
		g->transb ? CUBLAS_OP_T : CUBLAS_OP_N, g->transa ? CUBLAS_OP_T : CUBLAS_OP_N,
		g->n, g->m, g->k, &g->alpha,
		g->b, CUDA_R_32F, (int)g->ldb, g->stride_b,
		g->a, CUDA_R_32F, (int)g->lda, g->stride_a,
		&beta, g->c, CUDA_R_32F, (int)g->ldc, g->stride_c,
		g->batch, ct, CUBLAS_GEMM_DEFAULT), "gemm");
}

static int be_cuda_attn(be_t *be, const be_attn_t *a)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	if (a->D > CU_ATTN_DMAX)
		log_error("cuda backend: attention: head dimension %d over %d", a->D, CU_ATTN_DMAX);
	return be_cuda_k(cu_attn(c->stream, a), "attention");
}

static int be_cuda_layernorm(be_t *be, float *y, const float *x, int64_t rows, int d,
                             const float *w, const float *b, float eps)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	return be_cuda_k(cu_layernorm(c->stream, y, x, rows, d, w, b, eps), "layernorm");
}

static int be_cuda_softmax(be_t *be, float *x, int64_t rows, int d)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	return be_cuda_k(cu_softmax(c->stream, x, rows, d), "softmax");
}

static int be_cuda_act(be_t *be, float *x, int64_t n, be_act_t kind)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	return be_cuda_k(cu_act(c->stream, x, n, kind), "act");
}

static int be_cuda_binary(be_t *be, float *y, const float *a, const float *b, int64_t n,
                          be_bin_t kind)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	return be_cuda_k(cu_binary(c->stream, y, a, b, n, kind), "binary");
}

static int be_cuda_axpby(be_t *be, float *y, const float *x, int64_t n, float alpha, float beta)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	return be_cuda_k(cu_axpby(c->stream, y, x, n, alpha, beta), "axpby");
}

static int be_cuda_fill(be_t *be, float *x, int64_t n, float value)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	return be_cuda_k(cu_fill(c->stream, x, n, value), "fill");
}

/* idx is host memory: it goes through c->idx (grown as needed), and the
 * stream is waited for so that the caller may reuse idx on return, and the
 * next gather c->idx */
static int be_cuda_gather(be_t *be, float *y, const float *table, const int32_t *idx,
                          int64_t rows, int d, float scale)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	int rc = 0;

	if (rows <= 0) return rows < 0 ? -EINVAL : 0;
	pthread_mutex_lock(&c->idx_lock);
	if (rows > c->idx_cap) {
		int64_t cap = rows > 2 * c->idx_cap ? rows : 2 * c->idx_cap;
		void *p;
		if (!(rc = be_cuda_rt(cudaStreamSynchronize(c->stream), "gather")) &&
		    !(rc = be_cuda_alloc(be, sizeof(int32_t) * (size_t)cap, &p))) {
			if (c->idx) cudaFree(c->idx);
			c->idx = p;
			c->idx_cap = cap;
		}
	}
	if (!rc) rc = be_cuda_rt(cudaMemcpyAsync(c->idx, idx, sizeof(int32_t) * (size_t)rows,
	                                         cudaMemcpyHostToDevice, c->stream), "gather indices");
	if (!rc) rc = be_cuda_k(cu_gather(c->stream, y, table, c->idx, rows, d, scale), "gather");
	if (!rc) rc = be_cuda_rt(cudaStreamSynchronize(c->stream), "gather");
	pthread_mutex_unlock(&c->idx_lock);
	return rc;
}

static int be_cuda_transpose(be_t *be, float *y, const float *x, int64_t A, int64_t B, int64_t C)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	return be_cuda_k(cu_transpose(c->stream, y, x, A, B, C), "transpose");
}

static int be_cuda_transpose_inplace(be_t *be, float *x, int64_t A, int64_t C)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	return be_cuda_k(cu_transpose_inplace(c->stream, x, A, C), "transpose in place");
}

static int be_cuda_rotary(be_t *be, float *x, int T, int H, int D, const float *inv_freq)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	return be_cuda_k(cu_rotary(c->stream, x, T, H, D, inv_freq), "rotary");
}

static int be_cuda_outer(be_t *be, float *y, const float *q, const float *k, int i0, int ni,
                         int L, int ch)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	return be_cuda_k(cu_outer(c->stream, y, q, k, i0, ni, L, ch), "outer");
}

/* the resources of c that exist, in reverse order of creation */
static void be_cuda_release(be_cuda_ctx_t *c)
{
	cudaSetDevice(c->device);
	if (c->stream) cudaStreamSynchronize(c->stream);
	if (c->blas) cublasDestroy(c->blas);
	if (c->blas_ws) cudaFree(c->blas_ws);
	if (c->idx) cudaFree(c->idx);
	if (c->stream) cudaStreamDestroy(c->stream);
	cudaGetLastError();
	pthread_mutex_destroy(&c->idx_lock);
	free(c);
}

static void be_cuda_destroy(be_t *be)
{
	be_cuda_release(be->ctx);
	free(be);
}

/* one more worker on the parent's device: own stream, cuBLAS handle and
 * workspace, the parent's GEMM precision */
static be_t *be_cuda_worker(be_t *parent)
{
	be_cuda_ctx_t *pc = parent->ctx;
	be_t *be = be_cuda_init(pc->device);

	if (be) {
		((be_cuda_ctx_t *)be->ctx)->compute = pc->compute;
		be->precision = parent->precision;
	}
	return be;
}

int be_cuda_set_precision(be_t *be, be_cuda_prec_t prec)
{
	if (!be || be->destroy != be_cuda_destroy) return -EINVAL;
	be_cuda_ctx_t *c = be->ctx;
	switch (prec) {
	case BE_CUDA_FP32: c->compute = CUBLAS_COMPUTE_32F; be->precision = "fp32"; break;
	case BE_CUDA_TF32: c->compute = CUBLAS_COMPUTE_32F_FAST_TF32; be->precision = "tf32"; break;
	case BE_CUDA_BF16: c->compute = CUBLAS_COMPUTE_32F_FAST_16BF; be->precision = "bf16"; break;
	case BE_CUDA_FP16: c->compute = CUBLAS_COMPUTE_32F_FAST_16F; be->precision = "fp16"; break;
	default: return -EINVAL;
	}
	return 0;
}

int be_cuda_count(void)
{
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess) {
		cudaGetLastError();   /* no driver or no device: not an error here */
		return 0;
	}
	return n;
}

be_t *be_cuda_init(int device)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	struct cudaDeviceProp prop;
	be_cuda_ctx_t *c;
	be_t *be;

	if (e != cudaSuccess || n == 0) {
		cudaGetLastError();
		log_info("cuda backend: no CUDA device (%s)",
		         e != cudaSuccess ? cudaGetErrorString(e) : "none found");
		return NULL;
	}
	if (device < 0 || device >= n) {
		log_error("cuda backend: no device %d (%d present)", device, n);
		return NULL;
	}
	if (!(c = calloc(1, sizeof *c)) || !(be = calloc(1, sizeof *be))) {
		free(c);
		log_error("cuda backend: out of memory");
		return NULL;
	}
	c->device = device;
	snprintf(c->name, sizeof c->name, "cuda:%d", device);
	c->compute = CUBLAS_COMPUTE_32F;
	pthread_mutex_init(&c->idx_lock, NULL);
	if (be_cuda_rt(cudaSetDevice(device), "cudaSetDevice") ||
	    be_cuda_rt(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties") ||
	    be_cuda_rt(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "stream") ||
	    be_cuda_blas(cublasCreate(&c->blas), "cublasCreate") ||
	    be_cuda_blas(cublasSetStream(c->blas, c->stream), "cublasSetStream") ||
	    be_cuda_rt(cudaMalloc(&c->blas_ws, BE_CUDA_BLAS_WS), "cuBLAS workspace") ||
	    /* after cublasSetStream, which resets the workspace */
	    be_cuda_blas(cublasSetWorkspace(c->blas, c->blas_ws, BE_CUDA_BLAS_WS), "cublasSetWorkspace")) {
		be_cuda_release(c);
		free(be);
		return NULL;
	}
	*be = (be_t){
		.name = c->name, .precision = "fp32", .ctx = c, .destroy = be_cuda_destroy,
		.workspace = BE_CUDA_BLAS_WS,
		.worker = be_cuda_worker,
		.alloc = be_cuda_alloc, .free = be_cuda_free, .upload = be_cuda_upload,
		.download = be_cuda_download, .sync = be_cuda_sync, .mem_info = be_cuda_mem_info,
		.gemm = be_cuda_gemm,
		.attn = be_cuda_attn, .layernorm = be_cuda_layernorm, .softmax = be_cuda_softmax,
		.act = be_cuda_act, .binary = be_cuda_binary, .axpby = be_cuda_axpby,
		.fill = be_cuda_fill, .gather = be_cuda_gather, .transpose = be_cuda_transpose,
		.transpose_inplace = be_cuda_transpose_inplace, .rotary = be_cuda_rotary, .outer = be_cuda_outer,
	};
	log_info("cuda backend: device %d, %s, %.1f GiB, sm_%d%d", device, prop.name,
	         prop.totalGlobalMem / 1073741824.0, prop.major, prop.minor);
	return be;
}
