/* hash.c - a fast 64-bit hash of bytes (see hash.h). */
#include "util/hash.h"

#include <string.h>

#define HASH_K1 0x9e3779b97f4a7c15ull   /* 2^64 / golden ratio */
#define HASH_K2 0xc2b2ae3d27d4eb4full
#define HASH_K3 0x165667b19e3779f9ull

static inline uint64_t hash_rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

/* one lane takes one 64-bit word */
static inline uint64_t hash_lane(uint64_t h, uint64_t w)
{
	return hash_rotl(h ^ (w * HASH_K2), 29) * HASH_K1;
}

/* spread every input bit over every output bit */
static inline uint64_t hash_final(uint64_t h)
{
	h ^= h >> 32;
	h *= HASH_K2;
	h ^= h >> 29;
	h *= HASH_K3;
	h ^= h >> 32;
	return h;
}

uint64_t hash_bytes(uint64_t seed, const void *data, size_t n)
{
	const unsigned char *p = data;
	uint64_t a = seed ^ HASH_K1, b = seed + HASH_K2, c = ~seed, d = seed * HASH_K3 + 1;
	uint64_t w[4], h;
	size_t i = 0;

	for (; i + 32 <= n; i += 32) {
		memcpy(w, p + i, 32);   /* unaligned loads */
		a = hash_lane(a, w[0]);
		b = hash_lane(b, w[1]);
		c = hash_lane(c, w[2]);
		d = hash_lane(d, w[3]);
	}
	h = hash_rotl(a, 1) + hash_rotl(b, 7) + hash_rotl(c, 12) + hash_rotl(d, 18) + (uint64_t)n;
	for (; i + 8 <= n; i += 8) {
		memcpy(w, p + i, 8);
		h = hash_lane(h, w[0]);
	}
	for (; i < n; i++) h = hash_lane(h, p[i] | 0x100u);   /* a byte, marked as one */
	return hash_final(h);
}
