/* finite.h (prefix finite_) - finding a NaN or an infinity in float data:
 * weights as they are loaded, a fold's outputs before they are written. */
#ifndef ESMBATCH_UTIL_FINITE_H
#define ESMBATCH_UTIL_FINITE_H

#include <stdint.h>

/* the index of the first NaN or infinity of f[0..n), or -1; about a
 * memory pass (the blocks' loop is vectorised) */
int64_t finite_scan(const float *f, int64_t n);
/* the same for binary16 data h[0..n) (all five exponent bits set) */
int64_t finite_scan_f16(const uint16_t *h, int64_t n);

#endif
