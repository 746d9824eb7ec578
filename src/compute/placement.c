/* placement.c - best-fit placement with coalescing free gaps (see placement.h). */
#include "compute/placement.h"

#include <stdlib.h>
#include <string.h>

#include "util/grow.h"

size_t place_round(size_t nbytes)
{
	return (nbytes + PLACE_ALIGN - 1) / PLACE_ALIGN * PLACE_ALIGN;
}

void place_init(place_t *mp, size_t limit)
{
	memset(mp, 0, sizeof *mp);
	mp->limit = limit;
}

void place_free(place_t *mp)
{
	free(mp->free);
	memset(mp, 0, sizeof *mp);
}

static int place_insert(place_t *mp, int at, size_t off, size_t size)
{
	if (grow_array(&mp->free, &mp->cap, (size_t)mp->nfree + 1, sizeof *mp->free) < 0) return -1;
	memmove(mp->free + at + 1, mp->free + at, (mp->nfree - at) * sizeof *mp->free);
	mp->free[at] = (place_block_t){ off, size };
	mp->nfree++;
	return 0;
}

static void place_remove(place_t *mp, int at)
{
	memmove(mp->free + at, mp->free + at + 1, (mp->nfree - at - 1) * sizeof *mp->free);
	mp->nfree--;
}

int place_alloc(place_t *mp, size_t nbytes, size_t *off)
{
	size_t n = place_round(nbytes ? nbytes : 1);
	int best = -1;

	for (int i = 0; i < mp->nfree; i++)
		if (mp->free[i].size >= n && (best < 0 || mp->free[i].size < mp->free[best].size))
			best = i;
	if (best >= 0) {
		*off = mp->free[best].off;
		mp->free[best].off += n;
		mp->free[best].size -= n;
		if (mp->free[best].size == 0) place_remove(mp, best);
	} else {
		/* no gap fits: extend the top (a gap never touches the top,
		 * place_release swallows those) */
		if (mp->limit && mp->top + n > mp->limit) return -1;
		*off = mp->top;
		mp->top += n;
		if (mp->top > mp->high) mp->high = mp->top;
	}
	mp->live += n;
	if (mp->live > mp->peak_live) mp->peak_live = mp->live;
	return 0;
}

int place_release(place_t *mp, size_t off, size_t nbytes)
{
	size_t n = place_round(nbytes ? nbytes : 1);
	int at = 0;

	mp->live -= n;
	if (off + n == mp->top) {
		mp->top = off;
		/* swallow a free gap that now touches the top */
		while (mp->nfree && mp->free[mp->nfree - 1].off + mp->free[mp->nfree - 1].size == mp->top) {
			mp->top = mp->free[mp->nfree - 1].off;
			place_remove(mp, mp->nfree - 1);
		}
		return 0;
	}
	while (at < mp->nfree && mp->free[at].off < off) at++;
	/* merge with the previous and/or next gap */
	if (at > 0 && mp->free[at - 1].off + mp->free[at - 1].size == off) {
		mp->free[at - 1].size += n;
		if (at < mp->nfree && off + n == mp->free[at].off) {
			mp->free[at - 1].size += mp->free[at].size;
			place_remove(mp, at);
		}
		return 0;
	}
	if (at < mp->nfree && off + n == mp->free[at].off) {
		mp->free[at].off = off;
		mp->free[at].size += n;
		return 0;
	}
	return place_insert(mp, at, off, n);
}

int place_copy(place_t *dst, const place_t *src)
{
	if (grow_array(&dst->free, &dst->cap, (size_t)src->nfree, sizeof *dst->free) < 0) return -1;
	if (src->nfree) memcpy(dst->free, src->free, src->nfree * sizeof *src->free);
	dst->nfree = src->nfree;
	dst->top = src->top;
	dst->high = src->high;
	dst->live = src->live;
	dst->peak_live = src->peak_live;
	dst->limit = src->limit;
	return 0;
}

int place_same(const place_t *a, const place_t *b)
{
	return a->top == b->top && a->live == b->live && a->nfree == b->nfree &&
	       (!a->nfree || !memcmp(a->free, b->free, a->nfree * sizeof *a->free));
}
