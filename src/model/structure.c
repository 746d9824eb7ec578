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
 * squared norms stay small and the expansion loses no precision.  The
 * augmented vectors, the points back in each frame and the backbone update
 * are backend ops (op_ipa_in / op_ipa_out / op_ipa_rigid): the block loop
 * never copies to or from the host; the frames, unnormalised angles and
 * states of every block land in device tensors downloaded once at the end,
 * and the host does only the pure post-processing (angle normalisation,
 * torsions to frames to atoms, masks).
 */
#include "model/structure.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "protein/geometry.h"
#include "protein/residue.h"

#define STRUCTURE_LN_EPS 1e-5f   /* nn.LayerNorm default, every LayerNorm here */

int structure_load(structure_t *sm, const hparams_t *c, weights_t *w, be_t *be)
{
	const char *P = "trunk.structure_module";
	int C = c->sm_c_s, Z = c->sm_c_z, H = c->sm_heads, d = c->sm_ipa_dim;
	int Pq = c->sm_qk_points, Pv = c->sm_v_points, R = c->sm_resnet_dim, rc = 0;

	memset(sm, 0, sizeof *sm);
	sm->ntrans = c->sm_transitions;
	sm->nres = c->sm_resnet_blocks;
	sm->trans = calloc(sm->ntrans ? sm->ntrans : 1, sizeof *sm->trans);
	sm->res = calloc(sm->nres ? sm->nres : 1, sizeof *sm->res);
	if (!sm->trans || !sm->res) {
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
	rc |= weights_get(w, be, &sm->head_w, 0, 1, (int64_t[]){ H }, "%s.ipa.head_weights", P);
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
	return 0;
}

void structure_free(structure_t *sm)
{
	free(sm->trans);
	free(sm->res);
	memset(sm, 0, sizeof *sm);
}

size_t structure_out_layout(structure_out_t *o, const hparams_t *c, int L, char *base)
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

int structure_out_alloc(structure_out_t *o, const hparams_t *c, int L)
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

/* ---- host post-processing ------------------------------------------------ */

/* The host outputs of every block from its frames and unnormalised angles
 * (downloaded): angles normalised, then torsions to sidechain frames to
 * atom14 positions; after the last block atom37 and the atom masks.
 * out->{frames, unnorm_angles} -> out->{angles, sidechain, positions,
 * atom37, atom14_mask, atom37_mask}.  0, or -1 on a bad aatype. */
static int structure_host_out(const hparams_t *c, const int *aatype, structure_out_t *out)
{
	int L = out->L, A = c->sm_angles;

	for (int blk = 0; blk < out->blocks; blk++) {
		const float *fr = out->frames + (size_t)blk * L * 7;
		const float *un = out->unnorm_angles + (size_t)blk * L * A * 2;
		float *an = out->angles + (size_t)blk * L * A * 2;
		float *pos = out->positions + (size_t)blk * L * RESIDUE_NUM_ATOM14 * 3;
		for (int n = 0; n < L * A; n++) {
			float a = un[2 * n], b = un[2 * n + 1], s2 = a * a + b * b;
			float den = sqrtf(s2 > c->sm_eps ? s2 : c->sm_eps);
			an[2 * n] = a / den;
			an[2 * n + 1] = b / den;
		}
		if (geom_torsion_angles_to_frames(L, fr, an, aatype, out->sidechain) < 0 ||
		    geom_frames_to_atom14(L, out->sidechain, aatype, pos) < 0)
			return -1;
	}
	const float *a14 = out->positions + (size_t)(out->blocks - 1) * L * RESIDUE_NUM_ATOM14 * 3;
	if (geom_atom14_to_atom37(L, a14, aatype, out->atom37) < 0 ||
	    geom_atom_masks(L, aatype, out->atom14_mask, out->atom37_mask) < 0)
		return -1;
	return 0;
}

/* ---- the pass ------------------------------------------------------------- */

/* s += IPA(s, z, frames).  s: [L, c]; z: [L, L, c_z] (normalised);
 * state: [L, 7] the current backbone frames */
static void structure_ipa(fwd_t *fx, const structure_t *sm, const hparams_t *c, tensor_t s, tensor_t z,
                          tensor_t state)
{
	int L = (int)s.ne[0], H = c->sm_heads, d = c->sm_ipa_dim, Z = c->sm_c_z;
	int Pq = c->sm_qk_points, Pv = c->sm_v_points, Dp = 3 * Pq + 2, W = H * (d + 4 * Pv + Z);
	int64_t LL = (int64_t)L * L;

	tensor_t q = fwd_new2(fx, L, H * d), kv = fwd_new2(fx, L, 2 * H * d);
	tensor_t qp = fwd_new2(fx, L, 3 * H * Pq), kvp = fwd_new2(fx, L, 3 * H * (Pq + Pv));
	op_linear(fx, q, s, &sm->q, 0.0f);
	op_linear(fx, kv, s, &sm->kv, 0.0f);
	op_linear(fx, qp, s, &sm->q_pts, 0.0f);
	op_linear(fx, kvp, s, &sm->kv_pts, 0.0f);
	/* the rigids (translations about their mean) and the augmented
	 * point vectors of the file comment */
	tensor_t qa = fwd_new2(fx, L, H * Dp), ka = fwd_new2(fx, L, H * Dp), vp = fwd_new2(fx, L, H * 3 * Pv);
	tensor_t rig = fwd_new2(fx, L, 12);
	op_ipa_in(fx, &(op_ipa_in_t){
		.qa = qa, .ka = ka, .vp = vp, .rig = rig, .state = state, .qp = qp, .kvp = kvp,
		.hw = sm->head_w, .bb = sm->b.b, .H = H, .Pq = Pq, .Pv = Pv,
	});
	fwd_drop(fx, &kvp);
	fwd_drop(fx, &qp);

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
	op_ipa_out(fx, cat, (int64_t)H * d, op, rig, c->sm_eps);   /* the point columns */
	op_linear(fx, s, cat, &sm->out, 1.0f);
	fwd_drop(fx, &op);
	fwd_drop(fx, &cat);
	fwd_drop(fx, &rig);
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

void structure_forward(fwd_t *fx, const structure_t *sm, const hparams_t *c, tensor_t s, tensor_t z,
                const int *aatype, structure_out_t *out)
{
	int L = (int)s.ne[0], C = c->sm_c_s, B = c->sm_blocks, A2 = 2 * c->sm_angles;

	if (s.nd != 2 || s.ne[1] != C || z.nd != 3 || z.ne[0] != L || z.ne[1] != L ||
	    z.ne[2] != c->sm_c_z) {
		fwd_fail(fx, -1, "structure module: s [L, %d] and z [L, L, %d] expected", C, c->sm_c_z);
		return;
	}
	if (!fx->planning && (out->L != L || out->blocks != B)) {
		fwd_fail(fx, -1, "structure module: output buffers sized for another length");
		return;
	}
	/* every block's results, on the device until the loop ends */
	tensor_t frames = fwd_new3(fx, B, L, 7), unnorm = fwd_new3(fx, B, L, A2);
	tensor_t states = fwd_new3(fx, B, L, C);
	tensor_t state = fwd_new2(fx, L, 7);   /* backbone frames, translation unscaled */
	op_ipa_rigid(fx, state, (tensor_t){ 0 }, (tensor_t){ 0 }, 0.0f);   /* identity */

	op_layernorm(fx, z, z, &sm->ln_z);
	op_layernorm(fx, s, s, &sm->ln_s);   /* s_initial */
	tensor_t ainit = fwd_new2(fx, L, c->sm_resnet_dim), x = fwd_new2(fx, L, C);
	op_axpby(fx, x, s, 1.0f, 0.0f);
	op_act(fx, x, BE_RELU);
	op_linear(fx, ainit, x, &sm->ar_initial, 0.0f);
	op_linear(fx, x, s, &sm->lin_in, 0.0f);
	op_axpby(fx, s, x, 1.0f, 0.0f);
	fwd_drop(fx, &x);

	for (int blk = 0; blk < B; blk++) {
		structure_ipa(fx, sm, c, s, z, state);
		op_layernorm(fx, s, s, &sm->ln_ipa);
		structure_transition(fx, sm, s);

		tensor_t upd = fwd_new2(fx, L, 6);
		op_linear(fx, upd, s, &sm->bb, 0.0f);
		sm_angles(fx, sm, s, ainit, tensor_reshape2(tensor_rows(unnorm, blk, 1), L, A2));
		op_axpby(fx, tensor_reshape2(tensor_rows(states, blk, 1), L, C), s, 1.0f, 0.0f);
		op_ipa_rigid(fx, state, tensor_reshape2(tensor_rows(frames, blk, 1), L, 7), upd,
		             c->sm_trans_scale);
		fwd_drop(fx, &upd);
	}
	fwd_drop(fx, &ainit);
	fwd_drop(fx, &state);

	fwd_get(fx, frames, out->frames);
	fwd_get(fx, unnorm, out->unnorm_angles);
	fwd_get(fx, states, out->states);
	fwd_drop(fx, &states);
	fwd_drop(fx, &unnorm);
	fwd_drop(fx, &frames);
	if (!fx->planning && !fx->err && structure_host_out(c, aatype, out) < 0)
		fwd_fail(fx, -1, "structure module: bad aatype");
}
