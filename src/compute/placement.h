/* placement.h (prefix place_) - memory placement: best-fit offsets for tensors by lifetime.
 *
 * The activation planner.  Tensors are placed in one linear address space
 * [0, size) in the order they are created and released (ggml-alloc style):
 * a new tensor takes the smallest free gap that fits (ties: lowest offset),
 * else it extends the high-water mark; released blocks merge with their
 * neighbours.  The same sequence of calls always yields the same offsets, so
 * a forward pass run once with shapes only gives both the peak and every
 * placement, and the real pass replays it inside an arena of exactly that
 * size.
 */
#ifndef ESMBATCH_COMPUTE_PLACEMENT_H
#define ESMBATCH_COMPUTE_PLACEMENT_H

#include <stddef.h>

#define PLACE_ALIGN 256   /* bytes; every offset and size is a multiple */

typedef struct {
	size_t off, size;
} place_block_t;

typedef struct {
	place_block_t *free;      /* free gaps below `top`, sorted by offset */
	int         nfree;
	size_t      cap;
	size_t      top;       /* current end of the used space */
	size_t      high;      /* high-water mark = bytes the arena must reserve */
	size_t      live;      /* bytes of live tensors now */
	size_t      peak_live; /* max of live over time = peak allocated */
	size_t      limit;     /* 0: unbounded; else placement fails beyond it */
} place_t;

void place_init(place_t *mp, size_t limit);
void place_free(place_t *mp);
/* place nbytes; returns 0 and *off, or -1 when beyond the limit / no memory */
int  place_alloc(place_t *mp, size_t nbytes, size_t *off);
/* release a block placed by place_alloc with the same nbytes; -1 when the
 * bookkeeping itself runs out of memory */
int  place_release(place_t *mp, size_t off, size_t nbytes);
size_t place_round(size_t nbytes);

/* dst = a copy of src's placement state (free gaps, top, live, high,
 * peak_live, limit); dst must be place_init'ed or a previous copy.  0 or -1. */
int  place_copy(place_t *dst, const place_t *src);
/* 1 when a and b will place every future call identically: same free gaps,
 * top and live bytes (high and peak_live are not compared). */
int  place_same(const place_t *a, const place_t *b);

#endif
