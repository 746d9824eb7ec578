/* backend.h (prefix be_) - a compute backend: a struct of function pointers plus a context.
 *
 * Model code never calls these directly: it goes through the op layer
 * (ops.h), which checks shapes, skips work while planning and records the
 * first failure.  The ops are listed once (BE_OPS), each taking one
 * parameter struct; every backend implements every entry but the
 * optional ones, mem_info, worker and the trimul op, which it may leave
 * NULL (be_supports says which it has).  All tensors are
 * row-major float32 in backend memory (host memory for the CPU backend,
 * device memory for CUDA); strides are in elements.  Each entry returns 0 on
 * success and a negative status on failure (never exits): STATUS_DEVICE
 * (util/status.h) when the device itself is lost (CUDA: a sticky error),
 * so that the scheduler retires it instead of failing record after record.
 */
#ifndef ESMBATCH_BACKEND_BACKEND_H
#define ESMBATCH_BACKEND_BACKEND_H

#include <stddef.h>
#include <stdint.h>

typedef struct be be_t;

/* what a device computes with (--precision): auto lets the backend choose */
typedef enum {
	BE_PREC_AUTO = 0, BE_PREC_FP32, BE_PREC_BF16, BE_PREC_FP16, BE_PREC_COUNT
} be_prec_t;

/* "auto", "fp32", "bf16", "fp16"; "?" for anything else */
static inline const char *be_prec_name(be_prec_t p)
{
	static const char *const names[BE_PREC_COUNT] = { "auto", "fp32", "bf16", "fp16" };
	return (unsigned)p < BE_PREC_COUNT ? names[p] : "?";
}

/* C[b] = alpha * op(A[b]) op(B[b]) + beta * C[b] (+ bias[n] on every row),
 * b = 0..batch-1; op(X) = X or X^T; row-major.  prec: what this GEMM's
 * inputs are rounded to; BE_PREC_AUTO (0, so a GEMM that leaves it out)
 * takes the backend's precision (be->precision, --precision), BE_PREC_FP32
 * keeps fp32 inputs whatever the backend's; a backend that computes in fp32
 * only (the CPU) runs every GEMM in fp32.  Accumulation is fp32 always.
 * a_bf16 / b_bf16: that operand is bfloat16 data (the pointer is to its
 * uint16_t elements; ld and stride count them), on a device whose weights
 * are bf16 (be->weights_bf16), with prec BE_PREC_AUTO; the product
 * accumulates in fp32.  One of them (a weight matrix): the other, fp32
 * operand is rounded to bf16 too; only with batch 1.  Both (e.g. the
 * triangle products' operands, written in bf16 by ln_linear): any batch,
 * no conversion.
 * b_f16: b is binary16 weight data (uint16_t elements), on a backend
 * with be->weights_f16, widened exactly to fp32 as it is read: the
 * product is the one of its float32 copy, bit for bit; only with transa
 * 0, transb 1 (an nn.Linear's W) and batch 1.
 * relu: C = max(C, 0) after the bias, in the GEMM's epilogue (on the
 * block of C just computed, not a pass of its own); only with beta 0. */
typedef struct {
	int transa, transb;
	int m, n, k;
	float alpha, beta;
	const float *a; int64_t lda, stride_a;
	const float *b; int64_t ldb, stride_b;
	float       *c; int64_t ldc, stride_c;
	int batch;
	const float *bias;       /* [n] or NULL */
	be_prec_t    prec;       /* BE_PREC_AUTO: the backend's */
	int          a_bf16, b_bf16;   /* 1: a (b) is bf16 weight data */
	int          b_f16;    /* 1: b is binary16 weight data, widened exactly */
	int          relu;     /* 1: C = max(C, 0) after the bias (beta 0) */
} be_gemm_t;

/* o = softmax(scale * q k^T + bias + mask) v, per batch b and head h, with
 * the head dimension d contiguous and every other dimension strided:
 *   q: [B, Lq, H, D] at q + b*q_sb + i*q_sl + h*q_sh
 *   k, v: [B, Lk, H, D], o: [B, Lq, H, D] likewise
 *   bias: [B?, H, Lq, Lk] at bias + b*bias_sb + h*bias_sh + i*bias_sq + j
 *         (bias_sb = 0 shares one bias across the batch), or NULL
 *   mask: [B, Lk] at mask + b*mask_sb + j; 0 drops key j, or NULL;
 *         a query row whose keys are all dropped gets o = 0
 *   g: [B, Lq, H, D] at g + b*o_sb + i*o_sl + h*o_sh (the output's
 *      strides), pre-sigmoid gate logits, or NULL: then o = attention /
 *      (1 + exp(-g)), applied in the epilogue (the BE_GATE formula)
 *   rope: [max(Lq, Lk), D/2, 2] or NULL: ESM-2's rotary embedding
 *      applied to q and k as they are loaded (D even): with (c, s) =
 *      (rope[2 (p D/2 + d)], rope[2 (p D/2 + d) + 1]) at position p (query
 *      row i, key j), x[d] becomes x[d] c - x[d + D/2] s and x[d + D/2]
 *      becomes x[d + D/2] c + x[d] s for d < D/2 (rotate-half), each
 *      product and sum rounded to fp32 as written, so that the result is
 *      attention on the rotated tensors bit for bit
 * Implementations stream over keys (online softmax): no [Lq, Lk] score
 * matrix beyond a tile is ever materialised. */
typedef struct {
	int B, H, Lq, Lk, D;
	float scale;
	const float *q; int64_t q_sb, q_sl, q_sh;
	const float *k; int64_t k_sb, k_sl, k_sh;
	const float *v; int64_t v_sb, v_sl, v_sh;
	float       *o; int64_t o_sb, o_sl, o_sh;
	const float *bias; int64_t bias_sb, bias_sh, bias_sq;
	const float *mask; int64_t mask_sb;
	const float *g;          /* gate logits, o's strides, or NULL */
	const float *rope;       /* rotary (cos, sin) table, or NULL */
} be_attn_t;

/* The transition (an MLP with a residual) on rows of x, in place:
 *   x: [rows, d] += relu(LayerNorm(x) w1^T + b1) w2^T + b2
 * ln_w, ln_b: [d], eps; w1: [h, d], b1: [h]; w2: [d, h], b2: [d]
 * (nn.Linear layouts; biases may be NULL).  bf16: w1 and w2 are bfloat16
 * weight data (be->weights_bf16, as be_gemm_t.b_bf16): the normed rows
 * and the hidden rows are rounded to bf16 as their products' operands,
 * products accumulate in fp32.  Implementations work on tiles of rows:
 * the [rows, h] hidden layer is never held whole (CUDA's bf16 sequence
 * transition holds it for chunks of rows in its workspace's stage). */
typedef struct {
	float *x; int64_t rows; int d, h;
	const float *ln_w, *ln_b; float eps;
	const float *w1, *b1;
	const float *w2, *b2;
	int bf16;
} be_transition_t;

/* One output group of be_ln_linear_t: n features f of row (i, j), written
 * to y[i, j, f] at y + i*si + j*sj + f*sc (channel-last, channel-major
 * or a per-head [H, L, L] bias, by the strides), from the group's weight
 * rows (consecutive in be_ln_linear_t.w, groups in order):
 *   BE_LNLIN_PLAIN: n rows; y = x' W^T + bias + beta * y
 *   BE_LNLIN_GATE:  2n rows, p then g; y = (x' W_p^T + bias) *
 *                   sigmoid(x' W_g^T + bias_g) + beta * y
 * bias, bias_g: [n] or NULL (0).  beta 0 never reads y.
 * bf16: y is bfloat16 data (uint16_t elements, the strides counting
 * them), each value rounded to nearest even as it is stored: the operand
 * of a GEMM on bf16 operands (be_gemm_t.a_bf16 and b_bf16); beta 0 only. */
typedef enum { BE_LNLIN_PLAIN = 0, BE_LNLIN_GATE } be_lnlin_kind_t;
typedef struct {
	int n;
	be_lnlin_kind_t kind;
	float *y; int64_t si, sj, sc;
	const float *bias, *bias_g;
	float beta;
	int bf16;                /* 1: y is bf16 data (beta 0) */
} be_lnlin_out_t;

#define BE_LNLIN_GROUPS 6   /* most output groups of one be_ln_linear_t */

/* Layer norm fused into the linears that consume it: every row
 * x[i, j, :] (k floats, contiguous, at x + i*x_si + j*x_sj; i < ni,
 * j < nj) is read once, layer-normed over k (ln_w, ln_b: [k]; ln_w NULL:
 * no norm, a plain fused linear) into x', and multiplied by the weight
 * matrix w: [N, k] (N: the groups' weight rows together; w_bf16: bf16
 * weight data, be->weights_bf16), each group's features written through
 * its own strides.  Outputs apart from x and from each other. */
typedef struct {
	int ni, nj, k;
	const float *x; int64_t x_si, x_sj;
	const float *ln_w, *ln_b; float eps;
	const float *w; int w_bf16;
	int ngroups;
	be_lnlin_out_t out[BE_LNLIN_GROUPS];
} be_ln_linear_t;

/* N: the weight rows of p's groups together */
static inline int be_lnlin_rows(const be_ln_linear_t *p)
{
	int n = 0;
	for (int g = 0; g < p->ngroups; g++) n += p->out[g].kind == BE_LNLIN_GATE ? 2 * p->out[g].n : p->out[g].n;
	return n;
}

/* Rows of d floats of a pair tensor read or written in place at two
 * strides: row r = i * n2 + j (i < n1, j < n2) starts i * s1 + j * s2
 * elements after the base pointer.  A block of nc rows of z: [L, L, d]:
 * n1 = nc, s1 = L d, n2 = L, s2 = d; the same block of z^T: s1 = d,
 * s2 = L d (the triangle multiplication's incoming update). */
typedef struct { int64_t n1, n2, s1, s2; } be_rows_t;

/* The triangle multiplication's output side in one op, on rows =
 * zr.n1 * zr.n2 rows of c channels:
 *   z[row r] += (LayerNorm(x[r]) W^T + b) * sigmoid(gv[r])
 * (the gate as BE_GATE: a / (1 + exp(-gv))), the layer norm over c with
 * ln_w, ln_b, eps, statistics in fp32.
 *   z: rows at zr's strides (be_rows_t), updated in place
 *   x: element (r, ch) at x[r * x_rs + ch * x_cs]: channel-last
 *      (x_rs = c, x_cs = 1) or channel-major [c][rows] (x_rs = 1,
 *      x_cs = rows), apart from z
 *   gv: [rows, c] pre-sigmoid gate logits, apart from z
 *   w: [c, c] (out, in), fp32 or bfloat16 data (w_bf16, be->weights_bf16);
 *   b: [c] */
typedef struct {
	int c;
	float *z; be_rows_t zr;
	const float *x; int64_t x_rs, x_cs;
	const float *gv;
	const float *ln_w, *ln_b; float eps;
	const float *w; int w_bf16;
	const float *b;
} be_trimul_out_t;

typedef enum { BE_RELU, BE_GELU, BE_SIGMOID } be_act_t;
typedef enum { BE_ADD, BE_MUL, BE_GATE /* a * sigmoid(b) */ } be_bin_t;

/* The parameters of the ops below that have no struct of their own
 * above; shapes in comments, n = element count. */

/* y, x: [rows, d]; w, b: [d]; y may alias x */
typedef struct {
	float *y; const float *x; int64_t rows; int d;
	const float *w, *b; float eps;
} be_layernorm_t;

/* x: [rows, d] softmax over d, in place */
typedef struct { float *x; int64_t rows; int d; } be_softmax_t;

/* be_t.act: x: [n] = kind(x), in place */
typedef struct { float *x; int64_t n; be_act_t kind; } be_unary_t;

/* y = a kind b, all [n]; y may alias a or b */
typedef struct { float *y; const float *a, *b; int64_t n; be_bin_t kind; } be_binary_t;

/* y = alpha * x + beta * y, all [n] */
typedef struct { float *y; const float *x; int64_t n; float alpha, beta; } be_axpby_t;

/* x: [n] = value */
typedef struct { float *x; int64_t n; float value; } be_fill_t;

/* y: [rows, d] = scale * table[idx[r], :]; idx: host int32 [rows] */
typedef struct {
	float *y; const float *table; const int32_t *idx;
	int64_t rows; int d; float scale;
} be_gather_t;

/* y: [B, A, C] = x: [A, B, C] with its two leading dims swapped */
typedef struct { float *y; const float *x; int64_t A, B, C; } be_transpose_t;

/* ESMFold sequence-to-pair features for rows i0..i0+ni-1:
 * y: [ni, L, 2c] with y[i,j] = (q[j] * k[i0+i], q[j] - k[i0+i]);
 * q, k: [L, c]; bf16: y is bfloat16 data (uint16_t), each value rounded
 * to nearest even (the operand of a bf16 x bf16 GEMM) */
typedef struct { float *y; const float *q, *k; int i0, ni, L, c; int bf16; } be_outer_t;

/* The triangle-multiplication product on channel-last tensors,
 * x: [ni, nj, c] with x[i, j, :] = sum_k a[i, k, :] * b[j, k, :];
 * a: [ni, nk, c], b: [nj, nk, c]; x apart from a and b */
typedef struct { float *x; const float *a, *b; int ni, nj, nk, c; } be_trimul_t;

/* The structure module's invariant point attention, points in (a whole
 * step on the device, no host copy): rig: [L, 12] = the rigid of each
 * frame of state: [L, 7] (unit quaternion w, x, y, z, then translation):
 * its rotation matrix (row-major) and its translation less the mean
 * translation over the L frames.  With g = rig_i applied to a local point
 * and w_h = softplus(hw[h]) sqrt(2 / (27 Pq)):
 *   qp: [L, 3, H Pq], kvp: [L, 3, H (Pq + Pv)] local points (x, y, z
 *       planes; point p of head h at h Pq + p, h (Pq + Pv) + p)
 *   qa: [L, H, 3 Pq + 2] = (w_h g_1..g_Pq, -w_h/2 sum |g|^2 +
 *       sqrt(1/3) bb[h], 1)
 *   ka: [L, H, 3 Pq + 2] = (g_1..g_Pq, 1, -w_h/2 sum |g|^2)
 *   vp: [L, H, 3 Pv] = the value points g_{Pq+1}..g_{Pq+Pv}
 *   hw, bb: [H] (ipa.head_weights, ipa.linear_b.bias)
 * The sums of squares are compensated (as if in double, then rounded). */
typedef struct {
	float *qa, *ka, *vp, *rig;
	const float *state, *qp, *kvp, *hw, *bb;
	int L, H, Pq, Pv;
} be_ipa_in_t;

/* IPA points out: l = R_i^T (op[i, n] - t_i) with (R_i, t_i) = rig[i]
 * (be_ipa_in_t's), into cat[i, {0, 1, 2, 3} n_pts + n] = l_x, l_y, l_z,
 * sqrt(|l|^2 + eps).  op: [L, n_pts, 3]; cat: [L, ldc] (its first
 * 4 n_pts columns written) */
typedef struct {
	float *cat; int64_t ldc; const float *op, *rig;
	int L, n_pts; float eps;
} be_ipa_out_t;

/* Backbone update: state: [L, 7] (quaternion, translation) composed with
 * upd: [L, 6] = (b, c, d, t): q <- normalise(q + q (0, b, c, d)),
 * t <- t + R(q_old) t_upd; frame: [L, 7] = (q, t * scale) of the new
 * state, or NULL.  upd NULL: state = identity (frame untouched). */
typedef struct { float *state, *frame; const float *upd; int L; float scale; } be_ipa_rigid_t;

/* The trunk's relative-position embedding added to rows i0..i0+ni-1 of
 * the pair tensor, z: [ni, L, c]: z[i, j] += table[clamp(residx[j] -
 * residx[i0 + i], -bins, bins) + bins + 1]; table: [2 bins + 2, c];
 * residx: [L] residue indices as floats (whole numbers below 2^24, exact)
 * in backend memory, so no index list comes from the host */
typedef struct { float *z; const float *table, *residx; int i0, ni, L, c, bins; } be_relpos_t;

/* The op list, each X(OP, slot, params): the backend entry be_t.slot,
 * int (*slot)(be_t *be, const params *p), and its be_supports name
 * BE_OP_OP.  The be_t slots, be_supports and the backends' tables
 * (the CPU's, the debug backend's checking wrappers) are made from it:
 * an op is added or removed here, in its params struct above, and in
 * each backend's implementation.  The fused ops (transition, ln_linear,
 * trimul_out) read and write each tensor once where the unfused ones
 * they replace would pass over it several times. */
#define BE_OPS(X) \
	X(GEMM,       gemm,       be_gemm_t) \
	X(ATTN,       attn,       be_attn_t) \
	X(LAYERNORM,  layernorm,  be_layernorm_t) \
	X(SOFTMAX,    softmax,    be_softmax_t) \
	X(ACT,        act,        be_unary_t) \
	X(BINARY,     binary,     be_binary_t) \
	X(AXPBY,      axpby,      be_axpby_t) \
	X(FILL,       fill,       be_fill_t) \
	X(GATHER,     gather,     be_gather_t) \
	X(TRANSPOSE,  transpose,  be_transpose_t) \
	X(OUTER,      outer,      be_outer_t) \
	X(TRIMUL,     trimul,     be_trimul_t) \
	X(IPA_IN,     ipa_in,     be_ipa_in_t) \
	X(IPA_OUT,    ipa_out,    be_ipa_out_t) \
	X(IPA_RIGID,  ipa_rigid,  be_ipa_rigid_t) \
	X(TRANSITION, transition, be_transition_t) \
	X(LN_LINEAR,  ln_linear,  be_ln_linear_t) \
	X(TRIMUL_OUT, trimul_out, be_trimul_out_t) \
	X(RELPOS,     relpos,     be_relpos_t)

/* the revision of the backends' kernels' summation orders, in every
 * be->numerics: raised whenever a kernel's results change bits (a cache
 * of results must not serve another revision's).  2: the CPU's fused
 * layer norm + linear on the own AVX-512 GEMM, the CUDA sequence
 * transition in two products over a hidden buffer; 3: its output
 * product split over k, the slices summed in slice order; 4: the CPU's
 * fused layer norm + linear gates by avx512_gate (was libm's expf); 5:
 * CUDA's bf16 attention renews its stabiliser lazily and gates by ex2
 * and an approximate reciprocal; 6: CUDA's bf16 sequence transition by
 * cuBLASLt, its hidden bias rounded to bf16; 7: CUDA's bf16-weight GEMMs
 * add bias (after a residual) in cuBLASLt's epilogue */
#define BE_KERNELS_REV 7

/* what be_supports answers for: every op of BE_OPS, then the optional
 * entries that are no op (be_t.mem_info, be_t.worker, be_t.graph_*,
 * be_t.host_alloc and fetch) */
typedef enum {
#define BE_OP_ENUM(OP, slot, params) BE_OP_##OP,
	BE_OPS(BE_OP_ENUM)
#undef BE_OP_ENUM
	BE_OP_MEM_INFO, BE_OP_WORKER, BE_OP_GRAPH, BE_OP_FETCH,
	BE_OP_COUNT
} be_op_t;

struct be {
	const char *name;
	void       *ctx;

	void (*destroy)(be_t *be);

	/* memory */
	int  (*alloc)(be_t *be, size_t nbytes, void **ptr);
	void (*free)(be_t *be, void *ptr);
	int  (*upload)(be_t *be, void *dst, const void *src, size_t nbytes);
	int  (*download)(be_t *be, void *dst, const void *src, size_t nbytes);
	int  (*sync)(be_t *be);
	/* optional (may be NULL): the device's free and total bytes as its
	 * driver reports them (CUDA: cudaMemGetInfo) */
	int  (*mem_info)(be_t *be, size_t *free, size_t *total);
	/* optional (may be NULL: then all workers share this backend safely,
	 * as on the CPU): a backend for one more worker on the same device,
	 * with its own stream, library handle and workspace, in the same
	 * memory space (buffers of either, weights included, are valid in
	 * both; what was uploaded through this one is there before the new
	 * one runs anything).  The caller frees it with be_free before this one. */
	be_t *(*worker)(be_t *be);
	/* optional (all four NULL or none; CUDA: CUDA graphs): recording the
	 * backend's work.  graph_begin starts recording: the ops that follow
	 * run nothing, they are recorded; upload, download, sync, gather,
	 * alloc and free are refused (logged, negative) until graph_end,
	 * which stops recording and sets *g to the recording (NULL, and
	 * negative, when the recording failed: it is discarded).  graph_run
	 * queues the recorded ops again, on the buffers (addresses) they were
	 * recorded with; graph_free releases a recording.  graph_begin may
	 * decline (negative, nothing recorded: the caller runs the ops as
	 * they come), e.g. CUDA once a worker shares this backend's stream. */
	int  (*graph_begin)(be_t *be);
	int  (*graph_end)(be_t *be, void **g);
	int  (*graph_run)(be_t *be, void *g);
	void (*graph_free)(be_t *be, void *g);
	/* optional (all four NULL or none; CUDA): weights held in host memory
	 * and fetched as a pass reaches them (the language model's host-held
	 * layers, esm2.h).  host_alloc: n bytes of host memory every device
	 * of the process copies from at full speed (CUDA: pinned, portable),
	 * released by host_free.  fetch queues a copy of n bytes from such
	 * memory (src) into device memory dst on a copy path of its own: it
	 * starts once the work queued on this backend before it has run (so
	 * dst may be a buffer that work still reads), and the work queued
	 * after it runs beside it, not after it, until fetch_wait: what is
	 * queued after a fetch_wait runs after every fetch queued before it.
	 * Both are refused while recording a graph. */
	int  (*host_alloc)(be_t *be, size_t n, void **p);
	void (*host_free)(be_t *be, void *p);
	int  (*fetch)(be_t *be, void *dst, const void *src, size_t n);
	int  (*fetch_wait)(be_t *be);
	/* bytes the backend holds per worker outside the arenas (e.g. a
	 * cuBLAS workspace); counted in a job's peak reserved */
	size_t      workspace;
	/* 1: backend memory is host memory (the CPU): a pass's host buffers
	 * (fwd_host) lie in its arena, and its figures cover them */
	int         host_mem;
	/* what the GEMMs take as inputs where their prec is BE_PREC_AUTO:
	 * "fp32", "bf16", "fp16"; they accumulate in fp32, and every
	 * activation stays fp32 but the operands a kernel writes in bf16 for
	 * a bf16 x bf16 GEMM (be_lnlin_out_t.bf16, be_outer_t.bf16) */
	const char *precision;
	/* what decides the bits of its results beside the precision: equal
	 * strings (and precisions) give equal outputs for equal inputs, so a
	 * cache of results may serve one for the other ("cpu avx512, BLAS
	 * ...", "cuda sm_90 NVIDIA H200, cuBLAS 120403") */
	const char *numerics;
	/* 1: Linear weight matrices are held as bfloat16, converted once at
	 * load (weights.h) and shared by the device's workers; GEMMs read
	 * them as bf16 operands (be_gemm_t.a_bf16 / b_bf16).  Every other
	 * weight (biases, norms, embeddings) stays fp32. */
	int         weights_bf16;
	/* 1: the GEMMs take binary16 weights (be_gemm_t.b_f16), so that the
	 * language model's matrices, binary16 in the published checkpoint,
	 * are held as they are (half the memory and traffic; weights.h):
	 * the CPU at fp32 where its own kernel runs.  0 where weights_bf16. */
	int         weights_f16;

	/* the ops (BE_OPS; their parameters above); trimul is optional (may
	 * be NULL: the trunk then multiplies channel-major projections with
	 * batched GEMMs) */
#define BE_OP_SLOT(OP, slot, params) int (*slot)(be_t *be, const params *p);
	BE_OPS(BE_OP_SLOT)
#undef BE_OP_SLOT
};

/* 1 when be has the entry op (BE_OPS' ops, BE_OP_MEM_INFO, BE_OP_WORKER,
 * BE_OP_GRAPH, BE_OP_FETCH),
 * 0 when it is NULL there (or be is NULL): model code asks this instead
 * of testing slots or naming a backend */
static inline int be_supports(const be_t *be, be_op_t op)
{
	if (!be) return 0;
	switch (op) {
#define BE_OP_CASE(OP, slot, params) case BE_OP_##OP: return be->slot != NULL;
	BE_OPS(BE_OP_CASE)
#undef BE_OP_CASE
	case BE_OP_MEM_INFO: return be->mem_info != NULL;
	case BE_OP_WORKER:   return be->worker != NULL;
	case BE_OP_GRAPH:    return be->graph_begin != NULL;
	case BE_OP_FETCH:    return be->fetch != NULL;
	default:             return 0;
	}
}

/* The CPU backend (OpenMP + CBLAS); always available. NULL on error. */
be_t *be_cpu_init(int threads);
/* The precision of a backend made by be_cpu_init: auto and fp32 compute
 * in fp32; bf16 (a build with oneDNN, cpu_dnnl.h) holds the Linear weight
 * matrices in bf16 (weights_bf16) and runs GEMMs on bf16 operands with
 * fp32 accumulation, logging how.  -ENODEV: not a CPU backend; -EINVAL:
 * a precision it cannot compute in. */
int   be_cpu_set_precision(be_t *be, be_prec_t prec);
/* The CUDA backend for one device; NULL (logged) when there is none. */
be_t *be_cuda_init(int device);
/* destroys any backend (NULL is fine) */
void  be_free(be_t *be);

#endif
