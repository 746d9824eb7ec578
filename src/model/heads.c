/* heads.c - the output heads (see heads.h). */
#include "model/heads.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "protein/residue.h"
#include "model/trunk.h"

#define HEADS_LN_EPS 1e-5f     /* nn.LayerNorm default */
#define HEADS_TM_EPS 1e-8      /* compute_tm's eps */

int heads_load(heads_t *hd, const hparams_t *c, weights_t *w, be_t *be)
{
	int C = c->sm_c_s, hid = c->lddt_hidden, rc = 0;

	memset(hd, 0, sizeof *hd);
	rc |= weights_ln(w, be, &hd->lddt_ln, C, HEADS_LN_EPS, "lddt_head.0");
	rc |= weights_lin(w, be, &hd->lddt_1, hid, C, 1, "lddt_head.1");
	rc |= weights_lin(w, be, &hd->lddt_2, hid, hid, 1, "lddt_head.2");
	rc |= weights_lin(w, be, &hd->lddt_3, RESIDUE_NUM_ATOM37 * HEADS_LDDT_BINS, hid, 1, "lddt_head.3");
	rc |= weights_lin(w, be, &hd->ptm, HEADS_PAE_BINS, c->c_z, 1, "ptm_head");
	rc |= weights_lin(w, be, &hd->disto, HEADS_PAE_BINS, c->c_z, 1, "distogram_head");
	rc |= weights_lin(w, be, &hd->lm, HEADS_LM_TOKENS, c->c_s, 1, "lm_head");
	return rc ? -1 : 0;
}

void heads_plddt(fwd_t *fx, const heads_t *hd, tensor_t states, float *plddt, float *plddt_res)
{
	int64_t L = states.ne[0], hid = hd->lddt_1.out, na = (int64_t)L * RESIDUE_NUM_ATOM37;
	float centre[HEADS_LDDT_BINS];

	/* EsmCategoricalMixture: midpoints of linspace(0, 1, bins + 1) */
	for (int k = 0; k < HEADS_LDDT_BINS; k++)
		centre[k] = (float)((k + 0.5) / HEADS_LDDT_BINS);
	tensor_t x = fwd_new2(fx, L, states.ne[1]), t1 = fwd_new2(fx, L, hid), t2 = fwd_new2(fx, L, hid);
	op_layernorm(fx, x, states, &hd->lddt_ln);
	op_linear(fx, t1, x, &hd->lddt_1, 0.0f);
	op_linear(fx, t2, t1, &hd->lddt_2, 0.0f);
	fwd_drop(fx, &x);
	fwd_drop(fx, &t1);
	tensor_t lg = fwd_new2(fx, na, HEADS_LDDT_BINS);
	op_linear(fx, tensor_reshape2(lg, L, RESIDUE_NUM_ATOM37 * HEADS_LDDT_BINS), t2, &hd->lddt_3, 0.0f);
	fwd_drop(fx, &t2);
	op_softmax(fx, lg);
	tensor_t bins = fwd_new2(fx, HEADS_LDDT_BINS, 1), p = fwd_new2(fx, na, 1);
	fwd_set(fx, bins, centre);
	/* the expectation over the bins in fp32, whatever the device's precision:
	 * p: [L 37, 1] = lg: [L 37, bins] x bins: [bins, 1] */
	op_gemm(fx, &(be_gemm_t){
		.m = (int)na, .n = 1, .k = HEADS_LDDT_BINS, .alpha = 1.0f, .beta = 0.0f,
		.a = lg.d, .lda = HEADS_LDDT_BINS, .b = bins.d, .ldb = 1, .c = p.d, .ldc = 1,
		.batch = 1, .prec = BE_PREC_FP32 });
	fwd_get(fx, p, plddt);
	fwd_drop(fx, &p);
	fwd_drop(fx, &bins);
	fwd_drop(fx, &lg);
	if (!fx->planning && !fx->err && plddt_res)
		for (int64_t i = 0; i < L; i++) plddt_res[i] = plddt[i * RESIDUE_NUM_ATOM37 + RESIDUE_ATOM37_CA];
}

void heads_pae(fwd_t *fx, const heads_t *hd, tensor_t s_z, int chunk, float *pae, double *ptm,
               float *max_pae)
{
	int L = (int)s_z.ne[0], run = !fx->planning;
	int n = trunk_rows(chunk, L);
	float table[HEADS_PAE_BINS][2], step = (float)HEADS_PAE_MAX / (HEADS_PAE_BINS - 2);
	double clipped = L > 19 ? L : 19, d0 = 1.24 * cbrt(clipped - 15.0) - 1.8;
	double *tm_row = NULL, best = -INFINITY;
	float *buf = NULL;

	if (s_z.nd != 3 || s_z.ne[1] != L) {
		fwd_fail(fx, -1, "heads_pae: s_z [L, L, c_z] expected");
		return;
	}
	/* bin centres of linspace(0, max_bin, bins - 1) (float32, as the
	 * reference builds them), and the TM-score of each bin */
	for (int k = 0; k < HEADS_PAE_BINS; k++) {
		float ctr = k < HEADS_PAE_BINS - 1 ? (float)k * step + step / 2.0f
		                                   : (float)(HEADS_PAE_BINS - 2) * step + step / 2.0f + step;
		table[k][0] = ctr;
		table[k][1] = (float)(1.0 / (1.0 + (double)ctr * ctr / (d0 * d0)));
	}
	*max_pae = table[HEADS_PAE_BINS - 1][0];
	/* host scratch, placed in both passes */
	buf = fwd_host(fx, sizeof(float) * 2 * (size_t)n * L);
	tm_row = fwd_host(fx, sizeof *tm_row * (size_t)L);
	if (run && !fx->err) memset(tm_row, 0, sizeof *tm_row * (size_t)L);
	tensor_t tab = fwd_new2(fx, HEADS_PAE_BINS, 2), lg = fwd_new3(fx, n, L, HEADS_PAE_BINS);
	tensor_t ev = fwd_new2(fx, (int64_t)n * L, 2);
	fwd_set(fx, tab, &table[0][0]);
	for (int i0 = 0; i0 < L; i0 += n) {
		int m = trunk_chunk(L, i0, n);
		tensor_t lgm = tensor_rows(lg, 0, m), evm = tensor_rows(ev, 0, (int64_t)m * L);
		op_linear(fx, lgm, tensor_rows(s_z, i0, m), &hd->ptm, 0.0f);
		op_softmax(fx, lgm);
		/* (expected error, expected TM term) of every pair, in fp32
		 * whatever the device's precision: evm: [m L, 2] =
		 * lgm: [m L, bins] x tab: [bins, 2] */
		op_gemm(fx, &(be_gemm_t){
			.m = m * L, .n = 2, .k = HEADS_PAE_BINS, .alpha = 1.0f, .beta = 0.0f,
			.a = lgm.d, .lda = HEADS_PAE_BINS, .b = tab.d, .ldb = 2, .c = evm.d, .ldc = 2,
			.batch = 1, .prec = BE_PREC_FP32 });
		fwd_get(fx, evm, buf);
		if (!run || fx->err) continue;
		for (int64_t r = 0; r < (int64_t)m * L; r++) {
			if (pae) pae[(int64_t)i0 * L + r] = buf[2 * r];
			tm_row[i0 + r / L] += buf[2 * r + 1];
		}
	}
	fwd_drop(fx, &ev);
	fwd_drop(fx, &lg);
	fwd_drop(fx, &tab);
	if (run && !fx->err) {
		/* per alignment i: sum_j tm(i, j) / (eps + L); pTM = max over i */
		for (int i = 0; i < L; i++) {
			double v = tm_row[i] * (1.0 / (HEADS_TM_EPS + L));
			if (v > best) best = v;
		}
		*ptm = best;
	}
	fwd_host_drop(fx, tm_row, sizeof *tm_row * (size_t)L);
	fwd_host_drop(fx, buf, sizeof(float) * 2 * (size_t)n * L);
}

void heads_distogram(fwd_t *fx, const heads_t *hd, tensor_t s_z, tensor_t out)
{
	op_linear(fx, out, s_z, &hd->disto, 0.0f);
	tensor_t t = fwd_new3(fx, out.ne[0], out.ne[1], out.ne[2]);
	op_transpose(fx, t, out);
	op_axpby(fx, out, t, 0.5f, 0.5f);
	fwd_drop(fx, &t);
}

void heads_lm(fwd_t *fx, const heads_t *hd, tensor_t s_s, tensor_t out)
{
	op_linear(fx, out, s_s, &hd->lm, 0.0f);
}

double heads_mean_plddt(int L, const float *plddt, const float *atom37_mask)
{
	double num = 0.0, den = 0.0;

	for (int64_t i = 0; i < (int64_t)L * RESIDUE_NUM_ATOM37; i++) {
		num += (double)plddt[i] * atom37_mask[i];
		den += atom37_mask[i];
	}
	return num / den;
}
