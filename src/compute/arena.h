/* arena.h (prefix arena_) - a worker's activation arena, kept from one fold to the next.
 *
 * Reserving an arena per fold costs a device allocation and a release per
 * fold, and on CUDA a release (cudaFree) waits for the whole device, every
 * other worker's stream included.  A worker therefore keeps one arena for
 * the run: a fold whose plan fits in it runs there, a larger one grows it
 * (released, then reserved again at the new size), and it is released when
 * the worker ends or gives its memory back (the scheduler counts what a
 * worker keeps as granted to it: scheduler.h).  The arena owns its block;
 * the backend it was made for must outlive it.
 */
#ifndef ESMBATCH_COMPUTE_ARENA_H
#define ESMBATCH_COMPUTE_ARENA_H

#include <stddef.h>

#include "backend/backend.h"

typedef struct {
	be_t   *be;        /* whose alloc and free it uses */
	void   *base;      /* [size] bytes of backend memory, or NULL */
	size_t  size;
	long    reserves;  /* backend allocations made so far */
} arena_t;

void arena_init(arena_t *a, be_t *be);
/* At least n bytes at a->base: kept when it holds as many already, else
 * released and reserved again at exactly n.  0, or the backend's negative
 * status (then nothing is held). */
int  arena_reserve(arena_t *a, size_t n);
/* Give the block back to the backend; the arena holds nothing after. */
void arena_release(arena_t *a);
/* arena_release, for the end of the worker */
void arena_free(arena_t *a);

#endif
