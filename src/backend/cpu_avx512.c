/* cpu_avx512.c - the CPU backend's own float32 kernels (AVX-512F): GEMM,
 * the triangle-multiplication product, the attention's softmax step, the
 * gate and the layer norm.
 *
 * C = alpha A op(B) + beta C + bias for row-major A (k contiguous): the
 * shape of every nn.Linear, of the attention tiles and of the batched
 * products.  Per block of C, op(B) is packed into panels of 32 columns,
 * [k][32], which stay in L1 (a binary16 or bfloat16 weight, be_gemm_t.b_f16
 * or b_bf16, widened exactly as it is packed); A is read in place, one broadcast per
 * element, by a 12 x 32 register tile (24 accumulators).  Unlike a general
 * BLAS the large operand A is never copied, and the bias and beta are
 * applied while the tile is still in registers; C may be stored
 * transposed (ct), so that a linear on few rows can run as W X^T with the
 * weight as the operand read in place.  The triangle product (avx512_trimul_block)
 * works on channel-last tensors, 16 channels per vector, with a 4 x 5 tile
 * of (i, j) pairs, in blocks of AVX512_TRI_KB k for which a's 16 channels are
 * first copied together (in a they lie c floats apart).  Products run in
 * k order, one fused multiply-add per term, in float32.  The softmax step
 * and the gate use a vector exp (avx512_exp: cpu_exp's polynomial); sums and
 * maxima over a row end in one vector reduction.
 */
#include "config.h"

#include "backend/cpu_avx512.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>

#define AVX512_NR 32   /* columns per packed panel: two vectors of 16 */
#define AVX512_MR 12   /* rows per register tile */

int cpu_has_avx512(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f");
}

/* t[c] = column c of the 16 x 16 block r[0..16) (rows), in registers */
__attribute__((target("avx512f"), always_inline))
static inline void avx512_transpose16(__m512 r[16])
{
	__m512 t[16], u[16];

	#pragma GCC unroll 8
	for (int i = 0; i < 8; i++) {
		t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
		t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
	}
	/* u[4i + c]: rows 4i .. 4i+3 of columns c, c+4, c+8, c+12 (one per lane) */
	#pragma GCC unroll 4
	for (int i = 0; i < 4; i++) {
		u[4 * i + 0] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
		u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
		u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
		u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
	}
	#pragma GCC unroll 4
	for (int c = 0; c < 4; c++) {
		__m512 a = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);      /* c, c+8 of rows 0-7 */
		__m512 b = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xdd);      /* c+4, c+12 */
		__m512 a2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88); /* rows 8-15 */
		__m512 b2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xdd);
		r[c] = _mm512_shuffle_f32x4(a, a2, 0x88);
		r[c + 8] = _mm512_shuffle_f32x4(a, a2, 0xdd);
		r[c + 4] = _mm512_shuffle_f32x4(b, b2, 0x88);
		r[c + 12] = _mm512_shuffle_f32x4(b, b2, 0xdd);
	}
}

enum { AVX512_B_F32, AVX512_B_F16, AVX512_B_BF16 };   /* what B's elements are */

/* 16 16-bit values as float32: binary16 (vcvtph2ps) or bfloat16 (its
 * bits the upper half of a float32's), both exact */
__attribute__((target("avx512f"), always_inline))
static inline __m512 avx512_widen16(__m256i h, int kind)
{
	if (kind == AVX512_B_F16) return _mm512_cvtph_ps(h);
	return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* 16 elements (nk of them, the rest 0) of a row of B at src, as float32 */
__attribute__((target("avx512f"), always_inline))
static inline __m512 avx512_load_row(const void *src, int nk, __mmask16 km, int kind)
{
	if (kind == AVX512_B_F32) return _mm512_maskz_loadu_ps(km, src);
	if (nk == 16) return avx512_widen16(_mm256_loadu_si256((const __m256i *)src), kind);
	uint16_t h[16] = { 0 };
	memcpy(h, src, sizeof *h * (size_t)nk);
	return avx512_widen16(_mm256_loadu_si256((const __m256i *)h), kind);
}

/* pp: [kb][32] = op(B)[k0 .. k0+kb, j0 .. j0+w] of entry b (w <= 32), zero
 * past column w.  B: [n, k] is transposed 16 x 16 in registers (binary16
 * or bfloat16 where g->b_f16 or b_bf16: widened as it is loaded). */
__attribute__((target("avx512f")))
static void avx512_pack_panel(float *pp, const be_gemm_t *g, int64_t b, int k0, int kb, int j0, int w)
{
	const int kind = g->b_f16 ? AVX512_B_F16 : g->b_bf16 ? AVX512_B_BF16 : AVX512_B_F32;
	const int es = kind == AVX512_B_F32 ? 4 : 2;   /* bytes an element of B */

	if (!g->transb) {   /* B: [k, n], float32 */
		const float *B = g->b + b * g->stride_b;
		__mmask16 m0 = w >= 16 ? 0xffff : (__mmask16)((1u << w) - 1);
		__mmask16 m1 = w >= 32 ? 0xffff : w > 16 ? (__mmask16)((1u << (w - 16)) - 1) : 0;
		for (int k = 0; k < kb; k++) {
			const float *row = B + (int64_t)(k0 + k) * g->ldb + j0;
			_mm512_store_ps(pp + k * AVX512_NR, _mm512_maskz_loadu_ps(m0, row));
			_mm512_store_ps(pp + k * AVX512_NR + 16, _mm512_maskz_loadu_ps(m1, row + 16));
		}
		return;
	}
	for (int h = 0; h < AVX512_NR; h += 16)   /* B: [n, k], 16 of its rows at a time */
		for (int k = 0; k < kb; k += 16) {
			int nk = kb - k < 16 ? kb - k : 16;
			__mmask16 km = (__mmask16)((1u << nk) - 1);
			__m512 r[16];
			#pragma GCC unroll 16
			for (int i = 0; i < 16; i++) {
				const char *src = (const char *)g->b +
				                  es * (b * g->stride_b + (int64_t)(j0 + h + i) * g->ldb + k0 + k);
				/* the rows' lines two blocks on: B is often cold (weights) */
				if (h + i < w && k + 32 < kb) _mm_prefetch(src + 32 * es, _MM_HINT_T0);
				r[i] = h + i < w ? avx512_load_row(src, nk, km, kind) : _mm512_setzero_ps();
			}
			avx512_transpose16(r);
			#pragma GCC unroll 16
			for (int i = 0; i < 16; i++)
				if (i < nk) _mm512_store_ps(pp + (int64_t)(k + i) * AVX512_NR + h, r[i]);
		}
}

/* P: [ceil(nj / 32)][kb][32] = op(B)[k0 .. k0+kb, j0 .. j0+nj] of entry b */
static void avx512_pack(float *P, const be_gemm_t *g, int64_t b, int k0, int kb, int j0, int nj)
{
	for (int p0 = 0; p0 < nj; p0 += AVX512_NR)
		avx512_pack_panel(P + (int64_t)p0 * kb, g, b, k0, kb, j0 + p0, nj - p0 < AVX512_NR ? nj - p0 : AVX512_NR);
}

/* c: [R, w] (rows of stride ldc) = alpha x: [R, kb] pp: [kb, 32] + beta c
 * + bias: [w] (bias may be NULL; c is not read when beta is 0);
 * R <= 12, w <= 32.  ct: c transposed instead, [w, R] (rows of stride
 * ldc), and the bias [R] along the tile's rows. */
__attribute__((target("avx512f"), always_inline))
static inline void avx512_tile(const int R, const int ct, int kb, const float *x, int64_t ldx,
                           const float *pp, float *c, int64_t ldc, int w, float alpha, float beta,
                           const float *bias)
{
	__m512 c0[AVX512_MR], c1[AVX512_MR], bv0, bv1, va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
	__mmask16 m0 = w >= 16 ? 0xffff : (__mmask16)((1u << w) - 1);
	__mmask16 m1 = w >= 32 ? 0xffff : w > 16 ? (__mmask16)((1u << (w - 16)) - 1) : 0;

	#pragma GCC unroll 12
	for (int r = 0; r < AVX512_MR; r++)
		if (r < R) { c0[r] = _mm512_setzero_ps(); c1[r] = _mm512_setzero_ps(); }
	for (int k = 0; k < kb; k++) {
		__m512 w0 = _mm512_load_ps(pp + k * AVX512_NR), w1 = _mm512_load_ps(pp + k * AVX512_NR + 16);
		#pragma GCC unroll 12
		for (int r = 0; r < AVX512_MR; r++)
			if (r < R) {
				__m512 xv = _mm512_set1_ps(x[r * ldx + k]);
				c0[r] = _mm512_fmadd_ps(xv, w0, c0[r]);
				c1[r] = _mm512_fmadd_ps(xv, w1, c1[r]);
			}
	}
	if (ct) {   /* 16 columns at a time, transposed in registers */
		__mmask16 mr = (__mmask16)((1u << R) - 1);
		__m512 bv = bias ? _mm512_maskz_loadu_ps(mr, bias) : _mm512_setzero_ps();
		for (int h = 0; h < 2; h++) {
			__m512 t[16];
			for (int r = 0; r < 16; r++) t[r] = r < R ? (h ? c1[r] : c0[r]) : _mm512_setzero_ps();
			avx512_transpose16(t);
			for (int q = 0; q < 16 && h * 16 + q < w; q++) {
				float *cq = c + (int64_t)(h * 16 + q) * ldc;
				__m512 o = _mm512_fmadd_ps(va, t[q], bv);
				if (beta != 0.0f) o = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mr, cq), o);
				_mm512_mask_storeu_ps(cq, mr, o);
			}
		}
		return;
	}
	bv0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
	bv1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
	#pragma GCC unroll 12
	for (int r = 0; r < AVX512_MR; r++)
		if (r < R) {
			float *cr = c + r * ldc;
			__m512 o0 = _mm512_fmadd_ps(va, c0[r], bv0), o1 = _mm512_fmadd_ps(va, c1[r], bv1);
			if (beta != 0.0f) {
				o0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, cr), o0);
				o1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, cr + 16), o1);
			}
			_mm512_mask_storeu_ps(cr, m0, o0);
			_mm512_mask_storeu_ps(cr + 16, m1, o1);
		}
}

#define AVX512_TILE(R) \
	__attribute__((target("avx512f"))) \
	static void avx512_tile##R(int kb, const float *x, int64_t ldx, const float *pp, float *c, \
	                       int64_t ldc, int w, float alpha, float beta, const float *bias) \
	{ avx512_tile(R, 0, kb, x, ldx, pp, c, ldc, w, alpha, beta, bias); } \
	__attribute__((target("avx512f"))) \
	static void avx512_tile##R##t(int kb, const float *x, int64_t ldx, const float *pp, float *c, \
	                          int64_t ldc, int w, float alpha, float beta, const float *bias) \
	{ avx512_tile(R, 1, kb, x, ldx, pp, c, ldc, w, alpha, beta, bias); }
AVX512_TILE(1) AVX512_TILE(2) AVX512_TILE(3) AVX512_TILE(4) AVX512_TILE(5) AVX512_TILE(6)
AVX512_TILE(7) AVX512_TILE(8) AVX512_TILE(9) AVX512_TILE(10) AVX512_TILE(11) AVX512_TILE(12)

typedef void (*avx512_tile_fn)(int, const float *, int64_t, const float *, float *, int64_t, int,
                           float, float, const float *);
static const avx512_tile_fn avx512_tiles[2][AVX512_MR + 1] = {
	{ NULL, avx512_tile1, avx512_tile2, avx512_tile3, avx512_tile4, avx512_tile5, avx512_tile6,
	  avx512_tile7, avx512_tile8, avx512_tile9, avx512_tile10, avx512_tile11, avx512_tile12 },
	{ NULL, avx512_tile1t, avx512_tile2t, avx512_tile3t, avx512_tile4t, avx512_tile5t, avx512_tile6t,
	  avx512_tile7t, avx512_tile8t, avx512_tile9t, avx512_tile10t, avx512_tile11t, avx512_tile12t },
};

void avx512_pack_b(const be_gemm_t *g, int64_t b, int p, float *packed)
{
	int j0 = p * AVX512_NR / AVX512_NB * AVX512_NB, p0 = p * AVX512_NR - j0;
	int nj = g->n - j0 < AVX512_NB ? g->n - j0 : AVX512_NB;
	float *P = packed + (int64_t)j0 * g->k;   /* the column block */

	for (int k0 = 0; k0 < g->k; k0 += AVX512_KB) {
		int kb = g->k - k0 < AVX512_KB ? g->k - k0 : AVX512_KB;
		avx512_pack_panel(P + AVX512_PACKED(k0, nj) + (int64_t)p0 * kb, g, b, k0, kb, j0 + p0,
		              nj - p0 < AVX512_NR ? nj - p0 : AVX512_NR);
	}
}

void avx512_block(const be_gemm_t *g, int64_t b, int i0, int mi, int j0, int nj, const float *packed,
              float *P, int ct)
{
	const float *A = g->a + b * g->stride_a + (int64_t)i0 * g->lda;
	float *C = g->c + b * g->stride_c + (ct ? (int64_t)j0 * g->ldc + i0 : (int64_t)i0 * g->ldc + j0);

	for (int k0 = 0; k0 < g->k; k0 += AVX512_KB) {
		int kb = g->k - k0 < AVX512_KB ? g->k - k0 : AVX512_KB;
		/* the first k block applies beta and the bias, later ones add */
		float beta = k0 ? 1.0f : g->beta;
		const float *bias = k0 || !g->bias ? NULL : g->bias + (ct ? i0 : j0);
		const float *pk = packed ? packed + AVX512_PACKED(k0, nj) : P;

		if (!packed) avx512_pack(P, g, b, k0, kb, j0, nj);
		for (int r0 = 0; r0 < mi; r0 += AVX512_MR) {
			int R = mi - r0 < AVX512_MR ? mi - r0 : AVX512_MR;
			for (int p0 = 0; p0 < nj; p0 += AVX512_NR) {
				int w = nj - p0 < AVX512_NR ? nj - p0 : AVX512_NR;
				avx512_tiles[ct][R](kb, A + (int64_t)r0 * g->lda + k0, g->lda, pk + (int64_t)p0 * kb,
				                C + (ct ? (int64_t)p0 * g->ldc + r0 : (int64_t)r0 * g->ldc + p0),
				                g->ldc, w, g->alpha, beta, bias ? bias + (ct ? r0 : p0) : NULL);
			}
		}
	}
}

/* ---- the attention's softmax step, the gate -------------------------------- */

/* e^x, 16 at a time: cpu_exp's reduction and Cephes polynomial (cpu.c),
 * 2^n applied by vscalefps.  x is clamped to [-104, 89], where the result
 * rounds to 0 and overflows to +inf (so -inf gives 0 and +inf gives +inf,
 * exactly); NaN stays NaN. */
__attribute__((target("avx512f"), always_inline))
static inline __m512 avx512_exp(__m512 x)
{
	__m512 n, r, p;

	x = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));
	n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
	                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
	r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
	p = _mm512_fmadd_ps(_mm512_set1_ps(1.9875691500e-4f), r, _mm512_set1_ps(1.3981999507e-3f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
	p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
	return _mm512_scalef_ps(p, n);
}

__attribute__((target("avx512f")))
void avx512_attn_rows(float *s, int64_t lds, int tq, int tk, const float *bias, int64_t bias_sq,
                  const float *mask, float *m, float *l, float *acc, int D)
{
	const __m512 ninf = _mm512_set1_ps(-INFINITY);
	int nv = (tk + 15) / 16;
	__mmask16 tail = tk % 16 ? (__mmask16)((1u << tk % 16) - 1) : 0xffff;

	for (int i = 0; i < tq; i++) {
		float *si = s + i * lds, mx, sum, corr;
		const float *bi = bias ? bias + i * bias_sq : NULL;
		__m512 v[AVX512_KB / 16], vmx = ninf, vsum = _mm512_setzero_ps();

		/* s + bias, masked keys and the lanes past tk at -inf; the row max */
		for (int q = 0; q < nv; q++) {
			__mmask16 km = q == nv - 1 ? tail : 0xffff;
			__m512 x = _mm512_maskz_loadu_ps(km, si + 16 * q);
			if (bi) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(km, bi + 16 * q));
			if (mask)
				km &= _mm512_cmp_ps_mask(_mm512_maskz_loadu_ps(km, mask + 16 * q),
				                         _mm512_setzero_ps(), _CMP_NEQ_UQ);
			v[q] = _mm512_mask_blend_ps(km, ninf, x);
			vmx = _mm512_max_ps(vmx, v[q]);
		}
		mx = _mm512_reduce_max_ps(vmx);
		mx = m[i] > mx ? m[i] : mx;
		if (mx == -INFINITY) {   /* every key so far masked */
			for (int q = 0; q < nv; q++)
				_mm512_mask_storeu_ps(si + 16 * q, q == nv - 1 ? tail : 0xffff, _mm512_setzero_ps());
			continue;
		}
		for (int q = 0; q < nv; q++) {
			v[q] = avx512_exp(_mm512_sub_ps(v[q], _mm512_set1_ps(mx)));
			vsum = _mm512_add_ps(vsum, v[q]);
		}
		sum = _mm512_reduce_add_ps(vsum);
		if (!acc) {   /* the only key tile: the softmax itself */
			__m512 inv = _mm512_set1_ps(1.0f / sum);
			for (int q = 0; q < nv; q++)
				_mm512_mask_storeu_ps(si + 16 * q, q == nv - 1 ? tail : 0xffff, _mm512_mul_ps(v[q], inv));
			m[i] = mx;
			l[i] = sum;
			continue;
		}
		for (int q = 0; q < nv; q++)
			_mm512_mask_storeu_ps(si + 16 * q, q == nv - 1 ? tail : 0xffff, v[q]);
		corr = m[i] == -INFINITY ? 0.0f
		                         : _mm512_cvtss_f32(avx512_exp(_mm512_set1_ps(m[i] - mx)));
		if (m[i] != -INFINITY && corr != 1.0f) {   /* acc holds earlier tiles */
			float *ai = acc + (int64_t)i * D;
			for (int d = 0; d < D; d += 16) {
				__mmask16 dm = D - d >= 16 ? 0xffff : (__mmask16)((1u << (D - d)) - 1);
				_mm512_mask_storeu_ps(ai + d, dm,
				                      _mm512_mul_ps(_mm512_maskz_loadu_ps(dm, ai + d), _mm512_set1_ps(corr)));
			}
		}
		l[i] = l[i] * corr + sum;
		m[i] = mx;
	}
}

__attribute__((target("avx512f")))
void avx512_gate(float *y, const float *a, const float *b, int64_t n)
{
	const __m512 one = _mm512_set1_ps(1.0f);

	for (int64_t i = 0; i < n; i += 16) {
		__mmask16 m = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
		__m512 e = avx512_exp(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_maskz_loadu_ps(m, b + i)));
		_mm512_mask_storeu_ps(y + i, m, _mm512_div_ps(_mm512_maskz_loadu_ps(m, a + i),
		                                              _mm512_add_ps(one, e)));
	}
}

/* ---- layer norm ------------------------------------------------------------ */

/* sum of x[0 .. d) (sq: of (x - mean)^2 instead), over two vector accumulators */
__attribute__((target("avx512f"), always_inline))
static inline float avx512_row_sum(const float *x, int d, int sq, float mean)
{
	__m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps(), vm = _mm512_set1_ps(mean);
	int q = 0;

	for (; q + 32 <= d; q += 32) {
		__m512 a = _mm512_loadu_ps(x + q), b = _mm512_loadu_ps(x + q + 16);
		if (sq) {
			a = _mm512_sub_ps(a, vm);
			b = _mm512_sub_ps(b, vm);
			s0 = _mm512_fmadd_ps(a, a, s0);
			s1 = _mm512_fmadd_ps(b, b, s1);
		} else {
			s0 = _mm512_add_ps(s0, a);
			s1 = _mm512_add_ps(s1, b);
		}
	}
	for (; q < d; q += 16) {
		__mmask16 m = d - q >= 16 ? 0xffff : (__mmask16)((1u << (d - q)) - 1);
		__m512 a = _mm512_maskz_loadu_ps(m, x + q);
		if (sq) {
			a = _mm512_maskz_sub_ps(m, a, vm);
			s0 = _mm512_fmadd_ps(a, a, s0);
		} else {
			s0 = _mm512_add_ps(s0, a);
		}
	}
	return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

__attribute__((target("avx512f")))
void avx512_layernorm(float *y, const float *x, int64_t rows, int d, const float *w, const float *b,
                  float eps)
{
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * d;
		float *yr = y + r * d;
		float mean = avx512_row_sum(xr, d, 0, 0.0f) / (float)d;
		float inv = 1.0f / sqrtf(avx512_row_sum(xr, d, 1, mean) / (float)d + eps);
		__m512 vm = _mm512_set1_ps(mean), vi = _mm512_set1_ps(inv);

		for (int q = 0; q < d; q += 16) {
			__mmask16 m = d - q >= 16 ? 0xffff : (__mmask16)((1u << (d - q)) - 1);
			__m512 t = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, xr + q), vm), vi);
			_mm512_mask_storeu_ps(yr + q, m, _mm512_fmadd_ps(t, _mm512_maskz_loadu_ps(m, w + q),
			                                                 _mm512_maskz_loadu_ps(m, b + q)));
		}
	}
}

/* ---- the triangle product ------------------------------------------------ */

/* x[ii, jj, 0..16) = sum_k a[ii, k, 0..16) * b[jj, k, 0..16) for ii < RI,
 * jj < RJ (RI <= 4, RJ <= 5: 20 accumulators); rows of a, b, x at strides
 * sa, sb, sxi, columns of x at sxj, k at sk */
__attribute__((target("avx512f"), always_inline))
static inline void avx512_tri_tile(const int RI, const int RJ, const float *a, int64_t sa,
                               const float *b, int64_t sb, int nk, int64_t ska, int64_t sk, float *x,
                               int64_t sxi, int64_t sxj, int add)
{
	__m512 acc[4][5];

	#pragma GCC unroll 4
	for (int ii = 0; ii < 4; ii++)
		#pragma GCC unroll 5
		for (int jj = 0; jj < 5; jj++)
			if (ii < RI && jj < RJ)
				acc[ii][jj] = add ? _mm512_loadu_ps(x + ii * sxi + jj * sxj) : _mm512_setzero_ps();
	for (int k = 0; k < nk; k++) {
		__m512 av[4], bv[5];
		#pragma GCC unroll 4
		for (int ii = 0; ii < 4; ii++)
			if (ii < RI) av[ii] = _mm512_loadu_ps(a + ii * sa + k * ska);
		#pragma GCC unroll 5
		for (int jj = 0; jj < 5; jj++)
			if (jj < RJ) bv[jj] = _mm512_loadu_ps(b + jj * sb + k * sk);
		#pragma GCC unroll 4
		for (int ii = 0; ii < 4; ii++)
			#pragma GCC unroll 5
			for (int jj = 0; jj < 5; jj++)
				if (ii < RI && jj < RJ) acc[ii][jj] = _mm512_fmadd_ps(av[ii], bv[jj], acc[ii][jj]);
	}
	#pragma GCC unroll 4
	for (int ii = 0; ii < 4; ii++)
		#pragma GCC unroll 5
		for (int jj = 0; jj < 5; jj++)
			if (ii < RI && jj < RJ) _mm512_storeu_ps(x + ii * sxi + jj * sxj, acc[ii][jj]);
}

#define AVX512_TRI_TILE(RI, RJ) \
	__attribute__((target("avx512f"))) \
	static void avx512_tri_tile##RI##x##RJ(const float *a, int64_t sa, const float *b, int64_t sb, \
	                                   int nk, int64_t ska, int64_t sk, float *x, int64_t sxi, \
	                                   int64_t sxj, int add) \
	{ avx512_tri_tile(RI, RJ, a, sa, b, sb, nk, ska, sk, x, sxi, sxj, add); }
AVX512_TRI_TILE(4, 5) AVX512_TRI_TILE(1, 5) AVX512_TRI_TILE(4, 1) AVX512_TRI_TILE(1, 1)

__attribute__((target("avx512f")))
void avx512_trimul_block(float *x, const float *a, const float *b, int ni, int nj, int nk, int c,
                     int c0, int j0, int j1, float *ap)
{
	int64_t sa = (int64_t)nk * c, sxi = (int64_t)nj * c;

	for (int k0 = 0; k0 < nk; k0 += AVX512_TRI_KB) {
		int kb = nk - k0 < AVX512_TRI_KB ? nk - k0 : AVX512_TRI_KB, add = k0 > 0;
		int64_t sp = (int64_t)kb * 16;
		/* ap: [ni][kb][16], a's rows for this k block and these channels, in
		 * sequence (a itself has them 4 c bytes apart) */
		for (int i = 0; i < ni; i++)
			for (int k = 0; k < kb; k++)
				_mm512_store_ps(ap + i * sp + k * 16,
				                _mm512_loadu_ps(a + (int64_t)i * sa + (int64_t)(k0 + k) * c + c0));
		for (int j = j0; j < j1; j += 5) {
			int RJ = j1 - j < 5 ? j1 - j : 5;
			for (int i = 0; i < ni; i += 4) {
				int RI = ni - i < 4 ? ni - i : 4;
				const float *ai = ap + i * sp;
				const float *bj = b + (int64_t)j * sa + (int64_t)k0 * c + c0;
				float *xij = x + (int64_t)i * sxi + (int64_t)j * c + c0;
				if (RI == 4 && RJ == 5) {
					avx512_tri_tile4x5(ai, sp, bj, sa, kb, 16, c, xij, sxi, c, add);
				} else if (RJ == 5) {
					for (int r = 0; r < RI; r++)
						avx512_tri_tile1x5(ai + r * sp, sp, bj, sa, kb, 16, c, xij + r * sxi, sxi, c, add);
				} else if (RI == 4) {
					for (int q = 0; q < RJ; q++)
						avx512_tri_tile4x1(ai, sp, bj + q * sa, sa, kb, 16, c, xij + (int64_t)q * c, sxi, c, add);
				} else {
					for (int r = 0; r < RI; r++)
						for (int q = 0; q < RJ; q++)
							avx512_tri_tile1x1(ai + r * sp, sp, bj + q * sa, sa, kb, 16, c,
							               xij + r * sxi + (int64_t)q * c, sxi, c, add);
				}
			}
		}
	}
}

#else   /* no kernel for this CPU or compiler: cpu_has_avx512() is 0, nothing else is called */

int cpu_has_avx512(void) { return 0; }

void avx512_pack_b(const be_gemm_t *g, int64_t b, int p, float *packed)
{
	(void)g; (void)b; (void)p; (void)packed;
}

void avx512_block(const be_gemm_t *g, int64_t b, int i0, int mi, int j0, int nj, const float *packed,
              float *P, int ct)
{
	(void)g; (void)b; (void)i0; (void)mi; (void)j0; (void)nj; (void)packed; (void)P; (void)ct;
}

void avx512_attn_rows(float *s, int64_t lds, int tq, int tk, const float *bias, int64_t bias_sq,
                  const float *mask, float *m, float *l, float *acc, int D)
{
	(void)s; (void)lds; (void)tq; (void)tk; (void)bias; (void)bias_sq; (void)mask; (void)m;
	(void)l; (void)acc; (void)D;
}

void avx512_gate(float *y, const float *a, const float *b, int64_t n)
{
	(void)y; (void)a; (void)b; (void)n;
}

void avx512_layernorm(float *y, const float *x, int64_t rows, int d, const float *w, const float *b,
                  float eps)
{
	(void)y; (void)x; (void)rows; (void)d; (void)w; (void)b; (void)eps;
}

void avx512_trimul_block(float *x, const float *a, const float *b, int ni, int nj, int nk, int c,
                     int c0, int j0, int j1, float *ap)
{
	(void)x; (void)a; (void)b; (void)ni; (void)nj; (void)nk; (void)c; (void)c0; (void)j0;
	(void)j1; (void)ap;
}

#endif
