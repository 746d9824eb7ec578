/* trunk.c - the ESMFold folding trunk (see trunk.h).
 *
 * Layout notes.  Pair tensors are row-major [L, L, c].  Per-head biases
 * shared by all rows of an attention are [H, L, L] with the key index
 * contiguous; they are written straight in that layout by the output
 * strides of the ln_linear that also norms z.  The triangle
 * multiplication keeps one projection for all rows.  Where the backend
 * has a direct triangle product (BE_OP_TRIMUL, the CPU) everything stays
 * channel-last; elsewhere (CUDA) the projection is kept in row blocks
 * (one block per chunk of rows r0..r0+nr), each block channel-major
 * [c][nr][L], so that its products are batched (over channels) GEMMs on
 * block pairs.  The incoming update and the ending-node attention read
 * and update z^T through z's strides (ln_linear, trimul_out, the
 * attention's strides): there is no transposed copy of z.
 */
#include "model/trunk.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/log.h"

#define TRUNK_LN_EPS 1e-5f

/* ---- loading ------------------------------------------------------------ */

/* P = trunk.blocks.N.NAME; the input side's five linears in one
 * allocation, in the order the products use them (trunk_trimul): f's
 * projection and gate, then r's and linear_g (outgoing: f = b, r = a;
 * incoming: f = a, r = b) */
static int trunk_load_trimul(trunk_trimul_t *m, int cz, weights_t *w, be_t *be, int n, const char *name,
                             int outgoing)
{
	const char *p = "trunk.blocks.%d.%s.%s";
	weights_part_t a[2] = { { &m->a_p, "linear_a_p", cz, 1 }, { &m->a_g, "linear_a_g", cz, 1 } };
	weights_part_t b[2] = { { &m->b_p, "linear_b_p", cz, 1 }, { &m->b_g, "linear_b_g", cz, 1 } };
	const weights_part_t *f = outgoing ? b : a, *r = outgoing ? a : b;
	const weights_part_t parts[5] = { f[0], f[1], r[0], r[1], { &m->g, "linear_g", cz, 1 } };
	int rc = weights_ln(w, be, &m->ln_in, cz, TRUNK_LN_EPS, p, n, name, "layer_norm_in");
	rc |= weights_lin_group(w, be, &m->proj, parts, 5, cz, "trunk.blocks.%d.%s", n, name);
	rc |= weights_ln(w, be, &m->ln_out, cz, TRUNK_LN_EPS, p, n, name, "layer_norm_out");
	rc |= weights_lin(w, be, &m->z, cz, cz, 1, p, n, name, "linear_z");
	return rc;
}

static int trunk_load_triatt(trunk_triatt_t *m, int cz, int heads, weights_t *w, be_t *be, int n,
                          const char *name)
{
	const char *p = "trunk.blocks.%d.%s.%s";
	const weights_part_t parts[] = {
		{ &m->bias, "linear", heads, 0 }, { &m->q, "mha.linear_q", cz, 0 },
		{ &m->k, "mha.linear_k", cz, 0 }, { &m->v, "mha.linear_v", cz, 0 },
		{ &m->g, "mha.linear_g", cz, 1 },
	};
	int rc = weights_ln(w, be, &m->ln, cz, TRUNK_LN_EPS, p, n, name, "layer_norm");
	rc |= weights_lin_group(w, be, &m->proj, parts, 5, cz, "trunk.blocks.%d.%s", n, name);
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
static int trunk_load_block(trunk_block_t *b, const hparams_t *c, weights_t *w, be_t *be, int n)
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
	rc |= trunk_load_trimul(&b->mul_out, cz, w, be, n, "tri_mul_out", 1);
	rc |= trunk_load_trimul(&b->mul_in, cz, w, be, n, "tri_mul_in", 0);
	rc |= trunk_load_triatt(&b->att_start, cz, hz, w, be, n, "tri_att_start");
	rc |= trunk_load_triatt(&b->att_end, cz, hz, w, be, n, "tri_att_end");
	rc |= trunk_load_mlp(&b->mlp_pair, cz, w, be, n, "mlp_pair");
	return rc;
}

/* the head counts must divide the widths, and the pair width split in two */
static int trunk_check_cfg(const hparams_t *c)
{
	if (c->seq_head_width <= 0 || c->c_s % c->seq_head_width || c->pair_head_width <= 0 ||
	    c->c_z % c->pair_head_width || c->c_z % 2 || c->position_bins <= 0) {
		log_error("trunk: inconsistent config (c_s %d, c_z %d, head widths %d, %d, bins %d)",
		          c->c_s, c->c_z, c->seq_head_width, c->pair_head_width, c->position_bins);
		return -1;
	}
	return 0;
}

int trunk_load(trunk_t *t, const hparams_t *c, weights_t *w, be_t *be)
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

/* p for rows i0..i0+nc-1 of z: [L, L, c] (ending: of z^T, read by its
 * strides, x[i, j] = z[j, i0 + i]), layer-normed by ln (NULL: none) and
 * multiplied by the weight rows starting at w's; groups to be added */
static be_ln_linear_t trunk_lnlin(tensor_t z, int i0, int nc, int ending, const ln_t *ln, const lin_t *w)
{
	int64_t L = z.ne[1], c = z.ne[2], si = ending ? c : L * c, sj = ending ? L * c : c;
	return (be_ln_linear_t){
		.ni = nc, .nj = (int)L, .k = (int)c, .x = z.d + i0 * si, .x_si = si, .x_sj = sj,
		.ln_w = ln ? ln->w : NULL, .ln_b = ln ? ln->b : NULL, .eps = ln ? ln->eps : 0.0f,
		.w = w->w, .w_bf16 = w->bf16,
	};
}

/* output group: lin's features of the rows of y: [nc, L, c'], channel-last */
static be_lnlin_out_t trunk_out_rows(tensor_t y, const lin_t *lin)
{
	return (be_lnlin_out_t){ .n = lin->out, .y = y.d, .si = y.ne[1] * y.ne[2], .sj = y.ne[2], .sc = 1,
	                         .bias = lin->b };
}

/* output group: the pair bias [H, L, L], bias[h, i, j] = lin(x[i, j])[h]
 * (lin without bias), for every row i */
static be_lnlin_out_t trunk_out_bias(tensor_t bias, const lin_t *lin)
{
	int64_t L = bias.ne[1];
	return (be_lnlin_out_t){ .n = lin->out, .y = bias.d, .si = L, .sj = 1, .sc = L * L };
}

/* bias: [H, L, L], bias[h, i, j] = lin(ln(z[i, j]))[h] (lin without bias);
 * z: [L, L, c]; ending: of z^T.  One pass over z, no transient. */
static void trunk_pair_bias(fwd_t *fx, const ln_t *ln, const lin_t *lin, tensor_t z, tensor_t bias,
                            int ending)
{
	be_ln_linear_t p = trunk_lnlin(z, 0, (int)z.ne[0], ending, ln, lin);

	if (bias.ne[0] != lin->out || lin->in != z.ne[2] || lin->b)
		fwd_fail(fx, -1, "trunk: pair bias of %d heads from %d channels", lin->out, lin->in);
	p.out[p.ngroups++] = trunk_out_bias(bias, lin);
	op_ln_linear(fx, &p);
}

/* x: [R, d] += fc2(relu(fc1(ln(x)))): one fused op, one pass over x in and
 * one out; the [R, 4 d] hidden layer lives in the backend's tiles only */
static void trunk_mlp(fwd_t *fx, const trunk_mlp_t *m, tensor_t x)
{
	op_transition(fx, x, &m->ln, &m->fc1, &m->fc2);
}

/* ---- the block's parts --------------------------------------------------- */

/* s: [L, c_s] += gated self-attention of layernorm_1(s) with the pair bias
 * pair_to_sequence(z); z: [L, L, c_z] */
static void trunk_seq_attention(fwd_t *fx, const trunk_block_t *b, const hparams_t *c, tensor_t s, tensor_t z, int n)
{
	int L = (int)s.ne[0], cs = c->c_s, hw = c->seq_head_width, H = cs / hw;
	tensor_t bias = fwd_new3(fx, H, L, L);
	tensor_t y, qkv, g, o;

	trunk_pair_bias(fx, &b->p2s_ln, &b->p2s, z, bias, 0);
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
 * proj(layernorm(s)); s: [L, c_s].  With bf16 weights the features are
 * written in bf16 ([n, L, c_z] elements in [n, L, c_z / 2] floats), the
 * operand of o_proj's GEMM as it is (CUDA: no stage; on the CPU, whose
 * bf16 GEMMs round inside the product with no pass of their own, fp32). */
static void trunk_seq_to_pair(fwd_t *fx, const trunk_block_t *b, tensor_t s, tensor_t z, int n)
{
	int L = (int)s.ne[0], cz = (int)z.ne[2], h = cz / 2;
	int bf = b->s2p_o.bf16 && fx->be && fx->be->weights_bf16 && !fx->be->host_mem && cz % 2 == 0;
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
	x = fwd_new3(fx, n, L, bf ? h : cz);
	for (int i0 = 0; i0 < L; i0 += n) {
		int nc = trunk_chunk(L, i0, n);
		tensor_t xv = tensor_rows(x, 0, nc);
		op_outer(fx, xv, q, k, i0, bf);
		if (bf) op_linear_bf16(fx, tensor_rows(z, i0, nc), xv, &b->s2p_o, 1.0f);
		else op_linear(fx, tensor_rows(z, i0, nc), xv, &b->s2p_o, 1.0f);
	}
	fwd_drop(fx, &x);
	fwd_drop(fx, &qk);
}

/* dst = gated projection (p(x) + b_p) * sigmoid(gate(x) + b_g) of x =
 * layer_norm_in(rows i0..i0+nc-1 of z, of z^T where tr: read in place by
 * z's strides), one ln_linear reading z once: dst channel-major
 * [c][nc][L] (cm) or channel-last [nc, L, c]; ld > 0 (cm): channel-major
 * bf16 data [c][nc][ld] instead, ld >= L (columns L.. not written), the
 * operand of bf16 x bf16 GEMMs; gv (or NULL): also linear_g(x) + b,
 * channel-last [nc, L, c] fp32, the output gate's logits.  gate's weight
 * rows follow p's (and linear_g's gate's: trunk_load_trimul). */
static void trunk_trimul_in(fwd_t *fx, const trunk_trimul_t *m, tensor_t z, int i0, int nc, int tr,
                            const lin_t *p, const lin_t *gate, tensor_t dst, int cm, int64_t ld,
                            const tensor_t *gv)
{
	int64_t L = z.ne[1], c = z.ne[2], rs = ld ? ld : L;
	be_ln_linear_t q = trunk_lnlin(z, i0, nc, tr, &m->ln_in, p);

	if (gate->out != p->out || (ld && (!cm || ld < L)) ||
	    tensor_numel(dst) * (ld ? 2 : 1) != nc * rs * p->out)
		fwd_fail(fx, -1, "trunk: triangle projection of %d rows", nc);
	q.out[q.ngroups++] = (be_lnlin_out_t){
		.n = p->out, .kind = BE_LNLIN_GATE, .y = dst.d, .si = cm ? rs : L * c, .sj = cm ? 1 : c,
		.sc = cm ? nc * rs : 1, .bias = p->b, .bias_g = gate->b, .bf16 = ld > 0,
	};
	if (gv) q.out[q.ngroups++] = trunk_out_rows(*gv, &m->g);
	op_ln_linear(fx, &q);
}

/* The two projections of a triangle multiplication in the roles its
 * products give them: r, needed only for the chunk of rows being updated,
 * and f, needed for every row (see trunk_trimul). */
typedef struct { const lin_t *r_p, *r_g, *f_p, *f_g; } trunk_sides_t;

/* The update with batched GEMMs (backends without the trimul op, i.e. CUDA):
 * f in row blocks [c][nr][ld], r of a row chunk channel-major [c][nc][ld],
 * their products batched over channels, the product's layer_norm_out,
 * linear_z, gate and residual add in one op (trimul_out) reading it
 * channel-major [c][nc][L] fp32.  Where the device's weights are bf16
 * (its GEMMs round their inputs to bf16 anyway) ln_linear writes f and r
 * as bf16 rows padded to ld = L rounded up to 8 (16-byte rows for the
 * tensor cores' loads), the GEMMs read them as they are; else they are
 * fp32, ld = L.  tr: the rows are those of z^T, read and written in
 * place. */
static void trunk_trimul_gemm(fwd_t *fx, const trunk_trimul_t *m, const trunk_sides_t *sd, tensor_t z, int tr,
                              int n)
{
	int L = (int)z.ne[0], c = (int)z.ne[2], bf = fx->be && fx->be->weights_bf16;
	int64_t ld = bf ? ((int64_t)L + 7) / 8 * 8 : L, h = bf ? 2 : 1;   /* h: elements per float */
	tensor_t f, g, r, x;

	f = fwd_new2(fx, L, c * ld / h);     /* row blocks [c][nr][ld] */
	for (int i0 = 0; i0 < L; i0 += n) {
		int nc = trunk_chunk(L, i0, n);
		trunk_trimul_in(fx, m, z, i0, nc, tr, sd->f_p, sd->f_g, tensor_rows(f, i0, nc), 1, bf ? ld : 0, NULL);
	}
	g = fwd_new3(fx, n, L, c);
	r = fwd_new1(fx, c * n * ld / h);    /* channel-major r of one row chunk, [c][nc][ld] */
	x = fwd_new3(fx, c, n, L);           /* channel-major product of one row chunk */
	for (int i0 = 0; i0 < L; i0 += n) {
		int nc = trunk_chunk(L, i0, n);
		tensor_t gv = tensor_rows(g, 0, nc);
		tensor_t xv = tensor_reshape2(tensor_rows(tensor_reshape2(x, (int64_t)c * n, L), 0, (int64_t)c * nc),
		                              c, (int64_t)nc * L);
		trunk_trimul_in(fx, m, z, i0, nc, tr, sd->r_p, sd->r_g, tensor_rows(r, 0, c * nc * ld / h), 1,
		                bf ? ld : 0, &gv);
		for (int r0 = 0; r0 < L; r0 += n) {
			/* x[:, :, r0:r0+nr] = r f[r-block]^T over k, per channel */
			int nr = trunk_chunk(L, r0, n);
			be_gemm_t p = {
				.transa = 0, .transb = 1, .m = nc, .n = nr, .k = L,
				.alpha = 1.0f, .beta = 0.0f,
				.a = r.d, .lda = ld, .stride_a = (int64_t)nc * ld,
				.b = f.d + (int64_t)r0 * ld * c / h, .ldb = ld, .stride_b = (int64_t)nr * ld,
				.c = x.d + r0, .ldc = L, .stride_c = (int64_t)nc * L, .batch = c,
				.a_bf16 = bf, .b_bf16 = bf,
			};
			op_gemm(fx, &p);
		}
		op_trimul_out(fx, &(op_trimul_out_t){
			.z = z, .i0 = i0, .transposed = tr, .x = xv, .channel_major = 1, .gv = gv,
			.ln = &m->ln_out, .lin = &m->z,
		});
	}
	fwd_drop(fx, &x);
	fwd_drop(fx, &r);
	fwd_drop(fx, &g);
	fwd_drop(fx, &f);
}

/* The update with the backend's direct triangle product (BE_OP_TRIMUL, the
 * CPU): every tensor channel-last, without channel-major GEMMs.  tr: the
 * rows are those of z^T, read and written in place. */
static void trunk_trimul_direct(fwd_t *fx, const trunk_trimul_t *m, const trunk_sides_t *sd, tensor_t z, int tr,
                                int n)
{
	int L = (int)z.ne[0], c = (int)z.ne[2];
	tensor_t f, g, r, x;

	f = fwd_new3(fx, L, L, c);
	for (int i0 = 0; i0 < L; i0 += n) {
		int nc = trunk_chunk(L, i0, n);
		trunk_trimul_in(fx, m, z, i0, nc, tr, sd->f_p, sd->f_g, tensor_rows(f, i0, nc), 0, 0, NULL);
	}
	g = fwd_new3(fx, n, L, c);
	r = fwd_new3(fx, n, L, c);
	x = fwd_new3(fx, n, L, c);
	for (int i0 = 0; i0 < L; i0 += n) {
		int nc = trunk_chunk(L, i0, n);
		tensor_t gv = tensor_rows(g, 0, nc), rv = tensor_rows(r, 0, nc), xv = tensor_rows(x, 0, nc);
		trunk_trimul_in(fx, m, z, i0, nc, tr, sd->r_p, sd->r_g, rv, 0, 0, &gv);
		op_trimul(fx, xv, rv, f);
		op_trimul_out(fx, &(op_trimul_out_t){
			.z = z, .i0 = i0, .transposed = tr, .x = xv, .channel_major = 0, .gv = gv,
			.ln = &m->ln_out, .lin = &m->z,
		});
	}
	fwd_drop(fx, &x);
	fwd_drop(fx, &r);
	fwd_drop(fx, &g);
	fwd_drop(fx, &f);
}

/* z: [L, L, c] += triangle multiplicative update, outgoing
 * (x[i,j] = sum_k a[i,k] b[j,k]) or incoming (x[i,j] = sum_k a[k,i] b[k,j]).
 * Both are computed as x[i,j] = sum_k r[i,k] f[j,k]: f, the projection
 * needed for every row, is made once for all rows; r only for the chunk of
 * rows being updated.  Outgoing: r = a, f = b.  Incoming works on the rows
 * of z^T, read and written in place at their strides (no transposed copy),
 * where row p needs x^T[p,q] = sum_k b'[p,k] a'[q,k]: r = b, f = a.  The
 * product is the backend's direct one where it has it, else batched GEMMs. */
static void trunk_trimul(fwd_t *fx, const trunk_trimul_t *m, tensor_t z, int outgoing, int n)
{
	trunk_sides_t sd = outgoing ? (trunk_sides_t){ &m->a_p, &m->a_g, &m->b_p, &m->b_g }
	                         : (trunk_sides_t){ &m->b_p, &m->b_g, &m->a_p, &m->a_g };

	if (be_supports(fx->be, BE_OP_TRIMUL)) trunk_trimul_direct(fx, m, &sd, z, !outgoing, n);
	else                                   trunk_trimul_gemm(fx, m, &sd, z, !outgoing, n);
}

/* z: [L, L, c] += triangle attention around the starting node (row i
 * attends over z[i, :]) or, ending, around the ending node: the same on
 * z^T, read and updated through z's strides (no transpose).  The bias
 * linear(layer_norm(z)) is shared by all rows; in one chunk (n = L) the
 * layer norm, the bias and the q, k, v, g projections are one pass over z
 * (ln_linear), else the bias is a pass of its own before the chunks. */
static void trunk_triatt(fwd_t *fx, const trunk_triatt_t *m, const hparams_t *cf, tensor_t z, int n, int ending)
{
	int L = (int)z.ne[0], c = (int)z.ne[2], hw = cf->pair_head_width, H = c / hw;
	int64_t sb = (int64_t)L * c, zi = ending ? c : sb, zj = ending ? sb : c;   /* z's rows, columns */
	tensor_t bias = fwd_new3(fx, H, L, L);
	tensor_t q, k, v, g, o;

	if (m->proj.out != H + 4 * c || m->o.in != c)
		fwd_fail(fx, -1, "trunk: triangle attention of %d heads over %d channels", H, c);
	if (n < L) trunk_pair_bias(fx, &m->ln, &m->bias, z, bias, ending);
	q = fwd_new3(fx, n, L, c);
	k = fwd_new3(fx, n, L, c);
	v = fwd_new3(fx, n, L, c);
	g = fwd_new3(fx, n, L, c);
	o = fwd_new3(fx, n, L, c);
	for (int i0 = 0; i0 < L; i0 += n) {
		int nc = trunk_chunk(L, i0, n);
		tensor_t gv = tensor_rows(g, 0, nc), ov = tensor_rows(o, 0, nc);
		be_ln_linear_t p = trunk_lnlin(z, i0, nc, ending, &m->ln, n == L ? &m->proj : &m->q);
		if (n == L) p.out[p.ngroups++] = trunk_out_bias(bias, &m->bias);
		p.out[p.ngroups++] = trunk_out_rows(q, &m->q);
		p.out[p.ngroups++] = trunk_out_rows(k, &m->k);
		p.out[p.ngroups++] = trunk_out_rows(v, &m->v);
		p.out[p.ngroups++] = trunk_out_rows(gv, &m->g);
		op_ln_linear(fx, &p);
		be_attn_t a = {
			.B = nc, .H = H, .Lq = L, .Lk = L, .D = hw, .scale = 1.0f / sqrtf((float)hw),
			.q = q.d, .q_sb = sb, .q_sl = c, .q_sh = hw,
			.k = k.d, .k_sb = sb, .k_sl = c, .k_sh = hw,
			.v = v.d, .v_sb = sb, .v_sl = c, .v_sh = hw,
			.o = ov.d, .o_sb = sb, .o_sl = c, .o_sh = hw,
			.bias = bias.d, .bias_sb = 0, .bias_sh = (int64_t)L * L, .bias_sq = L,
			.g = gv.d,                   /* gated in the attention's epilogue */
		};
		op_attn(fx, &a);
		/* rows i0.. of z (ending: of z^T) += linear_o(o), the residual
		 * add in the epilogue (beta 1), written through z's strides */
		be_ln_linear_t po = trunk_lnlin(ov, 0, nc, 0, NULL, &m->o);
		po.out[po.ngroups++] = (be_lnlin_out_t){ .n = c, .y = z.d + i0 * zi, .si = zi, .sj = zj, .sc = 1,
		                                         .bias = m->o.b, .beta = 1.0f };
		op_ln_linear(fx, &po);
	}
	fwd_drop(fx, &o);
	fwd_drop(fx, &g);
	fwd_drop(fx, &v);
	fwd_drop(fx, &k);
	fwd_drop(fx, &q);
	fwd_drop(fx, &bias);
}

/* ---- public ---------------------------------------------------------------- */

/* Pair-tensor passes of one block: reads and writes of [L, L, c_z] worth
 * of activations (an [L, L, 4 c_z] tensor read once is 4), counted by the
 * op layer as the ops run (fwd_t.traffic; trunk_block_passes,
 * bench/pair_passes), one chunk (n = L).  H_s, H_z: sequence and pair
 * heads; the [H, L, L] biases are H / c_z of a pass.  cuda: the form
 * without BE_OP_TRIMUL where it differs (channel-major projections).
 * Counted per op: passes a backend makes inside one op are not (CUDA:
 * the bias written into C before a cuBLAS product, the bias-and-ReLU
 * epilogue kernel after it, the bf16 staging of an activation operand).
 *
 *   part / op                               reads   writes   passes
 *   seq attention: pair bias, layernorm and   1      H_s/c_z   1 + 2 H_s/c_z
 *     linear in one (ln_linear), attention's
 *     bias read
 *   sequence to pair: outer                   -       1        1
 *     o_proj GEMM + residual (beta 1)         2       1        3
 *   tri mul (each of 2): gated f: layer-    1       1        2
 *     norm_in, projection and gate in one
 *     (ln_linear, gate pair epilogue; cuda:
 *     written channel-major; incoming: of
 *     z^T's rows, read in place by strides)
 *     gated r and linear_g's logits: the      1       2        3
 *       same, with a second output group
 *     triangle product                        2       1        3
 *     trimul_out: layernorm_out, linear_z,    3       1        4
 *       gate + residual add in one op (x,
 *       gv, z read, z written; cuda: x the
 *       channel-major product; incoming: z^T
 *       rows in place)
 *   tri att (each of 2; ending: z^T read and  1     4 + H_z/c_z 5 + 2 H_z/c_z
 *     written by strides): layernorm, bias,
 *     q, k, v, g in one (ln_linear),
 *     attention's bias read
 *     attention (q, k, v, gate g -> o)        4       1        5
 *     o linear + residual (ln_linear, beta 1) 2       1        3
 *   pair transition (one op: layernorm,       1       1        2
 *     fc1 + ReLU, fc2 + residual on tiles
 *     of rows, the hidden layer in them)
 *
 * Totals (pair part; plus 2 (H_s + 2 H_z) / c_z and the sequence track):
 * cpu and cuda 57 (esmfold_v1 at L = 256: 58.3).  In bytes, cuda at bf16
 * writes the gated f and r and reads them in the triangle product as
 * bf16 (trunk_trimul_gemm), and the outer features and their GEMM's read
 * (trunk_seq_to_pair): half a pass each, 2 passes less per triangle
 * multiplication and 1 for the outer, 52 fp32 passes' worth. */

void trunk_block(fwd_t *fx, const trunk_block_t *b, const hparams_t *c, tensor_t s, tensor_t z, int chunk)
{
	int L = (int)s.ne[0], n = trunk_rows(chunk, L);

	if (!(s.nd == 2 && s.ne[1] == c->c_s && z.nd == 3 && z.ne[0] == L && z.ne[1] == L &&
	      z.ne[2] == c->c_z)) {
		fwd_fail(fx, -1, "trunk: s [L, c_s] and z [L, L, c_z] expected");
		return;
	}
	if (L == 0) return;
	trunk_seq_attention(fx, b, c, s, z, n);
	trunk_mlp(fx, &b->mlp_seq, s);
	trunk_seq_to_pair(fx, b, s, z, n);
	trunk_trimul(fx, &b->mul_out, z, 1, n);
	trunk_trimul(fx, &b->mul_in, z, 0, n);
	trunk_triatt(fx, &b->att_start, c, z, n, 0);
	trunk_triatt(fx, &b->att_end, c, z, n, 1);
	trunk_mlp(fx, &b->mlp_pair, tensor_reshape2(z, (int64_t)L * L, c->c_z));
}

void trunk_iter(fwd_t *fx, const trunk_t *t, const hparams_t *c, tensor_t s, tensor_t z,
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
		int nc = trunk_chunk(L, i0, n);
		op_relpos(fx, tensor_rows(z, i0, nc), t->relpos, rd, i0, bins);
	}
	fwd_drop(fx, &rd);
	fwd_host_drop(fx, ri, sizeof *ri * (size_t)L);
	/* every block makes the same placement calls: planning runs a block
	 * only while the placement state at its start is a new one.  Executing,
	 * each block is recorded in the first pass (recycle) and replayed in
	 * the later ones where the backend has graphs (no upload or download
	 * in a block; s, z and the block's scratch at the same addresses each
	 * pass: fwd_graph_begin checks) */
	fwd_memo_t memo;
	fwd_memo_init(&memo);
	for (int i = 0; i < t->nblocks; i++) {
		if (fwd_memo_begin(fx, &memo) || fwd_graph_begin(fx, i, (tensor_t[]){ s, z }, 2)) continue;
		trunk_block(fx, &t->blocks[i], c, s, z, chunk);
		fwd_graph_end(fx);
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
		int nc = trunk_chunk(L, i0, n);
		tensor_t ev = tensor_rows(e, 0, nc), zv = tensor_rows(z, i0, nc);
		op_gather(fx, tensor_reshape2(ev, (int64_t)nc * L, cz), t->recycle_disto, bins + (size_t)i0 * L, 1.0f);
		op_layernorm(fx, zv, tensor_rows(prev_z, i0, nc), &t->recycle_z_norm);
		op_binary(fx, zv, zv, ev, BE_ADD);
	}
	fwd_drop(fx, &e);
}

/* plans one block at length L: its arena high-water mark and the floats
 * its ops read and write (fwd_t.traffic); -1 when planning fails */
static int trunk_plan_block(const hparams_t *c, be_t *be, int L, int chunk, size_t *high, int64_t *traffic)
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
	*high = fx.place.high;
	*traffic = fx.traffic;
	rc = fx.err ? -1 : 0;
	if (fx.err) log_error("trunk: planning failed: %s", fx.errmsg);
	fwd_end(&fx);
	return rc;
}

size_t trunk_block_peak(const hparams_t *c, be_t *be, int L, int chunk)
{
	size_t high;
	int64_t traffic;

	return trunk_plan_block(c, be, L, chunk, &high, &traffic) < 0 ? 0 : high;
}

double trunk_block_passes(const hparams_t *c, be_t *be, int L, int chunk)
{
	size_t high;
	int64_t traffic;

	if (L < 1 || trunk_plan_block(c, be, L, chunk, &high, &traffic) < 0) return -1.0;
	return (double)traffic / ((double)L * L * c->c_z);
}
