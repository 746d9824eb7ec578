/* structure.c - the structure module (see structure.h).
 *
 * IPA logits of head h, as the reference defines them:
 *   a[h,i,j] = sqrt(1/(3d)) q_i.k_j + sqrt(1/3) (W_b z_ij + b_h)
 *              - w_h/2 sum_p |Tq_ip - Tk_jp|^2
 * The point term is expanded as w_h Tq.Tk - w_h/2 |Tq|^2 - w_h/2 |Tk|^2 and
 * folded into one GEMM over augmented per-head vectors
 *   Q'_i = [w_h Tq_i, -w_h/2 |Tq_i|^2 + sqrt(1/3) b_h, 1]
 *   K'_j = [Tk_j,     1,                              -w_h/2 |Tk_j|^2]
 * with the global points taken relative to the mean backbone origin, so the
 * squared norms stay small and the expansion loses no precision.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "protein/geometry.h"
#include "util/log.h"
#include "protein/residue.h"
#include "model/structure.h"

#define STRUCTURE_LN_EPS 1e-5f   /* nn.LayerNorm default, every LayerNorm here */

int structure_load(structure_t *sm, const cfg_t *c, weights_t *w, be_t *be)
{
	const char *P = "trunk.structure_module";
	int C = c->sm_c_s, Z = c->sm_c_z, H = c->sm_heads, d = c->sm_ipa_dim;
	int Pq = c->sm_qk_points, Pv = c->sm_v_points, R = c->sm_resnet_dim, rc = 0;
	float *hw = NULL;

	memset(sm, 0, sizeof *sm);
	sm->ntrans = c->sm_transitions;
	sm->nres = c->sm_resnet_blocks;
	sm->trans = calloc(sm->ntrans ? sm->ntrans : 1, sizeof *sm->trans);
	sm->res = calloc(sm->nres ? sm->nres : 1, sizeof *sm->res);
	sm->head_w = malloc(sizeof(float) * (H ? H : 1));
	sm->b_bias = malloc(sizeof(float) * (H ? H : 1));
	if (!sm->trans || !sm->res || !sm->head_w || !sm->b_bias) {
		log_error("structure module: out of memory");
		structure_free(sm);
		return -1;
	}
	rc |= weights_ln(w, be, &sm->ln_s, C, STRUCTURE_LN_EPS, "%s.layer_norm_s", P);
	rc |= weights_ln(w, be, &sm->ln_z, Z, STRUCTURE_LN_EPS, "%s.layer_norm_z", P);
	rc |= weights_lin(w, be, &sm->lin_in, C, C, 1, "%s.linear_in", P);
	rc |= weights_lin(w, be, &sm->q, H * d, C, 1, "%s.ipa.linear_q", P);
	rc |= weights_lin(w, be, &sm->kv, 2 * H * d, C, 1, "%s.ipa.linear_kv", P);
	rc |= weights_lin(w, be, &sm->q_pts, 3 * H * Pq, C, 1, "%s.ipa.linear_q_points", P);
	rc |= weights_lin(w, be, &sm->kv_pts, 3 * H * (Pq + Pv), C, 1, "%s.ipa.linear_kv_points", P);
	rc |= weights_lin(w, be, &sm->b, H, Z, 1, "%s.ipa.linear_b", P);
	rc |= weights_get(w, be, &hw, 0, 1, (int64_t[]){ H }, "%s.ipa.head_weights", P);
	rc |= weights_lin(w, be, &sm->out, C, H * (d + 4 * Pv + Z), 1, "%s.ipa.linear_out", P);
	rc |= weights_ln(w, be, &sm->ln_ipa, C, STRUCTURE_LN_EPS, "%s.layer_norm_ipa", P);
	for (int i = 0; i < sm->ntrans; i++) {
		rc |= weights_lin(w, be, &sm->trans[i].l1, C, C, 1, "%s.transition.layers.%d.linear_1", P, i);
		rc |= weights_lin(w, be, &sm->trans[i].l2, C, C, 1, "%s.transition.layers.%d.linear_2", P, i);
		rc |= weights_lin(w, be, &sm->trans[i].l3, C, C, 1, "%s.transition.layers.%d.linear_3", P, i);
	}
	rc |= weights_ln(w, be, &sm->ln_trans, C, STRUCTURE_LN_EPS, "%s.transition.layer_norm", P);
	rc |= weights_lin(w, be, &sm->bb, 6, C, 1, "%s.bb_update.linear", P);
	rc |= weights_lin(w, be, &sm->ar_in, R, C, 1, "%s.angle_resnet.linear_in", P);
	rc |= weights_lin(w, be, &sm->ar_initial, R, C, 1, "%s.angle_resnet.linear_initial", P);
	for (int i = 0; i < sm->nres; i++) {
		rc |= weights_lin(w, be, &sm->res[i].l1, R, R, 1, "%s.angle_resnet.layers.%d.linear_1", P, i);
		rc |= weights_lin(w, be, &sm->res[i].l2, R, R, 1, "%s.angle_resnet.layers.%d.linear_2", P, i);
	}
	rc |= weights_lin(w, be, &sm->ar_out, 2 * c->sm_angles, R, 1, "%s.angle_resnet.linear_out", P);
	if (rc) {
		structure_free(sm);
		return -1;
	}
	if (!be) return 0;
	/* per-head constants on the host: point weights and the pair-bias bias */
	if (be->download(be, sm->head_w, hw, sizeof(float) * H) < 0 ||
	    be->download(be, sm->b_bias, sm->b.b, sizeof(float) * H) < 0) {
		log_error("structure module: cannot read ipa.head_weights / ipa.linear_b.bias");
		structure_free(sm);
		return -1;
	}
	for (int h = 0; h < H; h++) {
		double x = sm->head_w[h], sp = x > 20.0 ? x : log1p(exp(x));   /* nn.Softplus */
		sm->head_w[h] = (float)(sp * sqrt(1.0 / (3.0 * (Pq * 9.0 / 2.0))));
	}
	return 0;
}

void structure_free(structure_t *sm)
{
	free(sm->trans);
	free(sm->res);
	free(sm->head_w);
	free(sm->b_bias);
	memset(sm, 0, sizeof *sm);
}

size_t structure_out_layout(structure_out_t *o, const cfg_t *c, int L, char *base)
{
	size_t B = (size_t)c->sm_blocks, n = (size_t)L, A = (size_t)c->sm_angles, off = 0;

	memset(o, 0, sizeof *o);
	o->L = L;
	o->blocks = c->sm_blocks;
	o->c = c->sm_c_s;
	o->frames = fwd_piece(base, &off, sizeof(float) * B * n * 7);   /* first: the block's base */
	o->positions = fwd_piece(base, &off, sizeof(float) * B * n * RESIDUE_NUM_ATOM14 * 3);
	o->angles = fwd_piece(base, &off, sizeof(float) * B * n * A * 2);
	o->unnorm_angles = fwd_piece(base, &off, sizeof(float) * B * n * A * 2);
	o->states = fwd_piece(base, &off, sizeof(float) * B * n * (size_t)o->c);
	o->sidechain = fwd_piece(base, &off, sizeof(float) * n * RESIDUE_NUM_GROUPS * 16);
	o->atom37 = fwd_piece(base, &off, sizeof(float) * n * RESIDUE_NUM_ATOM37 * 3);
	o->atom14_mask = fwd_piece(base, &off, sizeof(float) * n * RESIDUE_NUM_ATOM14);
	o->atom37_mask = fwd_piece(base, &off, sizeof(float) * n * RESIDUE_NUM_ATOM37);
	return off;
}

int structure_out_alloc(structure_out_t *o, const cfg_t *c, int L)
{
	void *p = NULL;

	if (posix_memalign(&p, 64, structure_out_layout(o, c, L, NULL) + 1) != 0) {
		memset(o, 0, sizeof *o);
		return -1;
	}
	structure_out_layout(o, c, L, p);
	return 0;
}

void structure_out_free(structure_out_t *o)
{
	free(o->frames);
	memset(o, 0, sizeof *o);
}

/* ---- host geometry -------------------------------------------------------- */

/* host state and scratch of one pass, one block placed with fwd_host */
typedef struct {
	int    L, H, d, Pq, Pv, Z, Dp, W;
	float *quat;      /* [L, 4] current backbone rotations (unit quaternions) */
	float *trans;     /* [L, 3] current backbone translations (nm scale) */
	geom_rigid_t *rig;/* [L] current rigids, translation relative to `center` */
	float *qp, *kvp;  /* [L, 3 H Pq], [L, 3 H (Pq + Pv)] point projections */
	float *qa, *ka;   /* [L, H, Dp] augmented point vectors */
	float *vp;        /* [L, H, 3 Pv] value points, global */
	float *op;        /* [L, H, 3 Pv] attended value points, global */
	float *cat;       /* [L, W] linear_out input */
	float *upd;       /* [L, 6] backbone update */
	float *ang;       /* [L, 2 A] angle resnet output */
	size_t bytes;     /* of the block (quat is its base) */
} structure_host_t;

/* lay out h's buffers from base (NULL: only size them); h's dims set */
static size_t structure_host_layout(structure_host_t *h, int A, char *base)
{
	size_t n = (size_t)h->L, off = 0;

	h->quat = fwd_piece(base, &off, sizeof(float) * n * 4);
	h->trans = fwd_piece(base, &off, sizeof(float) * n * 3);
	h->rig = fwd_piece(base, &off, sizeof *h->rig * n);
	h->qp = fwd_piece(base, &off, sizeof(float) * n * 3 * h->H * h->Pq);
	h->kvp = fwd_piece(base, &off, sizeof(float) * n * 3 * h->H * (h->Pq + h->Pv));
	h->qa = fwd_piece(base, &off, sizeof(float) * n * h->H * h->Dp);
	h->ka = fwd_piece(base, &off, sizeof(float) * n * h->H * h->Dp);
	h->vp = fwd_piece(base, &off, sizeof(float) * n * h->H * 3 * h->Pv);
	h->op = fwd_piece(base, &off, sizeof(float) * n * h->H * 3 * h->Pv);
	h->cat = fwd_piece(base, &off, sizeof(float) * n * h->W);
	h->upd = fwd_piece(base, &off, sizeof(float) * n * 6);
	h->ang = fwd_piece(base, &off, sizeof(float) * n * 2 * A);
	return off;
}

/* place h for length L (both passes); executing, the identity rigids */
static void structure_host_place(fwd_t *fx, structure_host_t *h, const cfg_t *c, int L)
{
	char *base;

	memset(h, 0, sizeof *h);
	h->L = L; h->H = c->sm_heads; h->d = c->sm_ipa_dim; h->Z = c->sm_c_z;
	h->Pq = c->sm_qk_points; h->Pv = c->sm_v_points;
	h->Dp = 3 * h->Pq + 2;
	h->W = h->H * (h->d + 4 * h->Pv + h->Z);
	h->bytes = structure_host_layout(h, c->sm_angles, NULL);
	if (!(base = fwd_host(fx, h->bytes))) return;
	structure_host_layout(h, c->sm_angles, base);
	if (fx->planning) return;
	for (int i = 0; i < L; i++) {
		float *q = h->quat + 4 * i;
		q[0] = 1.0f; q[1] = q[2] = q[3] = 0.0f;
		memset(h->trans + 3 * i, 0, sizeof(float) * 3);
	}
}

/* Rigids of the current frames with translations relative to their mean,
 * then the augmented q/k point vectors (see the file comment) and the value
 * points, all in that shifted global frame.
 * qp: [L, 3 H Pq], kvp: [L, 3 H (Pq + Pv)] -> qa, ka: [L, H, Dp], vp: [L, H, 3 Pv] */
static void structure_points_in(structure_host_t *h, const structure_t *sm)
{
	int L = h->L, H = h->H, Pq = h->Pq, Pv = h->Pv, Dp = h->Dp;
	int nq = H * Pq, nkv = H * (Pq + Pv);
	double ctr[3] = { 0, 0, 0 };
	const float sb = sqrtf(1.0f / 3.0f);

	for (int i = 0; i < L; i++)
		for (int k = 0; k < 3; k++) ctr[k] += h->trans[3 * i + k];
	for (int k = 0; k < 3; k++) ctr[k] /= L;
	for (int i = 0; i < L; i++) {
		geom_rigid_t *r = &h->rig[i];
		geom_quat_to_rot(h->quat + 4 * i, r->r);
		for (int k = 0; k < 3; k++) r->t[k] = (float)(h->trans[3 * i + k] - ctr[k]);
	}
	for (int i = 0; i < L; i++) {
		const geom_rigid_t *r = &h->rig[i];
		const float *qp = h->qp + (size_t)i * 3 * nq, *kvp = h->kvp + (size_t)i * 3 * nkv;
		for (int hh = 0; hh < H; hh++) {
			float wh = sm->head_w[hh], *qa = h->qa + ((size_t)i * H + hh) * Dp;
			float *ka = h->ka + ((size_t)i * H + hh) * Dp;
			float *vp = h->vp + ((size_t)i * H + hh) * 3 * Pv;
			double sq = 0.0;
			for (int p = 0; p < Pq; p++) {
				int n = hh * Pq + p;
				float loc[3] = { qp[n], qp[nq + n], qp[2 * nq + n] }, g[3];
				geom_rigid_apply(r, loc, g);
				for (int k = 0; k < 3; k++) {
					qa[3 * p + k] = wh * g[k];
					sq += (double)g[k] * g[k];
				}
			}
			qa[3 * Pq] = (float)(-0.5 * wh * sq) + sb * sm->b_bias[hh];
			qa[3 * Pq + 1] = 1.0f;
			sq = 0.0;
			for (int p = 0; p < Pq + Pv; p++) {
				int n = hh * (Pq + Pv) + p;
				float loc[3] = { kvp[n], kvp[nkv + n], kvp[2 * nkv + n] }, g[3];
				geom_rigid_apply(r, loc, g);
				if (p < Pq) {
					for (int k = 0; k < 3; k++) {
						ka[3 * p + k] = g[k];
						sq += (double)g[k] * g[k];
					}
				} else {
					memcpy(vp + 3 * (p - Pq), g, sizeof g);
				}
			}
			ka[3 * Pq] = 1.0f;
			ka[3 * Pq + 1] = (float)(-0.5 * wh * sq);
		}
	}
}

/* Attended value points back into each residue's frame, with their norms,
 * into the point columns of the linear_out input:
 * op: [L, H, Pv, 3] -> cat[:, H d + {0,1,2,3} H Pv + h Pv + p] = x, y, z, norm */
static void structure_points_out(structure_host_t *h, float eps)
{
	int L = h->L, H = h->H, Pv = h->Pv, off = H * h->d, hp = H * Pv;

	for (int i = 0; i < L; i++) {
		const geom_rigid_t *r = &h->rig[i];
		float *row = h->cat + (size_t)i * h->W + off;
		for (int n = 0; n < hp; n++) {
			const float *g = h->op + ((size_t)i * hp + n) * 3;
			float v[3] = { g[0] - r->t[0], g[1] - r->t[1], g[2] - r->t[2] }, l[3];
			for (int k = 0; k < 3; k++)   /* R^T v */
				l[k] = r->r[0][k] * v[0] + r->r[1][k] * v[1] + r->r[2][k] * v[2];
			row[n] = l[0];
			row[hp + n] = l[1];
			row[2 * hp + n] = l[2];
			row[3 * hp + n] = sqrtf(l[0] * l[0] + l[1] * l[1] + l[2] * l[2] + eps);
		}
	}
}

/* rigids <- rigids o (normalise(1, b, c, d), t): q += q (0, b, c, d), then
 * normalised; trans += R(q_old) t.  upd: [L, 6] */
static void structure_update_rigids(structure_host_t *h)
{
	for (int i = 0; i < h->L; i++) {
		float *q = h->quat + 4 * i, *t = h->trans + 3 * i, r[3][3];
		const float *u = h->upd + 6 * i;
		geom_quat_to_rot(q, r);
		for (int k = 0; k < 3; k++)
			t[k] += r[k][0] * u[3] + r[k][1] * u[4] + r[k][2] * u[5];
		float w = q[0] - (q[1] * u[0] + q[2] * u[1] + q[3] * u[2]);
		float x = q[1] + q[0] * u[0] + q[2] * u[2] - q[3] * u[1];
		float y = q[2] + q[0] * u[1] + q[3] * u[0] - q[1] * u[2];
		float z = q[3] + q[0] * u[2] + q[1] * u[1] - q[2] * u[0];
		q[0] = w; q[1] = x; q[2] = y; q[3] = z;
		geom_quat_normalize(q);
	}
}

/* Block outputs: frames (translation scaled), angles (normalised), atom14
 * positions, and for the last block the sidechain frames.
 * ang: [L, A, 2] -> out->{frames, unnorm_angles, angles, positions}[blk] */
static int structure_block_out(const structure_host_t *h, const cfg_t *c, const int *aatype, int blk,
                        structure_out_t *out)
{
	int L = h->L, A = c->sm_angles;
	float *fr = out->frames + (size_t)blk * L * 7;
	float *un = out->unnorm_angles + (size_t)blk * L * A * 2;
	float *an = out->angles + (size_t)blk * L * A * 2;
	float *pos = out->positions + (size_t)blk * L * RESIDUE_NUM_ATOM14 * 3;

	for (int i = 0; i < L; i++) {
		memcpy(fr + 7 * i, h->quat + 4 * i, sizeof(float) * 4);
		for (int k = 0; k < 3; k++) fr[7 * i + 4 + k] = h->trans[3 * i + k] * c->sm_trans_scale;
	}
	memcpy(un, h->ang, sizeof(float) * L * A * 2);
	for (int n = 0; n < L * A; n++) {
		float a = un[2 * n], b = un[2 * n + 1], s2 = a * a + b * b;
		float den = sqrtf(s2 > c->sm_eps ? s2 : c->sm_eps);
		an[2 * n] = a / den;
		an[2 * n + 1] = b / den;
	}
	if (geom_torsion_angles_to_frames(L, fr, an, aatype, out->sidechain) < 0) return -1;
	return geom_frames_to_atom14(L, out->sidechain, aatype, pos);
}

/* ---- the pass ------------------------------------------------------------- */

/* s += IPA(s, z, rigids).  s: [L, c]; z: [L, L, c_z] (normalised) */
static void structure_ipa(fwd_t *fx, const structure_t *sm, const cfg_t *c, tensor_t s, tensor_t z, structure_host_t *h)
{
	int L = (int)s.ne[0], H = c->sm_heads, d = c->sm_ipa_dim, Z = c->sm_c_z;
	int Pq = c->sm_qk_points, Pv = c->sm_v_points, Dp = 3 * Pq + 2, W = H * (d + 4 * Pv + Z);
	int64_t LL = (int64_t)L * L;
	int run = !fx->planning;

	tensor_t q = fwd_new2(fx, L, H * d), kv = fwd_new2(fx, L, 2 * H * d);
	tensor_t qp = fwd_new2(fx, L, 3 * H * Pq), kvp = fwd_new2(fx, L, 3 * H * (Pq + Pv));
	op_linear(fx, q, s, &sm->q, 0.0f);
	op_linear(fx, kv, s, &sm->kv, 0.0f);
	op_linear(fx, qp, s, &sm->q_pts, 0.0f);
	op_linear(fx, kvp, s, &sm->kv_pts, 0.0f);
	fwd_get(fx, qp, h->qp);
	fwd_get(fx, kvp, h->kvp);
	fwd_drop(fx, &qp);
	fwd_drop(fx, &kvp);
	if (run && !fx->err) structure_points_in(h, sm);

	tensor_t qa = fwd_new2(fx, L, H * Dp), ka = fwd_new2(fx, L, H * Dp), vp = fwd_new2(fx, L, H * 3 * Pv);
	fwd_set(fx, qa, h->qa);
	fwd_set(fx, ka, h->ka);
	fwd_set(fx, vp, h->vp);

	/* logits a: [H, L, L] */
	tensor_t a = fwd_new3(fx, H, L, L);
	op_gemm(fx, &(be_gemm_t){   /* sqrt(1/3) W_b z_ij: [H, c_z] x [L L, c_z]^T */
		.transa = 0, .transb = 1, .m = H, .n = (int)LL, .k = Z,
		.alpha = sqrtf(1.0f / 3.0f), .beta = 0.0f,
		.a = sm->b.w, .lda = Z, .a_bf16 = sm->b.bf16, .b = z.d, .ldb = Z, .c = a.d, .ldc = LL,
		.batch = 1 });
	op_gemm(fx, &(be_gemm_t){   /* + sqrt(1/(3d)) q_i.k_j per head */
		.transa = 0, .transb = 1, .m = L, .n = L, .k = d,
		.alpha = sqrtf(1.0f / (3.0f * d)), .beta = 1.0f,
		.a = q.d, .lda = H * d, .stride_a = d,
		.b = kv.d, .ldb = 2 * H * d, .stride_b = 2 * d,
		.c = a.d, .ldc = L, .stride_c = LL, .batch = H });
	/* + point term and the linear_b bias, in fp32 whatever the device's
	 * precision: w Tq.Tk - w/2 |Tq|^2 - w/2 |Tk|^2 cancels terms of
	 * 10-100 nm^2 down to the distances it measures, which bf16 inputs
	 * (8 bits) would bury in rounding */
	op_gemm(fx, &(be_gemm_t){
		.transa = 0, .transb = 1, .m = L, .n = L, .k = Dp,
		.alpha = 1.0f, .beta = 1.0f,
		.a = qa.d, .lda = H * Dp, .stride_a = Dp,
		.b = ka.d, .ldb = H * Dp, .stride_b = Dp,
		.c = a.d, .ldc = L, .stride_c = LL, .batch = H, .prec = BE_PREC_FP32 });
	fwd_drop(fx, &qa);
	fwd_drop(fx, &ka);
	fwd_drop(fx, &q);
	op_softmax(fx, tensor_reshape2(a, (int64_t)H * L, L));

	/* linear_out input cat: [L, W] = (o, o_pt x, y, z, |o_pt|, o_pair) */
	tensor_t cat = fwd_new2(fx, L, W), op = fwd_new2(fx, L, H * 3 * Pv);
	op_gemm(fx, &(be_gemm_t){   /* o = a v -> cat[:, h d + e] */
		.transa = 0, .transb = 0, .m = L, .n = d, .k = L, .alpha = 1.0f, .beta = 0.0f,
		.a = a.d, .lda = L, .stride_a = LL,
		.b = kv.d + d, .ldb = 2 * H * d, .stride_b = 2 * d,
		.c = cat.d, .ldc = W, .stride_c = d, .batch = H });
	op_gemm(fx, &(be_gemm_t){   /* global value points: [L, H, 3 Pv] */
		.transa = 0, .transb = 0, .m = L, .n = 3 * Pv, .k = L, .alpha = 1.0f, .beta = 0.0f,
		.a = a.d, .lda = L, .stride_a = LL,
		.b = vp.d, .ldb = H * 3 * Pv, .stride_b = 3 * Pv,
		.c = op.d, .ldc = H * 3 * Pv, .stride_c = 3 * Pv, .batch = H });
	op_gemm(fx, &(be_gemm_t){   /* o_pair[i, h] = sum_j a[h, i, j] z[i, j] */
		.transa = 0, .transb = 0, .m = H, .n = Z, .k = L, .alpha = 1.0f, .beta = 0.0f,
		.a = a.d, .lda = LL, .stride_a = L,
		.b = z.d, .ldb = Z, .stride_b = (int64_t)L * Z,
		.c = cat.d + H * (d + 4 * Pv), .ldc = Z, .stride_c = W, .batch = L });
	fwd_drop(fx, &a);
	fwd_drop(fx, &vp);
	fwd_drop(fx, &kv);
	fwd_get(fx, cat, h->cat);
	fwd_get(fx, op, h->op);
	if (run && !fx->err) structure_points_out(h, c->sm_eps);
	fwd_set(fx, cat, h->cat);
	op_linear(fx, s, cat, &sm->out, 1.0f);
	fwd_drop(fx, &op);
	fwd_drop(fx, &cat);
}

/* s = transition(s): per layer s += l3(relu(l2(relu(l1(s))))), then the
 * LayerNorm.  s: [L, c] */
static void structure_transition(fwd_t *fx, const structure_t *sm, tensor_t s)
{
	tensor_t t1 = fwd_new2(fx, s.ne[0], s.ne[1]), t2 = fwd_new2(fx, s.ne[0], s.ne[1]);
	for (int i = 0; i < sm->ntrans; i++) {
		op_linear(fx, t1, s, &sm->trans[i].l1, 0.0f);
		op_act(fx, t1, BE_RELU);
		op_linear(fx, t2, t1, &sm->trans[i].l2, 0.0f);
		op_act(fx, t2, BE_RELU);
		op_linear(fx, s, t2, &sm->trans[i].l3, 1.0f);
	}
	fwd_drop(fx, &t2);
	fwd_drop(fx, &t1);
	op_layernorm(fx, s, s, &sm->ln_trans);
}

/* unnormalised angles of the angle resnet.  s: [L, c]; ainit: [L, r] =
 * linear_initial(relu(s_initial)); ang: [L, 2 A] (written) */
static void sm_angles(fwd_t *fx, const structure_t *sm, tensor_t s, tensor_t ainit, tensor_t ang)
{
	int64_t L = s.ne[0], R = ainit.ne[1];
	tensor_t x = fwd_new2(fx, L, s.ne[1]), a = fwd_new2(fx, L, R), t = fwd_new2(fx, L, R);

	op_axpby(fx, x, s, 1.0f, 0.0f);
	op_act(fx, x, BE_RELU);
	op_axpby(fx, a, ainit, 1.0f, 0.0f);
	op_linear(fx, a, x, &sm->ar_in, 1.0f);
	fwd_drop(fx, &x);
	tensor_t u = fwd_new2(fx, L, R);
	for (int i = 0; i < sm->nres; i++) {
		op_axpby(fx, t, a, 1.0f, 0.0f);
		op_act(fx, t, BE_RELU);
		op_linear(fx, u, t, &sm->res[i].l1, 0.0f);
		op_act(fx, u, BE_RELU);
		op_linear(fx, a, u, &sm->res[i].l2, 1.0f);
	}
	fwd_drop(fx, &u);
	op_act(fx, a, BE_RELU);
	op_linear(fx, ang, a, &sm->ar_out, 0.0f);
	fwd_drop(fx, &t);
	fwd_drop(fx, &a);
}

void structure_forward(fwd_t *fx, const structure_t *sm, const cfg_t *c, tensor_t s, tensor_t z,
                const int *aatype, structure_out_t *out)
{
	int L = (int)s.ne[0], C = c->sm_c_s, run = !fx->planning;
	structure_host_t h = { 0 };

	if (s.nd != 2 || s.ne[1] != C || z.nd != 3 || z.ne[0] != L || z.ne[1] != L ||
	    z.ne[2] != c->sm_c_z) {
		fwd_fail(fx, -1, "structure module: s [L, %d] and z [L, L, %d] expected", C, c->sm_c_z);
		return;
	}
	if (run && (out->L != L || out->blocks != c->sm_blocks)) {
		fwd_fail(fx, -1, "structure module: output buffers sized for another length");
		return;
	}
	structure_host_place(fx, &h, c, L);

	op_layernorm(fx, z, z, &sm->ln_z);
	op_layernorm(fx, s, s, &sm->ln_s);   /* s_initial */
	tensor_t ainit = fwd_new2(fx, L, c->sm_resnet_dim), x = fwd_new2(fx, L, C);
	op_axpby(fx, x, s, 1.0f, 0.0f);
	op_act(fx, x, BE_RELU);
	op_linear(fx, ainit, x, &sm->ar_initial, 0.0f);
	op_linear(fx, x, s, &sm->lin_in, 0.0f);
	op_axpby(fx, s, x, 1.0f, 0.0f);
	fwd_drop(fx, &x);

	for (int blk = 0; blk < c->sm_blocks; blk++) {
		structure_ipa(fx, sm, c, s, z, &h);
		op_layernorm(fx, s, s, &sm->ln_ipa);
		structure_transition(fx, sm, s);

		tensor_t upd = fwd_new2(fx, L, 6), ang = fwd_new2(fx, L, 2 * c->sm_angles);
		op_linear(fx, upd, s, &sm->bb, 0.0f);
		sm_angles(fx, sm, s, ainit, ang);
		fwd_get(fx, upd, h.upd);
		fwd_get(fx, ang, h.ang);
		if (run) fwd_get(fx, s, out->states + (size_t)blk * L * C);
		fwd_drop(fx, &ang);
		fwd_drop(fx, &upd);
		if (run && !fx->err) {
			structure_update_rigids(&h);
			if (structure_block_out(&h, c, aatype, blk, out) < 0)
				fwd_fail(fx, -1, "structure module: bad aatype");
		}
	}
	fwd_drop(fx, &ainit);

	if (run && !fx->err) {
		const float *a14 = out->positions + (size_t)(c->sm_blocks - 1) * L * RESIDUE_NUM_ATOM14 * 3;
		if (geom_atom14_to_atom37(L, a14, aatype, out->atom37) < 0 ||
		    geom_atom_masks(L, aatype, out->atom14_mask, out->atom37_mask) < 0)
			fwd_fail(fx, -1, "structure module: bad aatype");
	}
	fwd_host_drop(fx, h.quat, h.bytes);
}
