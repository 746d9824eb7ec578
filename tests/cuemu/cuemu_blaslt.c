/* cuemu_blaslt.c - the cuBLASLt subset src/backend/cuda_blas.c calls, on the
 * CPU: handles, matmul descriptors, column-major matrix layouts, search
 * preferences, cublasLtMatmulAlgoGetHeuristic and cublasLtMatmul, queued on its stream with cuemu_enqueue (run at a
 * synchronising call in stream order, appended to the graph while the
 * stream captures, as cuemu_blas.c's GEMMs are).
 *
 * cublasLtMatmul computes D = epilogue(alpha op(A) op(B) + beta C),
 * column-major, op(A) m x k, op(B) k x n, C and D m x n, with
 * CUBLAS_COMPUTE_32F, a CUDA_R_32F scale (alpha, beta: host floats), A and
 * B both CUDA_R_16BF, C and D both CUDA_R_32F or both CUDA_R_16BF (C may
 * be D when their lds agree: in place; any other overlap is refused).  A
 * plain loop, each element of D in this order: the bf16 operands widened
 * exactly, their products (exact in float32) summed in float32 in k order
 * (acc, from +0); v = alpha * acc; where beta != 0, v = v + beta * c (C is
 * not read at all when beta == 0); with a *_BIAS epilogue v = v + bias[i]
 * (bias: m values of D's type); with a RELU* epilogue v = v < 0 ? 0 : v
 * (NaN and -0 kept); stored as D's type (bf16: nearest even, NaN kept,
 * cuemu_f2bf).  With CUEMU_GEMM_LOG set, each matmul accepted appends
 * cuemu_gemm_log's line "m n k 1 16BF bf16 lda ldb".
 *
 * Descriptor attributes: CUBLASLT_MATMUL_DESC_TRANSA / _TRANSB (int32_t:
 * CUBLAS_OP_N or _T), _EPILOGUE (uint32_t: CUBLASLT_EPILOGUE_DEFAULT,
 * _RELU, _BIAS, _RELU_BIAS), _BIAS_POINTER (void *, default NULL),
 * _BIAS_DATA_TYPE (int32_t, default -1: D's type), _POINTER_MODE (int32_t:
 * CUBLASLT_POINTER_MODE_HOST).  Layouts take no attributes.  Preferences:
 * MAX_WORKSPACE_BYTES (uint64_t) and MIN_ALIGNMENT_{A,B,C,D}_BYTES
 * (uint32_t, a power of two, default 256).  The heuristic checks the
 * descriptors as cublasLtMatmul does and returns one algo, which records
 * the preference's alignments: cublasLtMatmul refuses it (INVALID_VALUE,
 * said on stderr) for an operand off them, as a card's kernel counting on
 * them could fault; algo NULL runs as cuBLASLt's own choice.
 *
 * Statuses.  CUBLAS_STATUS_NOT_INITIALIZED: a NULL handle; cublasLtCreate
 * with no device.  CUBLAS_STATUS_INVALID_VALUE: a NULL argument; an
 * attribute other than the six above; a size other than the attribute's
 * type's; a transpose other than N, T, C or CONJG, a pointer mode outside
 * cublasLtPointerMode_t; a layout's ld below max(1, rows); layouts whose
 * sizes disagree; a *_BIAS epilogue without a bias pointer, or its bias
 * off 16 bytes (said on stderr: the alignment preferences do not cover
 * the bias, and a card's epilogue kernel can fault on one); C and D
 * overlapping but not the same matrix; a workspace NULL with a size > 0,
 * or non-NULL and off 256 bytes or not memory of the stream's device.
 * CUBLAS_STATUS_NOT_SUPPORTED (a valid value this subset does not take):
 * the transposes C and CONJG, any other epilogue, a device pointer mode,
 * an algo not of the heuristic, other types (compute, scale, A, B, C, D, a bias type
 * other than -1 or D's), a layout's rows, cols or ld above INT_MAX.
 * CUBLAS_STATUS_EXECUTION_FAILED: an operand (A, B, C where beta != 0, D,
 * the bias) not inside one allocation of the stream's device (with a
 * message on stderr), or the stream refusing work (sticky error).  m or n
 * zero: success, nothing queued or logged.  CUEMU_LT_REFUSE=N: the
 * heuristic answers N queries, then finds no algo for any (NOT_SUPPORTED,
 * a count of 0; the count restarts when a query finds the variable
 * unset), as a library with no kernel for them would. */
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>

#include "cuemu_rt.h"

/* cuBLASLt keeps no state per handle that this subset needs */
struct cublasLtContext {
	int unused;
};

/* what a matmul descriptor holds, inside cublasLtMatmulDescOpaque_t */
typedef struct {
	cublasComputeType_t compute;
	cudaDataType_t      scale;
	cublasOperation_t   ta, tb;
	uint32_t            epilogue;
	int32_t             bias_type;    /* -1: D's */
	const void         *bias;
} lt_desc_t;
_Static_assert(sizeof(lt_desc_t) <= sizeof(cublasLtMatmulDescOpaque_t),
               "lt_desc_t fits the header's matmul descriptor");

/* what a matrix layout holds, inside cublasLtMatrixLayoutOpaque_t */
typedef struct {
	cudaDataType type;
	int          rows, cols, ld;
} lt_layout_t;
_Static_assert(sizeof(lt_layout_t) <= sizeof(cublasLtMatrixLayoutOpaque_t),
               "lt_layout_t fits the header's matrix layout");

/* what a search preference holds, inside cublasLtMatmulPreferenceOpaque_t */
typedef struct {
	uint64_t max_ws;     /* MAX_WORKSPACE_BYTES, default 0 */
	uint32_t align[4];   /* MIN_ALIGNMENT_{A,B,C,D}_BYTES, default 256 */
} lt_pref_t;
_Static_assert(sizeof(lt_pref_t) <= sizeof(cublasLtMatmulPreferenceOpaque_t),
               "lt_pref_t fits the header's preference");

/* what an algo of cublasLtMatmulAlgoGetHeuristic holds, inside
 * cublasLtMatmulAlgo_t: the alignments of A, B, C and D it was chosen
 * for (its kernel may count on them) */
#define LT_ALGO_MAGIC 0x6375656d754c5431ull   /* "cuemuLT1" */
typedef struct {
	uint64_t magic;
	uint32_t align[4];
} lt_algo_t;
_Static_assert(sizeof(lt_algo_t) <= sizeof(cublasLtMatmulAlgo_t), "lt_algo_t fits the header's algo");

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h)
{
	void *p;
	if (!h) return CUBLAS_STATUS_INVALID_VALUE;
	cublasStatus_t st = (cublasStatus_t)cuemu_handle_new(&p, sizeof **h);
	*h = p;
	return st;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t h)
{
	if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
	free(h);
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc, cublasComputeType_t compute,
                                        cudaDataType_t scale)
{
	if (!desc) return CUBLAS_STATUS_INVALID_VALUE;
	if (!(*desc = calloc(1, sizeof **desc))) return CUBLAS_STATUS_ALLOC_FAILED;
	lt_desc_t d = { compute, scale, CUBLAS_OP_N, CUBLAS_OP_N, CUBLASLT_EPILOGUE_DEFAULT, -1, NULL };
	memcpy((*desc)->data, &d, sizeof d);
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc)
{
	free(desc);
	return CUBLAS_STATUS_SUCCESS;
}

/* an int32_t transpose: 0 and *op set for N or T, else the status */
static cublasStatus_t lt_trans(const void *buf, cublasOperation_t *op)
{
	int32_t v;
	memcpy(&v, buf, sizeof v);
	if (v == CUBLAS_OP_C || v == CUBLAS_OP_CONJG) return CUBLAS_STATUS_NOT_SUPPORTED;
	if (v != CUBLAS_OP_N && v != CUBLAS_OP_T) return CUBLAS_STATUS_INVALID_VALUE;
	*op = (cublasOperation_t)v;
	return CUBLAS_STATUS_SUCCESS;
}

/* attr of d set from buf (size checked by the caller) */
static cublasStatus_t lt_desc_set(lt_desc_t *d, cublasLtMatmulDescAttributes_t attr, const void *buf)
{
	int32_t i;
	uint32_t u;

	switch (attr) {
	case CUBLASLT_MATMUL_DESC_TRANSA: return lt_trans(buf, &d->ta);
	case CUBLASLT_MATMUL_DESC_TRANSB: return lt_trans(buf, &d->tb);
	case CUBLASLT_MATMUL_DESC_EPILOGUE:
		memcpy(&u, buf, sizeof u);
		if (u != CUBLASLT_EPILOGUE_DEFAULT && u != CUBLASLT_EPILOGUE_RELU &&
		    u != CUBLASLT_EPILOGUE_BIAS && u != CUBLASLT_EPILOGUE_RELU_BIAS)
			return CUBLAS_STATUS_NOT_SUPPORTED;
		d->epilogue = u;
		return CUBLAS_STATUS_SUCCESS;
	case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
		memcpy(&d->bias, buf, sizeof d->bias);
		return CUBLAS_STATUS_SUCCESS;
	case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
		memcpy(&d->bias_type, buf, sizeof d->bias_type);
		return CUBLAS_STATUS_SUCCESS;
	case CUBLASLT_MATMUL_DESC_POINTER_MODE:
		memcpy(&i, buf, sizeof i);
		if (i == CUBLASLT_POINTER_MODE_HOST) return CUBLAS_STATUS_SUCCESS;
		return i > CUBLASLT_POINTER_MODE_HOST && i <= CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST ?
		       CUBLAS_STATUS_NOT_SUPPORTED : CUBLAS_STATUS_INVALID_VALUE;
	default: return CUBLAS_STATUS_INVALID_VALUE;
	}
}

/* the size of attr's value, or 0 for an attribute this subset does not take */
static size_t lt_attr_size(cublasLtMatmulDescAttributes_t attr)
{
	switch (attr) {
	case CUBLASLT_MATMUL_DESC_TRANSA:
	case CUBLASLT_MATMUL_DESC_TRANSB:
	case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
	case CUBLASLT_MATMUL_DESC_POINTER_MODE: return sizeof(int32_t);
	case CUBLASLT_MATMUL_DESC_EPILOGUE: return sizeof(uint32_t);
	case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return sizeof(void *);
	default: return 0;
	}
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attr, const void *buf,
                                              size_t size)
{
	lt_desc_t d;
	size_t want = lt_attr_size(attr);

	if (!desc || !buf || !want || size != want) return CUBLAS_STATUS_INVALID_VALUE;
	memcpy(&d, desc->data, sizeof d);
	cublasStatus_t st = lt_desc_set(&d, attr, buf);
	if (st == CUBLAS_STATUS_SUCCESS) memcpy(desc->data, &d, sizeof d);
	return st;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld)
{
	if (!layout || ld < 1 || (uint64_t)ld < rows) return CUBLAS_STATUS_INVALID_VALUE;
	if (rows > INT_MAX || cols > INT_MAX || ld > INT_MAX) return CUBLAS_STATUS_NOT_SUPPORTED;
	if (!(*layout = calloc(1, sizeof **layout))) return CUBLAS_STATUS_ALLOC_FAILED;
	lt_layout_t l = { type, (int)rows, (int)cols, (int)ld };
	memcpy((*layout)->data, &l, sizeof l);
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout)
{
	free(layout);
	return CUBLAS_STATUS_SUCCESS;
}

/* one queued matmul (see the top of the file) */
typedef struct {
	int             m, n, k, lda, ldb, ldc, ldd;
	int             ta, tb;     /* 1: op(A) = A^T, op(B) = B^T */
	float           alpha, beta;
	const uint16_t *a, *b;
	const void     *c, *bias;   /* bias: NULL without a *_BIAS epilogue */
	void           *d;
	int             bf16;       /* C, D and the bias are bfloat16 (else float32) */
	int             relu;
} lt_matmul_t;

/* element i of x, of bfloat16 or float32 */
static float lt_get(const void *x, int bf16, size_t i)
{
	return bf16 ? cuemu_bf2f(((const uint16_t *)x)[i]) : ((const float *)x)[i];
}

/* the epilogue of element (i, j): acc scaled, C, bias, ReLU, stored in D */
static void lt_store(const lt_matmul_t *g, int i, int j, float acc)
{
	float v = g->alpha * acc;
	if (g->beta != 0.0f) v = v + g->beta * lt_get(g->c, g->bf16, (size_t)j * g->ldc + i);
	if (g->bias) v = v + lt_get(g->bias, g->bf16, (size_t)i);
	if (g->relu) v = v < 0.0f ? 0.0f : v;   /* NaN kept */
	size_t o = (size_t)j * g->ldd + i;
	if (g->bf16) ((uint16_t *)g->d)[o] = cuemu_f2bf(v);
	else ((float *)g->d)[o] = v;
}

static void lt_run(void *arg)
{
	const lt_matmul_t *g = arg;
	/* op(A) widened, row i at at[i k]; then column j of op(B), widened */
	float *at = malloc(sizeof *at * ((size_t)g->m * g->k + g->k + 1));
	if (!at) {
		fprintf(stderr, "cuemu: cublasLtMatmul: out of host memory\n");
		abort();
	}
	float *bj = at + (size_t)g->m * g->k;
	for (int i = 0; i < g->m; i++)
		for (int p = 0; p < g->k; p++)
			at[(size_t)i * g->k + p] =
				cuemu_bf2f(g->a[g->ta ? (size_t)i * g->lda + p : (size_t)p * g->lda + i]);
	for (int j = 0; j < g->n; j++) {
		for (int p = 0; p < g->k; p++)
			bj[p] = cuemu_bf2f(g->b[g->tb ? (size_t)p * g->ldb + j : (size_t)j * g->ldb + p]);
		for (int i = 0; i < g->m; i++) {
			const float *ai = at + (size_t)i * g->k;
			float acc = 0.0f;
			for (int p = 0; p < g->k; p++) acc += ai[p] * bj[p];   /* exact products, k order */
			lt_store(g, i, j, acc);
		}
	}
	free(at);
}

/* the bytes a layout's matrix spans (0 when empty); es: its element size */
static size_t lt_bytes(const lt_layout_t *l, size_t es)
{
	return l->rows && l->cols ? es * ((size_t)(l->cols - 1) * l->ld + l->rows) : 0;
}

/* the types and the epilogue's bias type checked; g->bf16 set */
static cublasStatus_t lt_check_types(const lt_desc_t *d, const lt_layout_t *a, const lt_layout_t *b,
                                     const lt_layout_t *c, const lt_layout_t *dl, lt_matmul_t *g)
{
	if (d->compute != CUBLAS_COMPUTE_32F || d->scale != CUDA_R_32F || a->type != CUDA_R_16BF ||
	    b->type != CUDA_R_16BF || c->type != dl->type ||
	    (dl->type != CUDA_R_32F && dl->type != CUDA_R_16BF))
		return CUBLAS_STATUS_NOT_SUPPORTED;
	if ((d->epilogue & CUBLASLT_EPILOGUE_BIAS) && d->bias_type != -1 && d->bias_type != (int32_t)dl->type)
		return CUBLAS_STATUS_NOT_SUPPORTED;
	g->bf16 = dl->type == CUDA_R_16BF;
	return CUBLAS_STATUS_SUCCESS;
}

/* the sizes of the four layouts agree; g's sizes, transposes and lds set */
static cublasStatus_t lt_check_dims(const lt_desc_t *d, const lt_layout_t *a, const lt_layout_t *b,
                                    const lt_layout_t *c, const lt_layout_t *dl, lt_matmul_t *g)
{
	g->ta = d->ta == CUBLAS_OP_T;
	g->tb = d->tb == CUBLAS_OP_T;
	g->m = dl->rows;
	g->n = dl->cols;
	g->k = g->ta ? a->rows : a->cols;
	if ((g->ta ? a->cols : a->rows) != g->m || (g->tb ? b->cols : b->rows) != g->k ||
	    (g->tb ? b->rows : b->cols) != g->n || c->rows != g->m || c->cols != g->n)
		return CUBLAS_STATUS_INVALID_VALUE;
	g->lda = a->ld;
	g->ldb = b->ld;
	g->ldc = c->ld;
	g->ldd = dl->ld;
	return CUBLAS_STATUS_SUCCESS;
}

/* the operands' memory (A, B, C where read, D, the bias) on device dev */
static int lt_operands_ok(const lt_matmul_t *g, const lt_layout_t *a, const lt_layout_t *b,
                          const lt_layout_t *c, const lt_layout_t *dl, int dev)
{
	size_t es = g->bf16 ? sizeof(uint16_t) : sizeof(float);
	return !((g->k && (cuemu_check_range(g->a, lt_bytes(a, sizeof(uint16_t)), dev) ||
	                   cuemu_check_range(g->b, lt_bytes(b, sizeof(uint16_t)), dev))) ||
	         (g->beta != 0.0f && cuemu_check_range(g->c, lt_bytes(c, es), dev)) ||
	         cuemu_check_range(g->d, lt_bytes(dl, es), dev) ||
	         (g->bias && cuemu_check_range(g->bias, es * (size_t)g->m, dev)));
}

/* C and D are the same matrix (same ld) or apart (C NULL: left to the
 * operand check) */
static int lt_alias_ok(const lt_matmul_t *g, const lt_layout_t *c, const lt_layout_t *dl)
{
	size_t es = g->bf16 ? sizeof(uint16_t) : sizeof(float);
	uintptr_t c0 = (uintptr_t)g->c, d0 = (uintptr_t)g->d;
	if (c0 == d0) return c->ld == dl->ld;
	return !c0 || c0 + lt_bytes(c, es) <= d0 || d0 + lt_bytes(dl, es) <= c0;
}

/* a workspace of size n: none (NULL, 0), or device memory of dev on 256 bytes */
static int lt_workspace_ok(const void *ws, size_t n, int dev)
{
	if (!ws) return !n;
	return !((uintptr_t)ws & 255) && !cuemu_check_range(ws, n, dev);
}

/* the descriptors read and checked into g (operand pointers set by the caller) */
static cublasStatus_t lt_prepare(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Adesc,
                                 cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc,
                                 cublasLtMatrixLayout_t Ddesc, lt_matmul_t *g, lt_layout_t l[4])
{
	lt_desc_t d;
	cublasStatus_t st;

	memcpy(&d, desc->data, sizeof d);
	memcpy(&l[0], Adesc->data, sizeof l[0]);
	memcpy(&l[1], Bdesc->data, sizeof l[1]);
	memcpy(&l[2], Cdesc->data, sizeof l[2]);
	memcpy(&l[3], Ddesc->data, sizeof l[3]);
	if ((st = lt_check_types(&d, &l[0], &l[1], &l[2], &l[3], g)) != CUBLAS_STATUS_SUCCESS ||
	    (st = lt_check_dims(&d, &l[0], &l[1], &l[2], &l[3], g)) != CUBLAS_STATUS_SUCCESS)
		return st;
	if ((d.epilogue & CUBLASLT_EPILOGUE_BIAS) && !d.bias) return CUBLAS_STATUS_INVALID_VALUE;
	g->bias = d.epilogue & CUBLASLT_EPILOGUE_BIAS ? d.bias : NULL;
	g->relu = (d.epilogue & CUBLASLT_EPILOGUE_RELU) != 0;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref)
{
	const lt_pref_t p = { 0, { 256, 256, 256, 256 } };

	if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
	if (!(*pref = calloc(1, sizeof **pref))) return CUBLAS_STATUS_ALLOC_FAILED;
	memcpy((*pref)->data, &p, sizeof p);
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref)
{
	free(pref);
	return CUBLAS_STATUS_SUCCESS;
}

/* MAX_WORKSPACE_BYTES (uint64_t) and MIN_ALIGNMENT_{A,B,C,D}_BYTES
 * (uint32_t, a power of two); any other attribute, size or value:
 * INVALID_VALUE */
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void *buf, size_t size)
{
	lt_pref_t p;
	uint32_t a;

	if (!pref || !buf) return CUBLAS_STATUS_INVALID_VALUE;
	memcpy(&p, pref->data, sizeof p);
	if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) {
		if (size != sizeof p.max_ws) return CUBLAS_STATUS_INVALID_VALUE;
		memcpy(&p.max_ws, buf, sizeof p.max_ws);
	} else if (attr >= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES && attr <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES) {
		if (size != sizeof a) return CUBLAS_STATUS_INVALID_VALUE;
		memcpy(&a, buf, sizeof a);
		if (!a || (a & (a - 1))) return CUBLAS_STATUS_INVALID_VALUE;
		p.align[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES] = a;
	} else {
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	memcpy(pref->data, &p, sizeof p);
	return CUBLAS_STATUS_SUCCESS;
}

/* 1 where CUEMU_LT_REFUSE=N is set and N heuristic queries were answered
 * since one last found it unset: a library without a kernel for them */
static int lt_refuse(void)
{
	static atomic_long accepted;
	const char *e = getenv("CUEMU_LT_REFUSE");

	if (!e || !*e) {
		atomic_store(&accepted, 0);
		return 0;
	}
	return atomic_fetch_add(&accepted, 1) >= atol(e);
}

/* one algo for the matmul the descriptors describe (checked as
 * cublasLtMatmul checks them), chosen for the preference's alignments;
 * none (NOT_SUPPORTED, *count 0) where CUEMU_LT_REFUSE says so */
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int *count)
{
	lt_matmul_t g = { 0 };
	lt_layout_t l[4];
	lt_pref_t p;
	lt_algo_t a = { LT_ALGO_MAGIC, { 0 } };
	cublasStatus_t st;

	if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!desc || !Adesc || !Bdesc || !Cdesc || !Ddesc || !pref || requested <= 0 || !results || !count)
		return CUBLAS_STATUS_INVALID_VALUE;
	*count = 0;
	if ((st = lt_prepare(desc, Adesc, Bdesc, Cdesc, Ddesc, &g, l)) != CUBLAS_STATUS_SUCCESS) return st;
	if (lt_refuse()) return CUBLAS_STATUS_NOT_SUPPORTED;
	memcpy(&p, pref->data, sizeof p);
	memcpy(a.align, p.align, sizeof a.align);
	memset(&results[0], 0, sizeof results[0]);
	memcpy(results[0].algo.data, &a, sizeof a);
	results[0].state = CUBLAS_STATUS_SUCCESS;
	results[0].wavesCount = 1.0f;
	*count = 1;
	return CUBLAS_STATUS_SUCCESS;
}

/* whether algo may run on the operands p (A, B, C, D): NULL (cuBLASLt's
 * own choice) or one of cublasLtMatmulAlgoGetHeuristic's they keep the
 * alignments of (SUCCESS); another algo (NOT_SUPPORTED); an operand off
 * its alignment (INVALID_VALUE, said on stderr: a card's kernel could
 * fault) */
static cublasStatus_t lt_algo_ok(const cublasLtMatmulAlgo_t *algo, const void *const p[4])
{
	static const char *const name = "ABCD";
	lt_algo_t a;

	if (!algo) return CUBLAS_STATUS_SUCCESS;
	memcpy(&a, algo->data, sizeof a);
	if (a.magic != LT_ALGO_MAGIC) return CUBLAS_STATUS_NOT_SUPPORTED;
	for (int i = 0; i < 4; i++)
		if ((uintptr_t)p[i] % a.align[i]) {
			fprintf(stderr, "cuemu: cublasLtMatmul: %c off the %u bytes its algo was chosen for\n", name[i],
			        a.align[i]);
			return CUBLAS_STATUS_INVALID_VALUE;
		}
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t Adesc, const void *B,
                              cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C,
                              cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,
                              const cublasLtMatmulAlgo_t *algo, void *workspace, size_t ws_size,
                              cudaStream_t stream)
{
	lt_matmul_t g = { 0 };
	lt_layout_t l[4];
	cublasStatus_t st;

	if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!desc || !Adesc || !Bdesc || !Cdesc || !Ddesc || !alpha || !beta)
		return CUBLAS_STATUS_INVALID_VALUE;
	if ((st = lt_prepare(desc, Adesc, Bdesc, Cdesc, Ddesc, &g, l)) != CUBLAS_STATUS_SUCCESS) return st;
	g.alpha = *(const float *)alpha;
	g.beta = *(const float *)beta;
	g.a = A;
	g.b = B;
	g.c = C;
	g.d = D;
	int dev = cuemu_stream_device(stream);
	if (!lt_alias_ok(&g, &l[2], &l[3])) return CUBLAS_STATUS_INVALID_VALUE;
	if (!lt_workspace_ok(workspace, ws_size, dev)) {
		fprintf(stderr, "cuemu: cublasLtMatmul: a workspace of %zu bytes must be memory of device %d "
		        "on 256 bytes\n", ws_size, dev);
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	if ((uintptr_t)g.bias % 16) {
		fprintf(stderr, "cuemu: cublasLtMatmul: the epilogue's bias off 16 bytes\n");
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	const void *const ptrs[4] = { A, B, C, D };
	if ((st = lt_algo_ok(algo, ptrs)) != CUBLAS_STATUS_SUCCESS) return st;
	if (!g.m || !g.n) return CUBLAS_STATUS_SUCCESS;
	if (!lt_operands_ok(&g, &l[0], &l[1], &l[2], &l[3], dev)) {
		fprintf(stderr, "cuemu: cublasLtMatmul: an operand is not memory of device %d\n", dev);
		return CUBLAS_STATUS_EXECUTION_FAILED;
	}
	cuemu_gemm_log(g.m, g.n, g.k, 1, 1, CUBLAS_COMPUTE_32F, g.lda, g.ldb);
	lt_matmul_t *q = malloc(sizeof *q);
	if (!q) return CUBLAS_STATUS_ALLOC_FAILED;
	*q = g;
	if (cuemu_enqueue(stream, lt_run, free, q) != cudaSuccess) {
		cudaGetLastError();
		return CUBLAS_STATUS_EXECUTION_FAILED;
	}
	return CUBLAS_STATUS_SUCCESS;
}
