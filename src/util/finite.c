/* finite.c - finding a NaN or an infinity (see finite.h). */
#include "util/finite.h"

#include <string.h>

/* a NaN or an infinity: all exponent bits set */
static int finite_bad(const float *f)
{
	uint32_t u;
	memcpy(&u, f, sizeof u);
	return (u & 0x7f800000u) == 0x7f800000u;
}

/* whole blocks by a loop of a fixed count, which the compiler vectorises
 * at -O2; the rest, and a block found bad, one by one */
int64_t finite_scan(const float *f, int64_t n)
{
	enum { BLOCK = 1024 };
	int64_t b = 0;

	for (; b + BLOCK <= n; b += BLOCK) {
		int bad = 0;
		for (int i = 0; i < BLOCK; i++) bad |= finite_bad(f + b + i);
		if (bad) break;
	}
	for (; b < n; b++)
		if (finite_bad(f + b)) return b;
	return -1;
}

int64_t finite_scan_f16(const uint16_t *h, int64_t n)
{
	enum { BLOCK = 1024 };
	int64_t b = 0;

	for (; b + BLOCK <= n; b += BLOCK) {
		int bad = 0;
		for (int i = 0; i < BLOCK; i++) bad |= (h[b + i] & 0x7c00u) == 0x7c00u;
		if (bad) break;
	}
	for (; b < n; b++)
		if ((h[b] & 0x7c00u) == 0x7c00u) return b;
	return -1;
}
