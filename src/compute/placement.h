/* mp.h - memory placement: best-fit offsets for tensors by lifetime.
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
#ifndef ESMBATCH_MP_H
#define ESMBATCH_MP_H

#include <stddef.h>

#define MP_ALIGN 256   /* bytes; every offset and size is a multiple */

typedef struct {
	size_t off, size;
} mp_block_t;

typedef struct {
	mp_block_t *free;      /* free gaps below `top`, sorted by offset */
	int         nfree, cap;
	size_t      top;       /* current end of the used space */
	size_t      high;      /* high-water mark = bytes the arena must reserve */
	size_t      live;      /* bytes of live tensors now */
	size_t      peak_live; /* max of live over time = peak allocated */
	size_t      limit;     /* 0: unbounded; else placement fails beyond it */
} mp_t;

void mp_init(mp_t *mp, size_t limit);
void mp_free(mp_t *mp);
/* place nbytes; returns 0 and *off, or -1 when beyond the limit / no memory */
int  mp_alloc(mp_t *mp, size_t nbytes, size_t *off);
/* release a block placed by mp_alloc with the same nbytes; -1 when the
 * bookkeeping itself runs out of memory */
int  mp_release(mp_t *mp, size_t off, size_t nbytes);
size_t mp_round(size_t nbytes);

/* dst = a copy of src's placement state (free gaps, top, live, high,
 * peak_live, limit); dst must be mp_init'ed or a previous copy.  0 or -1. */
int  mp_copy(mp_t *dst, const mp_t *src);
/* 1 when a and b will place every future call identically: same free gaps,
 * top and live bytes (high and peak_live are not compared). */
int  mp_same(const mp_t *a, const mp_t *b);

#endif
