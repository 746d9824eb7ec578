/* cuemu_wmma.c - the scheduler's side of the emulated nvcuda::wmma
 * (cuemu_mma.h): the bfloat16 / float16 conversions and the warp
 * collectives, run once per warp with every lane's part in hand.  Never
 * instrumented by ThreadSanitizer (like cuemu_fiber.c): reading the lanes'
 * fragments here is the register exchange of a tensor core, not a memory
 * access between CUDA threads. */
#include <math.h>
#include <string.h>

#include "cuemu_rt.h"

static uint32_t bits_of(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	return u;
}

static float float_of(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

uint16_t cuemu_f2bf(float f)
{
	uint32_t u = bits_of(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(u >> 16 | 0x40u);   /* quiet NaN */
	return (uint16_t)((u + 0x7fffu + (u >> 16 & 1u)) >> 16);
}

float cuemu_bf2f(uint16_t h)
{
	return float_of((uint32_t)h << 16);
}

uint16_t cuemu_f2h(float f)
{
	uint32_t u = bits_of(f), sign = u >> 16 & 0x8000u, x = u & 0x7fffffffu;

	if (x > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);     /* NaN */
	if (x >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);    /* >= 65520: infinity */
	if (x < 0x38800000u)                                         /* below 2^-14: subnormal */
		return (uint16_t)(sign | (uint32_t)nearbyintf(float_of(x) * 16777216.0f));
	return (uint16_t)(sign | (x + 0xfffu + (x >> 13 & 1u) - 0x38000000u) >> 13);
}

float cuemu_h2f(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = h >> 10 & 0x1fu, m = h & 0x3ffu;

	if (e == 0) return float_of(sign) + (sign ? -1.0f : 1.0f) * (float)m / 16777216.0f;
	if (e == 31) return float_of(sign | 0x7f800000u | m << 13);
	return float_of(sign | (e + 112) << 23 | m << 13);
}

void cuemu_wmma_uniform(void *const args[32])
{
	const cuemu_wmma_lane_t *l0 = args[0];
	for (int i = 1; i < 32; i++)
		if (memcmp(((const cuemu_wmma_lane_t *)args[i])->key, l0->key, sizeof l0->key))
			cuemu_fail("wmma operation with different arguments across the warp");
}

/* mat: [n] (row-major) = the warp's matrix from the lanes' parts of a
 * (which 0), b (1, both float16 if half, else bfloat16) or c (2) */
static void gather(float *mat, int n, void *const args[32], int which, int half)
{
	for (int l = 0; l < 32; l++) {
		const cuemu_wmma_lane_t *p = args[l];
		for (int e = 0; e < n / 32; e++) {
			int pos = cuemu_wmma_pos(l, e, n);
			if (which == 0) mat[pos] = half ? cuemu_h2f(((const uint16_t *)p->a)[e])
			                                : cuemu_bf2f(((const uint16_t *)p->a)[e]);
			else if (which == 1) mat[pos] = half ? cuemu_h2f(((const uint16_t *)p->b)[e])
			                                     : cuemu_bf2f(((const uint16_t *)p->b)[e]);
			else mat[pos] = p->c[e];
		}
	}
}

void cuemu_wmma_mma(void *const args[32])
{
	const cuemu_wmma_lane_t *l0 = args[0];
	int m = l0->m, n = l0->n, k = l0->k;
	float a[32 * 16], b[32 * 16], c[32 * 32];   /* [m, k], [k, n], [m, n]: at most 512 each */

	cuemu_wmma_uniform(args);
	gather(a, m * k, args, 0, l0->half);
	gather(b, k * n, args, 1, l0->half);
	gather(c, m * n, args, 2, 0);
	/* the products of bfloat16 / float16 values are exact in fp32 */
	for (int i = 0; i < m; i++)
		for (int j = 0; j < n; j++) {
			float s = c[i * n + j];
			for (int t = 0; t < k; t++) s += a[i * k + t] * b[t * n + j];
			c[i * n + j] = s;
		}
	for (int l = 0; l < 32; l++) {
		const cuemu_wmma_lane_t *p = args[l];
		for (int e = 0; e < m * n / 32; e++) p->d[e] = c[cuemu_wmma_pos(l, e, m * n)];
	}
}
