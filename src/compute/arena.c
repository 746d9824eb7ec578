/* arena.c - a worker's activation arena kept across folds (see arena.h). */
#include "compute/arena.h"

#include <string.h>

void arena_init(arena_t *a, be_t *be)
{
	memset(a, 0, sizeof *a);
	a->be = be;
}

int arena_reserve(arena_t *a, size_t n)
{
	int rc;

	if (a->base && a->size >= n) return 0;
	arena_release(a);
	if (n == 0) return 0;
	a->reserves++;
	if ((rc = a->be->alloc(a->be, n, &a->base)) < 0) {
		a->base = NULL;
		return rc;
	}
	a->size = n;
	return 0;
}

void arena_release(arena_t *a)
{
	if (a->base) a->be->free(a->be, a->base);
	a->base = NULL;
	a->size = 0;
}

void arena_free(arena_t *a)
{
	arena_release(a);
	a->be = NULL;
}
