/* cuemu_ptx.c - the scheduler's side of the emulated PTX primitives
 * (cuemu_ptx.h): mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 and
 * ldmatrix.sync.aligned.m8n8.x1/x2/x4(.trans).b16, run once per warp with
 * every lane's registers in hand, distributed as the PTX ISA's "Matrix
 * fragments for mma.m16n8k16 with floating point type" and "ldmatrix"
 * sections lay them out.  With g = lane / 4 and t = lane % 4:
 *   A (16 x 16, row):  register i (i < 4) holds a[2i] (low half), a[2i+1];
 *                      element e of the lane is A[g + 8 ((e / 2) % 2)]
 *                      [2 t + e % 2 + 8 (e / 4)]
 *   B (16 x 8, col):   register i (i < 2): element e is B[2 t + e % 2 +
 *                      8 (e / 2)][g]
 *   C, D (16 x 8):     c[e] = C[g + 8 (e / 2)][2 t + e % 2]
 *   ldmatrix:          matrix i (8 x 8 b16) has its row r at the address
 *                      of lane 8 i + r; lane l's register i is row l / 4,
 *                      columns 2 (l % 4), 2 (l % 4) + 1 of matrix i, or of
 *                      its transpose with .trans
 * Never instrumented by ThreadSanitizer (like cuemu_wmma.c): this is the
 * register exchange of a warp, not a memory access between CUDA threads. */
#include "cuemu_rt.h"

static uint16_t half_of(uint32_t r, int hi)
{
	return (uint16_t)(hi ? r >> 16 : r & 0xffffu);
}

void cuemu_mma_16816(void *const args[32])
{
	float a[16][16], b[16][8], c[16][8];

	for (int l = 0; l < 32; l++) {
		const cuemu_mma_lane_t *p = args[l];
		int g = l / 4, t = l % 4;
		for (int e = 0; e < 8; e++)
			a[g + 8 * (e / 2 % 2)][2 * t + e % 2 + 8 * (e / 4)] = cuemu_bf2f(half_of(p->a[e / 2], e % 2));
		for (int e = 0; e < 4; e++) {
			b[2 * t + e % 2 + 8 * (e / 2)][g] = cuemu_bf2f(half_of(p->b[e / 2], e % 2));
			c[g + 8 * (e / 2)][2 * t + e % 2] = p->c[e];
		}
	}
	/* exact products of bf16 values, fp32 sums in k order */
	for (int i = 0; i < 16; i++)
		for (int j = 0; j < 8; j++) {
			float s = c[i][j];
			for (int k = 0; k < 16; k++) s += a[i][k] * b[k][j];
			c[i][j] = s;
		}
	for (int l = 0; l < 32; l++) {
		const cuemu_mma_lane_t *p = args[l];
		int g = l / 4, t = l % 4;
		for (int e = 0; e < 4; e++) p->d[e] = c[g + 8 * (e / 2)][2 * t + e % 2];
	}
}

void cuemu_ldmatrix(void *const args[32])
{
	const cuemu_ldm_lane_t *l0 = args[0];
	uint16_t m[4][8][8];

	for (int l = 0; l < 32; l++) {
		const cuemu_ldm_lane_t *p = args[l];
		if (p->n != l0->n || p->trans != l0->trans)
			cuemu_fail("ldmatrix with different shapes across the warp");
		if (l < 8 * l0->n)
			for (int c = 0; c < 8; c++) m[l / 8][l % 8][c] = p->row[c];
	}
	for (int l = 0; l < 32; l++) {
		const cuemu_ldm_lane_t *p = args[l];
		int r = l / 4, c = 2 * (l % 4);
		for (int i = 0; i < l0->n; i++)
			p->out[i] = l0->trans ? (uint32_t)m[i][c][r] | (uint32_t)m[i][c + 1][r] << 16
			                      : (uint32_t)m[i][r][c] | (uint32_t)m[i][r][c + 1] << 16;
	}
}
