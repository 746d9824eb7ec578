/* model.c - load the whole model and run one fold with recycling (see
 * model.h).
 *
 * One fold: language model -> s_s_0; then `passes` trunk passes, each fed
 * the previous pass's s, z and the distogram of its structure-module
 * pseudo-CB atoms; the structure module after every pass; the heads on the
 * last pass.  The same function runs planning and executing.
 */
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/finite.h"
#include "util/log.h"
#include "util/status.h"
#include "protein/geometry.h"
#include "protein/residue.h"

#define MODEL_RECYCLE_MIN  3.375f
#define MODEL_RECYCLE_MAX  21.375f

int model_load(model_t *m, weights_t *w, be_t *be, int lm_host)
{
	const hparams_t *c = weights_cfg(w);
	static const char *const unused_ok[] = {
		"esm.contact_head.", "af2_to_esm",   /* ESMFold never calls these */
		"esm.lm_head.", NULL                 /* fair-esm ESM-2 files: the masked-LM head */
	};
	int rc = 0, extra;

	memset(m, 0, sizeof *m);
	m->cfg = c;
	m->be = be;
	rc |= esm2_load(&m->lm, c, w, be, lm_host);
	rc |= trunk_load(&m->trunk, c, w, be);
	rc |= structure_load(&m->sm, c, w, be);
	rc |= heads_load(&m->heads, c, w, be);
	if (rc) {
		model_free(m);
		return -1;
	}
	if ((extra = weights_unused(w, unused_ok)) > 0)
		log_warn("%s: %d tensors are not used by the model (-v lists them)", weights_path(w), extra);
	return 0;
}

void model_free(model_t *m)
{
	esm2_free(&m->lm);
	trunk_free(&m->trunk);
	structure_free(&m->sm);
	memset(m, 0, sizeof *m);
}

/* recycle distogram of the pseudo-CB atoms built from atom14 N, CA, C:
 * atom14: host [L, 14, 3] -> bins: host [L * L] in 0..14; cb: host
 * scratch [L][3].  Distances in double, bin edges in float32 as the
 * reference builds them, so no pair sits on the wrong side of an edge
 * through rounding of ours. */
static void model_recycle_bins(int L, const float *atom14, double (*cb)[3], int32_t *bins)
{
	float edge2[TRUNK_RECYCLE_BINS - 1];
	float step = (MODEL_RECYCLE_MAX - MODEL_RECYCLE_MIN) / (TRUNK_RECYCLE_BINS - 2);

	for (int k = 0; k < TRUNK_RECYCLE_BINS - 1; k++) {
		float e = MODEL_RECYCLE_MIN + step * k;
		edge2[k] = e * e;
	}
	for (int i = 0; i < L; i++) {
		const float *n = atom14 + i * 42, *ca = n + 3, *cc = n + 6;
		double b[3], c[3], a[3];
		for (int d = 0; d < 3; d++) { b[d] = (double)ca[d] - n[d]; c[d] = (double)cc[d] - ca[d]; }
		a[0] = b[1] * c[2] - b[2] * c[1];
		a[1] = b[2] * c[0] - b[0] * c[2];
		a[2] = b[0] * c[1] - b[1] * c[0];
		for (int d = 0; d < 3; d++)
			cb[i][d] = -0.58273431 * a[d] + 0.56802827 * b[d] - 0.54067466 * c[d] + ca[d];
	}
	for (int i = 0; i < L; i++)
		for (int j = 0; j < L; j++) {
			double d2 = 0.0;
			int nb = 0;
			for (int d = 0; d < 3; d++) d2 += (cb[j][d] - cb[i][d]) * (cb[j][d] - cb[i][d]);
			for (int k = 0; k < TRUNK_RECYCLE_BINS - 1; k++) nb += d2 > edge2[k];
			bins[(size_t)i * L + j] = nb;
		}
}

/* --- dumping intermediates ------------------------------------------------ */

void model_dump_emit(void *ctx, const char *tensor, safetensors_dtype_t dtype, int nd,
                     const int64_t *shape, const void *data)
{
	const model_dump_t *d = ctx;
	char key[512];

	snprintf(key, sizeof key, "%s/%s", d->name, tensor);
	safetensors_writer_add(d->w, key, dtype, nd, shape, data);
}

/* --- the forward pass ------------------------------------------------------ */

/* Host-side results and state of one fold: one block placed with fwd_host
 * at the start of the pass and live to its end (the results outlive it),
 * filled while executing. */
typedef struct {
	int32_t *bins;       /* [L * L] recycle bins of the previous pass */
	structure_out_t sm;         /* structure of the latest pass */
	float   *plddt;      /* [L, 37] */
	float   *plddt_res;  /* [L] */
	float   *pae;        /* [L, L] */
	double   ptm;
	float    max_pae;
} model_host_t;

/* lay out h for length L from base (NULL: only size it); its bytes */
static size_t model_host_layout(model_host_t *h, const hparams_t *c, int L, char *base)
{
	size_t n = (size_t)L, off = 0;
	char *sm;

	h->bins = fwd_piece(base, &off, sizeof *h->bins * n * n);
	h->plddt = fwd_piece(base, &off, sizeof *h->plddt * n * RESIDUE_NUM_ATOM37);
	h->plddt_res = fwd_piece(base, &off, sizeof *h->plddt_res * n);
	h->pae = fwd_piece(base, &off, sizeof *h->pae * n * n);
	sm = fwd_piece(base, &off, 0);
	off += structure_out_layout(&h->sm, c, L, sm);
	return off;
}

/* the intermediates of the final pass that only a dump wants */
static void model_dump_final(fwd_t *fx, const model_t *m, const tok_t *t, tensor_t s, tensor_t z, const model_host_t *h)
{
	const hparams_t *c = m->cfg;
	int L = t->L, B = c->sm_blocks, A = c->sm_angles;
	int64_t nb = c->sm_blocks;

	if (!fx->emit || fx->err) return;
	/* the logits tensors are placed in planning too: the arena must match */
	tensor_t lm = fwd_new2(fx, L, HEADS_LM_TOKENS);
	heads_lm(fx, &m->heads, s, lm);
	fwd_emit(fx, "lm_logits", lm);
	fwd_drop(fx, &lm);
	tensor_t dg = fwd_new3(fx, L, L, HEADS_PAE_BINS);
	heads_distogram(fx, &m->heads, z, dg);
	fwd_emit(fx, "distogram_logits", dg);
	fwd_drop(fx, &dg);
	int32_t *aa = fwd_host(fx, sizeof *aa * L);
	for (int i = 0; i < L && aa && !fx->planning; i++) aa[i] = t->aatype[i];
	fwd_emit_i32(fx, "aatype", aa, L);
	fwd_host_drop(fx, aa, sizeof *aa * L);
	fwd_emit_i32(fx, "residue_index", t->residx, L);
	fwd_emit_i32(fx, "esm_tokens", t->tokens, L + 2);
	if (fx->planning || fx->err) return;
	fwd_emit_host(fx, "frames", h->sm.frames, 3, (int64_t[]){ nb, L, 7 });
	fwd_emit_host(fx, "positions", h->sm.positions, 4, (int64_t[]){ nb, L, 14, 3 });
	fwd_emit_host(fx, "angles", h->sm.angles, 4, (int64_t[]){ B, L, A, 2 });
	fwd_emit_host(fx, "unnormalized_angles", h->sm.unnorm_angles, 4, (int64_t[]){ B, L, A, 2 });
	fwd_emit_host(fx, "states", h->sm.states, 3, (int64_t[]){ B, L, c->sm_c_s });
	fwd_emit_host(fx, "sidechain_frames", h->sm.sidechain, 4, (int64_t[]){ L, 8, 4, 4 });
	fwd_emit_host(fx, "atom14_mask", h->sm.atom14_mask, 2, (int64_t[]){ L, 14 });
	fwd_emit_host(fx, "plddt", h->plddt, 2, (int64_t[]){ L, 37 });
	fwd_emit_host(fx, "plddt_residue", h->plddt_res, 1, (int64_t[]){ L });
	fwd_emit_host(fx, "predicted_aligned_error", h->pae, 2, (int64_t[]){ L, L });
	fwd_emit_host(fx, "max_predicted_aligned_error", &h->max_pae, 0, NULL);
	float ptm = (float)h->ptm;
	fwd_emit_host(fx, "ptm", &ptm, 0, NULL);
}

static void model_forward(fwd_t *fx, const model_t *m, const tok_t *t, const model_run_t *r,
                          int passes, model_host_t *h)
{
	const hparams_t *c = m->cfg;
	int L = t->L, D = c->lm_dim;
	size_t nh = sizeof(float) * (size_t)(c->lm_layers + 1) * (L + 2) * D;
	size_t nc = sizeof(float) * (size_t)L * D;
	float *hidden = NULL, *comb = NULL;
	char name[32], *hb;

	/* the results and the fold's host state, live to the end */
	if (!(hb = fwd_host(fx, model_host_layout(h, c, L, NULL)))) return;
	model_host_layout(h, c, L, hb);
	if (!fx->planning) memset(h->bins, 0, sizeof *h->bins * (size_t)L * L);
	if (fx->emit) {
		hidden = fwd_host(fx, nh);
		comb = fwd_host(fx, nc);
	}
	tensor_t s_s_0 = fwd_new2(fx, L, c->c_s);
	esm2_forward(fx, &m->lm, c, t->tokens, t->aatype, s_s_0, hidden, comb);
	if (hidden && comb && !fx->planning && !fx->err) {
		fwd_emit_host(fx, "esm_hidden_states", hidden, 3, (int64_t[]){ c->lm_layers + 1, L + 2, D });
		fwd_emit_host(fx, "esm_s_combined", comb, 2, (int64_t[]){ L, D });
	}
	fwd_host_drop(fx, comb, nc);
	fwd_host_drop(fx, hidden, nh);
	fwd_emit(fx, "s_s_0", s_s_0);

	/* z doubles as the previous pass's pair state: recycled in place */
	tensor_t s = fwd_new2(fx, L, c->c_s), prev_s = fwd_new2(fx, L, c->c_s);
	tensor_t z = fwd_new3(fx, L, L, c->c_z);
	op_fill(fx, prev_s, 0.0f);
	op_fill(fx, z, 0.0f);
	for (int k = 0; k < passes; k++) {
		if (k > 0) op_axpby(fx, prev_s, s, 1.0f, 0.0f);
		trunk_recycle_in(fx, &m->trunk, s, z, s_s_0, prev_s, z, h->bins, r->chunk);
		trunk_iter(fx, &m->trunk, c, s, z, t->residx, r->chunk);
		snprintf(name, sizeof name, "trunk_s_r%d", k);
		fwd_emit(fx, name, s);
		snprintf(name, sizeof name, "trunk_z_r%d", k);
		fwd_emit(fx, name, z);

		tensor_t sm_s = fwd_new2(fx, L, c->sm_c_s), sm_z = fwd_new3(fx, L, L, c->sm_c_z);
		op_linear(fx, sm_s, s, &m->trunk.trunk2sm_s, 0.0f);
		op_linear(fx, sm_z, z, &m->trunk.trunk2sm_z, 0.0f);
		structure_forward(fx, &m->sm, c, sm_s, sm_z, t->aatype, &h->sm);
		fwd_drop(fx, &sm_z);
		if (k == passes - 1)   /* sm_s is now the last block's state */
			heads_plddt(fx, &m->heads, sm_s, h->plddt, h->plddt_res);
		fwd_drop(fx, &sm_s);
		double (*cb)[3] = fwd_host(fx, sizeof *cb * L);
		if (!fx->planning && !fx->err) {
			size_t last = (size_t)(c->sm_blocks - 1) * L * 14 * 3;
			model_recycle_bins(L, h->sm.positions + last, cb, h->bins);
			if (fx->emit) {
				snprintf(name, sizeof name, "sm_frames_r%d", k);
				fwd_emit_host(fx, name, h->sm.frames, 3, (int64_t[]){ c->sm_blocks, L, 7 });
				snprintf(name, sizeof name, "sm_positions_r%d", k);
				fwd_emit_host(fx, name, h->sm.positions + last, 3, (int64_t[]){ L, 14, 3 });
			}
		}
		fwd_host_drop(fx, cb, sizeof *cb * L);
		snprintf(name, sizeof name, "recycle_bins_r%d", k);
		fwd_emit_i32(fx, name, h->bins, L * L);
	}
	fwd_drop(fx, &prev_s);
	fwd_drop(fx, &s_s_0);
	heads_pae(fx, &m->heads, z, r->chunk, h->pae, &h->ptm, &h->max_pae);
	model_dump_final(fx, m, t, s, z, h);
	fwd_emit(fx, "s_s", s);
	fwd_emit(fx, "s_z", z);
	fwd_drop(fx, &z);
	fwd_drop(fx, &s);
}

static int model_passes(const model_t *m, const model_run_t *r)
{
	return r->passes > 0 ? r->passes : m->cfg->max_recycles;
}

int model_plan(const model_t *m, const tok_t *t, const model_run_t *r, model_plan_t *p)
{
	model_host_t h = { 0 };
	fwd_t fx;
	int rc;

	fwd_plan_begin(&fx, m->be);
	fx.no_memo = r->no_memo;
	fx.emit = r->emit;
	fx.emit_ctx = r->emit_ctx;
	model_forward(&fx, m, t, r, model_passes(m, r), &h);
	p->arena = fx.place.high;
	p->peak_live = fx.place.peak_live;
	p->host = fx.host_place.high;
	rc = fx.err;
	if (rc) log_error("planning failed: %s", fx.errmsg);
	fwd_end(&fx);
	return rc ? -1 : 0;
}

/* the first of a fold's outputs holding a NaN or an infinity, by name, or
 * NULL when all are finite */
static const char *model_out_nonfinite(const model_out_t *o)
{
	int64_t L = o->L;

	if (finite_scan(o->atom37, L * 37 * 3) >= 0) return "coordinates";
	if (finite_scan(o->plddt, L * 37) >= 0 || finite_scan(&o->mean_plddt, 1) >= 0) return "pLDDT";
	if (finite_scan(&o->ptm, 1) >= 0) return "pTM";
	if (finite_scan(o->pae, L * L) >= 0 || finite_scan(&o->max_pae, 1) >= 0) return "PAE";
	return NULL;
}

int model_fold(const model_t *m, const tok_t *t, const model_run_t *r, const model_plan_t *p,
               model_out_t *out, char *err, size_t errcap)
{
	model_host_t h = { 0 };
	int L = t->L, passes = model_passes(m, r), rc;
	model_plan_t own;
	fwd_t fx;

	memset(out, 0, sizeof *out);
	if (!p || !p->arena) {
		if (model_plan(m, t, r, &own) < 0) {
			snprintf(err, errcap, "planning failed");
			return STATUS_FAIL;
		}
		p = &own;
	}
	rc = r->arena ? fwd_exec_begin_kept(&fx, r->arena, p->arena) : fwd_exec_begin(&fx, m->be, p->arena);
	if (rc < 0 || fwd_exec_host(&fx, p->host) < 0) {
		snprintf(err, errcap, "%s", fx.errmsg);
		rc = fx.err;
		fwd_end(&fx);
		return rc;
	}
	fx.emit = r->emit;
	fx.emit_ctx = r->emit_ctx;
	model_forward(&fx, m, t, r, passes, &h);
	out->exec_arena = fx.place.high;
	out->exec_peak_live = fx.place.peak_live;
	out->exec_host = fx.host_place.high;
	out->device_used = -1;
	if (be_supports(m->be, BE_OP_MEM_INFO) && m->be->sync(m->be) == 0) {
		size_t fr, tot;
		if (m->be->mem_info(m->be, &fr, &tot) == 0) out->device_used = (int64_t)(tot - fr);
	}
	if (fx.err) {
		snprintf(err, errcap, "%s", fx.errmsg);
		rc = fx.err == STATUS_OOM || fx.err == STATUS_PLAN || fx.err == STATUS_DEVICE ?
		     fx.err : STATUS_FAIL;
		fwd_end(&fx);
		return rc;
	}
	/* the results lie in the pass's host memory: the model_out_t keeps it */
	out->mem = fwd_host_keep(&fx, &out->mem_be);
	/* fair-esm: linker atoms leave every output; mean pLDDT over real atoms */
	geom_apply_residue_mask(L, t->linker_mask, h.sm.atom37_mask, h.sm.atom37);
	fwd_emit_host(&fx, "atom37_positions", h.sm.atom37, 3, (int64_t[]){ L, 37, 3 });
	fwd_emit_host(&fx, "atom37_mask", h.sm.atom37_mask, 2, (int64_t[]){ L, 37 });
	out->L = L;
	out->atom37 = h.sm.atom37;
	out->atom37_mask = h.sm.atom37_mask;
	out->plddt = h.plddt;
	out->pae = h.pae;
	out->mean_plddt = (float)heads_mean_plddt(L, out->plddt, out->atom37_mask);
	fwd_emit_host(&fx, "mean_plddt", &out->mean_plddt, 0, NULL);
	fwd_end(&fx);
	out->ptm = (float)h.ptm;
	out->max_pae = h.max_pae;
	out->passes = passes;
	out->arena = p->arena;
	out->peak_live = p->peak_live;
	out->host = p->host;
	if (fwd_fault("nan")) out->ptm = NAN;   /* a test hook (forward.h) */
	const char *bad = model_out_nonfinite(out);
	if (bad) {
		snprintf(err, errcap, "non-finite output (%s)", bad);
		model_out_free(out);
		return STATUS_FAIL;
	}
	return 0;
}

void model_out_free(model_out_t *o)
{
	if (o->mem_be) o->mem_be->free(o->mem_be, o->mem);
	else free(o->mem);
	memset(o, 0, sizeof *o);
}
