/* grow.h (prefix grow_) - the one way an array grows: doubled, so n appends
 * cost O(n) copies in all.
 */
#ifndef ESMBATCH_UTIL_GROW_H
#define ESMBATCH_UTIL_GROW_H

#include <stddef.h>

/* Room for need elements of elem bytes in the array whose pointer is at pp
 * (a T **) and whose capacity, in elements, is *cap.  Nothing is done when
 * need <= *cap; else the array is reallocated to the smallest of 8, 16, ...
 * (doubling *cap when it is not 0) that holds need, and *cap set.  0, or -1
 * with the array and *cap untouched when the size overflows size_t or
 * realloc fails (nothing logged: the caller names what it was reading). */
int grow_array(void *pp, size_t *cap, size_t need, size_t elem);

#endif
