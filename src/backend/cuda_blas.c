/* cuda_blas.c - the CUDA backend's products: its gemm op on cuBLAS (fp32
 * operands, bf16 x bf16, and one bf16 weight with the other operand
 * rounded into the worker's stage, bias and ReLU in cuBLASLt's epilogue)
 * and its transition op (at bf16 the sequence transition's two products
 * on cuBLASLt, every other transition one kernel).  Errors as cuda.c's:
 * negative, logged once (cuda_ctx.h). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <cublasLt.h>
#include <cublas_v2.h>

#include "../kernels/kernels.h"
#include "util/log.h"
#include "backend/backend.h"
#include "backend/cuda.h"
#include "backend/cuda_ctx.h"

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

/* the largest power of two up to 256 that p's address is a multiple of */
static uint32_t be_cuda_align(const void *p)
{
	uint32_t a = 256;
	while (a > 1 && (uintptr_t)p % a) a /= 2;
	return a;
}

/* D: [m, n] (column-major, ldd; type dt: bf16 or fp32) = epi(alpha op(A)
 * op(B) + beta D + bias) by cuBLASLt on the stream, op(A): [m, k], op(B):
 * [k, n], both bf16 (lda, ldb; ta, tb: transposed); epi: ReLU or not, bias
 * (of D's type, [m]) or NULL; the algo its heuristic picks for the
 * operands' alignments (what the pointers are on, up to 256 bytes) and the
 * cuBLAS workspace.  A cuBLAS status: NOT_SUPPORTED where the heuristic
 * finds none, or the bias is off 16 bytes (the alignment preferences do
 * not cover it and the epilogue's kernels may assume 16), logged once per
 * backend: the caller then does without. */
static cublasStatus_t be_cuda_lt(be_cuda_ctx_t *c, int ta, int tb, int m, int n, int k, const void *A, int lda,
                                 const void *B, int ldb, void *D, cudaDataType_t dt, int ldd, float alpha,
                                 float beta, int relu, const void *bias)
{
	const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
	const cublasLtEpilogue_t epi = relu ? (bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU) :
	                               bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
	const uint32_t al[4] = { be_cuda_align(A), be_cuda_align(B), be_cuda_align(D), be_cuda_align(D) };
	const uint64_t wsb = BE_CUDA_BLAS_WS;
	cublasLtMatmulDesc_t op = NULL;
	cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
	cublasLtMatmulPreference_t pref = NULL;
	cublasLtMatmulHeuristicResult_t res;
	cublasStatus_t st;
	int found = 0;

	if ((uintptr_t)bias % 16) {
		st = CUBLAS_STATUS_NOT_SUPPORTED;
		goto out;
	}
	if ((st = cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F)) ||
	    (st = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa)) ||
	    (st = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb)) ||
	    (st = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi)) ||
	    (bias && (st = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
	                                                  sizeof bias))) ||
	    (st = cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, (uint64_t)(ta ? k : m), (uint64_t)(ta ? m : k), lda)) ||
	    (st = cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, (uint64_t)(tb ? n : k), (uint64_t)(tb ? k : n), ldb)) ||
	    (st = cublasLtMatrixLayoutCreate(&ld, dt, (uint64_t)m, (uint64_t)n, ldd)) ||
	    (st = cublasLtMatmulPreferenceCreate(&pref)) ||
	    (st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
	                                               sizeof wsb)))
		goto out;
	for (int i = 0; i < 4 && !st; i++)
		st = cublasLtMatmulPreferenceSetAttribute(
			pref, (cublasLtMatmulPreferenceAttributes_t)(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES + i), &al[i],
			sizeof al[i]);
	if (st || (st = cublasLtMatmulAlgoGetHeuristic(c->lt, op, la, lb, ld, ld, pref, 1, &res, &found)))
		goto out;
	st = found ? cublasLtMatmul(c->lt, op, &alpha, A, la, B, lb, &beta, D, ld, D, ld, &res.algo, c->ws,
	                            BE_CUDA_BLAS_WS, c->stream)
	           : CUBLAS_STATUS_NOT_SUPPORTED;
out:
	if (st == CUBLAS_STATUS_NOT_SUPPORTED && !atomic_exchange(&c->lt_refused, 1))
		log_warn("cuda:%d: cuBLASLt cannot run a %d x %d x %d product with an epilogue (no algo, or a bias"
		         " off 16 bytes): such products take a slower path", c->device, m, n, k);
	if (pref) cublasLtMatmulPreferenceDestroy(pref);
	if (ld) cublasLtMatrixLayoutDestroy(ld);
	if (lb) cublasLtMatrixLayoutDestroy(lb);
	if (la) cublasLtMatrixLayoutDestroy(la);
	if (op) cublasLtMatmulDescDestroy(op);
	return st;
}

/* one slice of be_cuda_gemm_bf16, in cuBLAS's column-major terms: C: [n,
 * m] (g->ldc) = epi(alpha op(B) op(A) + beta C) of the bf16 b, a (ldb,
 * lda; g's transposes), epi g's bias (bias: this slice's, or NULL) and
 * ReLU by cuBLASLt's epilogue; where it has no algo, or without either,
 * cublasGemmEx after cu_gemm_prologue (the bias) or before
 * cu_gemm_epilogue_relu (bias and ReLU) on the slice's C */
static int be_cuda_gemm_slice(be_cuda_ctx_t *c, const be_gemm_t *g, int m, int n, const void *a, int lda,
                              const void *b, int ldb, float *cp, const float *bias)
{
	float beta = g->beta;
	int rc;

	if (bias || g->relu) {
		cublasStatus_t st = be_cuda_lt(c, g->transb, g->transa, n, m, g->k, b, ldb, a, lda, cp, CUDA_R_32F,
		                               (int)g->ldc, g->alpha, beta, g->relu, bias);
		if (st != CUBLAS_STATUS_NOT_SUPPORTED) return be_cuda_blas(c, st, "gemm bf16 epilogue");
	}
	if (bias && !g->relu) {
		if ((rc = be_cuda_k(c, cu_gemm_prologue(c->stream, cp, g->ldc, 0, 1, m, n, beta, bias), "gemm bias")))
			return rc;
		beta = 1.0f;
	}
	if ((rc = be_cuda_blas(c, cublasGemmEx(c->blas,
		g->transb ? CUBLAS_OP_T : CUBLAS_OP_N, g->transa ? CUBLAS_OP_T : CUBLAS_OP_N,
		n, m, g->k, &g->alpha, b, CUDA_R_16BF, ldb, a, CUDA_R_16BF, lda,
		&beta, cp, CUDA_R_32F, (int)g->ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT), "gemm bf16")) || !g->relu)
		return rc;
	return be_cuda_k(c, cu_gemm_epilogue_relu(c->stream, cp, g->ldc, 0, 1, m, n, bias), "gemm epilogue");
}

/* One GEMM with one bf16 weight operand (g->a_bf16 / g->b_bf16; batch 1):
 * the other, fp32 operand is rounded into the worker's bf16 stage, as
 * many rows of C (A fp32) or columns (B fp32) as the stage holds at a
 * time, and each slice runs as bf16 x bf16 with fp32 accumulation
 * (CUBLAS_COMPUTE_32F), C in fp32, its bias and ReLU in the product's
 * epilogue (be_cuda_gemm_slice).  The stage is taken by one GEMM at a
 * time; the stream orders each slice's conversion after the previous
 * slice's product. */
static int be_cuda_gemm_bf16(be_cuda_ctx_t *c, const be_gemm_t *g)
{
	int64_t span = g->a_bf16 ? g->n : g->m, step = BE_CUDA_STAGE / (g->k > 0 ? g->k : 1);
	int rc = 0;

	if (step >= 8) step = step / 8 * 8;   /* each slice's bias and stage rows on 16 bytes */

	if (!c->stage || g->batch != 1 || step < 1) {
		log_error("cuda:%d: gemm: a bf16 weight needs bf16 weights, batch 1 and k <= %d",
		          c->device, BE_CUDA_STAGE);
		return -EINVAL;
	}
	pthread_mutex_lock(&c->stage_lock);
	for (int64_t p0 = 0; p0 < span && !rc; p0 += step) {
		int np = (int)(span - p0 < step ? span - p0 : step), m = g->m, n = g->n;
		const void *a = g->a, *b = g->b;
		const float *bias = g->bias;
		int64_t lda = g->lda, ldb = g->ldb;
		float *cp = g->c;
		if (g->b_bf16 && !g->a_bf16) {
			/* rows p0.. of op(A): [np, k] */
			rc = g->transa ? cu_to_bf16(c->stream, c->stage, g->a + p0, g->k, np, g->lda)
			               : cu_to_bf16(c->stream, c->stage, g->a + p0 * g->lda, np, g->k, g->lda);
			a = c->stage;
			lda = g->transa ? np : g->k;
			m = np;
			cp = g->c + p0 * g->ldc;
		} else if (!g->b_bf16) {
			/* columns p0.. of op(B): [k, np] */
			rc = g->transb ? cu_to_bf16(c->stream, c->stage, g->b + p0 * g->ldb, np, g->k, g->ldb)
			               : cu_to_bf16(c->stream, c->stage, g->b + p0, g->k, np, g->ldb);
			b = c->stage;
			ldb = g->transb ? g->k : np;
			n = np;
			cp = g->c + p0;
			bias = bias ? bias + p0 : NULL;
		}
		if ((rc = be_cuda_k(c, rc, "gemm bf16 operand"))) break;
		rc = be_cuda_gemm_slice(c, g, m, n, a, (int)lda, b, (int)ldb, cp, bias);
	}
	pthread_mutex_unlock(&c->stage_lock);
	return rc;
}

/* g as one strided batched cuBLAS call, A and B of type t (fp32, or
 * bf16 data: ld and strides in its elements), C fp32, compute type ct */
static int be_cuda_gemm_batched(be_cuda_ctx_t *c, const be_gemm_t *g, float beta, cudaDataType t,
                                cublasComputeType_t ct)
{
	return be_cuda_blas(c, cublasGemmStridedBatchedEx(c->blas,
		g->transb ? CUBLAS_OP_T : CUBLAS_OP_N, g->transa ? CUBLAS_OP_T : CUBLAS_OP_N,
		g->n, g->m, g->k, &g->alpha,
		g->b, t, (int)g->ldb, g->stride_b,
		g->a, t, (int)g->lda, g->stride_a,
		&beta, g->c, CUDA_R_32F, (int)g->ldc, g->stride_c,
		g->batch, ct, CUBLAS_GEMM_DEFAULT), t == CUDA_R_16BF ? "gemm bf16 x bf16" : "gemm");
}

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the
 * operands swap, the transpose flags stay, m and n swap.  The compute type
 * is the backend's unless g->prec names one; one bf16 operand takes
 * be_cuda_gemm_bf16, two are one bf16 x bf16 batched call. */
int be_cuda_gemm(be_t *be, const be_gemm_t *g)
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
	if (g->relu && beta != 0.0f) {
		log_error("cuda backend: gemm: relu needs beta 0");
		return -EINVAL;
	}
	/* one bf16 weight: staged, the bias and ReLU in its epilogue */
	if (g->a_bf16 != g->b_bf16) return be_cuda_gemm_bf16(c, g);
	if (g->relu) {
		/* the product with beta 0, then bias and ReLU in one pass */
		be_gemm_t p = *g;
		p.bias = NULL;
		p.relu = 0;
		if ((rc = be_cuda_gemm(be, &p))) return rc;
		return be_cuda_k(c, cu_gemm_epilogue_relu(c->stream, g->c, g->ldc, g->stride_c, g->batch,
		                                       g->m, g->n, g->bias), "gemm epilogue");
	}
	if (g->bias) {
		rc = be_cuda_k(c, cu_gemm_prologue(c->stream, g->c, g->ldc, g->stride_c, g->batch,
		                                g->m, g->n, beta, g->bias), "gemm bias");
		if (rc) return rc;
		beta = 1.0f;
	}
	/* both bf16: read as they are, fp32 accumulation (no stage) */
	if (g->a_bf16 && g->b_bf16) return be_cuda_gemm_batched(c, g, beta, CUDA_R_16BF, CUBLAS_COMPUTE_32F);
	return be_cuda_gemm_batched(c, g, beta, CUDA_R_32F, ct);
}

/* the sequence transition t (cu_seqtr_fits) at bf16 in chunks of rows,
 * each: xn = LN(x) (cu_seqtr_ln), hid = bf16(relu(xn w1^T + bf16(b1))),
 * x = x + hid w2^T + b2, the products cuBLASLt's (be_cuda_lt).  In the
 * stage (BE_CUDA_STAGE elements, taken as a GEMM takes it): b1 in bf16
 * ([h], on 16 bytes), then xn: [chunk, d] and hid: [chunk, h] (1,632 rows
 * at c_s 1024, h 4096: 13.8 MB at L 1344).  Where cuBLASLt refuses the
 * products (be_cuda_lt logs it) the rows not yet done go to cu_transition
 * on the CUDA cores.  0 or negative, logged. */
static int be_cuda_seqtr(be_cuda_ctx_t *c, const be_transition_t *t)
{
	const int d = t->d, h = t->h, hb = (h + 7) / 8 * 8;
	const int64_t chunk = (BE_CUDA_STAGE - hb) / (d + h) / 8 * 8;
	uint16_t *b1 = t->b1 ? c->stage : NULL, *xn = c->stage + hb, *hid = xn + chunk * d;
	cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
	int rc = 0;

	if (chunk < 8 || !c->stage) return be_cuda_k(c, -EINVAL, "sequence transition");
	if (b1 && (rc = be_cuda_k(c, cu_to_bf16(c->stream, b1, t->b1, 1, h, h), "sequence transition bias")))
		return rc;
	for (int64_t r0 = 0; r0 < t->rows; r0 += chunk) {
		be_transition_t ch = *t;
		ch.x = t->x + r0 * d;
		ch.rows = t->rows - r0 < chunk ? t->rows - r0 : chunk;
		if ((rc = be_cuda_k(c, cu_seqtr_ln(c->stream, &ch, xn), "sequence transition layer norm"))) return rc;
		if ((st = be_cuda_lt(c, 1, 0, h, (int)ch.rows, d, t->w1, d, xn, d, hid, CUDA_R_16BF, h, 1.0f, 0.0f, 1,
		                     b1)) ||
		    (st = be_cuda_lt(c, 1, 0, d, (int)ch.rows, h, t->w2, h, hid, h, ch.x, CUDA_R_32F, d, 1.0f, 1.0f, 0,
		                     t->b2))) {
			if (st != CUBLAS_STATUS_NOT_SUPPORTED) return be_cuda_blas(c, st, "sequence transition");
			ch.rows = t->rows - r0;
			return be_cuda_k(c, cu_transition(c->stream, &ch), "transition");
		}
	}
	return 0;
}

/* at bf16 the sequence transition by be_cuda_seqtr, every other one by
 * cu_transition */
int be_cuda_transition(be_t *be, const be_transition_t *t)
{
	be_cuda_ctx_t *c = be_cuda_ctx(be);
	int rc;

	if (t->rows < 0 || t->d <= 0 || t->h <= 0) return be_cuda_k(c, -EINVAL, "transition");
	if (!cu_seqtr_fits(t)) return be_cuda_k(c, cu_transition(c->stream, t), "transition");
	pthread_mutex_lock(&c->stage_lock);
	rc = be_cuda_seqtr(c, t);
	pthread_mutex_unlock(&c->stage_lock);
	return rc;
}

int be_cuda_seqtr_fits(const be_transition_t *t)
{
	return cu_seqtr_fits(t);
}
