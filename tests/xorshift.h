/* xorshift.h (prefix xs_) - the unit tests' random numbers: Marsaglia's
 * xorshift64 (shifts 13, 7, 17) stepped on a state the caller owns, so
 * each test keeps its own reproducible stream. */
#ifndef ESMBATCH_TEST_XORSHIFT_H
#define ESMBATCH_TEST_XORSHIFT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

/* the next state (nonzero stays nonzero) */
static inline uint64_t xs_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* uniform in [-1, 1) from the state's top 24 bits (exact in a float) */
static inline float xs_unif(uint64_t *s)
{
	return (float)((xs_next(s) >> 40) * (2.0 / 16777216.0) - 1.0);
}

/* uniform in [-1, 1) from the state's top 53 bits (exact in a double) */
static inline double xs_unif_d(uint64_t *s)
{
	return (double)(xs_next(s) >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

/* n floats scale * xs_unif + shift, malloc'd (at least one; the test
 * fails when there is no memory); the caller frees them */
static inline float *xs_vec(uint64_t *s, int64_t n, float scale, float shift)
{
	float *v = malloc(sizeof *v * (size_t)(n > 0 ? n : 1));
	assert_non_null(v);
	for (int64_t i = 0; i < n; i++) v[i] = scale * xs_unif(s) + shift;
	return v;
}

#endif
