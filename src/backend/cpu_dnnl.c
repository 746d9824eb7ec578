/* cpu_dnnl.c - bf16 GEMMs on the CPU (see cpu_dnnl.h).
 *
 * oneDNN's matmul takes the operands as bf16 memory at their own strides:
 * a bf16 weight as it is held, an fp32 activation rounded (to nearest
 * even, as the GEMM's operand and as the widened path rounds it) into a
 * contiguous bf16 copy; dst fp32, alpha as the output scale, bias its bias
 * argument, beta a sum post-op and the ReLU an eltwise one (oneDNN scales
 * the bias by alpha too: a GEMM with both is widened).  One engine
 * for the process; a stream and a scratchpad per call (cheap on the
 * CPU), so callers on many threads at once (the transition's tiles,
 * several workers) each run their own: in oneDNN's default scratchpad
 * mode distinct primitives share one scratchpad unless the library was
 * built with DNNL_ENABLE_CONCURRENT_EXEC, so ours are made in user mode.
 * Primitives come from oneDNN's primitive cache, keyed by shape.  oneDNN runs on the same OpenMP pool as the backend (inside a
 * parallel region: on the calling thread).
 */
#include "config.h"

#include "backend/cpu_dnnl.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

#include "util/hash.h"
#include "util/log.h"
#include "util/status.h"
#include "io/safetensors.h"

/* elements a GEMM operand spans: batch x [rows, cols] rows of stride ld */
static int64_t cpu_dnnl_span(int batch, int64_t stride, int rows, int cols, int64_t ld)
{
	return batch > 0 && rows > 0 && cols > 0 ? (batch - 1) * stride + (rows - 1) * ld + cols : 0;
}

float *cpu_dnnl_round(const void *x, int64_t n, int bf16)
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
static int            cpu_dnnl_amx, cpu_dnnl_all;
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
	cpu_dnnl_amx = isa == dnnl_cpu_isa_avx512_core_amx;
	cpu_dnnl_all = getenv("ESMBATCH_CPU_DNNL") != NULL;
}

const char *cpu_dnnl_version(void)
{
	static char v[32];
	const dnnl_version_t *d = dnnl_version();

	snprintf(v, sizeof v, "%d.%d.%d", d->major, d->minor, d->patch);
	return v;
}

int cpu_dnnl_probe(const char **isa)
{
	pthread_once(&cpu_dnnl_once, cpu_dnnl_init);
	if (isa) *isa = cpu_dnnl_isa;
	return cpu_dnnl_native && (cpu_dnnl_amx || cpu_dnnl_all);
}

/* x: an operand of batch x [rows, cols] at (stride, ld) rounded to bf16
 * into a contiguous copy, malloc'ed; NULL when out of memory */
static uint16_t *cpu_dnnl_pack(const float *x, int batch, int64_t stride, int rows, int cols, int64_t ld)
{
	int64_t n = (int64_t)rows * cols * batch;
	uint16_t *y = malloc(sizeof *y * (size_t)(n > 0 ? n : 1));

	#pragma omp parallel for schedule(static) if (y && n > (1 << 18))
	for (int64_t r = 0; r < (y ? (int64_t)batch * rows : 0); r++) {
		const float *s = x + r / rows * stride + r % rows * ld;
		uint16_t *d = y + r * cols;
		for (int c = 0; c < cols; c++) d[c] = safetensors_f32_to_bf16(s[c]);
	}
	return y;
}

/* What a primitive is made for: g's shape, its operands' strides as
 * oneDNN reads them (A and B bf16, C fp32; a packed operand contiguous),
 * its epilogue.  Every field set, no padding, so keys compare as bytes. */
typedef struct {
	int64_t m, n, k, batch;
	int64_t a_sb, a_sm, a_sk, b_sb, b_sk, b_sn, c_sb, c_sm;
	float alpha, beta;
	int32_t relu, bias;
} cpu_dnnl_key_t;

/* Made primitives, kept for the process's life (making one, a JIT
 * kernel, costs more than many small products): an open-addressed table
 * of CPU_DNNL_SLOTS, at most half of them used; past that a primitive is
 * made for the call and destroyed after it.  A primitive may run on many
 * threads at once. */
#define CPU_DNNL_SLOTS 1024
typedef struct {
	cpu_dnnl_key_t   key;
	dnnl_primitive_t p;      /* NULL: oneDNN has only its reference code */
	int              used;
} cpu_dnnl_slot_t;

static pthread_mutex_t cpu_dnnl_lock = PTHREAD_MUTEX_INITIALIZER;
static cpu_dnnl_slot_t cpu_dnnl_slots[CPU_DNNL_SLOTS];
static int             cpu_dnnl_nslots;

/* md: batch x [rows, cols] (2-D where batch is 1) of type dt at strides
 * (sb, sr, sc) */
static int cpu_dnnl_md(dnnl_memory_desc_t *md, int64_t batch, int64_t rows, int64_t cols,
                       dnnl_data_type_t dt, int64_t sb, int64_t sr, int64_t sc)
{
	dnnl_dims_t d = { batch, rows, cols }, s = { sb, sr, sc };
	int nd = batch == 1 ? 2 : 3;

	return dnnl_memory_desc_init_by_strides(md, nd, d + 3 - nd, dt, s + 3 - nd) == dnnl_success ? 0 : -1;
}

/* the bias: [1, n], or [1, 1, n] broadcast over a batch */
static int cpu_dnnl_bias_md(dnnl_memory_desc_t *md, int64_t batch, int64_t n)
{
	dnnl_dims_t d = { 1, 1, n }, s = { n, n, 1 };
	int nd = batch == 1 ? 2 : 3;

	return dnnl_memory_desc_init_by_strides(md, nd, d + 3 - nd, dnnl_f32, s + 3 - nd) == dnnl_success ? 0 : -1;
}

/* the matmul primitive of k, or NULL where oneDNN has none but its
 * reference code (or cannot make it) */
static dnnl_primitive_t cpu_dnnl_make(const cpu_dnnl_key_t *k)
{
	dnnl_memory_desc_t a, b, c, bias;
	dnnl_matmul_desc_t md;
	dnnl_primitive_attr_t attr = NULL;
	dnnl_post_ops_t po = NULL;
	dnnl_primitive_desc_t pd = NULL;
	dnnl_primitive_t p = NULL;
	const char *impl = NULL;
	int ok;

	ok = !cpu_dnnl_md(&a, k->batch, k->m, k->k, dnnl_bf16, k->a_sb, k->a_sm, k->a_sk) &&
	     !cpu_dnnl_md(&b, k->batch, k->k, k->n, dnnl_bf16, k->b_sb, k->b_sk, k->b_sn) &&
	     !cpu_dnnl_md(&c, k->batch, k->m, k->n, dnnl_f32, k->c_sb, k->c_sm, 1) &&
	     (!k->bias || !cpu_dnnl_bias_md(&bias, k->batch, k->n));
	ok = ok && dnnl_matmul_desc_init(&md, &a, &b, k->bias ? &bias : NULL, &c) == dnnl_success &&
	     dnnl_primitive_attr_create(&attr) == dnnl_success && dnnl_post_ops_create(&po) == dnnl_success;
	if (ok && k->alpha != 1.0f) ok = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &k->alpha) == dnnl_success;
	if (ok && k->beta != 0.0f) ok = dnnl_post_ops_append_sum(po, k->beta) == dnnl_success;
	if (ok && k->relu) ok = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f) == dnnl_success;
	ok = ok && dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success &&
	     dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
	     dnnl_primitive_desc_create(&pd, &md, attr, cpu_dnnl_eng, NULL) == dnnl_success &&
	     dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success &&
	     impl && !strstr(impl, "ref");
	if (ok && dnnl_primitive_create(&p, pd) != dnnl_success) p = NULL;
	if (pd) dnnl_primitive_desc_destroy(pd);
	if (po) dnnl_post_ops_destroy(po);
	if (attr) dnnl_primitive_attr_destroy(attr);
	return p;
}

/* the primitive of k: cached, or made; *own 1 where the caller destroys
 * it after the call (the table is full) */
static dnnl_primitive_t cpu_dnnl_prim(const cpu_dnnl_key_t *k, int *own)
{
	uint64_t h = hash_bytes(0, k, sizeof *k);
	cpu_dnnl_slot_t *s = NULL;
	dnnl_primitive_t p;

	*own = 0;
	pthread_mutex_lock(&cpu_dnnl_lock);
	for (uint64_t i = 0; i < CPU_DNNL_SLOTS; i++) {
		s = &cpu_dnnl_slots[(h + i) % CPU_DNNL_SLOTS];
		if (!s->used || !memcmp(&s->key, k, sizeof *k)) break;
	}
	if (s->used) {
		p = s->p;
	} else if (cpu_dnnl_nslots < CPU_DNNL_SLOTS / 2) {
		p = cpu_dnnl_make(k);
		*s = (cpu_dnnl_slot_t){ *k, p, 1 };
		cpu_dnnl_nslots++;
	} else {
		p = cpu_dnnl_make(k);
		*own = 1;
	}
	pthread_mutex_unlock(&cpu_dnnl_lock);
	return p;
}

/* g on oneDNN's bf16 matmul: 0, 1 where oneDNN has no fast primitive
 * for it (nothing done), negative on failure */
static int cpu_dnnl_matmul(const be_gemm_t *g)
{
	int ra = g->transa ? g->k : g->m, ca = g->transa ? g->m : g->k;
	int rb = g->transb ? g->n : g->k, cb = g->transb ? g->k : g->n, own = 0, rc = -1;
	uint16_t *pa = NULL, *pb = NULL;
	const void *a = g->a, *b = g->b;
	int64_t lda = g->lda, ldb = g->ldb, sa = g->stride_a, sb = g->stride_b;
	dnnl_memory_t ma = NULL, mb = NULL, mc = NULL, mbias = NULL, msp = NULL;
	const_dnnl_primitive_desc_t ppd;
	const dnnl_memory_desc_t *dsp = NULL;
	void *sp = NULL;
	size_t nsp = 0;
	dnnl_memory_desc_t da, db, dc, dbias;
	dnnl_primitive_t p;
	dnnl_stream_t st = NULL;
	cpu_dnnl_key_t k;

	/* oneDNN scales the bias with the product (alpha (A B + bias)) */
	if (g->alpha != 1.0f && g->bias) return 1;
	if (!g->a_bf16) {
		if (!(pa = cpu_dnnl_pack(g->a, g->batch, g->stride_a, ra, ca, g->lda))) return STATUS_OOM;
		a = pa; lda = ca; sa = (int64_t)ra * ca;
	}
	if (!g->b_bf16) {
		if (!(pb = cpu_dnnl_pack(g->b, g->batch, g->stride_b, rb, cb, g->ldb))) { rc = STATUS_OOM; goto done; }
		b = pb; ldb = cb; sb = (int64_t)rb * cb;
	}
	k = (cpu_dnnl_key_t){
		.m = g->m, .n = g->n, .k = g->k, .batch = g->batch,
		.a_sb = sa, .a_sm = g->transa ? 1 : lda, .a_sk = g->transa ? lda : 1,
		.b_sb = sb, .b_sk = g->transb ? 1 : ldb, .b_sn = g->transb ? ldb : 1,
		.c_sb = g->stride_c, .c_sm = g->ldc, .alpha = g->alpha, .beta = g->beta,
		.relu = g->relu, .bias = g->bias != NULL,
	};
	if (!(p = cpu_dnnl_prim(&k, &own))) { rc = 1; goto done; }
	if (cpu_dnnl_md(&da, k.batch, k.m, k.k, dnnl_bf16, k.a_sb, k.a_sm, k.a_sk) ||
	    cpu_dnnl_md(&db, k.batch, k.k, k.n, dnnl_bf16, k.b_sb, k.b_sk, k.b_sn) ||
	    cpu_dnnl_md(&dc, k.batch, k.m, k.n, dnnl_f32, k.c_sb, k.c_sm, 1) ||
	    cpu_dnnl_bias_md(&dbias, k.batch, k.n))
		goto done;
	if (dnnl_memory_create(&ma, &da, cpu_dnnl_eng, (void *)a) != dnnl_success ||
	    dnnl_memory_create(&mb, &db, cpu_dnnl_eng, (void *)b) != dnnl_success ||
	    dnnl_memory_create(&mc, &dc, cpu_dnnl_eng, g->c) != dnnl_success ||
	    (g->bias && dnnl_memory_create(&mbias, &dbias, cpu_dnnl_eng, (void *)g->bias) != dnnl_success) ||
	    dnnl_stream_create(&st, cpu_dnnl_eng, dnnl_stream_default_flags) != dnnl_success ||
	    dnnl_primitive_get_primitive_desc(p, &ppd) != dnnl_success)
		goto done;
	/* this call's own scratchpad (user mode: cpu_dnnl_make) */
	if ((dsp = dnnl_primitive_desc_query_md(ppd, dnnl_query_scratchpad_md, 0)))
		nsp = dnnl_memory_desc_get_size(dsp);
	if (nsp && (!(sp = aligned_alloc(64, (nsp + 63) & ~(size_t)63)) ||
	            dnnl_memory_create(&msp, dsp, cpu_dnnl_eng, sp) != dnnl_success)) {
		rc = sp ? -1 : STATUS_OOM;
		goto done;
	}
	dnnl_exec_arg_t args[5] = { { DNNL_ARG_SRC, ma }, { DNNL_ARG_WEIGHTS, mb }, { DNNL_ARG_DST, mc } };
	int nargs = 3;
	if (g->bias) args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_BIAS, mbias };
	if (msp) args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_SCRATCHPAD, msp };
	if (dnnl_primitive_execute(p, st, nargs, args) == dnnl_success &&
	    dnnl_stream_wait(st) == dnnl_success)
		rc = 0;
done:
	if (rc < 0) log_error("cpu backend: oneDNN bf16 matmul [%d, %d] x [%d, %d] (batch %d) failed",
	                      g->m, g->k, g->k, g->n, g->batch);
	if (st) dnnl_stream_destroy(st);
	if (msp) dnnl_memory_destroy(msp);
	free(sp);
	if (mbias) dnnl_memory_destroy(mbias);
	if (mc) dnnl_memory_destroy(mc);
	if (mb) dnnl_memory_destroy(mb);
	if (ma) dnnl_memory_destroy(ma);
	if (own && p) dnnl_primitive_destroy(p);
	free(pb);
	free(pa);
	return rc;
}

/* 1: oneDNN's bf16 matmul is faster than the own fp32 kernels on g's
 * shape (measured shape by shape: docs/benchmarks.md, "bf16 on the
 * CPU"): on AMX every shape but the pair linears' [*, 128] x [128, 128];
 * with AVX512-BF16 alone none (its matmul ran at a third to a half of
 * the own kernels' speed).  ESMBATCH_CPU_DNNL=1 (a test hook) takes every
 * shape to oneDNN where it has a bf16 matmul. */
static int cpu_dnnl_wins(const be_gemm_t *g)
{
	if (cpu_dnnl_all) return 1;
	return cpu_dnnl_amx && !(g->k <= 128 && g->n <= 128);
}

int cpu_dnnl_takes(const be_gemm_t *g)
{
	return g->m > 0 && g->n > 0 && g->k > 0 && g->batch > 0 && cpu_dnnl_probe(NULL) == 1 &&
	       cpu_dnnl_wins(g);
}

int cpu_dnnl_gemm(be_t *be, const be_gemm_t *g)
{
	int rc;

	if (!cpu_dnnl_takes(g)) return cpu_dnnl_widened(be, g);
	rc = cpu_dnnl_matmul(g);
	return rc == 1 ? cpu_dnnl_widened(be, g) : rc;
}

#else

const char *cpu_dnnl_version(void)
{
	return NULL;
}

int cpu_dnnl_probe(const char **isa)
{
	if (isa) *isa = "none";
	return -1;
}

int cpu_dnnl_takes(const be_gemm_t *g)
{
	(void)g;
	return 0;
}

int cpu_dnnl_gemm(be_t *be, const be_gemm_t *g)
{
	return cpu_dnnl_widened(be, g);
}

#endif
