/* backend.h (prefix be_) - a compute backend: a struct of function pointers plus a context.
 *
 * Model code never calls these directly: it goes through the op layer
 * (ops.h), which checks shapes, skips work while planning and records the
 * first failure.  Every backend implements every entry (mem_info,
 * worker and trimul are optional).  All tensors are
 * row-major float32 in backend memory (host memory for the CPU backend,
 * device memory for CUDA); strides are in elements.  Each entry returns 0 on
 * success and a negative status on failure (never exits): STATUS_DEVICE
 * (util/status.h) when the device itself is lost (CUDA: a sticky error),
 * so that the scheduler retires it instead of failing record after record.
 */
#ifndef ESMBATCH_BE_H
#define ESMBATCH_BE_H

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
 * a_bf16 / b_bf16: that operand is a weight matrix held as bfloat16
 * (be->weights_bf16; the pointer is to its uint16_t data): the other
 * operand is rounded to bf16 too and the product accumulates in fp32;
 * only with batch 1 and prec BE_PREC_AUTO.
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
} be_attn_t;

typedef enum { BE_RELU, BE_GELU, BE_SIGMOID } be_act_t;
typedef enum { BE_ADD, BE_MUL, BE_GATE /* a * sigmoid(b) */ } be_bin_t;

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
	 * both).  The caller frees it with be_free before this one. */
	be_t *(*worker)(be_t *be);
	/* bytes the backend holds per worker outside the arenas (e.g. a
	 * cuBLAS workspace); counted in a job's peak reserved */
	size_t      workspace;
	/* 1: backend memory is host memory (the CPU): a pass's host buffers
	 * (fwd_host) lie in its arena, and its figures cover them */
	int         host_mem;
	/* what the GEMMs take as inputs where their prec is BE_PREC_AUTO:
	 * "fp32", "bf16", "fp16"; they accumulate in fp32, and every
	 * activation stays fp32 */
	const char *precision;
	/* 1: Linear weight matrices are held as bfloat16, converted once at
	 * load (weights.h) and shared by the device's workers; GEMMs read
	 * them as bf16 operands (be_gemm_t.a_bf16 / b_bf16).  Every other
	 * weight (biases, norms, embeddings) stays fp32. */
	int         weights_bf16;

	/* ops; shapes in comments, n = element count */
	int (*gemm)(be_t *be, const be_gemm_t *g);
	int (*attn)(be_t *be, const be_attn_t *a);
	/* y, x: [rows, d]; w, b: [d]; y may alias x */
	int (*layernorm)(be_t *be, float *y, const float *x, int64_t rows, int d,
	                 const float *w, const float *b, float eps);
	/* y: [rows, d] = LayerNorm over d of x: [d, rows] (channel-major:
	 * element (r, i) at x[i * rows + r]), so a transpose and the norm
	 * are one pass; y apart from x */
	int (*layernorm_cm)(be_t *be, float *y, const float *x, int64_t rows, int d,
	                    const float *w, const float *b, float eps);
	/* x: [rows, d] softmax over d, in place */
	int (*softmax)(be_t *be, float *x, int64_t rows, int d);
	/* x: [n] in place */
	int (*act)(be_t *be, float *x, int64_t n, be_act_t kind);
	/* y = a OP b, all [n]; y may alias a or b */
	int (*binary)(be_t *be, float *y, const float *a, const float *b, int64_t n, be_bin_t kind);
	/* y += a * sigmoid(b), all [n]: a gate and a residual add in one
	 * pass; y apart from a and b */
	int (*gate_add)(be_t *be, float *y, const float *a, const float *b, int64_t n);
	/* y: [rows, cols] = (y + by[r]) * sigmoid(g + bg[r]) on row r; g:
	 * [rows, cols]; by, bg: [rows] or NULL (0): two channel-major
	 * projections' biases and their gate in one pass; y apart from g */
	int (*gate_rows)(be_t *be, float *y, const float *g, const float *by, const float *bg,
	                 int64_t rows, int64_t cols);
	/* y = alpha * x + beta * y, all [n] */
	int (*axpby)(be_t *be, float *y, const float *x, int64_t n, float alpha, float beta);
	/* x: [n] = value */
	int (*fill)(be_t *be, float *x, int64_t n, float value);
	/* y: [rows, d] = scale * table[idx[r], :]; idx: host int32 [rows] */
	int (*gather)(be_t *be, float *y, const float *table, const int32_t *idx,
	              int64_t rows, int d, float scale);
	/* y: [B, A, C] = x: [A, B, C] with its two leading dims swapped */
	int (*transpose)(be_t *be, float *y, const float *x, int64_t A, int64_t B, int64_t C);
	/* x: [A, A, C] in place: x[a, b, :] <-> x[b, a, :] */
	int (*transpose_inplace)(be_t *be, float *x, int64_t A, int64_t C);
	/* x: [T, H, D] in place, rotary embedding of position t (rotate-half
	 * layout), inv_freq: [D/2] */
	int (*rotary)(be_t *be, float *x, int T, int H, int D, const float *inv_freq);
	/* ESMFold sequence-to-pair features for rows i0..i0+ni-1:
	 * y: [ni, L, 2c] with y[i,j] = (q[j] * k[i0+i], q[j] - k[i0+i]);
	 * q, k: [L, c] */
	int (*outer)(be_t *be, float *y, const float *q, const float *k, int i0, int ni, int L, int c);
	/* optional (may be NULL: the trunk then multiplies channel-major
	 * projections with batched GEMMs): the triangle-multiplication
	 * product on channel-last tensors, x: [ni, nj, c] with
	 * x[i, j, :] = sum_k a[i, k, :] * b[j, k, :]; a: [ni, nk, c],
	 * b: [nj, nk, c]; x apart from a and b */
	int (*trimul)(be_t *be, float *x, const float *a, const float *b, int ni, int nj, int nk, int c);
	/* The structure module's invariant point attention, points in (a
	 * whole step on the device, no host copy): rig: [L, 12] = the rigid
	 * of each frame of state: [L, 7] (unit quaternion w, x, y, z, then
	 * translation): its rotation matrix (row-major) and its translation
	 * less the mean translation over the L frames.  With g = rig_i
	 * applied to a local point and w_h = softplus(hw[h]) sqrt(2 / (27 Pq)):
	 *   qp: [L, 3, H Pq], kvp: [L, 3, H (Pq + Pv)] local points (x, y, z
	 *       planes; point p of head h at h Pq + p, h (Pq + Pv) + p)
	 *   qa: [L, H, 3 Pq + 2] = (w_h g_1..g_Pq, -w_h/2 sum |g|^2 +
	 *       sqrt(1/3) bb[h], 1)
	 *   ka: [L, H, 3 Pq + 2] = (g_1..g_Pq, 1, -w_h/2 sum |g|^2)
	 *   vp: [L, H, 3 Pv] = the value points g_{Pq+1}..g_{Pq+Pv}
	 *   hw, bb: [H] (ipa.head_weights, ipa.linear_b.bias)
	 * The sums of squares are compensated (as if in double, then rounded). */
	int (*ipa_in)(be_t *be, float *qa, float *ka, float *vp, float *rig, const float *state,
	              const float *qp, const float *kvp, const float *hw, const float *bb,
	              int L, int H, int Pq, int Pv);
	/* IPA points out: l = R_i^T (op[i, n] - t_i) with (R_i, t_i) = rig[i]
	 * (ipa_in's), into cat[i, {0, 1, 2, 3} n_pts + n] = l_x, l_y, l_z,
	 * sqrt(|l|^2 + eps).  op: [L, n_pts, 3]; cat: [L, ldc] (its first
	 * 4 n_pts columns written) */
	int (*ipa_out)(be_t *be, float *cat, int64_t ldc, const float *op, const float *rig,
	               int L, int n_pts, float eps);
	/* Backbone update: state: [L, 7] (quaternion, translation) composed
	 * with upd: [L, 6] = (b, c, d, t): q <- normalise(q + q (0, b, c, d)),
	 * t <- t + R(q_old) t_upd; frame: [L, 7] = (q, t * scale) of the new
	 * state, or NULL.  upd NULL: state = identity (frame untouched). */
	int (*ipa_rigid)(be_t *be, float *state, float *frame, const float *upd, int L, float scale);
	/* The trunk's relative-position embedding added to rows i0..i0+ni-1
	 * of the pair tensor, z: [ni, L, c]: z[i, j] += table[clamp(residx[j]
	 * - residx[i0 + i], -bins, bins) + bins + 1]; table: [2 bins + 2, c];
	 * residx: [L] residue indices as floats (whole numbers below 2^24,
	 * exact) in backend memory, so no index list comes from the host */
	int (*relpos)(be_t *be, float *z, const float *table, const float *residx, int i0, int ni, int L,
	              int c, int bins);
};

/* The CPU backend (OpenMP + CBLAS); always available. NULL on error. */
be_t *be_cpu_init(int threads);
/* The CUDA backend for one device; NULL (logged) when there is none. */
be_t *be_cuda_init(int device);
/* destroys any backend (NULL is fine) */
void  be_free(be_t *be);

#endif
