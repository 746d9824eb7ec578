/* ops.c - shape checks and dispatch for the op layer (see ops.h). */
#include "compute/ops.h"

#include "util/log.h"
#include "util/status.h"

static int64_t op_last(tensor_t t) { return t.nd ? t.ne[t.nd - 1] : 0; }

/* 1 when the op should run on the backend, 0 when planning or failed */
static int op_run(fwd_t *fx) { return !fx->err && !fx->planning; }

/* fx->traffic += n activation floats (see forward.h) */
static void op_count(fwd_t *fx, int64_t n) { fx->traffic += n; }

/* floats of a GEMM operand of rows x cols per batch, where it is an
 * activation of the pass (a weight is not counted) */
static int64_t op_operand(const fwd_t *fx, const float *p, int64_t rows, int64_t cols, int batch)
{
	return p && fwd_owns(fx, p) ? rows * cols * batch : 0;
}

static int op_check(fwd_t *fx, int ok, const char *op, const char *what)
{
	if (!ok && !fx->err) fwd_fail(fx, -1, "%s: shape mismatch (%s)", op, what);
	return ok && !fx->err;
}

static void op_status(fwd_t *fx, int rc, const char *op)
{
	if (rc == STATUS_DEVICE) fwd_fail(fx, rc, "%s: %s: the device is lost", op, fx->be->name);
	else if (rc < 0) fwd_fail(fx, rc, "%s: %s backend failed", op, fx->be->name);
}

/* op_linear, x of fp32 elements (h 1) or of bf16 ones (h 2: each float
 * of x holds two, x_bf16 of the GEMM) */
static void op_linear_h(fwd_t *fx, tensor_t y, tensor_t x, const lin_t *l, float beta, int h)
{
	int64_t m = op_last(x) ? tensor_numel(x) / op_last(x) : 0;

	if (!op_check(fx, op_last(x) * h == l->in && op_last(y) == l->out &&
	              tensor_numel(y) == m * l->out && (h == 1 || (l->bf16 && fx->be && fx->be->weights_bf16)),
	              "linear", "x [.., in] -> y [.., out]; bf16 x: bf16 weights"))
		return;
	op_count(fx, tensor_numel(x) + tensor_numel(y) * (beta != 0.0f ? 2 : 1));
	if (!op_run(fx) || m == 0) return;
	be_gemm_t g = {
		.transa = 0, .transb = 1, .m = (int)m, .n = l->out, .k = l->in,
		.alpha = 1.0f, .beta = beta,
		.a = x.d, .lda = l->in, .b = l->w, .ldb = l->in, .c = y.d, .ldc = l->out,
		.batch = 1, .bias = l->b, .a_bf16 = h == 2, .b_bf16 = l->bf16, .b_f16 = l->f16,
	};
	op_status(fx, fx->be->gemm(fx->be, &g), "linear");
}

void op_linear(fwd_t *fx, tensor_t y, tensor_t x, const lin_t *l, float beta)
{
	op_linear_h(fx, y, x, l, beta, 1);
}

void op_linear_bf16(fwd_t *fx, tensor_t y, tensor_t x, const lin_t *l, float beta)
{
	op_linear_h(fx, y, x, l, beta, 2);
}

void op_layernorm(fwd_t *fx, tensor_t y, tensor_t x, const ln_t *ln)
{
	if (!op_check(fx, op_last(x) == ln->d && tensor_numel(x) == tensor_numel(y), "layernorm", "[.., d]"))
		return;
	op_count(fx, 2 * tensor_numel(x));
	if (!op_run(fx) || !tensor_numel(x)) return;
	op_status(fx, fx->be->layernorm(fx->be, &(be_layernorm_t){
		.y = y.d, .x = x.d, .rows = tensor_numel(x) / ln->d, .d = ln->d, .w = ln->w,
		.b = ln->b, .eps = ln->eps,
	}), "layernorm");
}

void op_act(fwd_t *fx, tensor_t x, be_act_t kind)
{
	op_count(fx, 2 * tensor_numel(x));
	if (!op_run(fx) || !tensor_numel(x)) return;
	op_status(fx, fx->be->act(fx->be, &(be_unary_t){
		.x = x.d, .n = tensor_numel(x), .kind = kind,
	}), "act");
}

void op_binary(fwd_t *fx, tensor_t y, tensor_t a, tensor_t b, be_bin_t kind)
{
	if (!op_check(fx, tensor_numel(y) == tensor_numel(a) && tensor_numel(a) == tensor_numel(b), "binary", "equal sizes"))
		return;
	op_count(fx, 3 * tensor_numel(y));
	if (!op_run(fx) || !tensor_numel(y)) return;
	op_status(fx, fx->be->binary(fx->be, &(be_binary_t){
		.y = y.d, .a = a.d, .b = b.d, .n = tensor_numel(y), .kind = kind,
	}), "binary");
}

void op_axpby(fwd_t *fx, tensor_t y, tensor_t x, float alpha, float beta)
{
	if (!op_check(fx, tensor_numel(y) == tensor_numel(x), "axpby", "equal sizes")) return;
	op_count(fx, tensor_numel(x) + tensor_numel(y) * (beta != 0.0f ? 2 : 1));
	if (!op_run(fx) || !tensor_numel(y)) return;
	op_status(fx, fx->be->axpby(fx->be, &(be_axpby_t){
		.y = y.d, .x = x.d, .n = tensor_numel(y), .alpha = alpha, .beta = beta,
	}), "axpby");
}

void op_fill(fwd_t *fx, tensor_t x, float value)
{
	op_count(fx, tensor_numel(x));
	if (!op_run(fx) || !tensor_numel(x)) return;
	op_status(fx, fx->be->fill(fx->be, &(be_fill_t){
		.x = x.d, .n = tensor_numel(x), .value = value,
	}), "fill");
}

void op_softmax(fwd_t *fx, tensor_t x)
{
	op_count(fx, 2 * tensor_numel(x));
	if (!op_run(fx) || !tensor_numel(x)) return;
	op_status(fx, fx->be->softmax(fx->be, &(be_softmax_t){
		.x = x.d, .rows = tensor_numel(x) / op_last(x), .d = (int)op_last(x),
	}), "softmax");
}

/* 1 where fx's backend fetches (be_t.fetch), or while planning (a shapes-only
 * model plans for a backend's form, with or without its entries) */
static int op_fetches(const fwd_t *fx)
{
	return be_supports(fx->be, BE_OP_FETCH) || fx->planning;
}

void op_fetch(fwd_t *fx, tensor_t dst, const void *src, size_t n)
{
	if (!op_check(fx, n <= sizeof(float) * (size_t)tensor_numel(dst) && op_fetches(fx),
	              "fetch", "n bytes within dst; a backend that fetches"))
		return;
	if (!op_run(fx) || !n) return;
	op_status(fx, fx->be->fetch(fx->be, dst.d, src, n), "fetch");
}

void op_fetch_wait(fwd_t *fx)
{
	if (!op_check(fx, op_fetches(fx), "fetch_wait", "a backend that fetches") || !op_run(fx)) return;
	op_status(fx, fx->be->fetch_wait(fx->be), "fetch_wait");
}

void op_gather(fwd_t *fx, tensor_t y, const float *table, const int32_t *idx, float scale)
{
	if (!op_check(fx, y.nd >= 2, "gather", "y [rows, d]")) return;
	op_count(fx, tensor_numel(y));
	if (!op_run(fx) || !tensor_numel(y)) return;
	op_status(fx, fx->be->gather(fx->be, &(be_gather_t){
		.y = y.d, .table = table, .idx = idx, .rows = tensor_numel(y) / op_last(y),
		.d = (int)op_last(y), .scale = scale,
	}), "gather");
}

void op_transpose(fwd_t *fx, tensor_t y, tensor_t x)
{
	int ok = x.nd >= 2 && y.nd == x.nd && y.ne[0] == x.ne[1] && y.ne[1] == x.ne[0];
	for (int i = 2; ok && i < x.nd; i++) ok = y.ne[i] == x.ne[i];
	if (!op_check(fx, ok, "transpose", "[A, B, ..] -> [B, A, ..]")) return;
	op_count(fx, 2 * tensor_numel(x));
	if (!op_run(fx) || !tensor_numel(x)) return;
	op_status(fx, fx->be->transpose(fx->be, &(be_transpose_t){
		.y = y.d, .x = x.d, .A = x.ne[0], .B = x.ne[1],
		.C = tensor_numel(x) / (x.ne[0] * x.ne[1]),
	}), "transpose");
}

void op_outer(fwd_t *fx, tensor_t y, tensor_t q, tensor_t k, int i0, int bf16)
{
	int ok = q.nd == 2 && k.nd == 2 && q.ne[0] == k.ne[0] && q.ne[1] == k.ne[1] &&
	         y.nd == 3 && y.ne[1] == q.ne[0] && y.ne[2] == (bf16 ? 1 : 2) * q.ne[1] && i0 + y.ne[0] <= q.ne[0];
	if (!op_check(fx, ok, "outer", "q, k [L, c] -> y [ni, L, 2c]")) return;
	op_count(fx, tensor_numel(q) + y.ne[0] * k.ne[1] + tensor_numel(y));
	if (!op_run(fx) || !tensor_numel(y)) return;
	op_status(fx, fx->be->outer(fx->be, &(be_outer_t){
		.y = y.d, .q = q.d, .k = k.d, .i0 = i0, .ni = (int)y.ne[0], .L = (int)q.ne[0],
		.c = (int)q.ne[1], .bf16 = bf16,
	}), "outer");
}

void op_trimul(fwd_t *fx, tensor_t x, tensor_t a, tensor_t b)
{
	int ok = be_supports(fx->be, BE_OP_TRIMUL) && a.nd == 3 && b.nd == 3 && x.nd == 3 && a.ne[1] == b.ne[1] &&
	         a.ne[2] == b.ne[2] && x.ne[0] == a.ne[0] && x.ne[1] == b.ne[0] && x.ne[2] == a.ne[2];
	if (!op_check(fx, ok, "trimul", "a [ni, nk, c], b [nj, nk, c] -> x [ni, nj, c] (be->trimul)"))
		return;
	op_count(fx, tensor_numel(a) + tensor_numel(b) + tensor_numel(x));
	if (!op_run(fx) || !tensor_numel(x)) return;
	op_status(fx, fx->be->trimul(fx->be, &(be_trimul_t){
		.x = x.d, .a = a.d, .b = b.d, .ni = (int)a.ne[0], .nj = (int)b.ne[0],
		.nk = (int)a.ne[1], .c = (int)a.ne[2],
	}), "trimul");
}

void op_ipa_in(fwd_t *fx, const op_ipa_in_t *a)
{
	int H = a->H, Pq = a->Pq, Pv = a->Pv;
	int64_t L = a->state.ne[0], Dp = 3 * Pq + 2;
	int ok = a->state.nd == 2 && a->state.ne[1] == 7 && tensor_numel(a->rig) == L * 12 &&
	         tensor_numel(a->qp) == L * 3 * H * Pq && tensor_numel(a->kvp) == L * 3 * H * (Pq + Pv) &&
	         tensor_numel(a->qa) == L * H * Dp && tensor_numel(a->ka) == L * H * Dp &&
	         tensor_numel(a->vp) == L * H * 3 * Pv;
	if (!op_check(fx, ok, "ipa_in", "state [L, 7], qp, kvp -> qa, ka, vp, rig [L, 12]")) return;
	op_count(fx, tensor_numel(a->state) + tensor_numel(a->qp) + tensor_numel(a->kvp) + tensor_numel(a->qa) +
	             tensor_numel(a->ka) + tensor_numel(a->vp) + tensor_numel(a->rig));
	if (!op_run(fx) || !L) return;
	op_status(fx, fx->be->ipa_in(fx->be, &(be_ipa_in_t){
		.qa = a->qa.d, .ka = a->ka.d, .vp = a->vp.d, .rig = a->rig.d, .state = a->state.d,
		.qp = a->qp.d, .kvp = a->kvp.d, .hw = a->hw, .bb = a->bb,
		.L = (int)L, .H = H, .Pq = Pq, .Pv = Pv,
	}), "ipa_in");
}

void op_ipa_out(fwd_t *fx, tensor_t cat, int64_t c0, tensor_t op, tensor_t rig, float eps)
{
	int64_t L = rig.ne[0], n = L ? tensor_numel(op) / (3 * L) : 0;
	int ok = rig.nd == 2 && rig.ne[1] == 12 && cat.nd == 2 && cat.ne[0] == L && op.ne[0] == L &&
	         tensor_numel(op) == L * n * 3 && c0 >= 0 && c0 + 4 * n <= cat.ne[1];
	if (!op_check(fx, ok, "ipa_out", "op [L, 3 n], rig [L, 12] -> cat [L, >= c0 + 4 n]")) return;
	op_count(fx, tensor_numel(op) + tensor_numel(rig) + L * 4 * n);
	if (!op_run(fx) || !L || !n) return;
	op_status(fx, fx->be->ipa_out(fx->be, &(be_ipa_out_t){
		.cat = cat.d + c0, .ldc = cat.ne[1], .op = op.d, .rig = rig.d, .L = (int)L,
		.n_pts = (int)n, .eps = eps,
	}), "ipa_out");
}

void op_ipa_rigid(fwd_t *fx, tensor_t state, tensor_t frame, tensor_t upd, float scale)
{
	int64_t L = state.ne[0];
	int ok = state.nd == 2 && state.ne[1] == 7 &&
	         (upd.nd ? tensor_numel(upd) == L * 6 : !frame.nd) &&
	         (!frame.nd || tensor_numel(frame) == L * 7);
	if (!op_check(fx, ok, "ipa_rigid", "state [L, 7], upd [L, 6] -> frame [L, 7]")) return;
	op_count(fx, tensor_numel(state) * (upd.nd ? 2 : 1) + tensor_numel(upd) + tensor_numel(frame));
	if (!op_run(fx) || !L) return;
	op_status(fx, fx->be->ipa_rigid(fx->be, &(be_ipa_rigid_t){
		.state = state.d, .frame = frame.d, .upd = upd.d, .L = (int)L, .scale = scale,
	}), "ipa_rigid");
}

void op_transition(fwd_t *fx, tensor_t x, const ln_t *ln, const lin_t *fc1, const lin_t *fc2)
{
	int d = (int)op_last(x);

	if (!op_check(fx, d == ln->d && fc1->in == d && fc2->out == d && fc2->in == fc1->out,
	              "transition", "x [.., d], fc1 [h, d], fc2 [d, h]"))
		return;
	if (!op_check(fx, fc1->bf16 == fc2->bf16 && (!fc1->bf16 || (fx->be && fx->be->weights_bf16)),
	              "transition", "fc1 and fc2 both bf16 weights (the device's) or neither"))
		return;
	op_count(fx, 2 * tensor_numel(x));
	if (!op_run(fx) || !tensor_numel(x)) return;
	be_transition_t t = {
		.x = x.d, .rows = tensor_numel(x) / d, .d = d, .h = fc1->out,
		.ln_w = ln->w, .ln_b = ln->b, .eps = ln->eps,
		.w1 = fc1->w, .b1 = fc1->b, .w2 = fc2->w, .b2 = fc2->b, .bf16 = fc1->bf16,
	};
	op_status(fx, fx->be->transition(fx->be, &t), "transition");
}

/* rows i0..i0+nc-1 of z: [L, L, d] (tr 0) or of z^T (tr 1) at their
 * strides, from *off elements into z */
static be_rows_t op_pair_rows(tensor_t z, int i0, int64_t nc, int tr, int64_t *off)
{
	int64_t L = z.ne[0], d = z.ne[2];

	*off = tr ? i0 * d : i0 * L * d;
	return tr ? (be_rows_t){ .n1 = nc, .n2 = L, .s1 = d, .s2 = L * d }
	          : (be_rows_t){ .n1 = nc, .n2 = L, .s1 = L * d, .s2 = d };
}

/* z: [L, L, d] with rows i0..i0+nc-1 */
static int op_pair_ok(tensor_t z, int i0, int64_t nc)
{
	return z.nd == 3 && z.ne[0] == z.ne[1] && i0 >= 0 && nc >= 0 && i0 + nc <= z.ne[0];
}

void op_trimul_out(fwd_t *fx, const op_trimul_out_t *t)
{
	tensor_t z = t->z, x = t->x, gv = t->gv;
	int64_t nc = gv.nd == 3 ? gv.ne[0] : -1, rows = nc * z.ne[1], c = z.ne[2], off;
	int cm = t->channel_major;
	int ok = op_pair_ok(z, t->i0, nc) && gv.ne[1] == z.ne[0] && gv.ne[2] == c && t->ln->d == c &&
	         t->lin->in == c && t->lin->out == c && tensor_numel(x) == rows * c &&
	         (cm ? x.nd == 2 && x.ne[0] == c : x.nd == 3 && x.ne[2] == c) && x.d != z.d && gv.d != z.d;

	if (!op_check(fx, ok, "trimul_out", "z [L, L, c], gv [nc, L, c], x [nc, L, c] or [c, nc L], apart"))
		return;
	be_rows_t r = op_pair_rows(z, t->i0, nc, t->transposed, &off);
	op_count(fx, tensor_numel(x) + tensor_numel(gv) + 2 * rows * c);
	if (!op_run(fx) || !rows) return;
	be_trimul_out_t b = {
		.c = (int)c, .z = z.d + off, .zr = r,
		.x = x.d, .x_rs = cm ? 1 : c, .x_cs = cm ? rows : 1, .gv = gv.d,
		.ln_w = t->ln->w, .ln_b = t->ln->b, .eps = t->ln->eps,
		.w = t->lin->w, .w_bf16 = t->lin->bf16, .b = t->lin->b,
	};
	op_status(fx, fx->be->trimul_out(fx->be, &b), "trimul_out");
}

void op_relpos(fwd_t *fx, tensor_t z, const float *table, tensor_t residx, int i0, int bins)
{
	int ok = z.nd == 3 && residx.nd == 1 && z.ne[1] == residx.ne[0] && i0 >= 0 &&
	         i0 + z.ne[0] <= residx.ne[0] && bins >= 0;
	if (!op_check(fx, ok, "relpos", "z [ni, L, c], residx [L], i0 + ni <= L")) return;
	op_count(fx, 2 * tensor_numel(z) + residx.ne[0]);
	if (!op_run(fx) || !tensor_numel(z)) return;
	op_status(fx, fx->be->relpos(fx->be, &(be_relpos_t){
		.z = z.d, .table = table, .residx = residx.d, .i0 = i0, .ni = (int)z.ne[0],
		.L = (int)z.ne[1], .c = (int)z.ne[2], .bins = bins,
	}), "relpos");
}

void op_gemm(fwd_t *fx, const be_gemm_t *g)
{
	if (!op_check(fx, (unsigned)g->prec < BE_PREC_COUNT, "gemm", "prec a be_prec_t")) return;
	if (!op_check(fx, !g->relu || g->beta == 0.0f, "gemm", "relu with beta 0")) return;
	if (!op_check(fx, !(g->a_bf16 || g->b_bf16) || (fx->be && fx->be->weights_bf16 &&
	              (g->batch == 1 || (g->a_bf16 && g->b_bf16)) && g->prec == BE_PREC_AUTO), "gemm",
	              "a bf16 operand: the device's precision, batch 1 unless both are bf16"))
		return;
	op_count(fx, op_operand(fx, g->a, g->m, g->k, g->batch) + op_operand(fx, g->b, g->k, g->n, g->batch) +
	             op_operand(fx, g->c, g->m, g->n, g->batch) * (g->beta != 0.0f ? 2 : 1));
	if (!op_run(fx) || !g->m || !g->n || !g->batch) return;
	op_status(fx, fx->be->gemm(fx->be, g), "gemm");
}

void op_attn(fwd_t *fx, const be_attn_t *a)
{
	int64_t q = (int64_t)a->B * a->Lq * a->H * a->D, kv = (int64_t)a->B * a->Lk * a->H * a->D;
	if (!op_check(fx, !a->rope || a->D % 2 == 0, "attention", "a rope table wants D even")) return;
	op_count(fx, (a->g ? 3 : 2) * q + 2 * kv + (a->bias ? (int64_t)(a->bias_sb ? a->B : 1) * a->H * a->Lq * a->Lk : 0) +
	             (a->mask ? (int64_t)a->B * a->Lk : 0) +
	             (a->rope ? (int64_t)(a->Lq > a->Lk ? a->Lq : a->Lk) * a->D : 0));
	if (!op_run(fx) || !a->B || !a->H || !a->Lq) return;
	op_status(fx, fx->be->attn(fx->be, a), "attention");
}

void op_ln_linear(fwd_t *fx, const be_ln_linear_t *p)
{
	int64_t rows = (int64_t)p->ni * p->nj, n = rows * p->k;
	int ok = p->ni >= 0 && p->nj >= 0 && p->k > 0 && p->ngroups >= 1 && p->ngroups <= BE_LNLIN_GROUPS &&
	         (!p->w_bf16 || (fx->be && fx->be->weights_bf16));

	for (int g = 0; ok && g < p->ngroups; g++) {
		ok = p->out[g].n > 0 && (unsigned)p->out[g].kind <= BE_LNLIN_GATE &&
		     (!p->out[g].bf16 || p->out[g].beta == 0.0f);
		n += rows * p->out[g].n * (p->out[g].beta != 0.0f ? 2 : 1);
	}
	if (!op_check(fx, ok, "ln_linear", "1..6 groups of n > 0 (bf16 output: beta 0), k > 0, bf16 weights on a bf16 device")) return;
	op_count(fx, n);
	if (!op_run(fx) || !rows) return;
	op_status(fx, fx->be->ln_linear(fx->be, p), "ln_linear");
}
