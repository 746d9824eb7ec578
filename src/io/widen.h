/* widen.h (prefix widen_) - binary16 and bfloat16 data widened to float32 at memory speed.
 *
 * Both conversions are exact, and every path gives the bits of the scalar
 * safetensors_f16_to_f32 / safetensors_bf16_to_f32 for all 65,536 inputs
 * (subnormals, infinities, NaN payloads and signalling NaNs kept; the
 * F16C instruction quiets a signalling NaN, so NaN lanes are rebuilt from
 * their bits).  bfloat16 is a 16-bit shift on every path.
 *
 * Paths: WIDEN_AVX512 (16 lanes, AVX-512F), WIDEN_F16C (8 lanes, F16C and
 * AVX2), WIDEN_SCALAR (the portable loop, on every host).  widen_best() is
 * the fastest this CPU runs (checked at run time), or WIDEN_SCALAR where
 * $ESMBATCH_WIDEN is "scalar".  The calls are one thread's work: callers
 * split large tensors across threads (weights.c).
 */
#ifndef ESMBATCH_IO_WIDEN_H
#define ESMBATCH_IO_WIDEN_H

#include <stdint.h>

typedef enum { WIDEN_SCALAR, WIDEN_F16C, WIDEN_AVX512 } widen_path_t;

/* 1 when this CPU (and this build) can run path p */
int          widen_usable(widen_path_t p);
widen_path_t widen_best(void);
const char  *widen_path_name(widen_path_t p);

/* dst[0..n) = src[0..n) widened; src (n 16-bit values) need not be aligned;
 * an unusable p runs the scalar loop */
void widen_f16(float *dst, const void *src, int64_t n, widen_path_t p);
void widen_bf16(float *dst, const void *src, int64_t n, widen_path_t p);

/* --- a whole tensor, on all threads --------------------------------------- */

/* outputs are written in pieces that end on the 2 MiB boundaries of their
 * addresses (WIDEN_PIECE bytes), so that no two threads fault the same
 * huge page (util/hugemem.h) and each piece's page is cleared once, by
 * the thread that fills it */
#define WIDEN_PIECE ((int64_t)2 << 20)

/* how many pieces n elements of esize bytes (4: float32, 2: binary16) at
 * address dst split into (0 for n 0), and piece c's first element *lo and
 * count *len: the first piece runs to dst's next 2 MiB boundary, the last
 * ends at n, every other is 2 MiB */
int64_t widen_pieces(uintptr_t dst, int64_t n, int esize);
void    widen_piece(uintptr_t dst, int64_t n, int esize, int64_t c, int64_t *lo, int64_t *len);

struct safetensors_tensor;
/* dst[0..numel) = t as float32, piece by piece across the OpenMP threads
 * on path p (convert 0: dst is t's own float32 data, only scanned), each
 * piece scanned for a NaN or an infinity while it is in cache; the first
 * one's index, or -1 */
int64_t widen_tensor(const struct safetensors_tensor *t, float *dst, int convert, widen_path_t p);
/* dst[0..numel) = t's binary16 data as it is (t->dtype F16), copied piece
 * by piece across the OpenMP threads and scanned likewise: for weights
 * held in half precision and widened where they are used (be_t.weights_f16) */
int64_t widen_copy_f16(const struct safetensors_tensor *t, uint16_t *dst);

#endif
