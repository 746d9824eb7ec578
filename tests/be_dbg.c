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

static int dbg_gemm(be_t *be, const be_gemm_t *g)
{
	dbg_ctx_t *c = be->ctx;
	int64_t na = dbg_span(g->batch, g->stride_a, g->transa ? g->k : g->m, g->lda, 1, 0,
	                      g->transa ? g->m : g->k);
	int64_t nb = dbg_span(g->batch, g->stride_b, g->transb ? g->n : g->k, g->ldb, 1, 0,
	                      g->transb ? g->k : g->n);
	int64_t nc = dbg_span(g->batch, g->stride_c, g->m, g->ldc, 1, 0, g->n);
	int rc;

	if (dbg_dev(c, "gemm", "a", g->a, na * F) || dbg_dev(c, "gemm", "b", g->b, nb * F) ||
	    dbg_dev(c, "gemm", "c", g->c, nc * F) ||
	    (g->bias && dbg_dev(c, "gemm", "bias", g->bias, g->n * F)) ||
	    dbg_apart(c, "gemm", "c and a", g->c, nc, g->a, na, 0) ||
	    dbg_apart(c, "gemm", "c and b", g->c, nc, g->b, nb, 0) ||
	    dbg_apart(c, "gemm", "c and bias", g->c, nc, g->bias, g->n, 0) ||
	    ((unsigned)g->prec >= BE_PREC_COUNT && dbg_fail(c, "gemm", "prec", "is no be_prec_t")))
		return -EFAULT;
	if ((rc = dbg_enter(c))) return rc;
	return dbg_leave(c, c->cpu->gemm(c->cpu, g));
}

static int dbg_attn(be_t *be, const be_attn_t *a)
{
	dbg_ctx_t *c = be->ctx;
	int64_t nq = dbg_span(a->B, a->q_sb, a->Lq, a->q_sl, a->H, a->q_sh, a->D);
	int64_t nk = dbg_span(a->B, a->k_sb, a->Lk, a->k_sl, a->H, a->k_sh, a->D);
	int64_t nv = dbg_span(a->B, a->v_sb, a->Lk, a->v_sl, a->H, a->v_sh, a->D);
	int64_t no = dbg_span(a->B, a->o_sb, a->Lq, a->o_sl, a->H, a->o_sh, a->D);
	int64_t nbias = a->bias ? dbg_span(a->B, a->bias_sb, a->H, a->bias_sh, a->Lq, a->bias_sq, a->Lk) : 0;
	int64_t nmask = a->mask ? dbg_span(a->B, a->mask_sb, 1, 0, 1, 0, a->Lk) : 0;
	int64_t nrope = a->rope ? (int64_t)(a->Lq > a->Lk ? a->Lq : a->Lk) * (a->D / 2) * 2 : 0;
	int rc;

	if (dbg_dev(c, "attn", "q", a->q, nq * F) || dbg_dev(c, "attn", "k", a->k, nk * F) ||
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
	    dbg_apart(c, "attn", "o and rope", a->o, no, a->rope, nrope, 0))
		return -EFAULT;
	if ((rc = dbg_enter(c))) return rc;
	return dbg_leave(c, c->cpu->attn(c->cpu, a));
}

static int dbg_layernorm(be_t *be, float *y, const float *x, int64_t rows, int d,
                         const float *w, const float *b, float eps)
{
	dbg_ctx_t *c = be->ctx;
	int64_t n = rows * d;
	int rc;

	if (dbg_dev(c, "layernorm", "y", y, n * F) || dbg_dev(c, "layernorm", "x", x, n * F) ||
	    dbg_dev(c, "layernorm", "w", w, d * F) || dbg_dev(c, "layernorm", "b", b, d * F) ||
	    dbg_apart(c, "layernorm", "y and x", y, n, x, n, 1) ||
	    dbg_apart(c, "layernorm", "y and w", y, n, w, d, 0) ||
	    dbg_apart(c, "layernorm", "y and b", y, n, b, d, 0))
		return -EFAULT;
	if ((rc = dbg_enter(c))) return rc;
	return dbg_leave(c, c->cpu->layernorm(c->cpu, y, x, rows, d, w, b, eps));
}

static int dbg_softmax(be_t *be, float *x, int64_t rows, int d)
{
	dbg_ctx_t *c = be->ctx;
	int rc;

	if (dbg_dev(c, "softmax", "x", x, rows * d * F)) return -EFAULT;
	if ((rc = dbg_enter(c))) return rc;
	return dbg_leave(c, c->cpu->softmax(c->cpu, x, rows, d));
}

static int dbg_act(be_t *be, float *x, int64_t n, be_act_t kind)
{
	dbg_ctx_t *c = be->ctx;
	int rc;

	if (dbg_dev(c, "act", "x", x, n * F)) return -EFAULT;
	if ((rc = dbg_enter(c))) return rc;
	return dbg_leave(c, c->cpu->act(c->cpu, x, n, kind));
}

static int dbg_binary(be_t *be, float *y, const float *a, const float *b, int64_t n, be_bin_t kind)
{
	dbg_ctx_t *c = be->ctx;
	int rc;

	if (dbg_dev(c, "binary", "y", y, n * F) || dbg_dev(c, "binary", "a", a, n * F) ||
	    dbg_dev(c, "binary", "b", b, n * F) || dbg_apart(c, "binary", "y and a", y, n, a, n, 1) ||
	    dbg_apart(c, "binary", "y and b", y, n, b, n, 1))
		return -EFAULT;
	if ((rc = dbg_enter(c))) return rc;
	return dbg_leave(c, c->cpu->binary(c->cpu, y, a, b, n, kind));
}

static int dbg_axpby(be_t *be, float *y, const float *x, int64_t n, float alpha, float beta)
{
	dbg_ctx_t *c = be->ctx;
	int rc;

	if (dbg_dev(c, "axpby", "y", y, n * F) || dbg_dev(c, "axpby", "x", x, n * F) ||
	    dbg_apart(c, "axpby", "y and x", y, n, x, n, 1))
		return -EFAULT;
	if ((rc = dbg_enter(c))) return rc;
	return dbg_leave(c, c->cpu->axpby(c->cpu, y, x, n, alpha, beta));
}

static int dbg_fill(be_t *be, float *x, int64_t n, float value)
{
	dbg_ctx_t *c = be->ctx;
	int rc;

	if (dbg_dev(c, "fill", "x", x, n * F)) return -EFAULT;
	if ((rc = dbg_enter(c))) return rc;
	return dbg_leave(c, c->cpu->fill(c->cpu, x, n, value));
}

/* idx is host memory by contract; every row it names must lie in table's
 * allocation */
static int dbg_gather(be_t *be, float *y, const float *table, const int32_t *idx,
                      int64_t rows, int d, float scale)
{
	dbg_ctx_t *c = be->ctx;
	int32_t hi = 0;
	int rc;

	if (dbg_dev(c, "gather", "y", y, rows * d * F) ||
	    dbg_host(c, "gather", "idx", idx, rows * (int64_t)sizeof *idx))
		return -EFAULT;
	for (int64_t r = 0; r < rows; r++) {
		if (idx[r] < 0) return dbg_fail(c, "gather", "idx", "holds a negative row");
		if (idx[r] > hi) hi = idx[r];
	}
	if (rows > 0 && (dbg_dev(c, "gather", "table", table, ((int64_t)hi + 1) * d * F) ||
	                 dbg_apart(c, "gather", "y and table", y, rows * d, table,
	                           ((int64_t)hi + 1) * d, 0)))
		return -EFAULT;
	if ((rc = dbg_enter(c))) return rc;
	return dbg_leave(c, c->cpu->gather(c->cpu, y, table, idx, rows, d, scale));
}

static int dbg_transpose(be_t *be, float *y, const float *x, int64_t A, int64_t B, int64_t C)
{
	dbg_ctx_t *c = be->ctx;
	int64_t n = A * B * C;
	int rc;

	if (dbg_dev(c, "transpose", "y", y, n * F) || dbg_dev(c, "transpose", "x", x, n * F) ||
	    dbg_apart(c, "transpose", "y and x", y, n, x, n, 0))
		return -EFAULT;
	if ((rc = dbg_enter(c))) return rc;
	return dbg_leave(c, c->cpu->transpose(c->cpu, y, x, A, B, C));
}

static int dbg_outer(be_t *be, float *y, const float *q, const float *k, int i0, int ni, int L,
                     int ch)
{
	dbg_ctx_t *c = be->ctx;
	int64_t n = (int64_t)ni * L * 2 * ch, m = (int64_t)L * ch;
	int rc;

	if (dbg_dev(c, "outer", "y", y, n * F) || dbg_dev(c, "outer", "q", q, m * F) ||
	    dbg_dev(c, "outer", "k", k, m * F) || dbg_apart(c, "outer", "y and q", y, n, q, m, 0) ||
	    dbg_apart(c, "outer", "y and k", y, n, k, m, 0))
		return -EFAULT;
	if ((rc = dbg_enter(c))) return rc;
	return dbg_leave(c, c->cpu->outer(c->cpu, y, q, k, i0, ni, L, ch));
}

static int dbg_trimul(be_t *be, float *x, const float *a, const float *b, int ni, int nj, int nk,
                      int ch)
{
	dbg_ctx_t *c = be->ctx;
	int64_t nx = (int64_t)ni * nj * ch, na = (int64_t)ni * nk * ch, nb = (int64_t)nj * nk * ch;
	int rc;

	if (dbg_dev(c, "trimul", "x", x, nx * F) || dbg_dev(c, "trimul", "a", a, na * F) ||
	    dbg_dev(c, "trimul", "b", b, nb * F) || dbg_apart(c, "trimul", "x and a", x, nx, a, na, 0) ||
	    dbg_apart(c, "trimul", "x and b", x, nx, b, nb, 0))
		return -EFAULT;
	if ((rc = dbg_enter(c))) return rc;
	return dbg_leave(c, c->cpu->trimul(c->cpu, x, a, b, ni, nj, nk, ch));
}

static int dbg_ipa_in(be_t *be, float *qa, float *ka, float *vp, float *rig, const float *state,
                      const float *qp, const float *kvp, const float *hw, const float *bb,
                      int L, int H, int Pq, int Pv)
{
	dbg_ctx_t *c = be->ctx;
	int64_t na = (int64_t)L * H * (3 * Pq + 2), nv = (int64_t)L * H * 3 * Pv, nr = (int64_t)L * 12;
	int64_t ns = (int64_t)L * 7, nq = (int64_t)L * 3 * H * Pq, nkv = (int64_t)L * 3 * H * (Pq + Pv);
	int rc;

	if (dbg_dev(c, "ipa_in", "qa", qa, na * F) || dbg_dev(c, "ipa_in", "ka", ka, na * F) ||
	    dbg_dev(c, "ipa_in", "vp", vp, nv * F) || dbg_dev(c, "ipa_in", "rig", rig, nr * F) ||
	    dbg_dev(c, "ipa_in", "state", state, ns * F) || dbg_dev(c, "ipa_in", "qp", qp, nq * F) ||
	    dbg_dev(c, "ipa_in", "kvp", kvp, nkv * F) || dbg_dev(c, "ipa_in", "hw", hw, H * F) ||
	    dbg_dev(c, "ipa_in", "bb", bb, H * F) ||
	    dbg_apart(c, "ipa_in", "qa and ka", qa, na, ka, na, 0) ||
	    dbg_apart(c, "ipa_in", "rig and state", rig, nr, state, ns, 0) ||
	    dbg_apart(c, "ipa_in", "qa and qp", qa, na, qp, nq, 0) ||
	    dbg_apart(c, "ipa_in", "ka and kvp", ka, na, kvp, nkv, 0) ||
	    dbg_apart(c, "ipa_in", "vp and kvp", vp, nv, kvp, nkv, 0))
		return -EFAULT;
	if ((rc = dbg_enter(c))) return rc;
	return dbg_leave(c, c->cpu->ipa_in(c->cpu, qa, ka, vp, rig, state, qp, kvp, hw, bb, L, H, Pq, Pv));
}

static int dbg_ipa_out(be_t *be, float *cat, int64_t ldc, const float *op, const float *rig,
                       int L, int n_pts, float eps)
{
	dbg_ctx_t *c = be->ctx;
	int64_t nc = L ? (L - 1) * ldc + 4 * (int64_t)n_pts : 0, no = (int64_t)L * n_pts * 3;
	int rc;

	if (dbg_dev(c, "ipa_out", "cat", cat, nc * F) || dbg_dev(c, "ipa_out", "op", op, no * F) ||
	    dbg_dev(c, "ipa_out", "rig", rig, (int64_t)L * 12 * F) ||
	    dbg_apart(c, "ipa_out", "cat and op", cat, nc, op, no, 0))
		return -EFAULT;
	if ((rc = dbg_enter(c))) return rc;
	return dbg_leave(c, c->cpu->ipa_out(c->cpu, cat, ldc, op, rig, L, n_pts, eps));
}

static int dbg_ipa_rigid(be_t *be, float *state, float *frame, const float *upd, int L, float scale)
{
	dbg_ctx_t *c = be->ctx;
	int64_t n = (int64_t)L * 7;
	int rc;

	if (dbg_dev(c, "ipa_rigid", "state", state, n * F) ||
	    (frame && dbg_dev(c, "ipa_rigid", "frame", frame, n * F)) ||
	    (upd && dbg_dev(c, "ipa_rigid", "upd", upd, (int64_t)L * 6 * F)) ||
	    (frame && dbg_apart(c, "ipa_rigid", "frame and state", frame, n, state, n, 0)))
		return -EFAULT;
	if ((rc = dbg_enter(c))) return rc;
	return dbg_leave(c, c->cpu->ipa_rigid(c->cpu, state, frame, upd, L, scale));
}

static int dbg_transition(be_t *be, const be_transition_t *t)
{
	dbg_ctx_t *c = be->ctx;
	int64_t n = t->rows * t->d, nw = (int64_t)t->h * t->d;
	int rc;

	if (dbg_dev(c, "transition", "x", t->x, n * F) || dbg_dev(c, "transition", "ln_w", t->ln_w, t->d * F) ||
	    dbg_dev(c, "transition", "ln_b", t->ln_b, t->d * F) ||
	    dbg_dev(c, "transition", "w1", t->w1, nw * F) || dbg_dev(c, "transition", "w2", t->w2, nw * F) ||
	    (t->b1 && dbg_dev(c, "transition", "b1", t->b1, t->h * F)) ||
	    (t->b2 && dbg_dev(c, "transition", "b2", t->b2, t->d * F)) ||
	    dbg_apart(c, "transition", "x and w1", t->x, n, t->w1, nw, 0) ||
	    dbg_apart(c, "transition", "x and w2", t->x, n, t->w2, nw, 0))
		return -EFAULT;
	if ((rc = dbg_enter(c))) return rc;
	return dbg_leave(c, c->cpu->transition(c->cpu, t));
}

/* every row of x and every element of each group's output inside live
 * blocks, outputs apart from x (by their spans) */
static int dbg_ln_linear(be_t *be, const be_ln_linear_t *p)
{
	dbg_ctx_t *c = be->ctx;
	int64_t nx = dbg_span(p->ni, p->x_si, p->nj, p->x_sj, 1, 0, p->k);
	int rc;

	if (dbg_dev(c, "ln_linear", "x", p->x, nx * F)) return -EFAULT;
	for (int g = 0; g < p->ngroups; g++) {
		const be_lnlin_out_t *q = &p->out[g];
		int64_t ny = dbg_span(p->ni, q->si, p->nj, q->sj, q->n, q->sc, 1);
		if (dbg_dev(c, "ln_linear", "y", q->y, ny * F) || dbg_apart(c, "ln_linear", "y and x", q->y, ny, p->x, nx, 0))
			return -EFAULT;
	}
	if ((rc = dbg_enter(c))) return rc;
	return dbg_leave(c, c->cpu->ln_linear(c->cpu, p));
}

static int dbg_trimul_out(be_t *be, const be_trimul_out_t *t)
{
	dbg_ctx_t *c = be->ctx;
	int64_t ch = t->c, rows = t->zr.n1 * t->zr.n2, n = rows * ch;
	int64_t nz = dbg_span(1, 0, t->zr.n1, t->zr.s1, t->zr.n2, t->zr.s2, ch);
	int rc;

	if (dbg_dev(c, "trimul_out", "z", t->z, nz * F) || dbg_dev(c, "trimul_out", "x", t->x, n * F) ||
	    dbg_dev(c, "trimul_out", "gv", t->gv, n * F) ||
	    dbg_dev(c, "trimul_out", "w", t->w, ch * ch * (t->w_bf16 ? 2 : F)) ||
	    dbg_dev(c, "trimul_out", "b", t->b, ch * F) || dbg_dev(c, "trimul_out", "ln_w", t->ln_w, ch * F) ||
	    dbg_dev(c, "trimul_out", "ln_b", t->ln_b, ch * F) ||
	    dbg_apart(c, "trimul_out", "z and x", t->z, nz, t->x, n, 0) ||
	    dbg_apart(c, "trimul_out", "z and gv", t->z, nz, t->gv, n, 0))
		return -EFAULT;
	if ((rc = dbg_enter(c))) return rc;
	return dbg_leave(c, c->cpu->trimul_out(c->cpu, t));
}

static int dbg_relpos(be_t *be, float *z, const float *table, const float *residx, int i0, int ni,
                      int L, int ch, int bins)
{
	dbg_ctx_t *c = be->ctx;
	int64_t nz = (int64_t)ni * L * ch, nt = (int64_t)(2 * bins + 2) * ch;
	int rc;

	if (dbg_dev(c, "relpos", "z", z, nz * F) || dbg_dev(c, "relpos", "table", table, nt * F) ||
	    dbg_dev(c, "relpos", "residx", residx, (int64_t)L * F) ||
	    dbg_apart(c, "relpos", "z and residx", z, nz, residx, L, 0))
		return -EFAULT;
	if ((rc = dbg_enter(c))) return rc;
	return dbg_leave(c, c->cpu->relpos(c->cpu, z, table, residx, i0, ni, L, ch, bins));
}

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
		.sync = dbg_sync, .gemm = dbg_gemm, .attn = dbg_attn, .layernorm = dbg_layernorm,
		.softmax = dbg_softmax, .act = dbg_act, .binary = dbg_binary, .axpby = dbg_axpby,
		.fill = dbg_fill, .gather = dbg_gather, .transpose = dbg_transpose,
		.outer = dbg_outer,
		.trimul = dbg_trimul,
		.transition = dbg_transition,
		.ipa_in = dbg_ipa_in, .ipa_out = dbg_ipa_out, .ipa_rigid = dbg_ipa_rigid,
		.ln_linear = dbg_ln_linear,
		.trimul_out = dbg_trimul_out,
		.relpos = dbg_relpos,
	};
	return be;
fail:
	if (c) be_free(c->cpu);
	free(c);
	free(be);
	return NULL;
}
