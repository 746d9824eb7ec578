/* test_cuemu_lt.c - checks of the emulated cuBLASLt subset
 * (cuemu_blaslt.c) against a plain loop here: bf16 operands, products
 * exact (in double), float32 sums in k order, then alpha, beta C (not read
 * when beta is 0), the bias and the ReLU in that order, rounded to bf16
 * (nearest even, worked out with frexp, not with the emulator's
 * conversion) where D is bf16; every element must be equal to the bit.
 * The cases: transa T with RELU_BIAS, a bf16 bias and D, lds above the
 * rows; fp32 D in place (C == D) with BIAS; RELU and DEFAULT with beta 0
 * over a NaN C; the refusals the subset documents; a matmul captured into
 * a graph runs at each launch, not at the capture; a copy queued before
 * it on its stream is seen by it; the heuristic's algos and the
 * alignments they hold the operands to; CUEMU_GEMM_LOG's line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

static int failures;

static void expect(int ok, const char *what)
{
	printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
	failures += !ok;
}

/* one matmul: sizes, transposes (1: T), lds, types, epilogue, scales */
typedef struct {
	int          m, n, k, ta, tb, lda, ldb, ldc, ldd;
	int          kb;          /* B's k where it differs from k (a bad call), else 0 */
	cudaDataType ab, cd;      /* the types of A and B, of C and D */
	uint32_t     epi;
	int32_t      bias_type;   /* BIAS_DATA_TYPE to set, or -2: left unset */
	int          no_bias;     /* 1: no BIAS_POINTER set */
	float        alpha, beta;
} lt_case_t;

static uint32_t rng = 12345;

static uint32_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 17;
	rng ^= rng << 5;
	return rng;
}

static float bf_value(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

/* x (finite, or NaN: compared as NaN only) to bf16 bits, nearest even: 8
 * significant bits by frexp */
static uint16_t bf_round(float x)
{
	int e;
	double m = frexp(x, &e);
	float y = (float)ldexp(nearbyint(ldexp(m, 8)), e - 8);
	uint32_t u;
	memcpy(&u, &y, sizeof u);
	return (uint16_t)(u >> 16);
}

/* a random bf16 value, exactly: up to 7 bits times 2^-14 .. 2^-2 */
static uint16_t bf_random(void)
{
	float f = ldexpf((float)((int)(next() % 255) - 127), (int)(next() % 13) - 14);
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	if (u & 0xffffu) exit(99);
	return (uint16_t)(u >> 16);
}

/* a random float32 in [-2, 2) with a full significand */
static float f_random(void)
{
	return (float)((double)next() / 4294967296.0 * 4.0 - 2.0);
}

/* element i of x, bf16 (cd CUDA_R_16BF) or float32 */
static float get(const void *x, cudaDataType cd, size_t i)
{
	return cd == CUDA_R_16BF ? bf_value(((const uint16_t *)x)[i]) : ((const float *)x)[i];
}

/* elements a [rows, cols] matrix of ld spans */
static size_t span(int rows, int cols, int ld)
{
	return rows && cols ? (size_t)(cols - 1) * ld + rows : 0;
}

/* the reference D (float32, before D's rounding) of t into v[ldd n] */
static void reference(const lt_case_t *t, const uint16_t *A, const uint16_t *B, const void *C,
                      const void *bias, float *v)
{
	for (int j = 0; j < t->n; j++)
		for (int i = 0; i < t->m; i++) {
			float acc = 0.0f;
			for (int p = 0; p < t->k; p++) {
				double a = bf_value(A[t->ta ? (size_t)i * t->lda + p : (size_t)p * t->lda + i]);
				double b = bf_value(B[t->tb ? (size_t)p * t->ldb + j : (size_t)j * t->ldb + p]);
				acc = acc + (float)(a * b);   /* a b is exact in float */
			}
			float x = t->alpha * acc;
			if (t->beta != 0.0f) x = x + t->beta * get(C, t->cd, (size_t)j * t->ldc + i);
			if (t->epi & CUBLASLT_EPILOGUE_BIAS) x = x + get(bias, t->cd, (size_t)i);
			if ((t->epi & CUBLASLT_EPILOGUE_RELU) && x < 0.0f) x = 0.0f;
			v[(size_t)j * t->ldd + i] = x;
		}
}

/* the bits of element o of x, bf16 (cd CUDA_R_16BF) or float32 */
static uint32_t bits(const void *x, cudaDataType cd, size_t o)
{
	uint32_t u;
	if (cd == CUDA_R_16BF) return ((const uint16_t *)x)[o];
	memcpy(&u, (const float *)x + o, sizeof u);
	return u;
}

/* 1 when the D read back (dh[nd], of t->cd) equals the reference v (NULL:
 * none) bit for bit inside the matrix, and before (D as it was) elsewhere
 * (the rows between m and ldd; all of it without v); prints the first
 * difference */
static int matches(const lt_case_t *t, size_t nd, const void *dh, const float *v, const void *before)
{
	for (size_t o = 0; o < nd; o++) {
		int i = (int)(o % (size_t)t->ldd), j = (int)(o / (size_t)t->ldd);
		uint32_t got = bits(dh, t->cd, o), want = bits(before, t->cd, o);
		int nan = v && i < t->m && isnan(v[o]);   /* then any NaN */
		if (v && i < t->m) want = t->cd == CUDA_R_16BF ? bf_round(v[o]) : bits(v, CUDA_R_32F, o);
		if (nan ? !isnan(get(dh, t->cd, o)) : got != want) {
			printf("      D(%d, %d): 0x%x, expected 0x%x\n", i, j, got, want);
			return 0;
		}
	}
	return 1;
}

static cudaStream_t stream;

/* n bytes host to device, or device to host, on the stream, synced */
static void copy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
	if (cudaMemcpyAsync(dst, src, n, kind, stream) || cudaStreamSynchronize(stream)) exit(99);
}

/* device memory of n bytes holding h[n] (h NULL: as cudaMalloc left it) */
static void *dev(const void *h, size_t n)
{
	void *d = NULL;
	if (cudaMalloc(&d, n ? n : 1)) exit(99);
	if (h) copy(d, h, n, cudaMemcpyHostToDevice);
	return d;
}

static cublasLtHandle_t lt;
static uint32_t heur_align;   /* > 0: run_case asks the heuristic for its algo, at this alignment */
static int heur_count;        /* the algos the heuristic returned, last time */

/* the heuristic's algo for the descriptors at heur_align bytes (MAX_WORKSPACE_BYTES
 * 0), heur_count set; a status */
static cublasStatus_t query(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
                            cublasLtMatrixLayout_t lc, cublasLtMatrixLayout_t ld, cublasLtMatmulAlgo_t *algo)
{
	cublasLtMatmulPreference_t pref = NULL;
	cublasLtMatmulHeuristicResult_t res;
	cublasStatus_t st = cublasLtMatmulPreferenceCreate(&pref);

	heur_count = -1;
	for (int i = 0; i < 4 && !st; i++)
		st = cublasLtMatmulPreferenceSetAttribute(
			pref, (cublasLtMatmulPreferenceAttributes_t)(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES + i),
			&heur_align, sizeof heur_align);
	if (!st) st = cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, ld, pref, 1, &res, &heur_count);
	if (!st && heur_count == 1 && res.state == CUBLAS_STATUS_SUCCESS) *algo = res.algo;
	else if (!st) st = CUBLAS_STATUS_NOT_SUPPORTED;
	cublasLtMatmulPreferenceDestroy(pref);
	return st;
}

/* the matmul t of the operands (bias may be NULL) with algo, the workspace
 * (ws, wsn) on the stream; the status of the first call that fails */
static cublasStatus_t run_case(const lt_case_t *t, const void *A, const void *B, const void *C, void *D,
                               const void *bias, const cublasLtMatmulAlgo_t *algo, void *ws, size_t wsn)
{
	cublasLtMatmulDesc_t desc = NULL;
	cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL, ld = NULL;
	int32_t ta = t->ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = t->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
	int kb = t->kb ? t->kb : t->k;
	cublasStatus_t st;

	if ((st = cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F)) ||
	    (st = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta)) ||
	    (st = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb)) ||
	    (st = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &t->epi, sizeof t->epi)) ||
	    (!t->no_bias &&
	     (st = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias))) ||
	    (t->bias_type != -2 &&
	     (st = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &t->bias_type,
	                                          sizeof t->bias_type))) ||
	    (st = cublasLtMatrixLayoutCreate(&la, t->ab, t->ta ? t->k : t->m, t->ta ? t->m : t->k, t->lda)) ||
	    (st = cublasLtMatrixLayoutCreate(&lb, t->ab, t->tb ? t->n : kb, t->tb ? kb : t->n, t->ldb)) ||
	    (st = cublasLtMatrixLayoutCreate(&lc, t->cd, t->m, t->n, t->ldc)) ||
	    (st = cublasLtMatrixLayoutCreate(&ld, t->cd, t->m, t->n, t->ldd)))
		goto done;
	cublasLtMatmulAlgo_t found;
	if (heur_align) {
		if ((st = query(desc, la, lb, lc, ld, &found))) goto done;
		algo = &found;
	}
	st = cublasLtMatmul(lt, desc, &t->alpha, A, la, B, lb, &t->beta, C, lc, D, ld, algo, ws, wsn, stream);
done:
	cublasLtMatrixLayoutDestroy(la);
	cublasLtMatrixLayoutDestroy(lb);
	cublasLtMatrixLayoutDestroy(lc);
	cublasLtMatrixLayoutDestroy(ld);
	cublasLtMatmulDescDestroy(desc);
	return st;
}

/* the host operands of a case, random, and their device copies */
typedef struct {
	uint16_t *a, *b;          /* host A, B (bf16) */
	void     *c, *bias, *d0;  /* host C, bias, D before the call (of t->cd) */
	void     *da, *db, *dc, *dd, *dbias;
	size_t    na, nb, nc, nd; /* elements */
	float    *v;              /* the reference D, [nd] */
} lt_data_t;

/* x[n] random of type cd (bf16 or float32), or all NaN */
static void *fill(size_t n, cudaDataType cd, int nan)
{
	size_t es = cd == CUDA_R_16BF ? 2 : 4;
	void *x = malloc(es * n + 1);
	if (!x) exit(99);
	if (nan) memset(x, 0xff, es * n);
	else
		for (size_t i = 0; i < n; i++) {
			if (cd == CUDA_R_16BF) ((uint16_t *)x)[i] = bf_random();
			else ((float *)x)[i] = f_random();
		}
	return x;
}

/* the operands of t: random, C NaN where nan_c, D holding pad (its bits
 * in every element, little-endian) before the call */
static void data_make(const lt_case_t *t, lt_data_t *x, int nan_c, uint32_t pad)
{
	size_t es = t->cd == CUDA_R_16BF ? 2 : 4;
	x->na = span(t->ta ? t->k : t->m, t->ta ? t->m : t->k, t->lda);
	x->nb = span(t->tb ? t->n : t->k, t->tb ? t->k : t->n, t->ldb);
	x->nc = span(t->m, t->n, t->ldc);
	x->nd = span(t->m, t->n, t->ldd);
	x->a = fill(x->na, CUDA_R_16BF, 0);
	x->b = fill(x->nb, CUDA_R_16BF, 0);
	x->c = fill(x->nc, t->cd, nan_c);
	x->bias = fill((size_t)t->m, t->cd, 0);
	x->d0 = malloc(es * x->nd + 1);
	if (!(x->v = calloc(x->nd + 1, sizeof *x->v)) || !x->d0) exit(99);
	for (size_t i = 0; i < x->nd; i++) memcpy((char *)x->d0 + es * i, &pad, es);
	x->da = dev(x->a, 2 * x->na);
	x->db = dev(x->b, 2 * x->nb);
	x->dc = dev(x->c, es * x->nc);
	x->dd = dev(x->d0, es * x->nd);
	x->dbias = dev(x->bias, es * (size_t)t->m);
}

static void data_free(lt_data_t *x)
{
	free(x->a);
	free(x->b);
	free(x->c);
	free(x->bias);
	free(x->d0);
	free(x->v);
	cudaFree(x->da);
	cudaFree(x->db);
	cudaFree(x->dc);
	cudaFree(x->dd);
	cudaFree(x->dbias);
}

/* D of t read back and compared with the reference of x's host operands
 * (ref 0: with D as it was, x->d0, throughout) */
static int d_matches(const lt_case_t *t, lt_data_t *x, int ref)
{
	size_t es = t->cd == CUDA_R_16BF ? 2 : 4;
	void *dh = malloc(es * x->nd + 1);
	if (!dh) exit(99);
	copy(dh, x->dd, es * x->nd, cudaMemcpyDeviceToHost);
	if (ref) reference(t, x->a, x->b, x->c, x->bias, x->v);
	int ok = matches(t, x->nd, dh, ref ? x->v : NULL, x->d0);
	free(dh);
	return ok;
}

/* (1) A^T (48 x 80 stored 80 x 48) B, RELU_BIAS, bf16 bias, C and D;
 * ldb and ldd above the rows; the ReLU both clamps and passes */
static void check_relu_bias(void)
{
	lt_case_t t = { 48, 37, 80, 1, 0, 80, 88, 48, 52, 0, CUDA_R_16BF, CUDA_R_16BF,
	                CUBLASLT_EPILOGUE_RELU_BIAS, CUDA_R_16BF, 0, 1.5f, -0.5f };
	lt_data_t x;
	int neg = 0, pos = 0;

	data_make(&t, &x, 0, 0x7fa1);
	expect(run_case(&t, x.da, x.db, x.dc, x.dd, x.dbias, NULL, NULL, 0) == CUBLAS_STATUS_SUCCESS,
	       "bf16 RELU_BIAS matmul (transa T, 48 x 37 x 80) accepted");
	expect(cudaStreamSynchronize(stream) == cudaSuccess && d_matches(&t, &x, 1),
	       "... every element the reference's, D's padding rows untouched");
	lt_case_t pre = t;
	pre.epi = CUBLASLT_EPILOGUE_BIAS;
	reference(&pre, x.a, x.b, x.c, x.bias, x.v);
	for (int j = 0; j < t.n; j++)
		for (int i = 0; i < t.m; i++) {
			neg += x.v[(size_t)j * t.ldd + i] < 0.0f;
			pos += x.v[(size_t)j * t.ldd + i] > 0.0f;
		}
	expect(neg > 100 && pos > 100, "... with over 100 elements each side of 0 before the ReLU");
	data_free(&x);
}

/* (2) fp32 D in place (C == D, ld above the rows), alpha 1, beta 1, BIAS
 * with a float bias (BIAS_DATA_TYPE left at -1), transa T */
static void check_in_place(void)
{
	lt_case_t t = { 20, 9, 33, 1, 0, 35, 33, 23, 23, 0, CUDA_R_16BF, CUDA_R_32F,
	                CUBLASLT_EPILOGUE_BIAS, -2, 0, 1.0f, 1.0f };
	lt_data_t x;

	data_make(&t, &x, 0, 0);
	memcpy(x.d0, x.c, sizeof(float) * x.nd);   /* D = C */
	copy(x.dd, x.d0, sizeof(float) * x.nd, cudaMemcpyHostToDevice);
	expect(run_case(&t, x.da, x.db, x.dd, x.dd, x.dbias, NULL, NULL, 0) == CUBLAS_STATUS_SUCCESS,
	       "fp32 BIAS matmul in place (C == D) accepted");
	expect(cudaStreamSynchronize(stream) == cudaSuccess && d_matches(&t, &x, 1),
	       "... D = (acc + C) + bias, every element, the padding rows C's");
	data_free(&x);
}

/* (3) beta 0 over a NaN C: RELU (bf16 D) and DEFAULT (fp32 D, transb T) */
static void check_beta0(void)
{
	lt_case_t r = { 17, 11, 40, 0, 0, 17, 40, 17, 17, 0, CUDA_R_16BF, CUDA_R_16BF,
	                CUBLASLT_EPILOGUE_RELU, -2, 1, 2.0f, 0.0f };
	lt_case_t d = { 13, 6, 21, 0, 1, 13, 6, 13, 13, 0, CUDA_R_16BF, CUDA_R_32F,
	                CUBLASLT_EPILOGUE_DEFAULT, -2, 1, -1.0f, 0.0f };
	const lt_case_t *t[2] = { &r, &d };
	const char *what[2] = { "RELU, no bias, beta 0 over a NaN C (bf16 D): the reference's, no NaN",
	                        "DEFAULT, beta 0 over a NaN C (fp32 D, transb T): the reference's, no NaN" };

	for (int i = 0; i < 2; i++) {
		lt_data_t x;
		data_make(t[i], &x, 1, 0);
		int ok = run_case(t[i], x.da, x.db, x.dc, x.dd, NULL, NULL, NULL, 0) == CUBLAS_STATUS_SUCCESS &&
		         cudaStreamSynchronize(stream) == cudaSuccess && d_matches(t[i], &x, 1);
		for (size_t e = 0; e < x.nd; e++) ok = ok && !isnan(x.v[e]);
		expect(ok, what[i]);
		data_free(&x);
	}
}

/* (3) a NaN in A: the ReLU keeps it (its row of D all NaN, the rest the
 * reference's) */
static void check_nan_relu(void)
{
	lt_case_t t = { 9, 7, 10, 0, 0, 9, 10, 9, 9, 0, CUDA_R_16BF, CUDA_R_32F,
	                CUBLASLT_EPILOGUE_RELU, -2, 1, 1.0f, 0.0f };
	lt_data_t x;
	int nans = 0;

	data_make(&t, &x, 0, 0);
	x.a[4 * t.lda + 2] = 0x7fc0;   /* A(2, 4) */
	copy(x.da, x.a, 2 * x.na, cudaMemcpyHostToDevice);
	int ok = run_case(&t, x.da, x.db, x.dc, x.dd, NULL, NULL, NULL, 0) == CUBLAS_STATUS_SUCCESS &&
	         cudaStreamSynchronize(stream) == cudaSuccess && d_matches(&t, &x, 1);
	for (size_t e = 0; e < x.nd; e++) nans += isnan(x.v[e]) && e % (size_t)t.ldd == 2;
	expect(ok && nans == t.n, "RELU of a NaN (A(2, 4) NaN): D's row 2 NaN, the rest the reference's");
	data_free(&x);
}

/* (4) refusals; none queues anything (D keeps its NaN fill) */
static void check_refusals(void)
{
	lt_case_t t = { 8, 8, 8, 0, 0, 8, 8, 8, 8, 0, CUDA_R_16BF, CUDA_R_16BF,
	                CUBLASLT_EPILOGUE_RELU_BIAS, -2, 1, 1.0f, 0.0f };
	lt_data_t x;
	cublasLtMatmulAlgo_t algo;
	cublasLtMatmulDesc_t desc;
	uint64_t big = CUBLAS_OP_T;

	memset(&algo, 0, sizeof algo);
	data_make(&t, &x, 0, 0x7fa1);
	expect(run_case(&t, x.da, x.db, x.dc, x.dd, NULL, NULL, NULL, 0) == CUBLAS_STATUS_INVALID_VALUE,
	       "RELU_BIAS without a bias pointer: INVALID_VALUE");
	t.no_bias = 0;
	expect(run_case(&t, x.da, x.db, x.dc, x.dd, (char *)x.dbias + 8, NULL, NULL, 0) ==
	       CUBLAS_STATUS_INVALID_VALUE, "a bias on 8 bytes, not 16: INVALID_VALUE");
	t.bias_type = CUDA_R_32F;
	expect(run_case(&t, x.da, x.db, x.dc, x.dd, x.dbias, NULL, NULL, 0) == CUBLAS_STATUS_NOT_SUPPORTED,
	       "a CUDA_R_32F bias with a bf16 D: NOT_SUPPORTED");
	t.bias_type = -1;
	t.ab = CUDA_R_32F;
	expect(run_case(&t, x.da, x.db, x.dc, x.dd, x.dbias, NULL, NULL, 0) == CUBLAS_STATUS_NOT_SUPPORTED,
	       "fp32 A and B: NOT_SUPPORTED");
	t.ab = CUDA_R_16BF;
	t.kb = 7;
	expect(run_case(&t, x.da, x.db, x.dc, x.dd, x.dbias, NULL, NULL, 0) == CUBLAS_STATUS_INVALID_VALUE,
	       "B's k 7 against A's 8: INVALID_VALUE");
	t.kb = 0;
	expect(run_case(&t, x.da, x.db, x.dc, x.dd, x.dbias, &algo, NULL, 0) == CUBLAS_STATUS_NOT_SUPPORTED,
	       "an algo given: NOT_SUPPORTED");
	expect(run_case(&t, x.da, x.db, x.dc, x.dd, x.dbias, NULL, (char *)x.dd + 2, 2) ==
	       CUBLAS_STATUS_INVALID_VALUE, "a workspace off 256 bytes: INVALID_VALUE");
	expect(run_case(&t, x.da, x.b, x.dc, x.dd, x.dbias, NULL, NULL, 0) == CUBLAS_STATUS_EXECUTION_FAILED,
	       "B in host memory: EXECUTION_FAILED");
	t.beta = 1.0f;
	expect(run_case(&t, x.da, x.db, (char *)x.dd + 2, x.dd, x.dbias, NULL, NULL, 0) ==
	       CUBLAS_STATUS_INVALID_VALUE, "C overlapping D, not equal: INVALID_VALUE");
	expect(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
	       cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &big, sizeof big) ==
	       CUBLAS_STATUS_INVALID_VALUE && cublasLtMatmulDescDestroy(desc) == CUBLAS_STATUS_SUCCESS,
	       "TRANSA of 8 bytes (int32_t's 4): INVALID_VALUE");
	expect(cudaStreamSynchronize(stream) == cudaSuccess && d_matches(&t, &x, 0),
	       "... and nothing ran: D as it was");
	data_free(&x);
}

/* the heuristic: its algo runs the matmul as algo NULL does, refuses an
 * operand off the alignment it was chosen for, a preference attribute of
 * the wrong size or an alignment not a power of two; CUEMU_LT_REFUSE=1
 * answers one query, then none (a count of 0) */
static void check_heuristic(void)
{
	lt_case_t t = { 16, 8, 32, 1, 0, 32, 32, 16, 16, 0, CUDA_R_16BF, CUDA_R_16BF,
	                CUBLASLT_EPILOGUE_RELU_BIAS, -2, 0, 1.0f, 0.0f };
	cublasLtMatmulPreference_t pref;
	uint32_t three = 3;
	uint64_t ws = 1 << 20;
	lt_data_t x;

	data_make(&t, &x, 0, 0x7fa1);
	heur_align = 256;
	expect(run_case(&t, x.da, x.db, x.dc, x.dd, x.dbias, NULL, NULL, 0) == CUBLAS_STATUS_SUCCESS &&
	       heur_count == 1 && cudaStreamSynchronize(stream) == cudaSuccess && d_matches(&t, &x, 1),
	       "the heuristic's one algo at 256 bytes runs the RELU_BIAS matmul, every element the reference's");
	expect(run_case(&t, (char *)x.da + 64, x.db, x.dc, x.dd, x.dbias, NULL, NULL, 0) ==
	       CUBLAS_STATUS_INVALID_VALUE, "... and refuses A on 64 bytes only");
	uint16_t *a2 = NULL;   /* A again, one element into an allocation: on 2 bytes */
	if (cudaMalloc((void **)&a2, 2 * (x.na + 1)) != cudaSuccess) exit(99);
	copy(a2 + 1, x.a, 2 * x.na, cudaMemcpyHostToDevice);
	heur_align = 2;
	expect(run_case(&t, a2 + 1, x.db, x.dc, x.dd, x.dbias, NULL, NULL, 0) == CUBLAS_STATUS_SUCCESS &&
	       heur_count == 1 && cudaStreamSynchronize(stream) == cudaSuccess && d_matches(&t, &x, 1),
	       "an algo chosen for 2 bytes takes A on 2 bytes, every element the reference's");
	cudaFree(a2);
	heur_align = 256;
	setenv("CUEMU_LT_REFUSE", "1", 1);
	cublasStatus_t first = run_case(&t, x.da, x.db, x.dc, x.dd, x.dbias, NULL, NULL, 0);
	int n1 = heur_count;
	cublasStatus_t second = run_case(&t, x.da, x.db, x.dc, x.dd, x.dbias, NULL, NULL, 0);
	unsetenv("CUEMU_LT_REFUSE");
	expect(first == CUBLAS_STATUS_SUCCESS && n1 == 1 && second == CUBLAS_STATUS_NOT_SUPPORTED && heur_count == 0,
	       "CUEMU_LT_REFUSE=1: one algo, then none (NOT_SUPPORTED, a count of 0)");
	heur_align = 0;
	expect(cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS &&
	       cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws) ==
	       CUBLAS_STATUS_SUCCESS &&
	       cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &three,
	                                            sizeof three) == CUBLAS_STATUS_INVALID_VALUE &&
	       cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &three,
	                                            sizeof three) == CUBLAS_STATUS_INVALID_VALUE &&
	       cublasLtMatmulPreferenceDestroy(pref) == CUBLAS_STATUS_SUCCESS,
	       "preferences: MAX_WORKSPACE_BYTES in 4 bytes (uint64_t's 8), an alignment of 3: INVALID_VALUE");
	data_free(&x);
}

/* (5) a matmul captured into a graph: not run at the capture, run at each
 * launch with the operands of then */
static void check_capture(void)
{
	lt_case_t t = { 16, 5, 24, 0, 0, 16, 24, 16, 16, 0, CUDA_R_16BF, CUDA_R_32F,
	                CUBLASLT_EPILOGUE_RELU_BIAS, -1, 0, 1.0f, 0.0f };
	lt_data_t x;
	cudaGraph_t g = NULL;
	cudaGraphExec_t ge = NULL;

	data_make(&t, &x, 0, 0);
	expect(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess &&
	       run_case(&t, x.da, x.db, x.dc, x.dd, x.dbias, NULL, NULL, 0) == CUBLAS_STATUS_SUCCESS &&
	       cudaStreamEndCapture(stream, &g) == cudaSuccess && g, "a matmul captured into a graph");
	expect(cudaStreamSynchronize(stream) == cudaSuccess && d_matches(&t, &x, 0),
	       "... did not run at the capture (D still 0)");
	expect(cudaGraphInstantiate(&ge, g, 0) == cudaSuccess && cudaGraphLaunch(ge, stream) == cudaSuccess &&
	       cudaStreamSynchronize(stream) == cudaSuccess && d_matches(&t, &x, 1),
	       "... ran at the graph's launch");
	free(x.a);
	x.a = fill(x.na, CUDA_R_16BF, 0);
	expect(cudaMemcpyAsync(x.da, x.a, 2 * x.na, cudaMemcpyHostToDevice, stream) == cudaSuccess &&
	       cudaGraphLaunch(ge, stream) == cudaSuccess && cudaStreamSynchronize(stream) == cudaSuccess &&
	       d_matches(&t, &x, 1), "... and again at a second launch, on a new A");
	cudaGraphExecDestroy(ge);
	cudaGraphDestroy(g);
	data_free(&x);
}

/* (6) a copy into A queued before the matmul on its stream is seen by it */
static void check_order(void)
{
	lt_case_t t = { 12, 7, 30, 1, 1, 30, 7, 12, 12, 0, CUDA_R_16BF, CUDA_R_16BF,
	                CUBLASLT_EPILOGUE_DEFAULT, -2, 1, 1.0f, 0.0f };
	lt_data_t x;

	data_make(&t, &x, 0, 0);
	float *v_old = calloc(x.nd + 1, sizeof *v_old);
	if (!v_old) exit(99);
	reference(&t, x.a, x.b, x.c, x.bias, v_old);
	free(x.a);
	x.a = fill(x.na, CUDA_R_16BF, 0);
	expect(cudaMemcpyAsync(x.da, x.a, 2 * x.na, cudaMemcpyHostToDevice, stream) == cudaSuccess &&
	       run_case(&t, x.da, x.db, x.dc, x.dd, NULL, NULL, NULL, 0) == CUBLAS_STATUS_SUCCESS &&
	       cudaStreamSynchronize(stream) == cudaSuccess && d_matches(&t, &x, 1) &&
	       memcmp(v_old, x.v, sizeof *v_old * x.nd),
	       "a copy into A queued before the matmul (transa, transb T) is seen by it (the old A: another D)");
	free(v_old);
	data_free(&x);
}

/* CUEMU_GEMM_LOG (path) holds line as its first line */
static void check_log(const char *path, const char *line)
{
	char buf[128] = "";
	FILE *f = fopen(path, "r");
	if (f && !fgets(buf, sizeof buf, f)) buf[0] = '\0';
	if (f) fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	if (strcmp(buf, line)) printf("      logged \"%s\"\n", buf);
	expect(!strcmp(buf, line), "CUEMU_GEMM_LOG: the first matmul logged as \"48 37 80 1 16BF bf16 80 88\"");
}

int main(void)
{
	char log[] = "/tmp/test_cuemu_lt.XXXXXX";
	int fd = mkstemp(log);

	if (fd < 0 || setenv("CUEMU_GEMM_LOG", log, 1)) return 99;
	close(fd);
	expect(cudaSetDevice(0) == cudaSuccess &&
	       cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess &&
	       cublasLtCreate(&lt) == CUBLAS_STATUS_SUCCESS, "a stream and a cuBLASLt handle");
	check_relu_bias();
	check_in_place();
	check_beta0();
	check_nan_relu();
	check_refusals();
	check_heuristic();
	check_capture();
	check_order();
	check_log(log, "48 37 80 1 16BF bf16 80 88");
	unlink(log);
	expect(cublasLtDestroy(lt) == CUBLAS_STATUS_SUCCESS && cudaStreamDestroy(stream) == cudaSuccess,
	       "handle and stream destroyed");
	return failures ? 1 : 0;
}
