/* cuemu_blas.c - the cuBLAS subset src/backend/cuda.c and cuda_blas.c
 * call, on the CPU: handles bound to a stream and a workspace, and
 * cublasGemmStridedBatchedEx and cublasGemmEx on column-major matrices,
 * queued on the handle's stream and run with CBLAS.  Arguments are checked as cuBLAS documents.  A and B
 * are both float32 or both bfloat16 (CUDA_R_16BF, with CUBLAS_COMPUTE_32F:
 * each bf16 value widened exactly, products accumulated in float32), C is
 * float32.  For float32 operands with the CUBLAS_COMPUTE_32F_FAST_16BF /
 * _16F / _TF32 compute types the inputs are rounded to bfloat16 / float16 /
 * TF32 first (accumulation stays float32), so results deviate from float32
 * as a tensor core's would.  With CUEMU_GEMM_LOG=FILE every GEMM accepted
 * appends one line to FILE, "m n k batch inputs operands lda ldb" (cuBLAS's
 * column-major sizes; inputs: 32F, 16BF -- bf16 operands or the FAST_16BF
 * compute --, 16F or TF32; operands: what A and B are stored as, bf16 or
 * f32), so a test can see which precision each ran at. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <cublas_v2.h>

#include "cuemu_rt.h"

struct cublasContext {
	cudaStream_t stream;
	void        *ws;
	size_t       ws_size;
};

int cuemu_handle_new(void **h, size_t size)
{
	int n = 0;
	*h = NULL;
	if (cudaGetDeviceCount(&n) != cudaSuccess || !n) {
		cudaGetLastError();
		return CUBLAS_STATUS_NOT_INITIALIZED;
	}
	if (!(*h = calloc(1, size))) return CUBLAS_STATUS_ALLOC_FAILED;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasCreate(cublasHandle_t *h)
{
	void *p;
	if (!h) return CUBLAS_STATUS_INVALID_VALUE;
	cublasStatus_t st = (cublasStatus_t)cuemu_handle_new(&p, sizeof **h);
	*h = p;
	return st;
}

cublasStatus_t cublasDestroy(cublasHandle_t h)
{
	if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
	free(h);
	return CUBLAS_STATUS_SUCCESS;
}

/* as cuBLAS: a new stream drops the user workspace */
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s)
{
	if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
	h->stream = s;
	h->ws = NULL;
	h->ws_size = 0;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *ws, size_t n)
{
	if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
	if ((n && !ws) || ((uintptr_t)ws & 255)) return CUBLAS_STATUS_INVALID_VALUE;
	if (n && cuemu_check_range(ws, n, cuemu_stream_device(h->stream))) {
		fprintf(stderr, "cuemu: cublasSetWorkspace: not memory of the stream's device\n");
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	h->ws = ws;
	h->ws_size = n;
	return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t st)
{
	switch (st) {
	case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
	case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
	case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
	case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
	case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
	case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
	default: return "CUBLAS_STATUS_UNKNOWN";
	}
}

/* x rounded to nearest even at `drop` low mantissa bits (bfloat16: 16,
 * TF32: 13); NaN and infinity kept */
static float round_bits(float x, int drop)
{
	uint32_t u;
	memcpy(&u, &x, sizeof u);
	if ((u & 0x7f800000u) == 0x7f800000u) return x;
	u += ((1u << (drop - 1)) - 1) + (u >> drop & 1u);
	u &= ~((1u << drop) - 1);
	memcpy(&x, &u, sizeof x);
	return x;
}

/* x rounded to float16 (overflow to infinity, subnormals below 2^-14) */
static float round_half(float x)
{
	return (float)(_Float16)x;
}

/* one queued GEMM: batch x C[m, n] = alpha op(A) op(B) + beta C, column-major */
typedef struct {
	cublasOperation_t   ta, tb;
	int                 m, n, k, lda, ldb, ldc, batch;
	long long           sa, sb, sc;
	float               alpha, beta;
	const void         *a, *b;
	int                 bf16;       /* 1: a and b are bfloat16 */
	float              *c;
	cublasComputeType_t compute;
} cuemu_gemm_t;

/* a float32 copy of the [rows, cols] bfloat16 matrix x (leading dimension
 * ld), each value widened exactly, or NULL */
static float *widen_copy(const uint16_t *x, int rows, int cols, int ld)
{
	size_t n = (size_t)(cols - 1) * ld + rows;
	float *y = malloc(sizeof *y * n);
	if (!y) return NULL;
	for (size_t i = 0; i < n; i++) {
		uint32_t u = (uint32_t)x[i] << 16;
		memcpy(&y[i], &u, sizeof u);
	}
	return y;
}

/* a copy of the [rows, cols] matrix x (leading dimension ld) rounded for
 * compute, or NULL */
static float *round_copy(const float *x, int rows, int cols, int ld, cublasComputeType_t compute)
{
	size_t n = (size_t)(cols - 1) * ld + rows;
	float *y = malloc(sizeof *y * n);
	if (!y) return NULL;
	for (size_t i = 0; i < n; i++)
		y[i] = compute == CUBLAS_COMPUTE_32F_FAST_16BF ? round_bits(x[i], 16) :
		       compute == CUBLAS_COMPUTE_32F_FAST_TF32 ? round_bits(x[i], 13) : round_half(x[i]);
	return y;
}

static void gemm_run(void *arg)
{
	const cuemu_gemm_t *g = arg;
	int ra = g->ta == CUBLAS_OP_N ? g->m : g->k, ca = g->ta == CUBLAS_OP_N ? g->k : g->m;
	int rb = g->tb == CUBLAS_OP_N ? g->k : g->n, cb = g->tb == CUBLAS_OP_N ? g->n : g->k;
	int lowp = g->compute != CUBLAS_COMPUTE_32F && g->compute != CUBLAS_COMPUTE_32F_PEDANTIC;

	size_t esize = g->bf16 ? sizeof(uint16_t) : sizeof(float);

	for (int i = 0; i < g->batch; i++) {
		const float *a = (const void *)((const char *)g->a + esize * i * g->sa);
		const float *b = (const void *)((const char *)g->b + esize * i * g->sb);
		float *c = g->c + i * g->sc, *ar = NULL, *br = NULL;
		if (g->beta == 0.0f)   /* C is not read */
			for (int j = 0; j < g->n; j++) memset(c + (size_t)j * g->ldc, 0, sizeof *c * g->m);
		if (g->k == 0) {
			for (int j = 0; j < g->n; j++)
				for (int r = 0; r < g->m; r++) c[(size_t)j * g->ldc + r] *= g->beta;
			continue;
		}
		if (g->bf16) {
			if (!(ar = widen_copy((const uint16_t *)a, ra, ca, g->lda)) ||
			    !(br = widen_copy((const uint16_t *)b, rb, cb, g->ldb))) {
				fprintf(stderr, "cuemu: gemm: out of host memory\n");
				abort();
			}
			a = ar;
			b = br;
		} else if (lowp) {
			if (!(ar = round_copy(a, ra, ca, g->lda, g->compute)) ||
			    !(br = round_copy(b, rb, cb, g->ldb, g->compute))) {
				fprintf(stderr, "cuemu: gemm: out of host memory\n");
				abort();
			}
			a = ar;
			b = br;
		}
		cblas_sgemm(CblasColMajor, g->ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
		            g->tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans, g->m, g->n, g->k,
		            g->alpha, a, g->lda, b, g->ldb, g->beta, c, g->ldc);
		free(ar);
		free(br);
	}
}

/* 0 when every batch of the [rows, cols] matrix x (ld, stride) is memory
 * of device dev */
static int operand_ok(const void *x, size_t esize, int rows, int cols, int ld, long long stride,
                      int batch, int dev)
{
	size_t one = esize * ((size_t)(cols - 1) * ld + rows);
	if (stride < 0) return -1;
	return cuemu_check_range(x, one + esize * (size_t)stride * (size_t)(batch - 1), dev);
}

void cuemu_gemm_log(int m, int n, int k, int batch, int bf16, int compute, int lda, int ldb)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	const char *path = getenv("CUEMU_GEMM_LOG");
	FILE *f;

	if (!path || !*path) return;
	pthread_mutex_lock(&lock);
	if ((f = fopen(path, "a"))) {
		fprintf(f, "%d %d %d %d %s %s %d %d\n", m, n, k, batch,
		        bf16 || compute == CUBLAS_COMPUTE_32F_FAST_16BF ? "16BF" :
		        compute == CUBLAS_COMPUTE_32F_FAST_16F ? "16F" :
		        compute == CUBLAS_COMPUTE_32F_FAST_TF32 ? "TF32" : "32F", bf16 ? "bf16" : "f32", lda, ldb);
		fclose(f);
	}
	pthread_mutex_unlock(&lock);
}

/* a GEMM of either entry point (who: its name); alpha and beta on the host */
static cublasStatus_t gemm_enqueue(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                   int m, int n, int k, const void *alpha, const void *A,
                                   cudaDataType Atype, int lda, long long sa, const void *B,
                                   cudaDataType Btype, int ldb, long long sb, const void *beta,
                                   void *C, cudaDataType Ctype, int ldc, long long sc, int batch,
                                   cublasComputeType_t compute, const char *who)
{
	if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
	if ((ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) || (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T) ||
	    m < 0 || n < 0 || k < 0 || batch < 0 || !alpha || !beta)
		return CUBLAS_STATUS_INVALID_VALUE;
	int ra = ta == CUBLAS_OP_N ? m : k, ca = ta == CUBLAS_OP_N ? k : m;
	int rb = tb == CUBLAS_OP_N ? k : n, cb = tb == CUBLAS_OP_N ? n : k;
	if (lda < (ra > 1 ? ra : 1) || ldb < (rb > 1 ? rb : 1) || ldc < (m > 1 ? m : 1))
		return CUBLAS_STATUS_INVALID_VALUE;
	int bf16 = Atype == CUDA_R_16BF;
	int f32c = compute == CUBLAS_COMPUTE_32F || compute == CUBLAS_COMPUTE_32F_PEDANTIC;
	if (Atype != Btype || (Atype != CUDA_R_32F && Atype != CUDA_R_16BF) || Ctype != CUDA_R_32F ||
	    (bf16 && !f32c) ||
	    (!f32c && compute != CUBLAS_COMPUTE_32F_FAST_16BF && compute != CUBLAS_COMPUTE_32F_FAST_16F &&
	     compute != CUBLAS_COMPUTE_32F_FAST_TF32))
		return CUBLAS_STATUS_NOT_SUPPORTED;
	if (!m || !n || !batch) return CUBLAS_STATUS_SUCCESS;
	int dev = cuemu_stream_device(h->stream);
	size_t es = bf16 ? sizeof(uint16_t) : sizeof(float);
	if ((k && (operand_ok(A, es, ra, ca, lda, sa, batch, dev) ||
	           operand_ok(B, es, rb, cb, ldb, sb, batch, dev))) ||
	    operand_ok(C, sizeof(float), m, n, ldc, sc, batch, dev)) {
		fprintf(stderr, "cuemu: %s: an operand is not memory of device %d\n", who, dev);
		return CUBLAS_STATUS_EXECUTION_FAILED;
	}
	cuemu_gemm_log(m, n, k, batch, bf16, compute, lda, ldb);
	cuemu_gemm_t *g = malloc(sizeof *g);
	if (!g) return CUBLAS_STATUS_ALLOC_FAILED;
	*g = (cuemu_gemm_t){ ta, tb, m, n, k, lda, ldb, ldc, batch, sa, sb, sc,
	                     *(const float *)alpha, *(const float *)beta, A, B, bf16, C, compute };
	if (cuemu_enqueue(h->stream, gemm_run, free, g) != cudaSuccess) {
		cudaGetLastError();
		return CUBLAS_STATUS_EXECUTION_FAILED;
	}
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta,
                                          cublasOperation_t tb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType Atype,
                                          int lda, long long sa, const void *B, cudaDataType Btype,
                                          int ldb, long long sb, const void *beta, void *C,
                                          cudaDataType Ctype, int ldc, long long sc, int batch,
                                          cublasComputeType_t compute, cublasGemmAlgo_t algo)
{
	return gemm_enqueue(h, ta, tb, m, n, k, alpha, A, Atype, lda, sa, B, Btype, ldb, sb, beta, C,
	                    Ctype, ldc, sc, batch, compute, "cublasGemmStridedBatchedEx");
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, const void *alpha, const void *A, cudaDataType Atype,
                            int lda, const void *B, cudaDataType Btype, int ldb, const void *beta,
                            void *C, cudaDataType Ctype, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo)
{
	return gemm_enqueue(h, ta, tb, m, n, k, alpha, A, Atype, lda, 0, B, Btype, ldb, 0, beta, C,
	                    Ctype, ldc, 0, 1, compute, "cublasGemmEx");
}
