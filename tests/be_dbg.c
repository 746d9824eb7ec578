/* be_dbg.c - test helper: the CPU backend on memory the host cannot touch
 * (see be_dbg.h).
 *
 * The region is one PROT_NONE mapping; allocations are page-aligned blocks
 * taken from it in address order and never reused.  Each entry checks its
 * pointers, opens the used part of the region (PROT_READ | PROT_WRITE),
 * calls the CPU backend and closes it again before returning, so only the
 * backend itself ever reads or writes it.  One thread at a time.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "be_dbg.h"
#include "util/log.h"

typedef struct {
	size_t off, size;   /* bytes from the region's base */
	int    live;
} dbg_blk_t;

typedef struct {
	be_t      *cpu;
	char      *base;    /* [cap] bytes, PROT_NONE outside the entries */
	size_t     cap, top;
	dbg_blk_t *blk;     /* [nblk], ascending off */
	int        nblk, capblk;
	long       violations;
} dbg_ctx_t;

/* --- the contract checks ---------------------------------------------------- */

static int dbg_fail(dbg_ctx_t *c, const char *op, const char *arg, const char *why)
{
	c->violations++;
	log_error("debug backend: %s: %s %s", op, arg, why);
	return -EFAULT;
}

static int dbg_in_region(const dbg_ctx_t *c, const void *p)
{
	return (const char *)p >= c->base && (const char *)p < c->base + c->cap;
}

/* the block holding byte p (live or freed), or NULL */
static const dbg_blk_t *dbg_block(const dbg_ctx_t *c, const void *p)
{
	size_t off = (size_t)((const char *)p - c->base);
	int lo = 0, hi = c->nblk - 1;

	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		const dbg_blk_t *b = &c->blk[mid];
		if (off < b->off) hi = mid - 1;
		else if (off >= b->off + b->size) lo = mid + 1;
		else return b;
	}
	return NULL;
}

/* arg: nbytes of backend memory at p, inside one live block */
static int dbg_dev(dbg_ctx_t *c, const char *op, const char *arg, const void *p, int64_t nbytes)
{
	const dbg_blk_t *b;

	if (nbytes <= 0) return 0;
	if (!p) return dbg_fail(c, op, arg, "is NULL");
	if (!dbg_in_region(c, p)) return dbg_fail(c, op, arg, "is host memory, not backend memory");
	if (!(b = dbg_block(c, p))) return dbg_fail(c, op, arg, "points outside every allocation");
	if (!b->live) return dbg_fail(c, op, arg, "points into freed memory");
	if ((size_t)((const char *)p - c->base) + (size_t)nbytes > b->off + b->size)
		return dbg_fail(c, op, arg, "runs past the end of its allocation");
	return 0;
}

/* arg: nbytes of host memory at p */
static int dbg_host(dbg_ctx_t *c, const char *op, const char *arg, const void *p, int64_t nbytes)
{
	if (nbytes <= 0) return 0;
	if (!p) return dbg_fail(c, op, arg, "is NULL");
	if (dbg_in_region(c, p) || dbg_in_region(c, (const char *)p + nbytes - 1))
		return dbg_fail(c, op, arg, "is backend memory where host memory is expected");
	return 0;
}

/* an output of n floats at y and an input of m floats at x share no element;
 * same: exact aliasing (y == x, n == m) is allowed */
static int dbg_apart(dbg_ctx_t *c, const char *op, const char *what, const float *y, int64_t n,
                     const float *x, int64_t m, int same)
{
	if (!x || n <= 0 || m <= 0) return 0;
	if (same && y == x && n == m) return 0;
	if (y < x + m && x < y + n) return dbg_fail(c, op, what, "overlap");
	return 0;
}

/* elements from the base to the end of a strided operand: n0 x n1 x n2
 * blocks (strides s0, s1, s2) of n3 contiguous elements; 0 when empty */
static int64_t dbg_span(int64_t n0, int64_t s0, int64_t n1, int64_t s1, int64_t n2, int64_t s2,
                        int64_t n3)
{
	if (n0 <= 0 || n1 <= 0 || n2 <= 0 || n3 <= 0) return 0;
	return (n0 - 1) * s0 + (n1 - 1) * s1 + (n2 - 1) * s2 + n3;
}

#define F (int64_t)sizeof(float)

/* --- opening and closing the region ------------------------------------------ */

static int dbg_protect(dbg_ctx_t *c, int prot)
{
	if (c->top && mprotect(c->base, c->top, prot) < 0) {
		log_error("debug backend: mprotect: %s", strerror(errno));
		return -EIO;
	}
	return 0;
}

static int dbg_enter(dbg_ctx_t *c) { return dbg_protect(c, PROT_READ | PROT_WRITE); }

/* close the region again; rc, or the failure to close it */
static int dbg_leave(dbg_ctx_t *c, int rc)
{
	int prc = dbg_protect(c, PROT_NONE);
	return rc < 0 ? rc : prc;
}

/* --- memory ------------------------------------------------------------------- */

static int dbg_alloc(be_t *be, size_t n, void **p)
{
	dbg_ctx_t *c = be->ctx;
	size_t page = (size_t)sysconf(_SC_PAGESIZE), size = ((n ? n : 1) + page - 1) / page * page;

	*p = NULL;
	if (size > c->cap - c->top) {
		log_warn("debug backend: out of memory for %zu bytes", n);
		return -ENOMEM;
	}
	if (c->nblk == c->capblk) {
		int cap = c->capblk ? 2 * c->capblk : 1024;
		dbg_blk_t *nb = realloc(c->blk, sizeof *nb * cap);
		if (!nb) return -ENOMEM;
		c->blk = nb;
		c->capblk = cap;
	}
	c->blk[c->nblk++] = (dbg_blk_t){ c->top, size, 1 };
	*p = c->base + c->top;
	c->top += size;
	return 0;
}

static void dbg_free(be_t *be, void *p)
{
	dbg_ctx_t *c = be->ctx;
	dbg_blk_t *b;

	if (!p) return;
	b = dbg_in_region(c, p) ? (dbg_blk_t *)dbg_block(c, p) : NULL;
	if (!b || !b->live || c->base + b->off != (char *)p) {
		dbg_fail(c, "free", "the pointer", "is not the start of a live allocation");
		return;
	}
	b->live = 0;
	madvise(c->base + b->off, b->size, MADV_DONTNEED);   /* pages back; never reused */
}

static int dbg_upload(be_t *be, void *dst, const void *src, size_t n)
{
	dbg_ctx_t *c = be->ctx;
	int rc;

	if (dbg_dev(c, "upload", "dst", dst, (int64_t)n) || dbg_host(c, "upload", "src", src, (int64_t)n))
		return -EFAULT;
	if ((rc = dbg_enter(c))) return rc;
	return dbg_leave(c, c->cpu->upload(c->cpu, dst, src, n));
}

static int dbg_download(be_t *be, void *dst, const void *src, size_t n)
{
	dbg_ctx_t *c = be->ctx;
	int rc;

	if (dbg_dev(c, "download", "src", src, (int64_t)n) ||
	    dbg_host(c, "download", "dst", dst, (int64_t)n))
		return -EFAULT;
	if ((rc = dbg_enter(c))) return rc;
	return dbg_leave(c, c->cpu->download(c->cpu, dst, src, n));
}

static int dbg_sync(be_t *be)
{
	dbg_ctx_t *c = be->ctx;
	return c->cpu->sync(c->cpu);
}

/* --- ops ------------------------------------------------------------------------ */

/* dbg_check_<slot>(c, p): nonzero (each violation logged and counted) when
 * the op's pointers break the contract; the wrappers below run the CPU's
 * op on the opened region only when they keep it */

static int dbg_check_gemm(dbg_ctx_t *c, const be_gemm_t *g)
{
	int64_t na = dbg_span(g->batch, g->stride_a, g->transa ? g->k : g->m, g->lda, 1, 0,
	                      g->transa ? g->m : g->k);
	int64_t nb = dbg_span(g->batch, g->stride_b, g->transb ? g->n : g->k, g->ldb, 1, 0,
	                      g->transb ? g->k : g->n);
	int64_t nc = dbg_span(g->batch, g->stride_c, g->m, g->ldc, 1, 0, g->n);

	/* bf16 data: 2 bytes an element, the spans below in floats */
	na = g->a_bf16 ? (na + 1) / 2 : na;
	nb = g->b_bf16 ? (nb + 1) / 2 : nb;
	return dbg_dev(c, "gemm", "a", g->a, na * F) || dbg_dev(c, "gemm", "b", g->b, nb * F) ||
	       dbg_dev(c, "gemm", "c", g->c, nc * F) ||
	       (g->bias && dbg_dev(c, "gemm", "bias", g->bias, g->n * F)) ||
	       dbg_apart(c, "gemm", "c and a", g->c, nc, g->a, na, 0) ||
	       dbg_apart(c, "gemm", "c and b", g->c, nc, g->b, nb, 0) ||
	       dbg_apart(c, "gemm", "c and bias", g->c, nc, g->bias, g->n, 0) ||
	       ((unsigned)g->prec >= BE_PREC_COUNT && dbg_fail(c, "gemm", "prec", "is no be_prec_t"));
}

static int dbg_check_attn(dbg_ctx_t *c, const be_attn_t *a)
{
	int64_t nq = dbg_span(a->B, a->q_sb, a->Lq, a->q_sl, a->H, a->q_sh, a->D);
	int64_t nk = dbg_span(a->B, a->k_sb, a->Lk, a->k_sl, a->H, a->k_sh, a->D);
	int64_t nv = dbg_span(a->B, a->v_sb, a->Lk, a->v_sl, a->H, a->v_sh, a->D);
	int64_t no = dbg_span(a->B, a->o_sb, a->Lq, a->o_sl, a->H, a->o_sh, a->D);
	int64_t nbias = a->bias ? dbg_span(a->B, a->bias_sb, a->H, a->bias_sh, a->Lq, a->bias_sq, a->Lk) : 0;
	int64_t nmask = a->mask ? dbg_span(a->B, a->mask_sb, 1, 0, 1, 0, a->Lk) : 0;
	int64_t nrope = a->rope ? (int64_t)(a->Lq > a->Lk ? a->Lq : a->Lk) * (a->D / 2) * 2 : 0;

	return dbg_dev(c, "attn", "q", a->q, nq * F) || dbg_dev(c, "attn", "k", a->k, nk * F) ||
	       dbg_dev(c, "attn", "v", a->v, nv * F) || dbg_dev(c, "attn", "o", a->o, no * F) ||
	       dbg_dev(c, "attn", "bias", a->bias, nbias * F) ||
	       dbg_dev(c, "attn", "mask", a->mask, nmask * F) ||
	       dbg_dev(c, "attn", "g", a->g, a->g ? no * F : 0) ||
	       dbg_dev(c, "attn", "rope", a->rope, nrope * F) ||
	       (a->rope && a->D % 2 && dbg_fail(c, "attn", "D", "is odd with a rope table")) ||
	       dbg_apart(c, "attn", "o and q", a->o, no, a->q, nq, 0) ||
	       dbg_apart(c, "attn", "o and k", a->o, no, a->k, nk, 0) ||
	       dbg_apart(c, "attn", "o and v", a->o, no, a->v, nv, 0) ||
	       dbg_apart(c, "attn", "o and bias", a->o, no, a->bias, nbias, 0) ||
	       dbg_apart(c, "attn", "o and mask", a->o, no, a->mask, nmask, 0) ||
	       dbg_apart(c, "attn", "o and g", a->o, no, a->g, a->g ? no : 0, 0) ||
	       dbg_apart(c, "attn", "o and rope", a->o, no, a->rope, nrope, 0);
}

static int dbg_check_layernorm(dbg_ctx_t *c, const be_layernorm_t *p)
{
	int64_t n = p->rows * p->d, d = p->d;

	return dbg_dev(c, "layernorm", "y", p->y, n * F) || dbg_dev(c, "layernorm", "x", p->x, n * F) ||
	       dbg_dev(c, "layernorm", "w", p->w, d * F) || dbg_dev(c, "layernorm", "b", p->b, d * F) ||
	       dbg_apart(c, "layernorm", "y and x", p->y, n, p->x, n, 1) ||
	       dbg_apart(c, "layernorm", "y and w", p->y, n, p->w, d, 0) ||
	       dbg_apart(c, "layernorm", "y and b", p->y, n, p->b, d, 0);
}

static int dbg_check_softmax(dbg_ctx_t *c, const be_softmax_t *p)
{
	return dbg_dev(c, "softmax", "x", p->x, p->rows * p->d * F);
}

static int dbg_check_act(dbg_ctx_t *c, const be_unary_t *p)
{
	return dbg_dev(c, "act", "x", p->x, p->n * F);
}

static int dbg_check_binary(dbg_ctx_t *c, const be_binary_t *p)
{
	int64_t n = p->n;

	return dbg_dev(c, "binary", "y", p->y, n * F) || dbg_dev(c, "binary", "a", p->a, n * F) ||
	       dbg_dev(c, "binary", "b", p->b, n * F) || dbg_apart(c, "binary", "y and a", p->y, n, p->a, n, 1) ||
	       dbg_apart(c, "binary", "y and b", p->y, n, p->b, n, 1);
}

static int dbg_check_axpby(dbg_ctx_t *c, const be_axpby_t *p)
{
	int64_t n = p->n;

	return dbg_dev(c, "axpby", "y", p->y, n * F) || dbg_dev(c, "axpby", "x", p->x, n * F) ||
	       dbg_apart(c, "axpby", "y and x", p->y, n, p->x, n, 1);
}

static int dbg_check_fill(dbg_ctx_t *c, const be_fill_t *p)
{
	return dbg_dev(c, "fill", "x", p->x, p->n * F);
}

/* idx is host memory by contract; every row it names must lie in table's
 * allocation */
static int dbg_check_gather(dbg_ctx_t *c, const be_gather_t *p)
{
	int64_t rows = p->rows, d = p->d;
	int32_t hi = 0;

	if (dbg_dev(c, "gather", "y", p->y, rows * d * F) ||
	    dbg_host(c, "gather", "idx", p->idx, rows * (int64_t)sizeof *p->idx))
		return -EFAULT;
	for (int64_t r = 0; r < rows; r++) {
		if (p->idx[r] < 0) return dbg_fail(c, "gather", "idx", "holds a negative row");
		if (p->idx[r] > hi) hi = p->idx[r];
	}
	return rows > 0 && (dbg_dev(c, "gather", "table", p->table, ((int64_t)hi + 1) * d * F) ||
	                    dbg_apart(c, "gather", "y and table", p->y, rows * d, p->table,
	                              ((int64_t)hi + 1) * d, 0));
}

static int dbg_check_transpose(dbg_ctx_t *c, const be_transpose_t *p)
{
	int64_t n = p->A * p->B * p->C;

	return dbg_dev(c, "transpose", "y", p->y, n * F) || dbg_dev(c, "transpose", "x", p->x, n * F) ||
	       dbg_apart(c, "transpose", "y and x", p->y, n, p->x, n, 0);
}

static int dbg_check_outer(dbg_ctx_t *c, const be_outer_t *p)
{
	int64_t n = (int64_t)p->ni * p->L * 2 * p->c, m = (int64_t)p->L * p->c;

	n = p->bf16 ? (n + 1) / 2 : n;   /* bf16 data: in floats */
	return dbg_dev(c, "outer", "y", p->y, n * F) || dbg_dev(c, "outer", "q", p->q, m * F) ||
	       dbg_dev(c, "outer", "k", p->k, m * F) || dbg_apart(c, "outer", "y and q", p->y, n, p->q, m, 0) ||
	       dbg_apart(c, "outer", "y and k", p->y, n, p->k, m, 0);
}

static int dbg_check_trimul(dbg_ctx_t *c, const be_trimul_t *p)
{
	int64_t nx = (int64_t)p->ni * p->nj * p->c, na = (int64_t)p->ni * p->nk * p->c;
	int64_t nb = (int64_t)p->nj * p->nk * p->c;

	return dbg_dev(c, "trimul", "x", p->x, nx * F) || dbg_dev(c, "trimul", "a", p->a, na * F) ||
	       dbg_dev(c, "trimul", "b", p->b, nb * F) || dbg_apart(c, "trimul", "x and a", p->x, nx, p->a, na, 0) ||
	       dbg_apart(c, "trimul", "x and b", p->x, nx, p->b, nb, 0);
}

static int dbg_check_ipa_in(dbg_ctx_t *c, const be_ipa_in_t *p)
{
	int64_t L = p->L, H = p->H, Pq = p->Pq, Pv = p->Pv;
	int64_t na = L * H * (3 * Pq + 2), nv = L * H * 3 * Pv, nr = L * 12;
	int64_t ns = L * 7, nq = L * 3 * H * Pq, nkv = L * 3 * H * (Pq + Pv);

	return dbg_dev(c, "ipa_in", "qa", p->qa, na * F) || dbg_dev(c, "ipa_in", "ka", p->ka, na * F) ||
	       dbg_dev(c, "ipa_in", "vp", p->vp, nv * F) || dbg_dev(c, "ipa_in", "rig", p->rig, nr * F) ||
	       dbg_dev(c, "ipa_in", "state", p->state, ns * F) || dbg_dev(c, "ipa_in", "qp", p->qp, nq * F) ||
	       dbg_dev(c, "ipa_in", "kvp", p->kvp, nkv * F) || dbg_dev(c, "ipa_in", "hw", p->hw, H * F) ||
	       dbg_dev(c, "ipa_in", "bb", p->bb, H * F) ||
	       dbg_apart(c, "ipa_in", "qa and ka", p->qa, na, p->ka, na, 0) ||
	       dbg_apart(c, "ipa_in", "rig and state", p->rig, nr, p->state, ns, 0) ||
	       dbg_apart(c, "ipa_in", "qa and qp", p->qa, na, p->qp, nq, 0) ||
	       dbg_apart(c, "ipa_in", "ka and kvp", p->ka, na, p->kvp, nkv, 0) ||
	       dbg_apart(c, "ipa_in", "vp and kvp", p->vp, nv, p->kvp, nkv, 0);
}

static int dbg_check_ipa_out(dbg_ctx_t *c, const be_ipa_out_t *p)
{
	int64_t L = p->L, nc = L ? (L - 1) * p->ldc + 4 * (int64_t)p->n_pts : 0, no = L * p->n_pts * 3;

	return dbg_dev(c, "ipa_out", "cat", p->cat, nc * F) || dbg_dev(c, "ipa_out", "op", p->op, no * F) ||
	       dbg_dev(c, "ipa_out", "rig", p->rig, L * 12 * F) ||
	       dbg_apart(c, "ipa_out", "cat and op", p->cat, nc, p->op, no, 0);
}

static int dbg_check_ipa_rigid(dbg_ctx_t *c, const be_ipa_rigid_t *p)
{
	int64_t n = (int64_t)p->L * 7;

	return dbg_dev(c, "ipa_rigid", "state", p->state, n * F) ||
	       (p->frame && dbg_dev(c, "ipa_rigid", "frame", p->frame, n * F)) ||
	       (p->upd && dbg_dev(c, "ipa_rigid", "upd", p->upd, (int64_t)p->L * 6 * F)) ||
	       (p->frame && dbg_apart(c, "ipa_rigid", "frame and state", p->frame, n, p->state, n, 0));
}

static int dbg_check_transition(dbg_ctx_t *c, const be_transition_t *t)
{
	int64_t n = t->rows * t->d, nw = (int64_t)t->h * t->d;

	return dbg_dev(c, "transition", "x", t->x, n * F) ||
	       dbg_dev(c, "transition", "ln_w", t->ln_w, t->d * F) ||
	       dbg_dev(c, "transition", "ln_b", t->ln_b, t->d * F) ||
	       dbg_dev(c, "transition", "w1", t->w1, nw * F) || dbg_dev(c, "transition", "w2", t->w2, nw * F) ||
	       (t->b1 && dbg_dev(c, "transition", "b1", t->b1, t->h * F)) ||
	       (t->b2 && dbg_dev(c, "transition", "b2", t->b2, t->d * F)) ||
	       dbg_apart(c, "transition", "x and w1", t->x, n, t->w1, nw, 0) ||
	       dbg_apart(c, "transition", "x and w2", t->x, n, t->w2, nw, 0);
}

/* every row of x and every element of each group's output inside live
 * blocks, outputs apart from x (by their spans) */
static int dbg_check_ln_linear(dbg_ctx_t *c, const be_ln_linear_t *p)
{
	int64_t nx = dbg_span(p->ni, p->x_si, p->nj, p->x_sj, 1, 0, p->k);

	if (dbg_dev(c, "ln_linear", "x", p->x, nx * F)) return -EFAULT;
	for (int g = 0; g < p->ngroups; g++) {
		const be_lnlin_out_t *q = &p->out[g];
		int64_t ny = dbg_span(p->ni, q->si, p->nj, q->sj, q->n, q->sc, 1);
		ny = q->bf16 ? (ny + 1) / 2 : ny;   /* bf16 data: in floats */
		if (dbg_dev(c, "ln_linear", "y", q->y, ny * F) || dbg_apart(c, "ln_linear", "y and x", q->y, ny, p->x, nx, 0))
			return -EFAULT;
	}
	return 0;
}

static int dbg_check_trimul_out(dbg_ctx_t *c, const be_trimul_out_t *t)
{
	int64_t ch = t->c, rows = t->zr.n1 * t->zr.n2, n = rows * ch;
	int64_t nz = dbg_span(1, 0, t->zr.n1, t->zr.s1, t->zr.n2, t->zr.s2, ch);

	return dbg_dev(c, "trimul_out", "z", t->z, nz * F) || dbg_dev(c, "trimul_out", "x", t->x, n * F) ||
	       dbg_dev(c, "trimul_out", "gv", t->gv, n * F) ||
	       dbg_dev(c, "trimul_out", "w", t->w, ch * ch * (t->w_bf16 ? 2 : F)) ||
	       dbg_dev(c, "trimul_out", "b", t->b, ch * F) || dbg_dev(c, "trimul_out", "ln_w", t->ln_w, ch * F) ||
	       dbg_dev(c, "trimul_out", "ln_b", t->ln_b, ch * F) ||
	       dbg_apart(c, "trimul_out", "z and x", t->z, nz, t->x, n, 0) ||
	       dbg_apart(c, "trimul_out", "z and gv", t->z, nz, t->gv, n, 0);
}

static int dbg_check_relpos(dbg_ctx_t *c, const be_relpos_t *p)
{
	int64_t nz = (int64_t)p->ni * p->L * p->c, nt = (int64_t)(2 * p->bins + 2) * p->c;

	return dbg_dev(c, "relpos", "z", p->z, nz * F) || dbg_dev(c, "relpos", "table", p->table, nt * F) ||
	       dbg_dev(c, "relpos", "residx", p->residx, (int64_t)p->L * F) ||
	       dbg_apart(c, "relpos", "z and residx", p->z, nz, p->residx, p->L, 0);
}

/* one wrapper per op of the list (backend.h's BE_OPS): the checks, then
 * the CPU's op with the region open; an op without its dbg_check_<slot>
 * does not compile */
#define DBG_OP(OP, slot, params)                                          \
	static int dbg_##slot(be_t *be, const params *p)                  \
	{                                                                 \
		int (*check)(dbg_ctx_t *, const params *) = dbg_check_##slot; \
		dbg_ctx_t *c = be->ctx;                                   \
		int rc;                                                   \
		if (check(c, p)) return -EFAULT;                          \
		if ((rc = dbg_enter(c))) return rc;                       \
		return dbg_leave(c, c->cpu->slot(c->cpu, p));             \
	}
BE_OPS(DBG_OP)
#undef DBG_OP

#undef F

/* --- the backend ----------------------------------------------------------------- */

static void dbg_destroy(be_t *be)
{
	dbg_ctx_t *c = be->ctx;

	munmap(c->base, c->cap);
	be_free(c->cpu);
	free(c->blk);
	free(c);
	free(be);
}

long be_dbg_violations(const be_t *be)
{
	return be && be->destroy == dbg_destroy ? ((const dbg_ctx_t *)be->ctx)->violations : -1;
}

be_t *be_dbg_init(int threads, size_t capacity)
{
	dbg_ctx_t *c = calloc(1, sizeof *c);
	be_t *be = calloc(1, sizeof *be);

	if (!c || !be || !(c->cpu = be_cpu_init(threads))) goto fail;
	c->cap = capacity;
	c->base = mmap(NULL, capacity, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (c->base == MAP_FAILED) {
		log_error("debug backend: cannot map %zu bytes: %s", capacity, strerror(errno));
		c->base = NULL;
		goto fail;
	}
	*be = (be_t){
		.name = "dbg", .precision = "fp32", .ctx = c, .destroy = dbg_destroy, .workspace = c->cpu->workspace,
		.alloc = dbg_alloc, .free = dbg_free, .upload = dbg_upload, .download = dbg_download,
		.sync = dbg_sync,
		/* every op of the list that the CPU has, checked */
#define DBG_SLOT(OP, slot, params) .slot = c->cpu->slot ? dbg_##slot : NULL,
		BE_OPS(DBG_SLOT)
#undef DBG_SLOT
	};
	return be;
fail:
	if (c) be_free(c->cpu);
	free(c);
	free(be);
	return NULL;
}
