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
static int tk_load_trimul(trunk_trimul_t *m, int cz, wt_t *w, be_t *be, int n, const char *name)
{
	const char *p = "trunk.blocks.%d.%s.%s";
	int rc = wt_ln(w, be, &m->ln_in, cz, TRUNK_LN_EPS, p, n, name, "layer_norm_in");
	rc |= wt_lin(w, be, &m->a_p, cz, cz, 1, p, n, name, "linear_a_p");
	rc |= wt_lin(w, be, &m->a_g, cz, cz, 1, p, n, name, "linear_a_g");
	rc |= wt_lin(w, be, &m->b_p, cz, cz, 1, p, n, name, "linear_b_p");
	rc |= wt_lin(w, be, &m->b_g, cz, cz, 1, p, n, name, "linear_b_g");
	rc |= wt_ln(w, be, &m->ln_out, cz, TRUNK_LN_EPS, p, n, name, "layer_norm_out");
	rc |= wt_lin(w, be, &m->z, cz, cz, 1, p, n, name, "linear_z");
	rc |= wt_lin(w, be, &m->g, cz, cz, 1, p, n, name, "linear_g");
	return rc;
}

static int tk_load_triatt(trunk_triatt_t *m, int cz, int heads, wt_t *w, be_t *be, int n,
                          const char *name)
{
	const char *p = "trunk.blocks.%d.%s.%s";
	int rc = wt_ln(w, be, &m->ln, cz, TRUNK_LN_EPS, p, n, name, "layer_norm");
	rc |= wt_lin(w, be, &m->bias, heads, cz, 0, p, n, name, "linear");
	rc |= wt_lin(w, be, &m->q, cz, cz, 0, p, n, name, "mha.linear_q");
	rc |= wt_lin(w, be, &m->k, cz, cz, 0, p, n, name, "mha.linear_k");
	rc |= wt_lin(w, be, &m->v, cz, cz, 0, p, n, name, "mha.linear_v");
	rc |= wt_lin(w, be, &m->g, cz, cz, 1, p, n, name, "mha.linear_g");
	rc |= wt_lin(w, be, &m->o, cz, cz, 1, p, n, name, "mha.linear_o");
	return rc;
}

static int tk_load_mlp(trunk_mlp_t *m, int d, wt_t *w, be_t *be, int n, const char *name)
{
	int rc = wt_ln(w, be, &m->ln, d, TRUNK_LN_EPS, "trunk.blocks.%d.%s.mlp.0", n, name);
	rc |= wt_lin(w, be, &m->fc1, 4 * d, d, 1, "trunk.blocks.%d.%s.mlp.1", n, name);
	rc |= wt_lin(w, be, &m->fc2, d, 4 * d, 1, "trunk.blocks.%d.%s.mlp.3", n, name);
	return rc;
}

/* w NULL: sizes only */
static int tk_load_block(trunk_block_t *b, const cfg_t *c, wt_t *w, be_t *be, int n)
{
	int cs = c->c_s, cz = c->c_z;
	int hs = cs / c->seq_head_width, hz = cz / c->pair_head_width;
	const char *p = "trunk.blocks.%d.%s";
	int rc;

	rc = wt_ln(w, be, &b->ln_1, cs, TRUNK_LN_EPS, p, n, "layernorm_1");
	rc |= wt_ln(w, be, &b->p2s_ln, cz, TRUNK_LN_EPS, p, n, "pair_to_sequence.layernorm");
	rc |= wt_lin(w, be, &b->p2s, hs, cz, 0, p, n, "pair_to_sequence.linear");
	rc |= wt_lin(w, be, &b->att_proj, 3 * cs, cs, 0, p, n, "seq_attention.proj");
	rc |= wt_lin(w, be, &b->att_g, cs, cs, 1, p, n, "seq_attention.g_proj");
	rc |= wt_lin(w, be, &b->att_o, cs, cs, 1, p, n, "seq_attention.o_proj");
	rc |= tk_load_mlp(&b->mlp_seq, cs, w, be, n, "mlp_seq");
	rc |= wt_ln(w, be, &b->s2p_ln, cs, TRUNK_LN_EPS, p, n, "sequence_to_pair.layernorm");
	rc |= wt_lin(w, be, &b->s2p_proj, cz, cs, 1, p, n, "sequence_to_pair.proj");
	rc |= wt_lin(w, be, &b->s2p_o, cz, cz, 1, p, n, "sequence_to_pair.o_proj");
	rc |= tk_load_trimul(&b->mul_out, cz, w, be, n, "tri_mul_out");
	rc |= tk_load_trimul(&b->mul_in, cz, w, be, n, "tri_mul_in");
	rc |= tk_load_triatt(&b->att_start, cz, hz, w, be, n, "tri_att_start");
	rc |= tk_load_triatt(&b->att_end, cz, hz, w, be, n, "tri_att_end");
	rc |= tk_load_mlp(&b->mlp_pair, cz, w, be, n, "mlp_pair");
	return rc;
}

/* the head counts must divide the widths, and the pair width split in two */
static int tk_check_cfg(const cfg_t *c)
{
	if (c->seq_head_width <= 0 || c->c_s % c->seq_head_width || c->pair_head_width <= 0 ||
	    c->c_z % c->pair_head_width || c->c_z % 2 || c->position_bins <= 0) {
		log_error("trunk: inconsistent config (c_s %d, c_z %d, head widths %d, %d, bins %d)",
		          c->c_s, c->c_z, c->seq_head_width, c->pair_head_width, c->position_bins);
		return -1;
	}
	return 0;
}

int trunk_load(trunk_t *t, const cfg_t *c, wt_t *w, be_t *be)
{
	float *p = NULL;
	int rc;

	*t = (trunk_t){ 0 };
	if (tk_check_cfg(c) < 0) return -1;
	t->blocks = calloc(c->trunk_blocks > 0 ? c->trunk_blocks : 1, sizeof *t->blocks);
	if (!t->blocks) {
		log_error("trunk: out of memory");
		return -1;
	}
	t->nblocks = c->trunk_blocks;
	rc = 0;
	for (int i = 0; i < t->nblocks; i++)
		rc |= tk_load_block(&t->blocks[i], c, w, be, i);
	rc |= wt_get(w, be, &p, 0, 2, (int64_t[]){ 2 * c->position_bins + 2, c->c_z },
	             "trunk.pairwise_positional_embedding.embedding.weight");
	t->relpos = p;
	rc |= wt_ln(w, be, &t->recycle_s_norm, c->c_s, TRUNK_LN_EPS, "trunk.recycle_s_norm");
	rc |= wt_ln(w, be, &t->recycle_z_norm, c->c_z, TRUNK_LN_EPS, "trunk.recycle_z_norm");
	rc |= wt_get(w, be, &p, 0, 2, (int64_t[]){ TRUNK_RECYCLE_BINS, c->c_z },
	             "trunk.recycle_disto.weight");
	t->recycle_disto = p;
	rc |= wt_lin(w, be, &t->trunk2sm_s, c->sm_c_s, c->c_s, 1, "trunk.trunk2sm_s");
	rc |= wt_lin(w, be, &t->trunk2sm_z, c->sm_c_z, c->c_z, 1, "trunk.trunk2sm_z");
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
static int tk_rows(int chunk, int L) { return chunk > 0 && chunk < L ? chunk : L; }

/* bias[:, i0:i0+nc, :] = W xv^T: the rows i0.. of a pair bias [H, L, L]
 * (bias[h, i, j] = lin(x[i, j])[h], lin without bias) from xv: [nc, L, c] */
static void tk_pair_bias_rows(fx_t *fx, const lin_t *lin, tn_t xv, tn_t bias, int i0)
{
	int nc = (int)xv.ne[0], L = (int)xv.ne[1], c = (int)xv.ne[2];
	be_gemm_t g = {
		.transa = 0, .transb = 1, .m = lin->out, .n = nc * L, .k = c,
		.alpha = 1.0f, .beta = 0.0f,
		.a = lin->w, .lda = c, .b = xv.d, .ldb = c,
		.c = bias.d + (int64_t)i0 * L, .ldc = (int64_t)L * L, .batch = 1,
	};

	if (bias.ne[0] != lin->out || lin->in != c || lin->b)
		fx_fail(fx, -1, "trunk: pair bias of %d heads from %d channels", lin->out, lin->in);
	op_gemm(fx, &g);
}

/* bias: [H, L, L], bias[h, i, j] = lin(ln(z[i, j]))[h] (lin without bias);
 * z: [L, L, c].  Transient: one [n, L, c] chunk. */
static void tk_pair_bias(fx_t *fx, const ln_t *ln, const lin_t *lin, tn_t z, tn_t bias, int n)
{
	int L = (int)z.ne[0], c = (int)z.ne[2];
	tn_t x = fx_new3(fx, n, L, c);

	for (int i0 = 0; i0 < L; i0 += n) {
		int nc = L - i0 < n ? L - i0 : n;
		tn_t xv = tn_rows(x, 0, nc);
		op_layernorm(fx, xv, tn_rows(z, i0, nc), ln);
		tk_pair_bias_rows(fx, lin, xv, bias, i0);
	}
	fx_drop(fx, &x);
}

/* x: [R, d] += fc2(relu(fc1(ln(x)))), rows_per_chunk rows at a time */
static void tk_mlp(fx_t *fx, const trunk_mlp_t *m, tn_t x, int64_t rows_per_chunk)
{
	int64_t R = x.ne[0];
	tn_t t = fx_new2(fx, rows_per_chunk, m->fc1.in);
	tn_t h = fx_new2(fx, rows_per_chunk, m->fc1.out);

	for (int64_t r0 = 0; r0 < R; r0 += rows_per_chunk) {
		int64_t nr = R - r0 < rows_per_chunk ? R - r0 : rows_per_chunk;
		tn_t xv = tn_rows(x, r0, nr), tv = tn_rows(t, 0, nr), hv = tn_rows(h, 0, nr);
		op_layernorm(fx, tv, xv, &m->ln);
		op_linear(fx, hv, tv, &m->fc1, 0.0f);
		op_act(fx, hv, BE_RELU);
		op_linear(fx, xv, hv, &m->fc2, 1.0f);
	}
	fx_drop(fx, &h);
	fx_drop(fx, &t);
}

/* ---- the block's parts --------------------------------------------------- */

/* s: [L, c_s] += gated self-attention of layernorm_1(s) with the pair bias
 * pair_to_sequence(z); z: [L, L, c_z] */
static void tk_seq_attention(fx_t *fx, const trunk_block_t *b, const cfg_t *c, tn_t s, tn_t z, int n)
{
	int L = (int)s.ne[0], cs = c->c_s, hw = c->seq_head_width, H = cs / hw;
	tn_t bias = fx_new3(fx, H, L, L);
	tn_t y, qkv, g, o;

	tk_pair_bias(fx, &b->p2s_ln, &b->p2s, z, bias, n);
	y = fx_new2(fx, L, cs);
	op_layernorm(fx, y, s, &b->ln_1);
	qkv = fx_new2(fx, L, 3 * cs);       /* [L, H, (q | k | v) of hw each] */
	op_linear(fx, qkv, y, &b->att_proj, 0.0f);
	g = fx_new2(fx, L, cs);
	op_linear(fx, g, y, &b->att_g, 0.0f);
	fx_drop(fx, &y);
	o = fx_new2(fx, L, cs);
	be_attn_t a = {
		.B = 1, .H = H, .Lq = L, .Lk = L, .D = hw, .scale = 1.0f / sqrtf((float)hw),
		.q = qkv.d, .q_sl = 3 * cs, .q_sh = 3 * hw,
		.k = qkv.d + hw, .k_sl = 3 * cs, .k_sh = 3 * hw,
		.v = qkv.d + 2 * hw, .v_sl = 3 * cs, .v_sh = 3 * hw,
		.o = o.d, .o_sl = cs, .o_sh = hw,
		.bias = bias.d, .bias_sh = (int64_t)L * L, .bias_sq = L,
	};
	op_attn(fx, &a);
	op_binary(fx, o, o, g, BE_GATE);
	op_linear(fx, s, o, &b->att_o, 1.0f);
	fx_drop(fx, &o);
	fx_drop(fx, &g);
	fx_drop(fx, &qkv);
	fx_drop(fx, &bias);
}

/* z: [L, L, c_z] += o_proj(cat(q[j] * k[i], q[j] - k[i])) with (q | k) =
 * proj(layernorm(s)); s: [L, c_s] */
static void tk_seq_to_pair(fx_t *fx, const trunk_block_t *b, tn_t s, tn_t z, int n)
{
	int L = (int)s.ne[0], cz = (int)z.ne[2], h = cz / 2;
	tn_t y = fx_new2(fx, L, (int)s.ne[1]);
	tn_t p = fx_new2(fx, L, cz);
	tn_t qk, x;

	op_layernorm(fx, y, s, &b->s2p_ln);
	op_linear(fx, p, y, &b->s2p_proj, 0.0f);
	fx_drop(fx, &y);
	qk = fx_new3(fx, 2, L, h);          /* [q; k] */
	op_transpose(fx, qk, tn_reshape3(p, L, 2, h));
	fx_drop(fx, &p);
	tn_t q = tn_reshape2(tn_rows(qk, 0, 1), L, h), k = tn_reshape2(tn_rows(qk, 1, 1), L, h);
	x = fx_new3(fx, n, L, cz);
	for (int i0 = 0; i0 < L; i0 += n) {
		int nc = L - i0 < n ? L - i0 : n;
		tn_t xv = tn_rows(x, 0, nc);
		op_outer(fx, xv, q, k, i0);
		op_linear(fx, tn_rows(z, i0, nc), xv, &b->s2p_o, 1.0f);
	}
	fx_drop(fx, &x);
	fx_drop(fx, &qk);
}

/* y: [out][rows] = (x: [rows, in] W^T + b)^T, channel-major straight from
 * the GEMM (W x^T, after the bias b ones^T as a k = 1 product); ones: [rows]
 * of 1 */
static void tk_linear_t(fx_t *fx, tn_t y, tn_t x, const lin_t *l, tn_t ones)
{
	int64_t rows = tn_numel(x) / l->in;
	be_gemm_t b = {
		.transa = 0, .transb = 0, .m = l->out, .n = (int)rows, .k = 1, .alpha = 1.0f, .beta = 0.0f,
		.a = l->b, .lda = 1, .b = ones.d, .ldb = rows, .c = y.d, .ldc = rows, .batch = 1,
	};
	be_gemm_t w = {
		.transa = 0, .transb = 1, .m = l->out, .n = (int)rows, .k = l->in, .alpha = 1.0f, .beta = 1.0f,
		.a = l->w, .lda = l->in, .b = x.d, .ldb = l->in, .c = y.d, .ldc = rows, .batch = 1,
	};

	if (tn_numel(y) != rows * l->out || tn_numel(ones) < rows)
		fx_fail(fx, -1, "trunk: channel-major linear of %lld rows", (long long)rows);
	op_gemm(fx, &b);
	op_gemm(fx, &w);
}

/* dst: one row block [c][nc][L] of a triangle-multiplication projection,
 * = gated projection of xv: [nc, L, c], made channel-major by the GEMMs
 * themselves; g: [c][nc][L] scratch, ones: [>= nc L] of 1 */
static void tk_trimul_proj(fx_t *fx, tn_t dst, tn_t xv, const lin_t *p, const lin_t *gate,
                           tn_t g, tn_t ones)
{
	tk_linear_t(fx, dst, xv, p, ones);
	tk_linear_t(fx, g, xv, gate, ones);
	op_binary(fx, dst, dst, g, BE_GATE);
}

/* The two projections of a triangle multiplication in the roles its
 * products give them: r, needed only for the chunk of rows being updated,
 * and f, needed for every row (see tk_trimul). */
typedef struct { const lin_t *r_p, *r_g, *f_p, *f_g; } tk_sides_t;

/* zv: [nc, L, c] (rows of z) += linear_z(layer_norm_out(xv)) *
 * sigmoid(linear_g(znv)), znv = layer_norm_in(zv); xv is normalised in
 * place; gv, out: [nc, L, c] scratch (out may be znv, read before) */
static void tk_trimul_out(fx_t *fx, const trunk_trimul_t *m, tn_t zv, tn_t znv, tn_t xv, tn_t gv,
                          tn_t out)
{
	op_layernorm(fx, xv, xv, &m->ln_out);
	op_linear(fx, gv, znv, &m->g, 0.0f);
	op_linear(fx, out, xv, &m->z, 0.0f);
	op_binary(fx, out, out, gv, BE_GATE);
	op_binary(fx, zv, zv, out, BE_ADD);
}

/* The update with batched GEMMs (backends without be->trimul, i.e. CUDA):
 * f in row blocks [c][nr][L], r of a row chunk channel-major [c][nc][L],
 * their products batched over channels. */
static void tk_trimul_gemm(fx_t *fx, const trunk_trimul_t *m, const tk_sides_t *sd, tn_t z, int n)
{
	int L = (int)z.ne[0], c = (int)z.ne[2];
	tn_t f, zn, t, g, ones, r, x;

	f = fx_new3(fx, L, L, c);           /* row blocks [c][nr][L] */
	zn = fx_new3(fx, n, L, c);
	t = fx_new3(fx, n, L, c);
	g = fx_new3(fx, n, L, c);
	ones = fx_new1(fx, (int64_t)n * L);
	op_fill(fx, ones, 1.0f);
	for (int i0 = 0; i0 < L; i0 += n) {
		int nc = L - i0 < n ? L - i0 : n;
		tn_t znv = tn_rows(zn, 0, nc);
		op_layernorm(fx, znv, tn_rows(z, i0, nc), &m->ln_in);
		tk_trimul_proj(fx, tn_rows(f, i0, nc), znv, sd->f_p, sd->f_g, tn_rows(g, 0, nc), ones);
	}
	r = fx_new3(fx, c, n, L);           /* channel-major r of one row chunk */
	x = fx_new3(fx, c, n, L);           /* channel-major product of one row chunk */
	for (int i0 = 0; i0 < L; i0 += n) {
		int nc = L - i0 < n ? L - i0 : n;
		tn_t znv = tn_rows(zn, 0, nc), tv = tn_rows(t, 0, nc), gv = tn_rows(g, 0, nc);
		tn_t zv = tn_rows(z, i0, nc);
		if (n < L) op_layernorm(fx, znv, zv, &m->ln_in);   /* else zn holds it */
		tk_trimul_proj(fx, tn_reshape2(r, c, (int64_t)nc * L), znv, sd->r_p, sd->r_g, gv, ones);
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
		op_transpose(fx, tn_reshape3(tv, (int64_t)nc * L, c, 1), tn_reshape3(x, c, (int64_t)nc * L, 1));
		tk_trimul_out(fx, m, zv, znv, tv, gv, znv);
	}
	fx_drop(fx, &x);
	fx_drop(fx, &r);
	fx_drop(fx, &ones);
	fx_drop(fx, &g);
	fx_drop(fx, &t);
	fx_drop(fx, &zn);
	fx_drop(fx, &f);
}

/* xv: [nc, L, c] = gated projection of znv: [nc, L, c], channel-last;
 * g: [nc, L, c] scratch */
static void tk_gated(fx_t *fx, tn_t xv, tn_t znv, const lin_t *p, const lin_t *gate, tn_t g)
{
	op_linear(fx, xv, znv, p, 0.0f);
	op_linear(fx, g, znv, gate, 0.0f);
	op_binary(fx, xv, xv, g, BE_GATE);
}

/* The update with the backend's direct triangle product (be->trimul, the
 * CPU): every tensor channel-last, without transposes or channel-major
 * GEMMs. */
static void tk_trimul_direct(fx_t *fx, const trunk_trimul_t *m, const tk_sides_t *sd, tn_t z,
                             int n)
{
	int L = (int)z.ne[0], c = (int)z.ne[2];
	tn_t f, zn, g, r, x;

	f = fx_new3(fx, L, L, c);
	zn = fx_new3(fx, n, L, c);
	g = fx_new3(fx, n, L, c);
	for (int i0 = 0; i0 < L; i0 += n) {
		int nc = L - i0 < n ? L - i0 : n;
		tn_t znv = tn_rows(zn, 0, nc);
		op_layernorm(fx, znv, tn_rows(z, i0, nc), &m->ln_in);
		tk_gated(fx, tn_rows(f, i0, nc), znv, sd->f_p, sd->f_g, tn_rows(g, 0, nc));
	}
	r = fx_new3(fx, n, L, c);
	x = fx_new3(fx, n, L, c);
	for (int i0 = 0; i0 < L; i0 += n) {
		int nc = L - i0 < n ? L - i0 : n;
		tn_t znv = tn_rows(zn, 0, nc), gv = tn_rows(g, 0, nc), rv = tn_rows(r, 0, nc);
		tn_t xv = tn_rows(x, 0, nc), zv = tn_rows(z, i0, nc);
		if (n < L) op_layernorm(fx, znv, zv, &m->ln_in);   /* else zn holds it */
		tk_gated(fx, rv, znv, sd->r_p, sd->r_g, gv);
		op_trimul(fx, xv, rv, f);
		tk_trimul_out(fx, m, zv, znv, xv, gv, rv);
	}
	fx_drop(fx, &x);
	fx_drop(fx, &r);
	fx_drop(fx, &g);
	fx_drop(fx, &zn);
	fx_drop(fx, &f);
}

/* z: [L, L, c] += triangle multiplicative update, outgoing
 * (x[i,j] = sum_k a[i,k] b[j,k]) or incoming (x[i,j] = sum_k a[k,i] b[k,j]).
 * Both are computed as x[i,j] = sum_k r[i,k] f[j,k]: f, the projection
 * needed for every row, is made once for all rows; r only for the chunk of
 * rows being updated.  Outgoing: r = a, f = b.  Incoming works on z^T (in
 * place), where row p needs x^T[p,q] = sum_k b'[p,k] a'[q,k]: r = b, f = a.
 * The product is the backend's direct one where it has it, else batched
 * GEMMs. */
static void tk_trimul(fx_t *fx, const trunk_trimul_t *m, tn_t z, int outgoing, int n)
{
	tk_sides_t sd = outgoing ? (tk_sides_t){ &m->a_p, &m->a_g, &m->b_p, &m->b_g }
	                         : (tk_sides_t){ &m->b_p, &m->b_g, &m->a_p, &m->a_g };

	if (!outgoing) op_transpose_inplace(fx, z);
	if (fx->be && fx->be->trimul) tk_trimul_direct(fx, m, &sd, z, n);
	else                          tk_trimul_gemm(fx, m, &sd, z, n);
	if (!outgoing) op_transpose_inplace(fx, z);
}

/* z: [L, L, c] += triangle attention around the starting node: row i attends
 * over z[i, :] with the bias linear(layer_norm(z)) shared by all rows.  In
 * one chunk (n = L) the bias comes from the projections' layer_norm(z). */
static void tk_triatt(fx_t *fx, const trunk_triatt_t *m, const cfg_t *cf, tn_t z, int n)
{
	int L = (int)z.ne[0], c = (int)z.ne[2], hw = cf->pair_head_width, H = c / hw;
	tn_t bias = fx_new3(fx, H, L, L);
	tn_t x, q, k, v, g;

	if (n < L) tk_pair_bias(fx, &m->ln, &m->bias, z, bias, n);
	x = fx_new3(fx, n, L, c);
	q = fx_new3(fx, n, L, c);
	k = fx_new3(fx, n, L, c);
	v = fx_new3(fx, n, L, c);
	g = fx_new3(fx, n, L, c);
	for (int i0 = 0; i0 < L; i0 += n) {
		int nc = L - i0 < n ? L - i0 : n;
		tn_t xv = tn_rows(x, 0, nc), gv = tn_rows(g, 0, nc);
		int64_t sb = (int64_t)L * c;
		op_layernorm(fx, xv, tn_rows(z, i0, nc), &m->ln);
		if (n == L) tk_pair_bias_rows(fx, &m->bias, xv, bias, 0);
		op_linear(fx, tn_rows(q, 0, nc), xv, &m->q, 0.0f);
		op_linear(fx, tn_rows(k, 0, nc), xv, &m->k, 0.0f);
		op_linear(fx, tn_rows(v, 0, nc), xv, &m->v, 0.0f);
		op_linear(fx, gv, xv, &m->g, 0.0f);
		be_attn_t a = {
			.B = nc, .H = H, .Lq = L, .Lk = L, .D = hw, .scale = 1.0f / sqrtf((float)hw),
			.q = q.d, .q_sb = sb, .q_sl = c, .q_sh = hw,
			.k = k.d, .k_sb = sb, .k_sl = c, .k_sh = hw,
			.v = v.d, .v_sb = sb, .v_sl = c, .v_sh = hw,
			.o = xv.d, .o_sb = sb, .o_sl = c, .o_sh = hw,
			.bias = bias.d, .bias_sb = 0, .bias_sh = (int64_t)L * L, .bias_sq = L,
		};
		op_attn(fx, &a);
		op_binary(fx, xv, xv, gv, BE_GATE);
		op_linear(fx, tn_rows(z, i0, nc), xv, &m->o, 1.0f);
	}
	fx_drop(fx, &g);
	fx_drop(fx, &v);
	fx_drop(fx, &k);
	fx_drop(fx, &q);
	fx_drop(fx, &x);
	fx_drop(fx, &bias);
}

/* z: [L, L, c] += triangle attention around the ending node: the starting
 * node's update on z^T (transposed in place and back) */
static void tk_triatt_end(fx_t *fx, const trunk_triatt_t *m, const cfg_t *cf, tn_t z, int n)
{
	op_transpose_inplace(fx, z);
	tk_triatt(fx, m, cf, z, n);
	op_transpose_inplace(fx, z);
}

/* ---- public ---------------------------------------------------------------- */

void trunk_block(fx_t *fx, const trunk_block_t *b, const cfg_t *c, tn_t s, tn_t z, int chunk)
{
	int L = (int)s.ne[0], n = tk_rows(chunk, L);

	if (!(s.nd == 2 && s.ne[1] == c->c_s && z.nd == 3 && z.ne[0] == L && z.ne[1] == L &&
	      z.ne[2] == c->c_z)) {
		fx_fail(fx, -1, "trunk: s [L, c_s] and z [L, L, c_z] expected");
		return;
	}
	if (L == 0) return;
	tk_seq_attention(fx, b, c, s, z, n);
	tk_mlp(fx, &b->mlp_seq, s, L);
	tk_seq_to_pair(fx, b, s, z, n);
	tk_trimul(fx, &b->mul_out, z, 1, n);
	tk_trimul(fx, &b->mul_in, z, 0, n);
	tk_triatt(fx, &b->att_start, c, z, n);
	tk_triatt_end(fx, &b->att_end, c, z, n);
	tk_mlp(fx, &b->mlp_pair, tn_reshape2(z, (int64_t)L * L, c->c_z), (int64_t)n * L);
}

void trunk_iter(fx_t *fx, const trunk_t *t, const cfg_t *c, tn_t s, tn_t z,
                const int32_t *residx, int chunk)
{
	int L = (int)z.ne[0], n = tk_rows(chunk, L), bins = c->position_bins;
	int32_t *idx = fx_host(fx, sizeof *idx * (size_t)n * L);
	tn_t e = fx_new3(fx, n, L, c->c_z);

	/* z += relpos[clamp(residx[j] - residx[i], -bins, bins) + bins + 1] */
	for (int i0 = 0; i0 < L && idx; i0 += n) {
		int nc = L - i0 < n ? L - i0 : n;
		tn_t ev = tn_rows(e, 0, nc);
		for (int i = 0; i < nc && !fx->planning; i++)
			for (int j = 0; j < L; j++) {
				int d = residx[j] - residx[i0 + i];
				d = d < -bins ? -bins : d > bins ? bins : d;
				idx[(size_t)i * L + j] = d + bins + 1;
			}
		op_gather(fx, tn_reshape2(ev, (int64_t)nc * L, c->c_z), t->relpos, idx, 1.0f);
		op_binary(fx, tn_rows(z, i0, nc), tn_rows(z, i0, nc), ev, BE_ADD);
	}
	fx_drop(fx, &e);
	fx_host_drop(fx, idx, sizeof *idx * (size_t)n * L);
	/* every block makes the same placement calls: planning runs a block
	 * only while the placement state at its start is a new one */
	fx_memo_t memo;
	fx_memo_init(&memo);
	for (int i = 0; i < t->nblocks; i++) {
		if (fx_memo_begin(fx, &memo)) continue;
		trunk_block(fx, &t->blocks[i], c, s, z, chunk);
		fx_memo_end(fx, &memo);
	}
	fx_memo_free(&memo);
}

void trunk_recycle_in(fx_t *fx, const trunk_t *t, tn_t s, tn_t z, tn_t s_s_0, tn_t prev_s,
                      tn_t prev_z, const int32_t *bins, int chunk)
{
	int L = (int)z.ne[0], cz = (int)z.ne[2], n = tk_rows(chunk, L);
	tn_t e;

	op_layernorm(fx, s, prev_s, &t->recycle_s_norm);
	op_binary(fx, s, s, s_s_0, BE_ADD);
	e = fx_new3(fx, n, L, cz);
	for (int i0 = 0; i0 < L; i0 += n) {
		int nc = L - i0 < n ? L - i0 : n;
		tn_t ev = tn_rows(e, 0, nc), zv = tn_rows(z, i0, nc);
		op_gather(fx, tn_reshape2(ev, (int64_t)nc * L, cz), t->recycle_disto, bins + (size_t)i0 * L, 1.0f);
		op_layernorm(fx, zv, tn_rows(prev_z, i0, nc), &t->recycle_z_norm);
		op_binary(fx, zv, zv, ev, BE_ADD);
	}
	fx_drop(fx, &e);
}

size_t trunk_block_peak(const cfg_t *c, be_t *be, int L, int chunk)
{
	trunk_block_t b;
	fx_t fx;
	size_t high;

	if (tk_check_cfg(c) < 0 || tk_load_block(&b, c, NULL, NULL, 0) < 0) return 0;
	fx_plan_begin(&fx, be);
	tn_t s = fx_new2(&fx, L, c->c_s), z = fx_new3(&fx, L, L, c->c_z);
	trunk_block(&fx, &b, c, s, z, chunk);
	fx_drop(&fx, &z);
	fx_drop(&fx, &s);
	high = fx.err ? 0 : fx.mp.high;
	if (fx.err) log_error("trunk: planning failed: %s", fx.errmsg);
	fx_end(&fx);
	return high;
}
