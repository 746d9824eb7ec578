/* num.h (prefix num_) - the one guard on a float-to-integer cast of a value
 * that came from outside (an option, a device spec, a file): C leaves the
 * cast of a NaN, an infinity or a value beyond the integer's range
 * undefined, so every such cast goes through num_to_i64.
 */
#ifndef ESMBATCH_UTIL_NUM_H
#define ESMBATCH_UTIL_NUM_H

#include <math.h>
#include <stdint.h>

/* largest bound num_to_i64 takes: every integer up to it is exact in a double */
#define NUM_EXACT_MAX ((int64_t)1 << 53)

/* v truncated toward zero into *out when v is finite and lo <= v <= hi
 * (|lo|, |hi| at most NUM_EXACT_MAX): 0; otherwise -1 and *out untouched */
static inline int num_to_i64(double v, int64_t lo, int64_t hi, int64_t *out)
{
	if (!isfinite(v) || v < (double)lo || v > (double)hi) return -1;
	*out = (int64_t)v;
	return 0;
}

#endif
