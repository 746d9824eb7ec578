/* hash.h (prefix hash_) - a fast 64-bit non-cryptographic hash of bytes.
 *
 * Four independent 64-bit lanes take 32 bytes a round (multiply, rotate),
 * so the CPU overlaps their multiplications; the tail and the lanes are
 * folded together with the length and a final avalanche.  For
 * fingerprints (weights files of many GB), not for security: an attacker
 * can make collisions.  Deterministic across runs and hosts of the same
 * byte order.
 */
#ifndef ESMBATCH_UTIL_HASH_H
#define ESMBATCH_UTIL_HASH_H

#include <stddef.h>
#include <stdint.h>

/* hash of data[0..n), chained from seed (use 0, or a previous result) */
uint64_t hash_bytes(uint64_t seed, const void *data, size_t n);

#endif
