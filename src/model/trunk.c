/* trunk.c - the ESMFold folding trunk (see trunk.h).
 *
 * Layout notes.  Pair tensors are row-major [L, L, c].  Per-head biases
 * shared by all rows of an attention are [H, L, L] with the key index
 * contiguous; they are written straight in that layout by a GEMM that
 * computes W x^T.  The triangle multiplication keeps one projection for all
 * rows.  Where the backend has a direct triangle product (be->trimul, the
 * CPU) everything stays channel-last; elsewhere (CUDA) the projection is
 * kept in row blocks (one block per chunk of rows r0..r0+nr), each block
 * channel-major [c][nr][L], so that its products are batched (over
 * channels) GEMMs on block pairs.  Incoming updates and the ending-node
 * attention work on z transposed in place, so neither needs a second z.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/log.h"
#include "model/trunk.h"

#define TRUNK_LN_EPS 1e-5f
#define TRUNK_RECYCLE_BINS 15

/* ---- loading ------------------------------------------------------------ */

/* P = trunk.blocks.N.NAME */
static int trunk_load_trimul(trunk_trimul_t *m, int cz, weights_t *w, be_t *be, int n, const char *name)
{
	const char *p = "trunk.blocks.%d.%s.%s";
	int rc = weights_ln(w, be, &m->ln_in, cz, TRUNK_LN_EPS, p, n, name, "layer_norm_in");
	rc |= weights_lin(w, be, &m->a_p, cz, cz, 1, p, n, name, "linear_a_p");
	rc |= weights_lin(w, be, &m->a_g, cz, cz, 1, p, n, name, "linear_a_g");
	rc |= weights_lin(w, be, &m->b_p, cz, cz, 1, p, n, name, "linear_b_p");
	rc |= weights_lin(w, be, &m->b_g, cz, cz, 1, p, n, name, "linear_b_g");
	rc |= weights_ln(w, be, &m->ln_out, cz, TRUNK_LN_EPS, p, n, name, "layer_norm_out");
	rc |= weights_lin(w, be, &m->z, cz, cz, 1, p, n, name, "linear_z");
	rc |= weights_lin(w, be, &m->g, cz, cz, 1, p, n, name, "linear_g");
	return rc;
}

static int trunk_load_triatt(trunk_triatt_t *m, int cz, int heads, weights_t *w, be_t *be, int n,
                          const char *name)
{
	const char *p = "trunk.blocks.%d.%s.%s";
	int rc = weights_ln(w, be, &m->ln, cz, TRUNK_LN_EPS, p, n, name, "layer_norm");
	rc |= weights_lin(w, be, &m->bias, heads, cz, 0, p, n, name, "linear");
	rc |= weights_lin(w, be, &m->q, cz, cz, 0, p, n, name, "mha.linear_q");
	rc |= weights_lin(w, be, &m->k, cz, cz, 0, p, n, name, "mha.linear_k");
	rc |= weights_lin(w, be, &m->v, cz, cz, 0, p, n, name, "mha.linear_v");
	rc |= weights_lin(w, be, &m->g, cz, cz, 1, p, n, name, "mha.linear_g");
	rc |= weights_lin(w, be, &m->o, cz, cz, 1, p, n, name, "mha.linear_o");
	return rc;
}

static int trunk_load_mlp(trunk_mlp_t *m, int d, weights_t *w, be_t *be, int n, const char *name)
{
	int rc = weights_ln(w, be, &m->ln, d, TRUNK_LN_EPS, "trunk.blocks.%d.%s.mlp.0", n, name);
	rc |= weights_lin(w, be, &m->fc1, 4 * d, d, 1, "trunk.blocks.%d.%s.mlp.1", n, name);
	rc |= weights_lin(w, be, &m->fc2, d, 4 * d, 1, "trunk.blocks.%d.%s.mlp.3", n, name);
	return rc;
}

/* w NULL: sizes only */
static int trunk_load_block(trunk_block_t *b, const cfg_t *c, weights_t *w, be_t *be, int n)
{
	int cs = c->c_s, cz = c->c_z;
	int hs = cs / c->seq_head_width, hz = cz / c->pair_head_width;
	const char *p = "trunk.blocks.%d.%s";
	int rc;

	rc = weights_ln(w, be, &b->ln_1, cs, TRUNK_LN_EPS, p, n, "layernorm_1");
	rc |= weights_ln(w, be, &b->p2s_ln, cz, TRUNK_LN_EPS, p, n, "pair_to_sequence.layernorm");
	rc |= weights_lin(w, be, &b->p2s, hs, cz, 0, p, n, "pair_to_sequence.linear");
	rc |= weights_lin(w, be, &b->att_proj, 3 * cs, cs, 0, p, n, "seq_attention.proj");
	rc |= weights_lin(w, be, &b->att_g, cs, cs, 1, p, n, "seq_attention.g_proj");
	rc |= weights_lin(w, be, &b->att_o, cs, cs, 1, p, n, "seq_attention.o_proj");
	rc |= trunk_load_mlp(&b->mlp_seq, cs, w, be, n, "mlp_seq");
	rc |= weights_ln(w, be, &b->s2p_ln, cs, TRUNK_LN_EPS, p, n, "sequence_to_pair.layernorm");
	rc |= weights_lin(w, be, &b->s2p_proj, cz, cs, 1, p, n, "sequence_to_pair.proj");
	rc |= weights_lin(w, be, &b->s2p_o, cz, cz, 1, p, n, "sequence_to_pair.o_proj");
	rc |= trunk_load_trimul(&b->mul_out, cz, w, be, n, "tri_mul_out");
	rc |= trunk_load_trimul(&b->mul_in, cz, w, be, n, "tri_mul_in");
	rc |= trunk_load_triatt(&b->att_start, cz, hz, w, be, n, "tri_att_start");
	rc |= trunk_load_triatt(&b->att_end, cz, hz, w, be, n, "tri_att_end");
	rc |= trunk_load_mlp(&b->mlp_pair, cz, w, be, n, "mlp_pair");
	return rc;
}

/* the head counts must divide the widths, and the pair width split in two */
static int trunk_check_cfg(const cfg_t *c)
{
	if (c->seq_head_width <= 0 || c->c_s % c->seq_head_width || c->pair_head_width <= 0 ||
	    c->c_z % c->pair_head_width || c->c_z % 2 || c->position_bins <= 0) {
		log_error("trunk: inconsistent config (c_s %d, c_z %d, head widths %d, %d, bins %d)",
		          c->c_s, c->c_z, c->seq_head_width, c->pair_head_width, c->position_bins);
		return -1;
	}
	return 0;
}

int trunk_load(trunk_t *t, const cfg_t *c, weights_t *w, be_t *be)
{
	float *p = NULL;
	int rc;

	*t = (trunk_t){ 0 };
	if (trunk_check_cfg(c) < 0) return -1;
	t->blocks = calloc(c->trunk_blocks > 0 ? c->trunk_blocks : 1, sizeof *t->blocks);
	if (!t->blocks) {
		log_error("trunk: out of memory");
		return -1;
	}
	t->nblocks = c->trunk_blocks;
	rc = 0;
	for (int i = 0; i < t->nblocks; i++)
		rc |= trunk_load_block(&t->blocks[i], c, w, be, i);
	rc |= weights_get(w, be, &p, 0, 2, (int64_t[]){ 2 * c->position_bins + 2, c->c_z },
	             "trunk.pairwise_positional_embedding.embedding.weight");
	t->relpos = p;
	rc |= weights_ln(w, be, &t->recycle_s_norm, c->c_s, TRUNK_LN_EPS, "trunk.recycle_s_norm");
	rc |= weights_ln(w, be, &t->recycle_z_norm, c->c_z, TRUNK_LN_EPS, "trunk.recycle_z_norm");
	rc |= weights_get(w, be, &p, 0, 2, (int64_t[]){ TRUNK_RECYCLE_BINS, c->c_z },
	             "trunk.recycle_disto.weight");
	t->recycle_disto = p;
	rc |= weights_lin(w, be, &t->trunk2sm_s, c->sm_c_s, c->c_s, 1, "trunk.trunk2sm_s");
	rc |= weights_lin(w, be, &t->trunk2sm_z, c->sm_c_z, c->c_z, 1, "trunk.trunk2sm_z");
	if (rc) {
		trunk_free(t);
		return -1;
	}
	return 0;
}

void trunk_free(trunk_t *t)
{
	free(t->blocks);
	*t = (trunk_t){ 0 };
}

/* ---- pair-op building blocks ------------------------------------------- */

/* rows per chunk for a length-L pair state */
static int trunk_rows(int chunk, int L) { return chunk > 0 && chunk < L ? chunk : L; }

/* bias[:, i0:i0+nc, :] = W xv^T: the rows i0.. of a pair bias [H, L, L]
 * (bias[h, i, j] = lin(x[i, j])[h], lin without bias) from xv: [nc, L, c] */
static void trunk_pair_bias_rows(fwd_t *fx, const lin_t *lin, tensor_t xv, tensor_t bias, int i0)
{
	int nc = (int)xv.ne[0], L = (int)xv.ne[1], c = (int)xv.ne[2];
	be_gemm_t g = {
		.transa = 0, .transb = 1, .m = lin->out, .n = nc * L, .k = c,
		.alpha = 1.0f, .beta = 0.0f,
		.a = lin->w, .lda = c, .a_bf16 = lin->bf16, .b = xv.d, .ldb = c,
		.c = bias.d + (int64_t)i0 * L, .ldc = (int64_t)L * L, .batch = 1,
	};

	if (bias.ne[0] != lin->out || lin->in != c || lin->b)
		fwd_fail(fx, -1, "trunk: pair bias of %d heads from %d channels", lin->out, lin->in);
	op_gemm(fx, &g);
}

/* bias: [H, L, L], bias[h, i, j] = lin(ln(z[i, j]))[h] (lin without bias);
 * z: [L, L, c].  Transient: one [n, L, c] chunk. */
static void trunk_pair_bias(fwd_t *fx, const ln_t *ln, const lin_t *lin, tensor_t z, tensor_t bias, int n)
{
	int L = (int)z.ne[0], c = (int)z.ne[2];
	tensor_t x = fwd_new3(fx, n, L, c);

	for (int i0 = 0; i0 < L; i0 += n) {
		int nc = L - i0 < n ? L - i0 : n;
		tensor_t xv = tensor_rows(x, 0, nc);
		op_layernorm(fx, xv, tensor_rows(z, i0, nc), ln);
		trunk_pair_bias_rows(fx, lin, xv, bias, i0);
	}
	fwd_drop(fx, &x);
}

/* x: [R, d] += fc2(relu(fc1(ln(x)))), rows_per_chunk rows at a time; the
 * ReLU in fc1's epilogue */
static void trunk_mlp(fwd_t *fx, const trunk_mlp_t *m, tensor_t x, int64_t rows_per_chunk)
{
	int64_t R = x.ne[0];
	tensor_t t = fwd_new2(fx, rows_per_chunk, m->fc1.in);
	tensor_t h = fwd_new2(fx, rows_per_chunk, m->fc1.out);

	for (int64_t r0 = 0; r0 < R; r0 += rows_per_chunk) {
		int64_t nr = R - r0 < rows_per_chunk ? R - r0 : rows_per_chunk;
		tensor_t xv = tensor_rows(x, r0, nr), tv = tensor_rows(t, 0, nr), hv = tensor_rows(h, 0, nr);
		op_layernorm(fx, tv, xv, &m->ln);
		op_linear_relu(fx, hv, tv, &m->fc1);
		op_linear(fx, xv, hv, &m->fc2, 1.0f);
	}
	fwd_drop(fx, &h);
	fwd_drop(fx, &t);
}

/* ---- the block's parts --------------------------------------------------- */

/* s: [L, c_s] += gated self-attention of layernorm_1(s) with the pair bias
 * pair_to_sequence(z); z: [L, L, c_z] */
static void trunk_seq_attention(fwd_t *fx, const trunk_block_t *b, const cfg_t *c, tensor_t s, tensor_t z, int n)
{
	int L = (int)s.ne[0], cs = c->c_s, hw = c->seq_head_width, H = cs / hw;
	tensor_t bias = fwd_new3(fx, H, L, L);
	tensor_t y, qkv, g, o;

	trunk_pair_bias(fx, &b->p2s_ln, &b->p2s, z, bias, n);
	y = fwd_new2(fx, L, cs);
	op_layernorm(fx, y, s, &b->ln_1);
	qkv = fwd_new2(fx, L, 3 * cs);       /* [L, H, (q | k | v) of hw each] */
	op_linear(fx, qkv, y, &b->att_proj, 0.0f);
	g = fwd_new2(fx, L, cs);
	op_linear(fx, g, y, &b->att_g, 0.0f);
	fwd_drop(fx, &y);
	o = fwd_new2(fx, L, cs);
	be_attn_t a = {
		.B = 1, .H = H, .Lq = L, .Lk = L, .D = hw, .scale = 1.0f / sqrtf((float)hw),
		.q = qkv.d, .q_sl = 3 * cs, .q_sh = 3 * hw,
		.k = qkv.d + hw, .k_sl = 3 * cs, .k_sh = 3 * hw,
		.v = qkv.d + 2 * hw, .v_sl = 3 * cs, .v_sh = 3 * hw,
		.o = o.d, .o_sl = cs, .o_sh = hw,
		.bias = bias.d, .bias_sh = (int64_t)L * L, .bias_sq = L,
		.g = g.d,                        /* o = sigmoid(g) * attention */
	};
	op_attn(fx, &a);
	op_linear(fx, s, o, &b->att_o, 1.0f);
	fwd_drop(fx, &o);
	fwd_drop(fx, &g);
	fwd_drop(fx, &qkv);
	fwd_drop(fx, &bias);
}

/* z: [L, L, c_z] += o_proj(cat(q[j] * k[i], q[j] - k[i])) with (q | k) =
 * proj(layernorm(s)); s: [L, c_s] */
static void trunk_seq_to_pair(fwd_t *fx, const trunk_block_t *b, tensor_t s, tensor_t z, int n)
{
	int L = (int)s.ne[0], cz = (int)z.ne[2], h = cz / 2;
	tensor_t y = fwd_new2(fx, L, (int)s.ne[1]);
	tensor_t p = fwd_new2(fx, L, cz);
	tensor_t qk, x;

	op_layernorm(fx, y, s, &b->s2p_ln);
	op_linear(fx, p, y, &b->s2p_proj, 0.0f);
	fwd_drop(fx, &y);
	qk = fwd_new3(fx, 2, L, h);          /* [q; k] */
	op_transpose(fx, qk, tensor_reshape3(p, L, 2, h));
	fwd_drop(fx, &p);
	tensor_t q = tensor_reshape2(tensor_rows(qk, 0, 1), L, h), k = tensor_reshape2(tensor_rows(qk, 1, 1), L, h);
	x = fwd_new3(fx, n, L, cz);
	for (int i0 = 0; i0 < L; i0 += n) {
		int nc = L - i0 < n ? L - i0 : n;
		tensor_t xv = tensor_rows(x, 0, nc);
		op_outer(fx, xv, q, k, i0);
		op_linear(fx, tensor_rows(z, i0, nc), xv, &b->s2p_o, 1.0f);
	}
	fwd_drop(fx, &x);
	fwd_drop(fx, &qk);
}

/* y: [out][rows] = W x^T for x: [rows, in], channel-major straight from
 * the GEMM, without the bias (trunk_trimul_proj adds it) */
static void trunk_linear_t(fwd_t *fx, tensor_t y, tensor_t x, const lin_t *l)
{
	int64_t rows = tensor_numel(x) / l->in;
	be_gemm_t w = {
		.transa = 0, .transb = 1, .m = l->out, .n = (int)rows, .k = l->in, .alpha = 1.0f, .beta = 0.0f,
		.a = l->w, .lda = l->in, .b = x.d, .ldb = l->in, .c = y.d, .ldc = rows, .batch = 1,
		.a_bf16 = l->bf16,
	};

	if (tensor_numel(y) != rows * l->out)
		fwd_fail(fx, -1, "trunk: channel-major linear of %lld rows", (long long)rows);
	op_gemm(fx, &w);
}

/* dst: one row block [c][nc][L] of a triangle-multiplication projection,
 * = gated projection of xv: [nc, L, c], made channel-major by the GEMMs
 * themselves, the two biases (per row there, in fp32) and the gate in one
 * pass after them; g: [c][nc][L] scratch */
static void trunk_trimul_proj(fwd_t *fx, tensor_t dst, tensor_t xv, const lin_t *p, const lin_t *gate,
                           tensor_t g)
{
	int64_t rows = tensor_numel(xv) / p->in;

	trunk_linear_t(fx, dst, xv, p);
	trunk_linear_t(fx, g, xv, gate);
	op_gate_rows(fx, tensor_reshape2(dst, p->out, rows), tensor_reshape2(g, gate->out, rows), p->b, gate->b);
}

/* The two projections of a triangle multiplication in the roles its
 * products give them: r, needed only for the chunk of rows being updated,
 * and f, needed for every row (see trunk_trimul). */
typedef struct { const lin_t *r_p, *r_g, *f_p, *f_g; } trunk_sides_t;

/* zv: [nc, L, c] (rows of z) += linear_z(xn) * sigmoid(linear_g(znv)),
 * xn = layer_norm_out(product), znv = layer_norm_in(zv), the gate and the
 * residual add in one pass; gv, out: [nc, L, c] scratch (out may be znv,
 * read before) */
static void trunk_trimul_out(fwd_t *fx, const trunk_trimul_t *m, tensor_t zv, tensor_t znv, tensor_t xn, tensor_t gv,
                          tensor_t out)
{
	op_linear(fx, gv, znv, &m->g, 0.0f);
	op_linear(fx, out, xn, &m->z, 0.0f);
	op_gate_add(fx, zv, out, gv);
}

/* The update with batched GEMMs (backends without be->trimul, i.e. CUDA):
 * f in row blocks [c][nr][L], r of a row chunk channel-major [c][nc][L],
 * their products batched over channels. */
static void trunk_trimul_gemm(fwd_t *fx, const trunk_trimul_t *m, const trunk_sides_t *sd, tensor_t z, int n)
{
	int L = (int)z.ne[0], c = (int)z.ne[2];
	tensor_t f, zn, t, g, r, x;

	f = fwd_new3(fx, L, L, c);           /* row blocks [c][nr][L] */
	zn = fwd_new3(fx, n, L, c);
	t = fwd_new3(fx, n, L, c);
	g = fwd_new3(fx, n, L, c);
	for (int i0 = 0; i0 < L; i0 += n) {
		int nc = L - i0 < n ? L - i0 : n;
		tensor_t znv = tensor_rows(zn, 0, nc);
		op_layernorm(fx, znv, tensor_rows(z, i0, nc), &m->ln_in);
		trunk_trimul_proj(fx, tensor_rows(f, i0, nc), znv, sd->f_p, sd->f_g, tensor_rows(g, 0, nc));
	}
	r = fwd_new3(fx, c, n, L);           /* channel-major r of one row chunk */
	x = fwd_new3(fx, c, n, L);           /* channel-major product of one row chunk */
	for (int i0 = 0; i0 < L; i0 += n) {
		int nc = L - i0 < n ? L - i0 : n;
		tensor_t znv = tensor_rows(zn, 0, nc), tv = tensor_rows(t, 0, nc), gv = tensor_rows(g, 0, nc);
		tensor_t zv = tensor_rows(z, i0, nc);
		if (n < L) op_layernorm(fx, znv, zv, &m->ln_in);   /* else zn holds it */
		trunk_trimul_proj(fx, tensor_reshape2(r, c, (int64_t)nc * L), znv, sd->r_p, sd->r_g, gv);
		for (int r0 = 0; r0 < L; r0 += n) {
			/* x[:, :, r0:r0+nr] = r f[r-block]^T over k, per channel */
			int nr = L - r0 < n ? L - r0 : n;
			be_gemm_t p = {
				.transa = 0, .transb = 1, .m = nc, .n = nr, .k = L,
				.alpha = 1.0f, .beta = 0.0f,
				.a = r.d, .lda = L, .stride_a = (int64_t)nc * L,
				.b = f.d + (int64_t)r0 * L * c, .ldb = L, .stride_b = (int64_t)nr * L,
				.c = x.d + r0, .ldc = L, .stride_c = (int64_t)nc * L, .batch = c,
			};
			op_gemm(fx, &p);
		}
		/* layer_norm_out of the channel-major product, written channel-last */
		op_layernorm_cm(fx, tensor_reshape2(tv, (int64_t)nc * L, c), tensor_reshape2(x, c, (int64_t)nc * L),
		                &m->ln_out);
		trunk_trimul_out(fx, m, zv, znv, tv, gv, znv);
	}
	fwd_drop(fx, &x);
	fwd_drop(fx, &r);
	fwd_drop(fx, &g);
	fwd_drop(fx, &t);
	fwd_drop(fx, &zn);
	fwd_drop(fx, &f);
}

/* xv: [nc, L, c] = gated projection of znv: [nc, L, c], channel-last;
 * g: [nc, L, c] scratch */
static void trunk_gated(fwd_t *fx, tensor_t xv, tensor_t znv, const lin_t *p, const lin_t *gate, tensor_t g)
{
	op_linear(fx, xv, znv, p, 0.0f);
	op_linear(fx, g, znv, gate, 0.0f);
	op_binary(fx, xv, xv, g, BE_GATE);
}

/* The update with the backend's direct triangle product (be->trimul, the
 * CPU): every tensor channel-last, without transposes or channel-major
 * GEMMs. */
static void trunk_trimul_direct(fwd_t *fx, const trunk_trimul_t *m, const trunk_sides_t *sd, tensor_t z,
                             int n)
{
	int L = (int)z.ne[0], c = (int)z.ne[2];
	tensor_t f, zn, g, r, x;

	f = fwd_new3(fx, L, L, c);
	zn = fwd_new3(fx, n, L, c);
	g = fwd_new3(fx, n, L, c);
	for (int i0 = 0; i0 < L; i0 += n) {
		int nc = L - i0 < n ? L - i0 : n;
		tensor_t znv = tensor_rows(zn, 0, nc);
		op_layernorm(fx, znv, tensor_rows(z, i0, nc), &m->ln_in);
		trunk_gated(fx, tensor_rows(f, i0, nc), znv, sd->f_p, sd->f_g, tensor_rows(g, 0, nc));
	}
	r = fwd_new3(fx, n, L, c);
	x = fwd_new3(fx, n, L, c);
	for (int i0 = 0; i0 < L; i0 += n) {
		int nc = L - i0 < n ? L - i0 : n;
		tensor_t znv = tensor_rows(zn, 0, nc), gv = tensor_rows(g, 0, nc), rv = tensor_rows(r, 0, nc);
		tensor_t xv = tensor_rows(x, 0, nc), zv = tensor_rows(z, i0, nc);
		if (n < L) op_layernorm(fx, znv, zv, &m->ln_in);   /* else zn holds it */
		trunk_gated(fx, rv, znv, sd->r_p, sd->r_g, gv);
		op_trimul(fx, xv, rv, f);
		op_layernorm(fx, xv, xv, &m->ln_out);
		trunk_trimul_out(fx, m, zv, znv, xv, gv, rv);
	}
	fwd_drop(fx, &x);
	fwd_drop(fx, &r);
	fwd_drop(fx, &g);
	fwd_drop(fx, &zn);
	fwd_drop(fx, &f);
}

/* z: [L, L, c] += triangle multiplicative update, outgoing
 * (x[i,j] = sum_k a[i,k] b[j,k]) or incoming (x[i,j] = sum_k a[k,i] b[k,j]).
 * Both are computed as x[i,j] = sum_k r[i,k] f[j,k]: f, the projection
 * needed for every row, is made once for all rows; r only for the chunk of
 * rows being updated.  Outgoing: r = a, f = b.  Incoming works on z^T (in
 * place), where row p needs x^T[p,q] = sum_k b'[p,k] a'[q,k]: r = b, f = a.
 * The product is the backend's direct one where it has it, else batched
 * GEMMs. */
static void trunk_trimul(fwd_t *fx, const trunk_trimul_t *m, tensor_t z, int outgoing, int n)
{
	trunk_sides_t sd = outgoing ? (trunk_sides_t){ &m->a_p, &m->a_g, &m->b_p, &m->b_g }
	                         : (trunk_sides_t){ &m->b_p, &m->b_g, &m->a_p, &m->a_g };

	if (!outgoing) op_transpose_inplace(fx, z);
	if (fx->be && fx->be->trimul) trunk_trimul_direct(fx, m, &sd, z, n);
	else                          trunk_trimul_gemm(fx, m, &sd, z, n);
	if (!outgoing) op_transpose_inplace(fx, z);
}

/* z: [L, L, c] += triangle attention around the starting node: row i attends
 * over z[i, :] with the bias linear(layer_norm(z)) shared by all rows.  In
 * one chunk (n = L) the bias comes from the projections' layer_norm(z). */
static void trunk_triatt(fwd_t *fx, const trunk_triatt_t *m, const cfg_t *cf, tensor_t z, int n)
{
	int L = (int)z.ne[0], c = (int)z.ne[2], hw = cf->pair_head_width, H = c / hw;
	tensor_t bias = fwd_new3(fx, H, L, L);
	tensor_t x, q, k, v, g;

	if (n < L) trunk_pair_bias(fx, &m->ln, &m->bias, z, bias, n);
	x = fwd_new3(fx, n, L, c);
	q = fwd_new3(fx, n, L, c);
	k = fwd_new3(fx, n, L, c);
	v = fwd_new3(fx, n, L, c);
	g = fwd_new3(fx, n, L, c);
	for (int i0 = 0; i0 < L; i0 += n) {
		int nc = L - i0 < n ? L - i0 : n;
		tensor_t xv = tensor_rows(x, 0, nc), gv = tensor_rows(g, 0, nc);
		int64_t sb = (int64_t)L * c;
		op_layernorm(fx, xv, tensor_rows(z, i0, nc), &m->ln);
		if (n == L) trunk_pair_bias_rows(fx, &m->bias, xv, bias, 0);
		op_linear(fx, tensor_rows(q, 0, nc), xv, &m->q, 0.0f);
		op_linear(fx, tensor_rows(k, 0, nc), xv, &m->k, 0.0f);
		op_linear(fx, tensor_rows(v, 0, nc), xv, &m->v, 0.0f);
		op_linear(fx, gv, xv, &m->g, 0.0f);
		be_attn_t a = {
			.B = nc, .H = H, .Lq = L, .Lk = L, .D = hw, .scale = 1.0f / sqrtf((float)hw),
			.q = q.d, .q_sb = sb, .q_sl = c, .q_sh = hw,
			.k = k.d, .k_sb = sb, .k_sl = c, .k_sh = hw,
			.v = v.d, .v_sb = sb, .v_sl = c, .v_sh = hw,
			.o = xv.d, .o_sb = sb, .o_sl = c, .o_sh = hw,
			.bias = bias.d, .bias_sb = 0, .bias_sh = (int64_t)L * L, .bias_sq = L,
			.g = gv.d,                   /* gated in the attention's epilogue */
		};
		op_attn(fx, &a);
		op_linear(fx, tensor_rows(z, i0, nc), xv, &m->o, 1.0f);
	}
	fwd_drop(fx, &g);
	fwd_drop(fx, &v);
	fwd_drop(fx, &k);
	fwd_drop(fx, &q);
	fwd_drop(fx, &x);
	fwd_drop(fx, &bias);
}

/* z: [L, L, c] += triangle attention around the ending node: the starting
 * node's update on z^T (transposed in place and back) */
static void trunk_triatt_end(fwd_t *fx, const trunk_triatt_t *m, const cfg_t *cf, tensor_t z, int n)
{
	op_transpose_inplace(fx, z);
	trunk_triatt(fx, m, cf, z, n);
	op_transpose_inplace(fx, z);
}

/* ---- public ---------------------------------------------------------------- */

/* Pair-tensor passes of one block: reads and writes of [L, L, c_z] worth
 * of activations (an [L, L, 4 c_z] tensor read once is 4), counted by the
 * op layer as the ops run (fwd_t.traffic; trunk_block_passes,
 * bench/pair_passes), one chunk (n = L).  H_s, H_z: sequence and pair
 * heads; the [H, L, L] biases are H / c_z of a pass.  cuda: the form
 * without be->trimul where it differs (channel-major projections).
 * Counted per op: passes a backend makes inside one op are not (CUDA:
 * the bias written into C before a cuBLAS product, the bias-and-ReLU
 * epilogue kernel after it, the bf16 staging of an activation operand).
 *
 *   part / op                               reads   writes   passes
 *   seq attention: layernorm(z)               1       1        2
 *     pair bias GEMM, attention's bias read   1      H_s/c_z   1 + 2 H_s/c_z
 *   sequence to pair: outer                   -       1        1
 *     o_proj GEMM + residual (beta 1)         2       1        3
 *   tri mul (each of 2): layernorm_in         1       1        2
 *     gated f, r: 2 linears + gate, twice     2x4     2x3      14
 *     triangle product                        2       1        3
 *     layernorm_out (cuda: of the channel-    1       1        2
 *       major product, written channel-last)
 *     linear_g, linear_z                      2       2        4
 *     gate + residual add (gate_add)          3       1        4
 *     incoming only: 2 in-place transposes    2       2        4
 *   tri att (each of 2): layernorm            1       1        2
 *     bias GEMM, attention's bias read        1      H_z/c_z   1 + 2 H_z/c_z
 *     q, k, v, g linears                      4       4        8
 *     attention (q, k, v, gate g -> o)        4       1        5
 *     o linear + residual                     2       1        3
 *     ending only: 2 in-place transposes      2       2        4
 *   pair transition: layernorm                1       1        2
 *     fc1 (4 c_z wide), ReLU in its epilogue  1       4        5
 *     fc2 + residual                          5       1        6
 *
 * Totals (pair part; plus 2 (H_s + 2 H_z) / c_z and the sequence track):
 * cpu and cuda 124 (esmfold_v1 at L = 256: 125.7).  Before the fusions
 * (the attention's gate a pass of its own after it, 3 each: 128;
 * gate_add: gate and residual apart; the ReLU a pass of its own over
 * [L, L, 4 c_z]; on CUDA each channel-major projection's bias written
 * first by a k = 1 product and read back by the product with beta 1,
 * 22 passes for f and r where gate_rows makes 14, and the product
 * transposed to channel-last, 2 more, before layernorm_cm did both)
 * cpu 140, cuda 160. */

void trunk_block(fwd_t *fx, const trunk_block_t *b, const cfg_t *c, tensor_t s, tensor_t z, int chunk)
{
	int L = (int)s.ne[0], n = trunk_rows(chunk, L);

	if (!(s.nd == 2 && s.ne[1] == c->c_s && z.nd == 3 && z.ne[0] == L && z.ne[1] == L &&
	      z.ne[2] == c->c_z)) {
		fwd_fail(fx, -1, "trunk: s [L, c_s] and z [L, L, c_z] expected");
		return;
	}
	if (L == 0) return;
	trunk_seq_attention(fx, b, c, s, z, n);
	trunk_mlp(fx, &b->mlp_seq, s, L);
	trunk_seq_to_pair(fx, b, s, z, n);
	trunk_trimul(fx, &b->mul_out, z, 1, n);
	trunk_trimul(fx, &b->mul_in, z, 0, n);
	trunk_triatt(fx, &b->att_start, c, z, n);
	trunk_triatt_end(fx, &b->att_end, c, z, n);
	trunk_mlp(fx, &b->mlp_pair, tensor_reshape2(z, (int64_t)L * L, c->c_z), (int64_t)n * L);
}

void trunk_iter(fwd_t *fx, const trunk_t *t, const cfg_t *c, tensor_t s, tensor_t z,
                const int32_t *residx, int chunk)
{
	int L = (int)z.ne[0], n = trunk_rows(chunk, L), bins = c->position_bins;
	float *ri = fwd_host(fx, sizeof *ri * (size_t)L);
	tensor_t rd = fwd_new1(fx, L);

	/* z += relpos[clamp(residx[j] - residx[i], -bins, bins) + bins + 1],
	 * the bins found on the backend from the residue indices (one copy) */
	for (int i = 0; i < L && ri && !fx->planning; i++) ri[i] = (float)residx[i];
	if (ri) fwd_set(fx, rd, ri);
	for (int i0 = 0; i0 < L; i0 += n) {
		int nc = L - i0 < n ? L - i0 : n;
		op_relpos(fx, tensor_rows(z, i0, nc), t->relpos, rd, i0, bins);
	}
	fwd_drop(fx, &rd);
	fwd_host_drop(fx, ri, sizeof *ri * (size_t)L);
	/* every block makes the same placement calls: planning runs a block
	 * only while the placement state at its start is a new one */
	fwd_memo_t memo;
	fwd_memo_init(&memo);
	for (int i = 0; i < t->nblocks; i++) {
		if (fwd_memo_begin(fx, &memo)) continue;
		trunk_block(fx, &t->blocks[i], c, s, z, chunk);
		fwd_memo_end(fx, &memo);
	}
	fwd_memo_free(&memo);
}

void trunk_recycle_in(fwd_t *fx, const trunk_t *t, tensor_t s, tensor_t z, tensor_t s_s_0, tensor_t prev_s,
                      tensor_t prev_z, const int32_t *bins, int chunk)
{
	int L = (int)z.ne[0], cz = (int)z.ne[2], n = trunk_rows(chunk, L);
	tensor_t e;

	op_layernorm(fx, s, prev_s, &t->recycle_s_norm);
	op_binary(fx, s, s, s_s_0, BE_ADD);
	e = fwd_new3(fx, n, L, cz);
	for (int i0 = 0; i0 < L; i0 += n) {
		int nc = L - i0 < n ? L - i0 : n;
		tensor_t ev = tensor_rows(e, 0, nc), zv = tensor_rows(z, i0, nc);
		op_gather(fx, tensor_reshape2(ev, (int64_t)nc * L, cz), t->recycle_disto, bins + (size_t)i0 * L, 1.0f);
		op_layernorm(fx, zv, tensor_rows(prev_z, i0, nc), &t->recycle_z_norm);
		op_binary(fx, zv, zv, ev, BE_ADD);
	}
	fwd_drop(fx, &e);
}

/* plans one block at length L: its arena high-water mark and the floats
 * its ops read and write (fwd_t.traffic); -1 when planning fails */
static int trunk_plan_block(const cfg_t *c, be_t *be, int L, int chunk, size_t *high, int64_t *traffic)
{
	trunk_block_t b;
	fwd_t fx;
	int rc;

	if (trunk_check_cfg(c) < 0 || trunk_load_block(&b, c, NULL, NULL, 0) < 0) return -1;
	fwd_plan_begin(&fx, be);
	tensor_t s = fwd_new2(&fx, L, c->c_s), z = fwd_new3(&fx, L, L, c->c_z);
	trunk_block(&fx, &b, c, s, z, chunk);
	fwd_drop(&fx, &z);
	fwd_drop(&fx, &s);
	*high = fx.mp.high;
	*traffic = fx.traffic;
	rc = fx.err ? -1 : 0;
	if (fx.err) log_error("trunk: planning failed: %s", fx.errmsg);
	fwd_end(&fx);
	return rc;
}

size_t trunk_block_peak(const cfg_t *c, be_t *be, int L, int chunk)
{
	size_t high;
	int64_t traffic;

	return trunk_plan_block(c, be, L, chunk, &high, &traffic) < 0 ? 0 : high;
}

double trunk_block_passes(const cfg_t *c, be_t *be, int L, int chunk)
{
	size_t high;
	int64_t traffic;

	if (L < 1 || trunk_plan_block(c, be, L, chunk, &high, &traffic) < 0) return -1.0;
	return (double)traffic / ((double)L * L * c->c_z);
}
