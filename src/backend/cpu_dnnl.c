/* cpu_dnnl.c - bf16 GEMMs on the CPU (see cpu_dnnl.h).
 *
 * oneDNN's matmul takes the operands as bf16 memory at their own strides:
 * a bf16 weight as it is held, an fp32 activation rounded (to nearest
 * even, as the GEMM's operand and as the widened path rounds it) into a
 * contiguous bf16 copy; dst fp32, alpha as the output scale, bias its bias
 * argument, beta a sum post-op and the ReLU an eltwise one.  One engine
 * for the process; a stream per call (cheap on the CPU), so callers on
 * many threads at once (the transition's tiles, several workers) each run
 * their own.  Primitives come from oneDNN's primitive cache, keyed by
 * shape.  oneDNN runs on the same OpenMP pool as the backend (inside a
 * parallel region: on the calling thread).
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

#include "backend/cpu_dnnl.h"
#include "io/safetensors.h"
#include "util/log.h"
#include "util/status.h"

/* elements a GEMM operand spans: batch x [rows, cols] rows of stride ld */
static int64_t cpu_dnnl_span(int batch, int64_t stride, int rows, int cols, int64_t ld)
{
	return batch > 0 && rows > 0 && cols > 0 ? (batch - 1) * stride + (rows - 1) * ld + cols : 0;
}

/* x: [n] float32 (bf16 0) or bfloat16 (bf16 1) values as float32 rounded to
 * bfloat16 (to nearest even), malloc'ed; NULL when out of memory */
static float *cpu_dnnl_round(const void *x, int64_t n, int bf16)
{
	float *y = malloc(sizeof *y * (size_t)(n > 0 ? n : 1));

	#pragma omp parallel for schedule(static) if (y && n > (1 << 18))
	for (int64_t i = 0; i < (y ? n : 0); i++)
		y[i] = safetensors_bf16_to_f32(bf16 ? ((const uint16_t *)x)[i] :
		                               safetensors_f32_to_bf16(((const float *)x)[i]));
	return y;
}

int cpu_dnnl_widened(be_t *be, const be_gemm_t *g)
{
	be_gemm_t r = *g;
	float *a, *b;
	int rc;

	a = cpu_dnnl_round(g->a, cpu_dnnl_span(g->batch, g->stride_a, g->transa ? g->k : g->m,
	                                       g->transa ? g->m : g->k, g->lda), g->a_bf16);
	b = cpu_dnnl_round(g->b, cpu_dnnl_span(g->batch, g->stride_b, g->transb ? g->n : g->k,
	                                       g->transb ? g->k : g->n, g->ldb), g->b_bf16);
	r.a = a;
	r.b = b;
	r.a_bf16 = r.b_bf16 = 0;
	r.prec = BE_PREC_FP32;
	rc = a && b ? be->gemm(be, &r) : STATUS_OOM;
	free(a);
	free(b);
	return rc;
}

#ifdef HAVE_DNNL

static pthread_once_t cpu_dnnl_once = PTHREAD_ONCE_INIT;
static dnnl_engine_t  cpu_dnnl_eng;
static int            cpu_dnnl_native = -1;
static const char    *cpu_dnnl_isa = "none";

static const char *cpu_dnnl_isa_name(dnnl_cpu_isa_t isa)
{
	switch (isa) {
	case dnnl_cpu_isa_sse41:           return "sse41";
	case dnnl_cpu_isa_avx:             return "avx";
	case dnnl_cpu_isa_avx2:            return "avx2";
	case dnnl_cpu_isa_avx2_vnni:       return "avx2_vnni";
	case dnnl_cpu_isa_avx512_core:     return "avx512_core";
	case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
	case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
	case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
	default:                           return "other";
	}
}

static void cpu_dnnl_init(void)
{
	dnnl_cpu_isa_t isa;

	if (dnnl_engine_create(&cpu_dnnl_eng, dnnl_cpu, 0) != dnnl_success) {
		log_warn("oneDNN: no CPU engine: bf16 GEMMs widened to fp32");
		cpu_dnnl_native = 0;
		return;
	}
	isa = dnnl_get_effective_cpu_isa();
	cpu_dnnl_isa = cpu_dnnl_isa_name(isa);
	cpu_dnnl_native = isa == dnnl_cpu_isa_avx512_core_bf16 || isa == dnnl_cpu_isa_avx512_core_amx;
}

int cpu_dnnl_probe(const char **isa)
{
	pthread_once(&cpu_dnnl_once, cpu_dnnl_init);
	if (isa) *isa = cpu_dnnl_isa;
	return cpu_dnnl_native;
}

/* md: batch x [rows, cols] (2-D where batch is 1) of type dt at strides
 * (sb, sr, sc) */
static int cpu_dnnl_md(dnnl_memory_desc_t *md, int batch, int rows, int cols, dnnl_data_type_t dt,
                       int64_t sb, int64_t sr, int64_t sc)
{
	dnnl_dims_t d = { batch, rows, cols }, s = { sb, sr, sc };

	if (batch == 1) {
		dnnl_dims_t d2 = { rows, cols }, s2 = { sr, sc };
		return dnnl_memory_desc_init_by_strides(md, 2, d2, dt, s2) == dnnl_success ? 0 : -1;
	}
	return dnnl_memory_desc_init_by_strides(md, 3, d, dt, s) == dnnl_success ? 0 : -1;
}

/* x: an operand of batch x [rows, cols] at (stride, ld) rounded to bf16
 * into a contiguous copy, malloc'ed; NULL when out of memory */
static uint16_t *cpu_dnnl_pack(const float *x, int batch, int64_t stride, int rows, int cols, int64_t ld)
{
	int64_t per = (int64_t)rows * cols, n = per * batch;
	uint16_t *y = malloc(sizeof *y * (size_t)(n > 0 ? n : 1));

	#pragma omp parallel for schedule(static) if (y && n > (1 << 18))
	for (int64_t r = 0; r < (y ? (int64_t)batch * rows : 0); r++) {
		const float *s = x + r / rows * stride + r % rows * ld;
		uint16_t *d = y + r * cols;
		for (int c = 0; c < cols; c++) d[c] = safetensors_f32_to_bf16(s[c]);
	}
	return y;
}

/* the matmul primitive of g (operand descriptors a, b, c, bias), or NULL
 * where oneDNN has none but its reference code */
static dnnl_primitive_t cpu_dnnl_prim(const be_gemm_t *g, const dnnl_memory_desc_t *a,
                                      const dnnl_memory_desc_t *b, const dnnl_memory_desc_t *c,
                                      const dnnl_memory_desc_t *bias)
{
	dnnl_matmul_desc_t md;
	dnnl_primitive_attr_t attr = NULL;
	dnnl_post_ops_t po = NULL;
	dnnl_primitive_desc_t pd = NULL;
	dnnl_primitive_t p = NULL;
	const char *impl = NULL;
	int ok;

	ok = dnnl_matmul_desc_init(&md, a, b, bias, c) == dnnl_success &&
	     dnnl_primitive_attr_create(&attr) == dnnl_success && dnnl_post_ops_create(&po) == dnnl_success;
	if (ok && g->alpha != 1.0f) ok = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &g->alpha) == dnnl_success;
	if (ok && g->beta != 0.0f) ok = dnnl_post_ops_append_sum(po, g->beta) == dnnl_success;
	if (ok && g->relu) ok = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f) == dnnl_success;
	ok = ok && dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success &&
	     dnnl_primitive_desc_create(&pd, &md, attr, cpu_dnnl_eng, NULL) == dnnl_success &&
	     dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success &&
	     impl && !strstr(impl, "ref");
	if (ok && dnnl_primitive_create(&p, pd) != dnnl_success) p = NULL;
	if (pd) dnnl_primitive_desc_destroy(pd);
	if (po) dnnl_post_ops_destroy(po);
	if (attr) dnnl_primitive_attr_destroy(attr);
	return p;
}

/* g on oneDNN's bf16 matmul: 0, 1 where oneDNN has no (fast) primitive
 * for it (nothing done), negative on failure */
static int cpu_dnnl_matmul(const be_gemm_t *g)
{
	int ra = g->transa ? g->k : g->m, ca = g->transa ? g->m : g->k;
	int rb = g->transb ? g->n : g->k, cb = g->transb ? g->k : g->n;
	uint16_t *pa = NULL, *pb = NULL;
	const void *a = g->a, *b = g->b;
	int64_t lda = g->lda, ldb = g->ldb, sa = g->stride_a, sb = g->stride_b;
	dnnl_memory_desc_t da, db, dc, dbias;
	dnnl_memory_t ma = NULL, mb = NULL, mc = NULL, mbias = NULL;
	dnnl_primitive_t p = NULL;
	dnnl_stream_t st = NULL;
	int rc = -1;

	if (!g->a_bf16) {
		if (!(pa = cpu_dnnl_pack(g->a, g->batch, g->stride_a, ra, ca, g->lda))) return STATUS_OOM;
		a = pa; lda = ca; sa = (int64_t)ra * ca;
	}
	if (!g->b_bf16) {
		if (!(pb = cpu_dnnl_pack(g->b, g->batch, g->stride_b, rb, cb, g->ldb))) { rc = STATUS_OOM; goto done; }
		b = pb; ldb = cb; sb = (int64_t)rb * cb;
	}
	if (cpu_dnnl_md(&da, g->batch, g->m, g->k, dnnl_bf16, sa, g->transa ? 1 : lda, g->transa ? lda : 1) < 0 ||
	    cpu_dnnl_md(&db, g->batch, g->k, g->n, dnnl_bf16, sb, g->transb ? 1 : ldb, g->transb ? ldb : 1) < 0 ||
	    cpu_dnnl_md(&dc, g->batch, g->m, g->n, dnnl_f32, g->stride_c, g->ldc, 1) < 0)
		goto done;
	if (g->bias) {   /* [1, n], or [1, 1, n] broadcast over the batch */
		dnnl_dims_t d = { 1, 1, g->n }, s = { g->n, g->n, 1 };
		int nd = g->batch == 1 ? 2 : 3;
		if (dnnl_memory_desc_init_by_strides(&dbias, nd, d + 3 - nd, dnnl_f32, s + 3 - nd) != dnnl_success)
			goto done;
	}
	if (!(p = cpu_dnnl_prim(g, &da, &db, &dc, g->bias ? &dbias : NULL))) { rc = 1; goto done; }
	if (dnnl_memory_create(&ma, &da, cpu_dnnl_eng, (void *)a) != dnnl_success ||
	    dnnl_memory_create(&mb, &db, cpu_dnnl_eng, (void *)b) != dnnl_success ||
	    dnnl_memory_create(&mc, &dc, cpu_dnnl_eng, g->c) != dnnl_success ||
	    (g->bias && dnnl_memory_create(&mbias, &dbias, cpu_dnnl_eng, (void *)g->bias) != dnnl_success) ||
	    dnnl_stream_create(&st, cpu_dnnl_eng, dnnl_stream_default_flags) != dnnl_success)
		goto done;
	dnnl_exec_arg_t args[4] = {
		{ DNNL_ARG_SRC, ma }, { DNNL_ARG_WEIGHTS, mb }, { DNNL_ARG_DST, mc }, { DNNL_ARG_BIAS, mbias },
	};
	if (dnnl_primitive_execute(p, st, g->bias ? 4 : 3, args) == dnnl_success &&
	    dnnl_stream_wait(st) == dnnl_success)
		rc = 0;
done:
	if (rc < 0) log_error("cpu backend: oneDNN bf16 matmul [%d, %d] x [%d, %d] (batch %d) failed",
	                      g->m, g->k, g->k, g->n, g->batch);
	if (st) dnnl_stream_destroy(st);
	if (mbias) dnnl_memory_destroy(mbias);
	if (mc) dnnl_memory_destroy(mc);
	if (mb) dnnl_memory_destroy(mb);
	if (ma) dnnl_memory_destroy(ma);
	if (p) dnnl_primitive_destroy(p);
	free(pb);
	free(pa);
	return rc;
}

/* 1: oneDNN's bf16 matmul is faster than the own fp32 kernels on g's
 * shape (docs/benchmarks.md, "bf16 on the CPU") */
static int cpu_dnnl_wins(const be_gemm_t *g)
{
	return 1;
}

int cpu_dnnl_gemm(be_t *be, const be_gemm_t *g)
{
	int rc;

	if (g->m <= 0 || g->n <= 0 || g->k <= 0 || g->batch <= 0 || cpu_dnnl_probe(NULL) != 1 ||
	    !cpu_dnnl_wins(g))
		return cpu_dnnl_widened(be, g);
	rc = cpu_dnnl_matmul(g);
	return rc == 1 ? cpu_dnnl_widened(be, g) : rc;
}

#else

int cpu_dnnl_probe(const char **isa)
{
	if (isa) *isa = "none";
	return -1;
}

int cpu_dnnl_gemm(be_t *be, const be_gemm_t *g)
{
	return cpu_dnnl_widened(be, g);
}

#endif
