/* esm2.c - ESM-2 and the projection to the trunk input (see esm2.h). */
#include "model/esm2.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "compute/placement.h"

#define LM_AA_TYPES 23   /* ESMFold's amino-acid embedding: 20 + X + pad + mask */

/* *inv_freq: the layer's own rotary frequencies [hd/2] in backend memory,
 * or NULL; l->host set: its matrices go to host memory */
static int esm2_load_layer(esm2_layer_t *l, const hparams_t *c, weights_t *w, be_t *be, int i,
                           float **inv_freq)
{
	const char *p = "esm.encoder.layer";
	int D = c->lm_dim, hd = c->lm_dim / c->lm_heads, rc = 0;
	/* the six matrices as a plain GEMM multiplies them, or held in host memory */
	int (*mat)(weights_t *, be_t *, lin_t *, int, int, int, const char *, ...) =
		l->host && be ? weights_lin_host : weights_lin_f16;

	rc |= weights_ln(w, be, &l->attn_ln, D, c->lm_ln_eps, "%s.%d.attention.LayerNorm", p, i);
	rc |= mat(w, be, &l->q, D, D, 1, "%s.%d.attention.self.query", p, i);
	rc |= mat(w, be, &l->k, D, D, 1, "%s.%d.attention.self.key", p, i);
	rc |= mat(w, be, &l->v, D, D, 1, "%s.%d.attention.self.value", p, i);
	rc |= weights_get(w, be, inv_freq, 1, 1, (int64_t[]){ hd / 2 },
	             "%s.%d.attention.self.rotary_embeddings.inv_freq", p, i);
	rc |= mat(w, be, &l->o, D, D, 1, "%s.%d.attention.output.dense", p, i);
	rc |= weights_ln(w, be, &l->ffn_ln, D, c->lm_ln_eps, "%s.%d.LayerNorm", p, i);
	rc |= mat(w, be, &l->fc1, c->lm_ffn, D, 1, "%s.%d.intermediate.dense", p, i);
	rc |= mat(w, be, &l->fc2, D, c->lm_ffn, 1, "%s.%d.output.dense", p, i);
	return rc ? -1 : 0;
}

/* the matrices of a host-held layer, in their order in a ring slot */
#define ESM2_HOST_MATS 6
static const lin_t *esm2_mat(const esm2_layer_t *l, int m)
{
	const lin_t *mats[ESM2_HOST_MATS] = { &l->q, &l->k, &l->v, &l->o, &l->fc1, &l->fc2 };
	return mats[m];
}

/* bytes of matrix l on the device: bf16 (or binary16) 2 an element, else
 * 4; rounded up as the planner places (place_round), its offset's step in
 * a slot */
static size_t esm2_mat_bytes(const lin_t *l, int half)
{
	return place_round((size_t)l->out * l->in * (half ? 2 : 4));
}

/* bytes of one ring slot: a layer's matrices, each at an aligned offset */
static size_t esm2_slot_bytes(const esm2_layer_t *l, int half)
{
	size_t n = 0;
	for (int m = 0; m < ESM2_HOST_MATS; m++) n += esm2_mat_bytes(esm2_mat(l, m), half);
	return n;
}

int64_t esm2_host_bytes(const esm2_t *lm, const be_t *be)
{
	int64_t n = 0;
	for (int i = 0; i < lm->nlayers; i++)
		if (lm->layers[i].host)
			for (int m = 0; m < ESM2_HOST_MATS; m++) {
				const lin_t *l = esm2_mat(&lm->layers[i], m);
				n += (int64_t)l->out * l->in * (be && be->weights_bf16 ? 2 : 4);
			}
	return n;
}

/* lm->layers[].host for nhost of the n layers, spread evenly: layer i
 * where (i + 1) nhost / n passes a whole number, the last one always */
static void esm2_pick_host(esm2_t *lm, int nhost)
{
	int n = lm->nlayers;

	lm->nhost = nhost < 0 ? 0 : nhost > n ? n : nhost;
	for (int i = 0; i < n; i++)
		lm->layers[i].host = (int64_t)(i + 1) * lm->nhost / n != (int64_t)i * lm->nhost / n;
}

int esm2_load(esm2_t *lm, const hparams_t *c, weights_t *w, be_t *be, int nhost)
{
	int D = c->lm_dim, n = c->lm_layers, half = D / c->lm_heads / 2, rc = 0;
	float *comb = NULL, *shared_freq = NULL, **own_freq = NULL;

	memset(lm, 0, sizeof *lm);
	lm->nlayers = n;
	if (!(lm->layers = calloc(n, sizeof *lm->layers)) || !(lm->combine = malloc(sizeof(float) * (n + 1))) ||
	    !(lm->freq = calloc((size_t)n * half, sizeof *lm->freq)) || !(own_freq = calloc(n, sizeof *own_freq)))
		goto fail;
	if (nhost > 0 && be && !be_supports(be, BE_OP_FETCH)) {
		log_info("%s: the language model's layers stay in its own memory (it fetches no host memory)",
		         be->name);
		nhost = 0;
	}
	esm2_pick_host(lm, nhost);
	for (int i = 0; i < n; i++) rc |= esm2_load_layer(&lm->layers[i], c, w, be, i, &own_freq[i]);
	rc |= weights_get(w, be, (float **)&lm->embed, 0, 2, (int64_t[]){ c->vocab, D },
	             "esm.embeddings.word_embeddings.weight");
	rc |= weights_ln(w, be, &lm->final_ln, D, c->lm_ln_eps, "esm.encoder.emb_layer_norm_after");
	rc |= weights_get(w, be, &comb, 0, 1, (int64_t[]){ n + 1 }, "esm_s_combine");
	rc |= weights_ln(w, be, &lm->s_mlp_ln, D, 1e-5f, "esm_s_mlp.0");
	rc |= weights_lin(w, be, &lm->s_mlp_1, c->c_s, D, 1, "esm_s_mlp.1");
	rc |= weights_lin(w, be, &lm->s_mlp_3, c->c_s, c->c_s, 1, "esm_s_mlp.3");
	rc |= weights_get(w, be, (float **)&lm->aa_embed, 0, 2, (int64_t[]){ LM_AA_TYPES, c->c_s },
	             "embedding.weight");
	/* newer transformers keep one rotary buffer for all layers */
	rc |= weights_get(w, be, &shared_freq, 1, 1, (int64_t[]){ half },
	             "esm.rotary_embeddings.inv_freq");
	if (rc) goto fail;
	if (!be) goto done;
	/* softmax(esm_s_combine) on the host, in double */
	if (be->download(be, lm->combine, comb, sizeof(float) * (n + 1)) < 0) goto fail;
	{
		double mx = -INFINITY, sum = 0.0, e[n + 1];
		for (int i = 0; i <= n; i++) if (lm->combine[i] > mx) mx = lm->combine[i];
		for (int i = 0; i <= n; i++) sum += e[i] = exp(lm->combine[i] - mx);
		for (int i = 0; i <= n; i++) lm->combine[i] = (float)(e[i] / sum);
	}
	for (int i = 0; i < n; i++) {
		float *f = lm->freq + (size_t)i * half, *src = own_freq[i] ? own_freq[i] : shared_freq;
		if (src && be->download(be, f, src, sizeof *f * half) < 0) goto fail;
		for (int d = 0; d < half && !src; d++)   /* as ESM-2 builds its buffer */
			f[d] = (float)(1.0 / pow(10000.0, (double)(2 * d) / (2 * half)));
	}
done:
	free(own_freq);
	return 0;
fail:
	free(own_freq);
	esm2_free(lm);
	return -1;
}

void esm2_free(esm2_t *lm)
{
	free(lm->layers);
	free(lm->combine);
	free(lm->freq);
	memset(lm, 0, sizeof *lm);
}

/* rope: [T, hd/2, 2] = (cos, sin) of ESM-2's rotary angles t f[d] for the
 * positions t < T and frequencies f: host [hd/2], each evaluated in double
 * and rounded (be_attn_t.rope); staged in tab: host [T, hd] */
static void esm2_rope(fwd_t *fx, tensor_t rope, float *tab, const float *f)
{
	int T = (int)rope.ne[0], half = (int)rope.ne[1] / 2;

	if (fx->planning || fx->err) return;
	for (int t = 0; t < T; t++)
		for (int d = 0; d < half; d++) {
			double ang = (double)t * f[d];
			tab[((int64_t)t * half + d) * 2] = (float)cos(ang);
			tab[((int64_t)t * half + d) * 2 + 1] = (float)sin(ang);
		}
	fwd_set(fx, rope, tab);
}

/* one pre-LayerNorm block; x: [T, D] updated in place; rope: [T, hd/2, 2]
 * the rotary table of its frequencies (esm2_rope) */
static void esm2_layer(fwd_t *fx, const esm2_layer_t *l, const hparams_t *c, tensor_t x, tensor_t rope)
{
	int T = (int)x.ne[0], D = c->lm_dim, H = c->lm_heads, hd = D / H;
	tensor_t h = fwd_new2(fx, T, D);
	tensor_t q = fwd_new3(fx, T, H, hd), k = fwd_new3(fx, T, H, hd), v = fwd_new3(fx, T, H, hd);

	op_layernorm(fx, h, x, &l->attn_ln);
	op_linear(fx, tensor_reshape2(q, T, D), h, &l->q, 0.0f);
	op_linear(fx, tensor_reshape2(k, T, D), h, &l->k, 0.0f);
	op_linear(fx, tensor_reshape2(v, T, D), h, &l->v, 0.0f);
	/* h: [T, H, hd] = softmax(rot(q) rot(k)^T / sqrt(hd)) v, q and k rotated as loaded */
	be_attn_t a = {
		.B = 1, .H = H, .Lq = T, .Lk = T, .D = hd, .scale = 1.0f / sqrtf((float)hd),
		.q = q.d, .q_sl = D, .q_sh = hd, .k = k.d, .k_sl = D, .k_sh = hd,
		.v = v.d, .v_sl = D, .v_sh = hd, .o = h.d, .o_sl = D, .o_sh = hd, .rope = rope.d,
	};
	op_attn(fx, &a);
	fwd_drop(fx, &v);
	fwd_drop(fx, &k);
	fwd_drop(fx, &q);
	op_linear(fx, x, h, &l->o, 1.0f);               /* x += o(attn) */

	tensor_t f = fwd_new2(fx, T, c->lm_ffn);
	op_layernorm(fx, h, x, &l->ffn_ln);
	op_linear(fx, f, h, &l->fc1, 0.0f);
	op_act(fx, f, BE_GELU);
	op_linear(fx, x, f, &l->fc2, 1.0f);             /* x += fc2(gelu(fc1(ln(x)))) */
	fwd_drop(fx, &f);
	fwd_drop(fx, &h);
}

/* 1: the pass's matrices are bf16 (2 bytes an element): its backend's
 * say, or planned without one, CUDA's at its default precision */
static int esm2_half(const fwd_t *fx)
{
	return fx->be ? fx->be->weights_bf16 : 1;
}

/* the host-held layer l's matrices queued into slot: [slot bytes / 4] */
static void esm2_fetch(fwd_t *fx, const esm2_layer_t *l, tensor_t slot)
{
	int half = esm2_half(fx);
	size_t off = 0;

	for (int m = 0; m < ESM2_HOST_MATS; m++) {
		const lin_t *x = esm2_mat(l, m);
		size_t n = esm2_mat_bytes(x, half);
		op_fetch(fx, tensor_rows(slot, (int64_t)(off / sizeof(float)), (int64_t)(n / sizeof(float))), x->w,
		         (size_t)x->out * x->in * (half ? 2 : 4));
		off += n;
	}
}

/* *v = the host-held layer l with its matrices in slot (esm2_fetch's) */
static void esm2_in_slot(const fwd_t *fx, const esm2_layer_t *l, tensor_t slot, esm2_layer_t *v)
{
	size_t off = 0;

	*v = *l;
	for (int m = 0; m < ESM2_HOST_MATS; m++) {
		lin_t *x = (lin_t *)esm2_mat(v, m);   /* one of *v's own: not const */
		x->w = (const float *)((const char *)slot.d + off);
		off += esm2_mat_bytes(x, esm2_half(fx));
	}
}

/* the first host-held layer from i on, or -1 */
static int esm2_next_host(const esm2_t *lm, int i)
{
	while (i < lm->nlayers && !lm->layers[i].host) i++;
	return i < lm->nlayers ? i : -1;
}

/* acc: [L, D] += w * rows 1..L of x: [L+2, D]; also copy x out for a dump */
static void esm2_collect(fwd_t *fx, tensor_t acc, tensor_t x, float w, float *hidden)
{
	op_axpby(fx, acc, tensor_rows(x, 1, acc.ne[0]), w, 1.0f);
	if (hidden) fwd_get(fx, x, hidden);
}

void esm2_forward(fwd_t *fx, const esm2_t *lm, const hparams_t *c, const int32_t *tokens,
                  const int *aatype, tensor_t s_s_0, float *hidden, float *combined)
{
	int L = (int)s_s_0.ne[0], T = L + 2, D = c->lm_dim, hd = D / c->lm_heads;
	size_t hs = (size_t)T * D;
	int32_t *aa = NULL;
	/* token dropout at inference: no <mask> tokens, so the embedding is
	 * scaled by (1 - 0.15 * 0.8) / (1 - 0) */
	float scale = c->token_dropout ? (float)(1.0 - 0.15 * 0.8) : 1.0f;
	tensor_t x = fwd_new2(fx, T, D), acc = fwd_new2(fx, L, D), rope = fwd_new2(fx, T, hd);
	float *tab = fwd_host(fx, sizeof *tab * T * hd);
	/* the host-held layers' two slots (one where one layer is host-held);
	 * the first one's matrices fetched at once */
	int next = esm2_next_host(lm, 0), nslot = lm->nhost < 2 ? lm->nhost : 2, fetched = 0;
	tensor_t slot[2] = { { 0 } };
	for (int k = 0; k < nslot; k++)
		slot[k] = fwd_new1(fx, (int64_t)(esm2_slot_bytes(&lm->layers[next], esm2_half(fx)) / sizeof(float)));
	if (nslot) esm2_fetch(fx, &lm->layers[next], slot[0]);

	op_gather(fx, x, lm->embed, tokens, scale);
	op_fill(fx, acc, 0.0f);
	esm2_collect(fx, acc, x, lm->combine[0], hidden);
	/* every layer makes the same placement calls (see fwd_memo_t) */
	fwd_memo_t memo;
	fwd_memo_init(&memo);
	for (int i = 0; i < lm->nlayers; i++) {
		const float *f = lm->freq + (size_t)i * (hd / 2);
		if (i == 0 || memcmp(f - hd / 2, f, sizeof *f * (hd / 2))) esm2_rope(fx, rope, tab, f);
		const esm2_layer_t *l = &lm->layers[i];
		esm2_layer_t in_slot;
		if (l->host) {   /* its matrices in, the next host-held one's queued */
			op_fetch_wait(fx);
			if ((next = esm2_next_host(lm, i + 1)) >= 0)
				esm2_fetch(fx, &lm->layers[next], slot[(fetched + 1) % 2]);
			esm2_in_slot(fx, l, slot[fetched++ % 2], &in_slot);
			l = &in_slot;
		}
		if (fwd_memo_begin(fx, &memo)) continue;
		esm2_layer(fx, l, c, x, rope);
		fwd_memo_end(fx, &memo);
		if (i == lm->nlayers - 1) op_layernorm(fx, x, x, &lm->final_ln);
		esm2_collect(fx, acc, x, lm->combine[i + 1], hidden ? hidden + (i + 1) * hs : NULL);
	}
	fwd_memo_free(&memo);
	for (int k = nslot - 1; k >= 0; k--) fwd_drop(fx, &slot[k]);
	fwd_host_drop(fx, tab, sizeof *tab * T * hd);
	fwd_drop(fx, &rope);
	fwd_drop(fx, &x);
	if (combined) fwd_get(fx, acc, combined);

	/* s_s_0 = mlp(esm_s) + embedding(aatype) */
	tensor_t h = fwd_new2(fx, L, D), m = fwd_new2(fx, L, c->c_s);
	op_layernorm(fx, h, acc, &lm->s_mlp_ln);
	op_linear(fx, m, h, &lm->s_mlp_1, 0.0f);
	op_act(fx, m, BE_RELU);
	op_linear(fx, s_s_0, m, &lm->s_mlp_3, 0.0f);
	fwd_drop(fx, &m);
	fwd_drop(fx, &h);
	fwd_drop(fx, &acc);
	tensor_t e = fwd_new2(fx, L, c->c_s);
	aa = fwd_host(fx, sizeof *aa * L);
	for (int i = 0; i < L && !fx->planning && aa; i++) aa[i] = aatype[i];
	op_gather(fx, e, lm->aa_embed, aa, 1.0f);
	op_axpby(fx, s_s_0, e, 1.0f, 1.0f);
	fwd_host_drop(fx, aa, sizeof *aa * L);
	fwd_drop(fx, &e);
}
