/* widen.c - binary16 / bfloat16 to float32: AVX-512F, F16C + AVX2 and scalar paths (widen.h). */
#include "io/widen.h"

#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "util/finite.h"
#include "io/safetensors.h"

static void widen_f16_scalar(float *dst, const unsigned char *src, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		uint16_t h;
		memcpy(&h, src + 2 * i, 2);
		dst[i] = safetensors_f16_to_f32(h);
	}
}

static void widen_bf16_scalar(float *dst, const unsigned char *src, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		uint16_t h;
		memcpy(&h, src + 2 * i, 2);
		dst[i] = safetensors_bf16_to_f32(h);
	}
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define WIDEN_X86 1

/* NaN lanes (|h| > 0x7c00) as the scalar path builds them:
 * sign << 16 | all-ones exponent | payload << 13 (F16C would quiet it) */
#define WIDEN_NAN_BITS(and, or, sll, set1, w) \
	or(or(sll(and(w, set1(0x8000)), 16), set1(0x7f800000)), sll(and(w, set1(0x3ff)), 13))

__attribute__((target("avx2,f16c")))
static void widen_f16_f16c(float *dst, const unsigned char *src, int64_t n)
{
	int64_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m128i h = _mm_loadu_si128((const __m128i *)(src + 2 * i));
		__m256 f = _mm256_cvtph_ps(h);
		__m256i w = _mm256_cvtepu16_epi32(h);
		__m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x7fff)),
		                                 _mm256_set1_epi32(0x7c00));
		if (!_mm256_testz_si256(nan, nan)) {
			__m256i bits = WIDEN_NAN_BITS(_mm256_and_si256, _mm256_or_si256, _mm256_slli_epi32,
			                              _mm256_set1_epi32, w);
			f = _mm256_blendv_ps(f, _mm256_castsi256_ps(bits), _mm256_castsi256_ps(nan));
		}
		_mm256_storeu_ps(dst + i, f);
	}
	widen_f16_scalar(dst + i, src + 2 * i, n - i);
}

__attribute__((target("avx2")))
static void widen_bf16_avx2(float *dst, const unsigned char *src, int64_t n)
{
	int64_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + 2 * i)));
		_mm256_storeu_si256((__m256i *)(dst + i), _mm256_slli_epi32(w, 16));
	}
	widen_bf16_scalar(dst + i, src + 2 * i, n - i);
}

__attribute__((target("avx512f")))
static void widen_f16_avx512(float *dst, const unsigned char *src, int64_t n)
{
	int64_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m256i h = _mm256_loadu_si256((const __m256i *)(src + 2 * i));
		__m512 f = _mm512_cvtph_ps(h);
		__m512i w = _mm512_cvtepu16_epi32(h);
		__mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(w, _mm512_set1_epi32(0x7fff)),
		                                        _mm512_set1_epi32(0x7c00));
		if (nan) {
			__m512i bits = WIDEN_NAN_BITS(_mm512_and_si512, _mm512_or_si512, _mm512_slli_epi32,
			                              _mm512_set1_epi32, w);
			f = _mm512_mask_mov_ps(f, nan, _mm512_castsi512_ps(bits));
		}
		_mm512_storeu_ps(dst + i, f);
	}
	widen_f16_scalar(dst + i, src + 2 * i, n - i);
}

__attribute__((target("avx512f")))
static void widen_bf16_avx512(float *dst, const unsigned char *src, int64_t n)
{
	int64_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(src + 2 * i)));
		_mm512_storeu_si512(dst + i, _mm512_slli_epi32(w, 16));
	}
	widen_bf16_scalar(dst + i, src + 2 * i, n - i);
}
#endif

int widen_usable(widen_path_t p)
{
#ifdef WIDEN_X86
	__builtin_cpu_init();
	if (p == WIDEN_AVX512) return __builtin_cpu_supports("avx512f");
	if (p == WIDEN_F16C) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
#endif
	return p == WIDEN_SCALAR;
}

widen_path_t widen_best(void)
{
	const char *e = getenv("ESMBATCH_WIDEN");

	if (e && !strcmp(e, "scalar")) return WIDEN_SCALAR;
	if (widen_usable(WIDEN_AVX512)) return WIDEN_AVX512;
	if (widen_usable(WIDEN_F16C)) return WIDEN_F16C;
	return WIDEN_SCALAR;
}

const char *widen_path_name(widen_path_t p)
{
	return p == WIDEN_AVX512 ? "avx512" : p == WIDEN_F16C ? "f16c" : "scalar";
}

void widen_f16(float *dst, const void *src, int64_t n, widen_path_t p)
{
#ifdef WIDEN_X86
	if (p == WIDEN_AVX512 && widen_usable(p)) { widen_f16_avx512(dst, src, n); return; }
	if (p == WIDEN_F16C && widen_usable(p)) { widen_f16_f16c(dst, src, n); return; }
#endif
	widen_f16_scalar(dst, src, n);
}

void widen_bf16(float *dst, const void *src, int64_t n, widen_path_t p)
{
#ifdef WIDEN_X86
	if (p == WIDEN_AVX512 && widen_usable(p)) { widen_bf16_avx512(dst, src, n); return; }
	if (p == WIDEN_F16C && widen_usable(p)) { widen_bf16_avx2(dst, src, n); return; }
#endif
	widen_bf16_scalar(dst, src, n);
}

int64_t widen_pieces(uintptr_t dst, int64_t n, int esize)
{
	int64_t head = (int64_t)((WIDEN_PIECE - (int64_t)(dst % WIDEN_PIECE)) % WIDEN_PIECE) / esize;
	int64_t per = WIDEN_PIECE / esize;

	if (n <= 0) return 0;
	if (head >= n) return 1;
	return (head > 0) + (n - head + per - 1) / per;
}

void widen_piece(uintptr_t dst, int64_t n, int esize, int64_t c, int64_t *lo, int64_t *len)
{
	int64_t head = (int64_t)((WIDEN_PIECE - (int64_t)(dst % WIDEN_PIECE)) % WIDEN_PIECE) / esize;
	int64_t per = WIDEN_PIECE / esize;

	if (head > n) head = n;
	if (head > 0 && c == 0) { *lo = 0; *len = head; return; }
	*lo = head + (c - (head > 0)) * per;
	*len = n - *lo < per ? n - *lo : per;
}

/* dst[0..numel): t as float32 (esize 4; convert 0: t's own data, only
 * scanned) or t's binary16 copied (esize 2), piece by piece on all
 * threads, each piece scanned; the first NaN's or infinity's index, or -1 */
static int64_t widen_run(const struct safetensors_tensor *t, void *dst, int esize, int convert, widen_path_t p)
{
	int64_t n = t->numel, np = widen_pieces((uintptr_t)dst, n, esize), bad = INT64_MAX;

#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) reduction(min: bad) if (np > 1)
#endif
	for (int64_t c = 0; c < np; c++) {
		int64_t lo, len, b;
		widen_piece((uintptr_t)dst, n, esize, c, &lo, &len);
		if (esize == 2) {
			uint16_t *h = (uint16_t *)dst + lo;
			memcpy(h, (const uint16_t *)t->data + lo, sizeof *h * len);
			b = finite_scan_f16(h, len);
		} else {
			float *f = (float *)dst + lo;
			if (convert) safetensors_to_f32_part(t, lo, len, f, p);
			b = finite_scan(f, len);
		}
		if (b >= 0 && lo + b < bad) bad = lo + b;
	}
	return bad == INT64_MAX ? -1 : bad;
}

int64_t widen_tensor(const struct safetensors_tensor *t, float *dst, int convert, widen_path_t p)
{
	return widen_run(t, dst, sizeof *dst, convert, p);
}

int64_t widen_copy_f16(const struct safetensors_tensor *t, uint16_t *dst)
{
	return widen_run(t, dst, sizeof *dst, 1, WIDEN_SCALAR);
}
