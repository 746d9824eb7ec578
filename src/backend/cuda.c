/* cuda.c - the CUDA backend: host side in C over the runtime API, cuBLAS,
 * cuBLASLt (products with a bias or ReLU epilogue: the bf16-weight GEMMs,
 * the sequence transition's) and the kernels of kernels/.  This file: the
 * device, memory, copies, kernel launches and graphs; the products (the
 * gemm and transition ops): cuda_blas.c; what both share: cuda_ctx.h.
 *
 * One backend = one device, one non-blocking stream, one cuBLAS handle
 * bound to it, one cuBLASLt handle, and one workspace allocation
 * (be->workspace, counted in every quota): the cuBLAS workspace (cuBLASLt's
 * too), a fixed device buffer for gather indices and, at bf16, the stage a
 * GEMM rounds its activation operand into when the other is a bf16 weight
 * (be->weights_bf16: the Linear matrices are held in bf16, shared by the
 * device's workers), which the bf16 sequence transition also holds its
 * bias, normed rows and hidden layer in.  Every entry makes the device
 * current first (workers may live on other host threads; a host
 * thread remembers its current device, so that this costs a runtime call
 * only when the thread changes devices) and queues its work on the
 * stream; only download and sync wait for it.  Host data travels through
 * two pinned staging halves of the backend's (BE_CUDA_PIN bytes each, in
 * turn, each with the event of its last copy): an upload or a gather's
 * indices are copied into a half on the host and queued from there, so
 * the caller has its buffer back at once and the host never waits for the
 * stream, only, when both halves are in flight, for the older copy.
 * Weights held in host memory (be->host_alloc: pinned, portable) are
 * fetched on a copy stream of the backend's own: a fetch waits, by an
 * event recorded on the stream, for the work queued before it, and the
 * stream waits for the fetches, by an event recorded after the last
 * copy, only at fetch_wait.
 * Workers may share a backend: their work then runs in turn on
 * its one stream, and the staging halves, the index buffer and the stage
 * are each taken by one op at a time.  Every CUDA and cuBLAS error becomes a
 * negative status with one log line: -ENOMEM for an allocation the device
 * refused (the job can be retried smaller), -EINVAL for a shape the kernels
 * do not support, STATUS_DEVICE for a sticky error (an illegal address, a
 * launch failure: the device's context is lost, logged once per device,
 * and every later call on it returns STATUS_DEVICE too), -EIO otherwise.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#include "backend/cuda.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "../kernels/kernels.h"
#include "util/log.h"
#include "util/status.h"
#include "backend/backend.h"
#include "backend/cuda_ctx.h"

/* the devices a sticky error has poisoned, so that the error is logged
 * once per device and not by every later call */
#define BE_CUDA_MAX_DEVICES 64
static atomic_int be_cuda_gone[BE_CUDA_MAX_DEVICES];

/* 1: e is a sticky error: the device's context is unusable for the rest of
 * the process (every later call on it returns the same error).
 * cudaErrorUnknown (999) is what some virtualised drivers return for a
 * dead context: retiring the device is safe, retrying it is not. */
static int be_cuda_sticky(cudaError_t e)
{
	switch (e) {
	case cudaErrorIllegalAddress: case cudaErrorLaunchFailure: case cudaErrorLaunchTimeout:
	case cudaErrorHardwareStackError: case cudaErrorIllegalInstruction:
	case cudaErrorMisalignedAddress: case cudaErrorInvalidAddressSpace: case cudaErrorInvalidPc:
	case cudaErrorAssert: case cudaErrorECCUncorrectable: case cudaErrorUnknown:
		return 1;
	default:
		return 0;
	}
}

/* device d lost its context through e: STATUS_DEVICE, logged the first
 * time only */
static int be_cuda_lose(int d, cudaError_t e, const char *what)
{
	if (d >= 0 && d < BE_CUDA_MAX_DEVICES && atomic_exchange(&be_cuda_gone[d], 1)) return STATUS_DEVICE;
	log_error("cuda:%d: %s: %s, a sticky error: the device's context is lost", d, what,
	          cudaGetErrorString(e));
	return STATUS_DEVICE;
}

/* a CUDA runtime result on c's device as a status, logged */
static int be_cuda_rt(const be_cuda_ctx_t *c, cudaError_t e, const char *what)
{
	if (e == cudaSuccess) return 0;
	if (be_cuda_sticky(e)) return be_cuda_lose(c->device, e, what);
	cudaGetLastError();   /* clear it: it is not sticky */
	log_error("cuda:%d: %s: %s", c->device, what, cudaGetErrorString(e));
	return e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
}

int be_cuda_blas(const be_cuda_ctx_t *c, cublasStatus_t st, const char *what)
{
	cudaError_t e;

	if (st == CUBLAS_STATUS_SUCCESS) return 0;
	if (be_cuda_sticky(e = cudaGetLastError())) return be_cuda_lose(c->device, e, what);
	log_error("cuda:%d: %s: %s", c->device, what, cublasGetStatusString(st));
	return st == CUBLAS_STATUS_ALLOC_FAILED ? -ENOMEM : -EIO;
}

int be_cuda_k(const be_cuda_ctx_t *c, int rc, const char *what)
{
	cudaError_t e;

	if (rc == -EINVAL) log_error("cuda:%d: %s: shape not supported", c->device, what);
	else if (rc < 0 && be_cuda_sticky(e = cudaGetLastError())) return be_cuda_lose(c->device, e, what);
	else if (rc < 0) log_error("cuda:%d: %s: %s", c->device, what, cu_last_error());
	return rc;
}

/* the device this host thread made current through be_cuda_use, -1
 * before its first (every cudaSetDevice of the program is there) */
static _Thread_local int be_cuda_current = -1;

/* device made current on this thread; a runtime call only when it changes */
static cudaError_t be_cuda_use(int device)
{
	if (device == be_cuda_current) return cudaSuccess;
	cudaError_t e = cudaSetDevice(device);
	be_cuda_current = e == cudaSuccess ? device : -1;
	return e;
}

be_cuda_ctx_t *be_cuda_ctx(be_t *be)
{
	be_cuda_ctx_t *c = be->ctx;
	be_cuda_use(c->device);
	return c;
}

/* 0, or -EBUSY (logged) while c records a graph: what would wait for
 * the stream, allocate, or queue a copy out of the staging halves (which a
 * replay would read as they are then, not as they were) is refused */
static int be_cuda_idle(const be_cuda_ctx_t *c, const char *what)
{
	if (!c->recording) return 0;
	log_error("cuda:%d: %s while recording a CUDA graph: refused (a recording holds no host "
	          "copies, waits or allocations)", c->device, what);
	return -EBUSY;
}

/* n <= BE_CUDA_PIN bytes of host src queued for device dst through the
 * next staging half, once the copy that last used it has run; the
 * caller holds c->pin_lock */
static int be_cuda_put(be_cuda_ctx_t *c, void *dst, const void *src, size_t n, const char *what)
{
	be_cuda_pin_t *h = &c->pin[c->pin_next];
	int rc = be_cuda_rt(c, cudaEventSynchronize(h->done), what);

	if (rc) return rc;
	c->pin_next ^= 1;
	memcpy(h->buf, src, n);
	if ((rc = be_cuda_rt(c, cudaMemcpyAsync(dst, h->buf, n, cudaMemcpyHostToDevice, c->stream), what)))
		return rc;
	return be_cuda_rt(c, cudaEventRecord(h->done, c->stream), what);
}

static int be_cuda_alloc(be_t *be, size_t n, void **p)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	if (be_cuda_idle(c, "alloc")) {
		*p = NULL;
		return -EBUSY;
	}
	cudaError_t e = cudaMalloc(p, n ? n : 256);
	if (e != cudaSuccess) {
		*p = NULL;
		if (e == cudaErrorMemoryAllocation) {
			cudaGetLastError();
			log_warn("cuda:%d: out of memory for %zu bytes", c->device, n);
			return -ENOMEM;
		}
		return be_cuda_rt(c, e, "cudaMalloc");
	}
	return 0;
}

static void be_cuda_free(be_t *be, void *p)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	if (p && !be_cuda_idle(c, "free")) be_cuda_rt(c, cudaFree(p), "cudaFree");
}

/* Host buffers are the caller's again on return: an upload is staged
 * through the pinned halves (no wait for the stream), a download waits
 * for it (the host needs the data). */
static int be_cuda_upload(be_t *be, void *dst, const void *src, size_t n)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	int rc = be_cuda_idle(c, "upload");

	if (rc) return rc;
	pthread_mutex_lock(&c->pin_lock);
	for (size_t o = 0; o < n && !rc; o += BE_CUDA_PIN)
		rc = be_cuda_put(c, (char *)dst + o, (const char *)src + o,
		                 n - o < BE_CUDA_PIN ? n - o : BE_CUDA_PIN, "upload");
	pthread_mutex_unlock(&c->pin_lock);
	return rc;
}

static int be_cuda_download(be_t *be, void *dst, const void *src, size_t n)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	int rc = be_cuda_idle(c, "download");
	if (rc) return rc;
	rc = be_cuda_rt(c, cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, c->stream), "download");
	return rc ? rc : be_cuda_rt(c, cudaStreamSynchronize(c->stream), "download");
}

/* n bytes of pinned host memory, portable: every device fetches from it */
static int be_cuda_host_alloc(be_t *be, size_t n, void **p)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	int rc = be_cuda_rt(c, cudaHostAlloc(p, n ? n : 1, cudaHostAllocPortable), "pinned host memory");

	if (rc) *p = NULL;
	return rc;
}

static void be_cuda_host_free(be_t *be, void *p)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	if (p) be_cuda_rt(c, cudaFreeHost(p), "cudaFreeHost");
}

/* n bytes of pinned host src into device dst on the copy stream, after
 * the work queued on the stream so far */
static int be_cuda_fetch(be_t *be, void *dst, const void *src, size_t n)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	int rc = be_cuda_idle(c, "fetch");

	if (rc || (rc = be_cuda_rt(c, cudaEventRecord(c->fetch_from, c->stream), "fetch")) ||
	    (rc = be_cuda_rt(c, cudaStreamWaitEvent(c->copy, c->fetch_from, 0), "fetch")) ||
	    (rc = be_cuda_rt(c, cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, c->copy), "fetch")))
		return rc;
	return be_cuda_rt(c, cudaEventRecord(c->fetched, c->copy), "fetch");
}

/* the stream's later work after every fetch so far (the copy stream runs
 * them in order: the last one's event covers them all) */
static int be_cuda_fetch_wait(be_t *be)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	int rc = be_cuda_idle(c, "fetch_wait");
	return rc ? rc : be_cuda_rt(c, cudaStreamWaitEvent(c->stream, c->fetched, 0), "fetch_wait");
}

/* the device's free and total bytes, as the driver reports them */
static int be_cuda_mem_info(be_t *be, size_t *fr, size_t *total)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	return be_cuda_rt(c, cudaMemGetInfo(fr, total), "cudaMemGetInfo");
}

/* the stream's work and the fetches done (a pass that failed between a
 * fetch and its fetch_wait leaves no copy writing into its arena) */
static int be_cuda_sync(be_t *be)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	int rc = be_cuda_idle(c, "sync") ? -EBUSY : be_cuda_rt(c, cudaStreamSynchronize(c->stream), "sync");
	return rc ? rc : be_cuda_rt(c, cudaStreamSynchronize(c->copy), "sync");
}

/* the be_prec_t a CUDA backend computes with (never auto) */
static be_prec_t be_cuda_prec(const be_t *be)
{
	const be_cuda_ctx_t *c = be->ctx;
	return c->compute == CUBLAS_COMPUTE_32F_FAST_16BF ? BE_PREC_BF16 :
	       c->compute == CUBLAS_COMPUTE_32F_FAST_16F ? BE_PREC_FP16 : BE_PREC_FP32;
}

static int be_cuda_attn(be_t *be, const be_attn_t *a)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	/* at bf16, on the tensor cores where the head fits */
	if (be_cuda_prec(be) == BE_PREC_BF16 && a->D <= CU_FLASH_DMAX)
		return be_cuda_k(c, cu_flash_attn(c->stream, a), "attention (bf16)");
	if (a->D > CU_ATTN_DMAX)
		log_error("cuda backend: attention: head dimension %d over %d", a->D, CU_ATTN_DMAX);
	return be_cuda_k(c, cu_attn(c->stream, a), "attention");
}

/* on the tensor cores at bf16, in fp32 otherwise */
static int be_cuda_trimul_out(be_t *be, const be_trimul_out_t *t)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	if (t->c > CU_TRIMUL_OUT_CMAX)
		log_error("cuda backend: trimul_out: %d channels over %d", t->c, CU_TRIMUL_OUT_CMAX);
	return be_cuda_k(c, cu_trimul_out(c->stream, t, be_cuda_prec(be) == BE_PREC_BF16), "trimul_out");
}

/* idx is host memory: it goes through a staging half into c->idx,
 * BE_CUDA_IDX_ROWS rows at a time (the stream runs each slice's copy after
 * the previous slice's kernel, so the buffer is never grown: no
 * allocation during a fold); staged, idx is the caller's again on return
 * without a wait for the stream */
static int be_cuda_gather(be_t *be, const be_gather_t *p)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	float *y = p->y, scale = p->scale;
	const float *table = p->table;
	const int32_t *idx = p->idx;
	int64_t rows = p->rows;
	int d = p->d, rc = 0;

	if (rows <= 0) return rows < 0 ? -EINVAL : 0;
	if (be_cuda_idle(c, "gather")) return -EBUSY;
	pthread_mutex_lock(&c->idx_lock);
	pthread_mutex_lock(&c->pin_lock);
	for (int64_t r0 = 0; r0 < rows && !rc; r0 += BE_CUDA_IDX_ROWS) {
		int64_t n = rows - r0 < BE_CUDA_IDX_ROWS ? rows - r0 : BE_CUDA_IDX_ROWS;
		rc = be_cuda_put(c, c->idx, idx + r0, sizeof(int32_t) * (size_t)n, "gather indices");
		if (!rc) rc = be_cuda_k(c, cu_gather(c->stream, y + r0 * d, table, c->idx, n, d, scale),
		                        "gather");
	}
	pthread_mutex_unlock(&c->pin_lock);
	pthread_mutex_unlock(&c->idx_lock);
	return rc;
}

/* The ops that are one kernel launch each: be_cuda_<slot>(be, p) makes
 * the device current and returns the launch `call` (on c, the context,
 * with p, the op's parameters), its failure logged under the slot's name. */
#define BE_CUDA_LAUNCH(slot, params, call)                 \
	static int be_cuda_##slot(be_t *be, const params *p) \
	{                                                    \
		be_cuda_ctx_t *c = be_cuda_ctx(be);          \
		return be_cuda_k(c, call, #slot);            \
	}
BE_CUDA_LAUNCH(layernorm, be_layernorm_t, cu_layernorm(c->stream, p->y, p->x, p->rows, p->d, p->w, p->b, p->eps))
BE_CUDA_LAUNCH(softmax, be_softmax_t, cu_softmax(c->stream, p->x, p->rows, p->d))
BE_CUDA_LAUNCH(act, be_unary_t, cu_act(c->stream, p->x, p->n, p->kind))
BE_CUDA_LAUNCH(binary, be_binary_t, cu_binary(c->stream, p->y, p->a, p->b, p->n, p->kind))
BE_CUDA_LAUNCH(axpby, be_axpby_t, cu_axpby(c->stream, p->y, p->x, p->n, p->alpha, p->beta))
BE_CUDA_LAUNCH(fill, be_fill_t, cu_fill(c->stream, p->x, p->n, p->value))
BE_CUDA_LAUNCH(transpose, be_transpose_t, cu_transpose(c->stream, p->y, p->x, p->A, p->B, p->C))
BE_CUDA_LAUNCH(outer, be_outer_t, cu_outer(c->stream, p->y, p->q, p->k, p->i0, p->ni, p->L, p->c, p->bf16))
BE_CUDA_LAUNCH(ipa_in, be_ipa_in_t, cu_ipa_in(c->stream, p->qa, p->ka, p->vp, p->rig, p->state, p->qp,
                                              p->kvp, p->hw, p->bb, p->L, p->H, p->Pq, p->Pv))
BE_CUDA_LAUNCH(ipa_out, be_ipa_out_t, cu_ipa_out(c->stream, p->cat, p->ldc, p->op, p->rig, p->L, p->n_pts, p->eps))
BE_CUDA_LAUNCH(ipa_rigid, be_ipa_rigid_t, cu_ipa_rigid(c->stream, p->state, p->frame, p->upd, p->L, p->scale))
BE_CUDA_LAUNCH(relpos, be_relpos_t, cu_relpos(c->stream, p->z, p->table, p->residx, p->i0, p->ni, p->L, p->c,
                                              p->bins))
BE_CUDA_LAUNCH(ln_linear, be_ln_linear_t, cu_ln_linear(c->stream, p))
#undef BE_CUDA_LAUNCH

/* no direct triangle product: the trunk batches GEMMs instead (a NULL
 * slot, be_supports(be, BE_OP_TRIMUL) 0) */
#define be_cuda_trimul NULL

/* --- CUDA graphs: the stream captured (cuBLAS is capturable: its
 * workspace is set, be_cuda_workspace), instantiated at the end --- */

static int be_cuda_graph_begin(be_t *be)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	int rc = be_cuda_idle(c, "graph_begin");

	if (!rc && atomic_load(&c->shared)) return -EAGAIN;   /* not logged: the step runs unrecorded */
	if (rc || (rc = be_cuda_rt(c, cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal),
	                           "cudaStreamBeginCapture")))
		return rc;
	c->recording = 1;
	return 0;
}

/* ends the capture whatever came before (a failed op included) */
static int be_cuda_graph_end(be_t *be, void **g)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	cudaGraph_t graph = NULL;
	cudaGraphExec_t x = NULL;
	int rc;

	*g = NULL;
	if (!c->recording) return -EINVAL;
	c->recording = 0;
	rc = be_cuda_rt(c, cudaStreamEndCapture(c->stream, &graph), "cudaStreamEndCapture");
	if (!rc) rc = be_cuda_rt(c, cudaGraphInstantiate(&x, graph, 0), "cudaGraphInstantiate");
	if (graph) cudaGraphDestroy(graph);
	*g = rc ? NULL : x;
	return rc;
}

static int be_cuda_graph_run(be_t *be, void *g)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	int rc = be_cuda_idle(c, "graph_run");
	return rc ? rc : be_cuda_rt(c, cudaGraphLaunch((cudaGraphExec_t)g, c->stream), "cudaGraphLaunch");
}

static void be_cuda_graph_free(be_t *be, void *g)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	if (g) be_cuda_rt(c, cudaGraphExecDestroy((cudaGraphExec_t)g), "cudaGraphExecDestroy");
}

/* the resources of c that exist, in reverse order of creation */
static void be_cuda_release(be_cuda_ctx_t *c)
{
	be_cuda_use(c->device);
	if (c->stream) cudaStreamSynchronize(c->stream);
	if (c->copy) cudaStreamSynchronize(c->copy);
	if (c->fetch_from) cudaEventDestroy(c->fetch_from);
	if (c->fetched) cudaEventDestroy(c->fetched);
	for (int i = 0; i < 2; i++) {
		if (c->pin[i].done) cudaEventDestroy(c->pin[i].done);
		if (c->pin[i].buf) cudaFreeHost(c->pin[i].buf);
	}
	if (c->blas) cublasDestroy(c->blas);
	if (c->lt) cublasLtDestroy(c->lt);
	if (c->ws) cudaFree(c->ws);
	if (c->copy) cudaStreamDestroy(c->copy);
	if (c->stream) cudaStreamDestroy(c->stream);
	cudaGetLastError();
	pthread_mutex_destroy(&c->idx_lock);
	pthread_mutex_destroy(&c->stage_lock);
	pthread_mutex_destroy(&c->pin_lock);
	free(c);
}

static void be_cuda_destroy(be_t *be)
{
	be_cuda_release(be->ctx);
	free(be);
}

/* be's workspace for GEMM precision prec (a be_prec_t other than auto),
 * replacing the one it has when its size differs: the cuBLAS workspace, the gather indices and,
 * at bf16 (weight matrices in bf16), the bf16 stage; be's precision,
 * weights_bf16 and workspace follow.  0 or negative, logged. */
static int be_cuda_workspace(be_t *be, be_prec_t prec)
{
	be_cuda_ctx_t *c = be->ctx;
	int bf16 = prec == BE_PREC_BF16, rc;
	size_t n = bf16 ? BE_CUDA_WS_BF16 : BE_CUDA_WS_F32;

	if (c->ws && n == be->workspace) return 0;
	if (be_cuda_idle(c, "workspace")) return -EBUSY;
	if (c->ws) {
		if ((rc = be_cuda_rt(c, cudaStreamSynchronize(c->stream), "workspace"))) return rc;
		cudaFree(c->ws);
		c->ws = NULL;
		be->workspace = 0;
	}
	if ((rc = be_cuda_rt(c, cudaMalloc(&c->ws, n), "workspace")) ||
	    (rc = be_cuda_blas(c, cublasSetWorkspace(c->blas, c->ws, BE_CUDA_BLAS_WS), "cublasSetWorkspace")))
		return rc;
	c->idx = (int32_t *)((char *)c->ws + BE_CUDA_BLAS_WS);
	c->stage = bf16 ? (uint16_t *)((char *)c->ws + BE_CUDA_WS_F32) : NULL;
	be->workspace = n;
	be->weights_bf16 = bf16;
	return 0;
}

/* be's GEMM precision prec, its workspace following (be_cuda_workspace) */
static int be_cuda_prec_set(be_t *be, be_prec_t prec)
{
	be_cuda_ctx_t *c = be->ctx;

	switch (prec) {
	case BE_PREC_AUTO: /* fall through: bf16 */
	case BE_PREC_BF16: prec = BE_PREC_BF16; c->compute = CUBLAS_COMPUTE_32F_FAST_16BF; break;
	case BE_PREC_FP16: c->compute = CUBLAS_COMPUTE_32F_FAST_16F; break;
	case BE_PREC_FP32: c->compute = CUBLAS_COMPUTE_32F; break;
	default: return -EINVAL;
	}
	be->precision = be_prec_name(prec);
	return be_cuda_workspace(be, prec);
}

int be_cuda_set_precision(be_t *be, be_prec_t prec)
{
	if (!be || be->destroy != be_cuda_destroy) return -EINVAL;
	return be_cuda_prec_set(be, prec);
}

static be_t *be_cuda_open(int device, struct cudaDeviceProp *prop, be_prec_t prec);

/* one more worker on the parent's device: own stream, cuBLAS handle and
 * workspace, the parent's GEMM precision and weights, whose uploads (queued
 * on the parent's stream) are waited for first: the worker's stream is
 * not ordered after the parent's */
static be_t *be_cuda_worker(be_t *parent)
{
	be_cuda_ctx_t *pc = parent->ctx;
	be_t *be = be_cuda_sync(parent) ? NULL : be_cuda_open(pc->device, NULL, be_cuda_prec(parent));

	if (!be) atomic_store(&pc->shared, 1);   /* the caller shares parent's stream */
	return be;
}

/* 1 when kernels built for the architectures archs ("80,86,90", PTX of
 * ptx) run on a card of compute capability cc (10 * major + minor): a
 * cubin runs on its own major version at the same or a higher minor, PTX
 * is compiled at load time for its own or any newer card */
static int be_cuda_arch_runs(int cc, const char *archs, int ptx)
{
	const char *p = archs;

	if (ptx > 0 && cc >= ptx) return 1;
	while (p && *p) {
		int a = atoi(p);
		if (a > 0 && a / 10 == cc / 10 && a % 10 <= cc % 10) return 1;
		p = strchr(p, ',');
		if (p) p++;
	}
	return 0;
}

#ifndef ESMBATCH_CUDA_ARCHS
#define ESMBATCH_CUDA_ARCHS "90"
#endif
#ifndef ESMBATCH_CUDA_PTX
#define ESMBATCH_CUDA_PTX 90
#endif

int be_cuda_check_arch(int device)
{
	struct cudaDeviceProp prop;
	int cc;

	if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
		cudaGetLastError();   /* no such device: be_cuda_init says so */
		return 0;
	}
	cc = 10 * prop.major + prop.minor;
	if (be_cuda_arch_runs(cc, ESMBATCH_CUDA_ARCHS, ESMBATCH_CUDA_PTX)) return 0;
	log_error("cuda:%d (%s, compute capability %d.%d) refused: this build has kernels for "
	          "sm_{%s} and PTX for compute_%d only; rebuild with ./configure "
	          "--with-cuda-arch=%s,%d", device, prop.name, prop.major, prop.minor,
	          ESMBATCH_CUDA_ARCHS, ESMBATCH_CUDA_PTX, ESMBATCH_CUDA_ARCHS, cc);
	return -1;
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

/* c's copy stream and the events ordering it against the stream */
static int be_cuda_copy_stream(be_cuda_ctx_t *c)
{
	int rc = be_cuda_rt(c, cudaStreamCreateWithFlags(&c->copy, cudaStreamNonBlocking), "copy stream");

	if (!rc) rc = be_cuda_rt(c, cudaEventCreateWithFlags(&c->fetch_from, cudaEventDisableTiming), "fetch event");
	return rc ? rc : be_cuda_rt(c, cudaEventCreateWithFlags(&c->fetched, cudaEventDisableTiming), "fetch event");
}

/* c's two pinned staging halves and their events */
static int be_cuda_pins(be_cuda_ctx_t *c)
{
	for (int i = 0; i < 2; i++) {
		int rc = be_cuda_rt(c, cudaHostAlloc(&c->pin[i].buf, BE_CUDA_PIN, cudaHostAllocPortable),
		                    "pinned staging");
		if (rc || (rc = be_cuda_rt(c, cudaEventCreateWithFlags(&c->pin[i].done, cudaEventDisableTiming),
		                           "staging event")))
			return rc;
	}
	return 0;
}

/* the backend of device `device` at precision prec, its workspace made
 * for it (its properties in *prop when prop is not NULL); NULL after one
 * logged line */
static be_t *be_cuda_open(int device, struct cudaDeviceProp *prop, be_prec_t prec)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
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
	pthread_mutex_init(&c->stage_lock, NULL);
	pthread_mutex_init(&c->pin_lock, NULL);
	*be = (be_t){
		.name = c->name, .precision = "fp32", .ctx = c, .destroy = be_cuda_destroy,
		.worker = be_cuda_worker,
		.alloc = be_cuda_alloc, .free = be_cuda_free, .upload = be_cuda_upload,
		.download = be_cuda_download, .sync = be_cuda_sync, .mem_info = be_cuda_mem_info,
		.host_alloc = be_cuda_host_alloc, .host_free = be_cuda_host_free,
		.fetch = be_cuda_fetch, .fetch_wait = be_cuda_fetch_wait,
		/* every op of the list, be_cuda_<slot> each (trimul: NULL, above) */
#define BE_CUDA_SLOT(OP, slot, params) .slot = be_cuda_##slot,
		BE_OPS(BE_CUDA_SLOT)
#undef BE_CUDA_SLOT
	};
	/* ESMBATCH_CUDA_GRAPHS=0: no graphs (be_supports(be, BE_OP_GRAPH) 0) */
	const char *ge = getenv("ESMBATCH_CUDA_GRAPHS");
	if (!ge || strcmp(ge, "0")) {
		be->graph_begin = be_cuda_graph_begin;
		be->graph_end = be_cuda_graph_end;
		be->graph_run = be_cuda_graph_run;
		be->graph_free = be_cuda_graph_free;
	}
	log_debug("cuda:%d: CUDA graphs %s", device, be->graph_begin ? "on (ESMBATCH_CUDA_GRAPHS=0: off)" :
	          "off (ESMBATCH_CUDA_GRAPHS=0)");
	if (be_cuda_rt(c, be_cuda_use(device), "cudaSetDevice") ||
	    (prop && be_cuda_rt(c, cudaGetDeviceProperties(prop, device), "cudaGetDeviceProperties")) ||
	    be_cuda_rt(c, cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "stream") ||
	    be_cuda_copy_stream(c) || be_cuda_pins(c) ||
	    be_cuda_blas(c, cublasCreate(&c->blas), "cublasCreate") ||
	    be_cuda_blas(c, cublasLtCreate(&c->lt), "cublasLtCreate") ||
	    be_cuda_blas(c, cublasSetStream(c->blas, c->stream), "cublasSetStream") ||
	    /* after cublasSetStream, which resets the workspace */
	    be_cuda_prec_set(be, prec)) {
		be_cuda_release(c);
		free(be);
		return NULL;
	}
	return be;
}

be_t *be_cuda_init(int device)
{
	struct cudaDeviceProp prop;
	be_t *be = be_cuda_open(device, &prop, BE_PREC_FP32);

	/* once per device, before any launch: the kernels' shared memory
	 * limits (cu_smem_init), shared by the device's workers, whose
	 * backends (be_cuda_worker) say nothing */
	if (be && be_cuda_k(be->ctx, cu_smem_init((int)prop.sharedMemPerBlockOptin), "shared memory limits")) {
		be_cuda_destroy(be);
		return NULL;
	}
	if (be) {
		be_cuda_ctx_t *c = be->ctx;
		int rt = 0;
		if (cudaRuntimeGetVersion(&rt) != cudaSuccess) rt = CUDART_VERSION;
		snprintf(c->numerics, sizeof c->numerics, "cuda sm_%d%d %s r%d, runtime %d, cuBLAS %d",
		         prop.major, prop.minor, prop.name, BE_KERNELS_REV, rt, CUBLAS_VERSION);
		be->numerics = c->numerics;
	}
	if (be)
		log_info("cuda backend: device %d, %s, %.1f GiB, sm_%d%d", device, prop.name,
		         prop.totalGlobalMem / 1073741824.0, prop.major, prop.minor);
	return be;
}
