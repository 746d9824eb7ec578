/* waitq.c - the scheduler's waiting items as a treap (see waitq.h). */
#include "sched/waitq.h"

#include <stdlib.h>

void wq_init(wq_t *q)
{
	q->n = NULL;
	q->cap = q->count = 0;
	q->root = -1;
}

void wq_free(wq_t *q)
{
	free(q->n);
	wq_init(q);
}

int wq_reserve(wq_t *q, int cap)
{
	wq_node_t *n;

	if (cap <= q->cap) return 0;
	if (!(n = realloc(q->n, (size_t)cap * sizeof *n))) return -1;
	for (int i = q->cap; i < cap; i++) n[i] = (wq_node_t){ .l = -1, .r = -1, .best = i };
	q->n = n;
	q->cap = cap;
	return 0;
}

/* a fixed scramble of the index (a 32-bit finalizer): the node's priority */
static uint32_t wq_pri(int i)
{
	uint32_t h = (uint32_t)i * 0x9e3779b1u;
	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	return h ^ (h >> 16);
}

/* a is the better pick than b: longer, or as long with a lower index */
static int wq_better(const wq_t *q, int a, int b)
{
	if (b < 0) return 1;
	if (a < 0) return 0;
	return q->n[a].len > q->n[b].len || (q->n[a].len == q->n[b].len && a < b);
}

/* (quota, index) of a below that of b */
static int wq_below(const wq_t *q, int a, int b)
{
	return q->n[a].quota < q->n[b].quota || (q->n[a].quota == q->n[b].quota && a < b);
}

static void wq_fix(wq_t *q, int t)
{
	wq_node_t *x = &q->n[t];
	int b = t;
	if (x->l >= 0 && wq_better(q, q->n[x->l].best, b)) b = q->n[x->l].best;
	if (x->r >= 0 && wq_better(q, q->n[x->r].best, b)) b = q->n[x->r].best;
	x->best = b;
}

/* split t into the nodes below item k (*a) and the rest (*b); with
 * `incl`, item k itself goes to *a */
static void wq_split(wq_t *q, int t, int k, int incl, int *a, int *b)
{
	if (t < 0) {
		*a = *b = -1;
		return;
	}
	if (wq_below(q, t, k) || (incl && t == k)) {
		wq_split(q, q->n[t].r, k, incl, &q->n[t].r, b);
		*a = t;
	} else {
		wq_split(q, q->n[t].l, k, incl, a, &q->n[t].l);
		*b = t;
	}
	wq_fix(q, t);
}

/* every node of a is below every node of b */
static int wq_merge(wq_t *q, int a, int b)
{
	if (a < 0) return b;
	if (b < 0) return a;
	if (q->n[a].pri > q->n[b].pri) {
		q->n[a].r = wq_merge(q, q->n[a].r, b);
		wq_fix(q, a);
		return a;
	}
	q->n[b].l = wq_merge(q, a, q->n[b].l);
	wq_fix(q, b);
	return b;
}

void wq_put(wq_t *q, int i, int64_t quota, int len)
{
	wq_node_t *x = &q->n[i];
	int a, b;

	*x = (wq_node_t){ .quota = quota, .len = len, .l = -1, .r = -1, .best = i, .pri = wq_pri(i),
	                  .in = 1 };
	wq_split(q, q->root, i, 0, &a, &b);
	q->root = wq_merge(q, wq_merge(q, a, i), b);
	q->count++;
}

void wq_take(wq_t *q, int i)
{
	int a, m, b;

	if (i < 0 || i >= q->cap || !q->n[i].in) return;
	wq_split(q, q->root, i, 0, &a, &b);
	wq_split(q, b, i, 1, &m, &b);   /* m: item i alone */
	q->root = wq_merge(q, a, b);
	q->n[i].in = 0;
	q->n[i].l = q->n[i].r = -1;
	q->count--;
}

int wq_pick(const wq_t *q, int64_t lim)
{
	int best = -1;

	/* every node left of one whose quota is <= lim is too: take its left
	 * subtree's best and itself, go right; else go left */
	for (int t = q->root; t >= 0;) {
		const wq_node_t *x = &q->n[t];
		if (x->quota <= lim) {
			if (x->l >= 0 && wq_better(q, q->n[x->l].best, best)) best = q->n[x->l].best;
			if (wq_better(q, t, best)) best = t;
			t = x->r;
		} else {
			t = x->l;
		}
	}
	return best;
}

int64_t wq_least(const wq_t *q)
{
	int t = q->root;

	if (t < 0) return -1;
	while (q->n[t].l >= 0) t = q->n[t].l;
	return q->n[t].quota;
}
