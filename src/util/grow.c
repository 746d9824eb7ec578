/* grow.c - doubling growth of an array (see grow.h). */
#include "util/grow.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define GROW_FIRST 8   /* elements of a first allocation */

int grow_array(void *pp, size_t *cap, size_t need, size_t elem)
{
	size_t n = *cap ? *cap : GROW_FIRST;
	void *p, *np;

	if (need <= *cap) return 0;
	while (n < need) {
		if (n > SIZE_MAX / 2) return -1;
		n *= 2;
	}
	if (!elem || n > SIZE_MAX / elem) return -1;
	/* pp points at a T *: read and written as bytes, valid for any T */
	memcpy(&p, pp, sizeof p);
	if (!(np = realloc(p, n * elem))) return -1;
	memcpy(pp, &np, sizeof np);
	*cap = n;
	return 0;
}
