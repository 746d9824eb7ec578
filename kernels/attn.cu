/* attn.cu - fused streaming attention (online softmax), float32.
 *
 * o = softmax(scale * q k^T + bias + mask) v per (batch b, head h), strides
 * as in be_attn_t (backend.h); the optional gate (be_attn_t.g) is applied
 * as o is written: o / (1 + exp(-g)), no pass of its own; the rotary
 * embedding (be_attn_t.rope) as q and k are staged (cu_rope).  One block of
 * ATTN_WARPS warps owns BQ = ATTN_WARPS x QW consecutive queries of one
 * (b, h) and streams over the keys in tiles of ATTN_BK = 32, staged in
 * shared memory:
 *   Qs: [BQ, Dp]      queries, pre-multiplied by scale (Dp = D rounded up to 4,
 *                     zero-padded)
 *   Ks: [ATTN_BK, KS] keys (KS = Dp, or Dp + 4 so that the float4 reads of
 *                     eight lanes fall in distinct banks)
 *   Vs: [ATTN_BK, Dp] values
 *   Ps: [ATTN_WARPS, ATTN_BK, QW] each warp's probabilities of the tile
 * Each warp owns QW queries: lane j scores key j of the tile against them,
 * the warp reduces the running maximum and sum with shuffles, then lane t
 * accumulates output columns t, t + 32, ... in registers.  Only the
 * [BQ, ATTN_BK] tile of scores ever exists.
 */
#include "common.cuh"

#define ATTN_WARPS 4
#define ATTN_BK 32

static __host__ __device__ int attn_ks(int dp)
{
	return (dp / 4) % 2 ? dp : dp + 4;
}

/* shared memory of one block, in floats */
static __host__ __device__ int64_t attn_smem_floats(int dp, int qw)
{
	return (int64_t)ATTN_WARPS * qw * dp + ATTN_BK * attn_ks(dp) + ATTN_BK * dp +
	       ATTN_WARPS * ATTN_BK * qw;
}

/* grid: one block per (query tile, h, b), flattened as
 * blockIdx.x = (b * H + h) * ntiles + tile; D <= DMAX */
template <int DMAX, int QW>
static __global__ void __launch_bounds__(ATTN_WARPS * 32)
k_attn(be_attn_t a, int ntiles)
{
	CU_DYN_SHARED(float4, attn_smem4);
	const int BQ = ATTN_WARPS * QW, DT = DMAX / 32;
	const int D = a.D, dp = (D + 3) & ~3, ks = attn_ks(dp);
	float *Qs = (float *)attn_smem4, *Ks = Qs + BQ * dp, *Vs = Ks + ATTN_BK * ks,
	      *Ps = Vs + ATTN_BK * dp;
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, tid = threadIdx.x;
	const int tile = blockIdx.x % ntiles, bh = blockIdx.x / ntiles;
	const int h = bh % a.H, b = bh / a.H, i0 = tile * BQ;
	float *ps = Ps + warp * ATTN_BK * QW;

	const float *qb = a.q + b * a.q_sb + h * a.q_sh;
	for (int e = tid; e < BQ * dp; e += ATTN_WARPS * 32) {
		int r = e / dp, c = e - r * dp;
		const float *x = qb + (int64_t)(i0 + r) * a.q_sl;
		Qs[e] = i0 + r < a.Lq && c < D ? a.scale * (a.rope ? cu_rope(x, c, D, a.rope, i0 + r) : x[c])
		                               : 0.0f;
	}

	float acc[QW][DT], m[QW], l[QW];
	for (int qi = 0; qi < QW; qi++) {
		m[qi] = -INFINITY;
		l[qi] = 0.0f;
		for (int t = 0; t < DT; t++) acc[qi][t] = 0.0f;
	}
	const float *kb = a.k + b * a.k_sb + h * a.k_sh, *vb = a.v + b * a.v_sb + h * a.v_sh;
	const float *mask = a.mask ? a.mask + b * a.mask_sb : NULL;
	const float *bias = a.bias ? a.bias + b * a.bias_sb + h * a.bias_sh : NULL;

	for (int j0 = 0; j0 < a.Lk; j0 += ATTN_BK) {
		int tk = a.Lk - j0 < ATTN_BK ? a.Lk - j0 : ATTN_BK;
		__syncthreads();   /* Qs written; the previous tile (Ks, Vs, Ps) consumed */
		for (int e = tid; e < ATTN_BK * dp; e += ATTN_WARPS * 32) {
			int r = e / dp, c = e - r * dp;
			int ok = r < tk && c < D;
			const float *x = kb + (int64_t)(j0 + r) * a.k_sl;
			Ks[r * ks + c] = !ok ? 0.0f : a.rope ? cu_rope(x, c, D, a.rope, j0 + r) : x[c];
			Vs[e] = ok ? vb[(int64_t)(j0 + r) * a.v_sl + c] : 0.0f;
		}
		__syncthreads();

		/* scores of key j0 + lane against this warp's queries */
		float s[QW];
		for (int qi = 0; qi < QW; qi++) s[qi] = 0.0f;
		const float4 *kr = (const float4 *)(Ks + lane * ks);
		const float4 *qr = (const float4 *)(Qs + warp * QW * dp);
		for (int d4 = 0; d4 < dp / 4; d4++) {
			float4 kv = kr[d4];
			for (int qi = 0; qi < QW; qi++) {
				float4 qv = qr[qi * (dp / 4) + d4];
				s[qi] += qv.x * kv.x + qv.y * kv.y + qv.z * kv.z + qv.w * kv.w;
			}
		}
		int j = j0 + lane;
		int live = lane < tk && (!mask || mask[j] != 0.0f);
		for (int qi = 0; qi < QW; qi++) {
			int iq = i0 + warp * QW + qi;
			float v = -INFINITY;
			if (live) v = s[qi] + (bias && iq < a.Lq ? bias[(int64_t)iq * a.bias_sq + j] : 0.0f);
			float mx = fmaxf(m[qi], cu_warp_max(v));
			float p = 0.0f, corr = 1.0f;
			if (mx != -INFINITY) {
				p = expf(v - mx);
				corr = expf(m[qi] - mx);
			}
			l[qi] = l[qi] * corr + cu_warp_sum(p);
			m[qi] = mx;
			for (int t = 0; t < DT; t++) acc[qi][t] *= corr;
			ps[lane * QW + qi] = p;
		}
		__syncwarp();

		/* acc += p v over the tile's keys */
		for (int jj = 0; jj < tk; jj++) {
			float p[QW];
			for (int q4 = 0; q4 < QW / 4; q4++) {
				float4 pv = ((const float4 *)(ps + jj * QW))[q4];
				p[4 * q4] = pv.x; p[4 * q4 + 1] = pv.y; p[4 * q4 + 2] = pv.z; p[4 * q4 + 3] = pv.w;
			}
			const float *vr = Vs + jj * dp;
			for (int t = 0; t < DT; t++) {
				int d = lane + 32 * t;
				float vv = d < dp ? vr[d] : 0.0f;
				for (int qi = 0; qi < QW; qi++) acc[qi][t] += p[qi] * vv;
			}
		}
	}

	for (int qi = 0; qi < QW; qi++) {
		int iq = i0 + warp * QW + qi;
		if (iq >= a.Lq) break;
		float inv = l[qi] > 0.0f ? 1.0f / l[qi] : 0.0f;
		int64_t off = b * a.o_sb + (int64_t)iq * a.o_sl + h * a.o_sh;
		for (int t = 0; t < DT; t++) {
			int d = lane + 32 * t;
			if (d >= D) continue;
			float r = acc[qi][t] * inv;
			a.o[off + d] = a.g ? r / (1.0f + expf(-a.g[off + d])) : r;   /* the BE_GATE formula */
		}
	}
}

template <int DMAX, int QW>
static int attn_launch(cudaStream_t s, const be_attn_t *a)
{
	const int BQ = ATTN_WARPS * QW;
	int ntiles = (a->Lq + BQ - 1) / BQ;
	int64_t nblocks = (int64_t)ntiles * a->H * a->B;
	size_t smem = sizeof(float) * (size_t)attn_smem_floats((a->D + 3) & ~3, QW);

	if (nblocks > 0x7fffffff) return -EINVAL;
	CU_LAUNCH((unsigned)nblocks, ATTN_WARPS * 32, smem, s, k_attn<DMAX, QW>)(*a, ntiles);
	return cu_launched();
}

/* the instances cu_attn launches */
extern "C" int cu_attn_smem_init(int bytes)
{
	int rc = cu_smem_allow((const void *)k_attn<32, 8>, bytes);
	if (!rc) rc = cu_smem_allow((const void *)k_attn<64, 8>, bytes);
	if (!rc) rc = cu_smem_allow((const void *)k_attn<128, 4>, bytes);
	if (!rc) rc = cu_smem_allow((const void *)k_attn<256, 4>, bytes);
	return rc;
}

extern "C" int cu_attn(cudaStream_t s, const be_attn_t *a)
{
	if (a->B < 0 || a->H < 0 || a->Lq < 0 || a->Lk < 0 || a->D <= 0 || a->D > CU_ATTN_DMAX)
		return -EINVAL;
	if ((int64_t)a->B * a->H * a->Lq == 0) return 0;
	if (a->D <= 32)  return attn_launch<32, 8>(s, a);
	if (a->D <= 64)  return attn_launch<64, 8>(s, a);
	if (a->D <= 128) return attn_launch<128, 4>(s, a);
	return attn_launch<256, 4>(s, a);
}
