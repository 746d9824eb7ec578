/* flash_attn.cu - attention on tensor cores in the FlashAttention-2 design
 * (bf16 mma.sync, fp32 accumulators and softmax in registers): the kernel
 * of be_attn_t (backend.h) when the backend's precision is bf16.
 *
 * o = softmax(scale * q k^T + bias + mask) v per (batch row b, head h),
 * head dimension D <= CU_FLASH_DMAX, zero-padded to DP = 16, 32 or 64.  A
 * block takes FA_BQ = 64 queries of rb batch rows (rb = 2 where the bias is
 * shared by the batch or absent: triangle attention's one [H, L, L] bias
 * serves every row of the pair tensor; else 1), one head; 4 warps per row,
 * each owning 16 queries whose q (rotated, scaled, rounded to bf16) stays
 * in registers as mma A fragments.  The block streams over the keys in
 * tiles of FA_BK = 64, double-buffered through cp.async (kernels/mma.cuh):
 * while tile t is computed, tile t + 1's raw k, v (fp32, every row of the
 * block) and bias (fp32, shared by the rows) are in flight.  Per tile the
 * block converts k (rotated on load where be_attn_t.rope is given) and v
 * to bf16 once, and the dropped keys of each row to an additive 0 / -inf;
 * then each warp, in registers:
 *   S = bias + q k^T             (mma m16n8k16; the accumulators start at
 *                                 the bias, ldmatrix of k)
 *   S += mask                    (only in tiles where a row drops keys)
 *   online softmax               (row max over the quad by shuffles, exp2
 *                                 of one FFMA; the stabiliser renewed,
 *                                 and O rescaled, only in a tile where a
 *                                 row's maximum exceeds it by more than
 *                                 FA_SLACK, in log2 units)
 *   O = O exp(m_old - m_new) + P V   (P: S's accumulators rounded to bf16
 *                                 in place as A fragments, ldmatrix.trans
 *                                 of v; the row sums l = P 1 by mma too)
 * and at the end writes o = O / l, gated by 1 / (1 + exp(-g)) where
 * be_attn_t.g is given (the BE_GATE formula), once.  Only a [16, 64]
 * tile of scores exists per warp, never an [Lq, Lk] matrix.
 *
 * Shared memory (CU_DYN_SHARED, on 128 bytes; byte offsets from
 * fa_layout), two stages of raw tiles then the converted ones:
 *   kraw, vraw [stage]: [rb, FA_BK, DP] fp32   cp.async, zero past D / Lk
 *   braw [stage]:       [FA_BQ, FA_BK] fp32    the bias tile, zero past Lq, Lk
 *                                              (and throughout without a bias)
 *   kb, vb:             [rb, FA_BK, DP + 8] bf16   (rows of 16-byte multiples)
 *   madd:               [rb, FA_BK] fp32       0 for a live key, else -inf
 *   drop:               [rb] int               the tile drops a key of the row
 * Index arithmetic within a row is 32-bit (the launcher checks it fits),
 * the per-row bases 64-bit, computed once.  16-byte copies where every
 * pointer and stride allows them, 4-byte copies otherwise.
 */
#include "common.cuh"
#include "mma.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "flash_attn.cu: bf16 mma.sync needs sm_80 or newer (configure --with-cuda-arch)"
#endif

#define FA_BQ 64       /* queries of a block (4 warps of 16 per row) */
#define FA_BK 64       /* keys of a tile */
#define FA_VEC_KV 1u   /* fa_vec bits: k and v by 16-byte copies */
#define FA_VEC_BIAS 2u /* the bias by 16-byte copies */
#define FA_SLACK 8.0f  /* log2 of the largest probability before the stabiliser is renewed */

/* byte offsets of the shared arrays of one block (see the top); stage: the
 * size of one stage of raw tiles; bytes: the size to request */
typedef struct {
	int vraw, braw, stage, kb, vb, madd, drop, bytes;
} fa_layout_t;

static __host__ __device__ fa_layout_t fa_layout(int dp, int rb)
{
	fa_layout_t y;
	y.vraw = rb * FA_BK * dp * 4;
	y.braw = 2 * y.vraw;
	y.stage = y.braw + FA_BQ * FA_BK * 4;
	y.kb = 2 * y.stage;
	y.vb = y.kb + rb * FA_BK * (dp + 8) * 2;
	y.madd = y.vb + rb * FA_BK * (dp + 8) * 2;
	y.drop = y.madd + rb * FA_BK * 4;
	y.bytes = y.drop + 16;
	return y;
}

/* element c of query row iq: rotated where a.rope is given, 0 past D, Lq */
static __device__ __forceinline__ float fa_q(const be_attn_t &a, const float *qb, int ok, int iq,
                                             int qsl, int c)
{
	if (!ok || iq >= a.Lq || c >= a.D) return 0.0f;
	const float *qr = qb + iq * qsl;
	return a.rope ? cu_rope(qr, c, a.D, a.rope, iq) : qr[c];
}

/* grid: blockIdx.x = (batch group * H + h) * ntiles + query tile; block:
 * 128 RB threads (RB = rb, 1 or 2); vec: FA_VEC_* bits */
template <int DP, int RB>
static __global__ void __launch_bounds__(RB * 128)
k_flash_attn(be_attn_t a, int ntiles, unsigned vec)
{
	CU_DYN_SHARED(unsigned char, fa_smem);
	const int LDK = DP + 8, KS = DP / 16, NT = DP / 8, KC = DP / 4;
	const float L2E = 1.44269504088896341f;
	const int rb = RB, nthr = RB * 128, tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
	const int g = lane / 4, t = lane % 4;
	const int tile = blockIdx.x % ntiles, h = blockIdx.x / ntiles % a.H, bg = blockIdx.x / ntiles / a.H;
	const int r = warp / 4, qw = warp % 4, b0 = bg * rb, b = b0 + r, i0 = tile * FA_BQ;
	const int B = a.B, Lk = a.Lk, D = a.D, nrows = B - b0 < rb ? B - b0 : rb;
	const fa_layout_t y = fa_layout(DP, rb);
	/* the block's bases; offsets from them fit 32 bits (flash_launch) */
	const float *kbase = a.k + (int64_t)b0 * a.k_sb + (int64_t)h * a.k_sh;
	const float *vbase = a.v + (int64_t)b0 * a.v_sb + (int64_t)h * a.v_sh;
	const float *bbase = a.bias ? a.bias + (int64_t)b0 * a.bias_sb + (int64_t)h * a.bias_sh + i0 * a.bias_sq
	                            : NULL;
	const int ksb = (int)a.k_sb, ksl = (int)a.k_sl, vsb = (int)a.v_sb, vsl = (int)a.v_sl;
	const int bsq = (int)a.bias_sq, nq = a.Lq - i0 < FA_BQ ? a.Lq - i0 : FA_BQ;

	/* the 16-byte copies of this thread, the same in every tile: k / v
	 * chunk i is row kr0 + i KSTEP (of the block's rb x FA_BK), columns
	 * kc .. kc + 3, at kofs[i] / vofs[i] from the tile's base; kjj[i] its
	 * key in the tile, FA_BK where the row is past B or the columns past
	 * D (then kofs, vofs 0: an address that is never read); bias chunk i
	 * is query row bq0 + i BSTEP, keys bc .. bc + 3, at bofs[i] (0 past
	 * Lq, where bit i of bok is clear) */
	enum { NKV = KC / 2, NB = FA_BQ * FA_BK / 4 / (RB * 128), KSTEP = RB * 128 / KC,
	       BSTEP = RB * 128 / (FA_BK / 4) };
	const int kc = tid % KC * 4, bc = tid % (FA_BK / 4) * 4, kr0 = tid / KC, bq0 = tid / (FA_BK / 4);
	int kjj[NKV], kofs[NKV], vofs[NKV], bofs[NB];
	unsigned bok = 0;
#pragma unroll
	for (int i = 0; i < NKV; i++) {
		int row = kr0 + i * KSTEP, rr = row / FA_BK, ok = rr < nrows && kc < D;
		kjj[i] = ok ? row % FA_BK : FA_BK;
		kofs[i] = ok ? rr * ksb + row % FA_BK * ksl + kc : 0;
		vofs[i] = ok ? rr * vsb + row % FA_BK * vsl + kc : 0;
	}
#pragma unroll
	for (int i = 0; i < NB; i++) {
		int q = bq0 + i * BSTEP;
		bofs[i] = q < nq ? q * bsq + bc : 0;
		bok |= (unsigned)(q < nq) << i;
	}

	/* tile kt's raw k, v and bias into stage st, one cp.async group */
	auto issue = [&](int kt, int st) {
		int j0 = kt * FA_BK, nk = Lk - j0 < FA_BK ? Lk - j0 : FA_BK;
		float *kr = (float *)(fa_smem + st * y.stage), *vr = (float *)(fa_smem + st * y.stage + y.vraw);
		float *br = (float *)(fa_smem + st * y.stage + y.braw);
		if (vec & FA_VEC_KV) {
			const float *kt0 = kbase + j0 * ksl, *vt0 = vbase + j0 * vsl;
#pragma unroll
			for (int i = 0; i < NKV; i++) {
				int n = kjj[i] < nk ? 16 : 0;
				cu_cp_async_16(kr + (kr0 + i * KSTEP) * DP + kc, kt0 + kofs[i], n);
				cu_cp_async_16(vr + (kr0 + i * KSTEP) * DP + kc, vt0 + vofs[i], n);
			}
		} else {
			for (int e = tid; e < rb * FA_BK * DP; e += nthr) {
				int rr = e / (FA_BK * DP), jj = e / DP % FA_BK, c = e % DP;
				int ok = rr < nrows && jj < nk && c < D;
				int ko = ok ? rr * ksb + (j0 + jj) * ksl + c : 0, vo = ok ? rr * vsb + (j0 + jj) * vsl + c : 0;
				cu_cp_async_4(kr + (rr * FA_BK + jj) * DP + c, kbase + ko, ok ? 4 : 0);
				cu_cp_async_4(vr + (rr * FA_BK + jj) * DP + c, vbase + vo, ok ? 4 : 0);
			}
		}
		if (bbase && (vec & FA_VEC_BIAS)) {
			int n = bc < nk ? (nk - bc < 4 ? nk - bc : 4) * 4 : 0;
#pragma unroll
			for (int i = 0; i < NB; i++)
				cu_cp_async_16(br + (bq0 + i * BSTEP) * FA_BK + bc, bbase + j0 + bofs[i], bok >> i & 1 ? n : 0);
		} else if (bbase) {
			for (int e = tid; e < FA_BQ * FA_BK; e += nthr) {
				int q = e / FA_BK, jj = e % FA_BK, ok = q < nq && jj < nk;
				cu_cp_async_4(br + q * FA_BK + jj, bbase + (ok ? q * bsq + j0 + jj : 0), ok ? 4 : 0);
			}
		}
		cu_cp_async_commit();
	};

	const int nkt = (Lk + FA_BK - 1) / FA_BK;
	if (!bbase)   /* no bias: both stages' bias tiles 0, never written again */
		for (int e = tid; e < 2 * FA_BQ * FA_BK; e += nthr)
			((float *)(fa_smem + e / (FA_BQ * FA_BK) * y.stage + y.braw))[e % (FA_BQ * FA_BK)] = 0.0f;
	if (nkt > 0) issue(0, 0);

	/* this warp's 16 queries as A fragments: register i of k-step ks holds
	 * (q[r][k], q[r][k + 1]) with r = g + 8 (i % 2), k = 16 ks + 2 t + 8 (i / 2) */
	uint32_t qf[KS][4];
	{
		const float *qb = a.q + (int64_t)b * a.q_sb + (int64_t)h * a.q_sh;
		const int qsl = (int)a.q_sl, ok = b < B;
		for (int ks = 0; ks < KS; ks++)
			for (int i = 0; i < 4; i++) {
				int iq = i0 + qw * 16 + g + 8 * (i % 2), c = 16 * ks + 2 * t + 8 * (i / 2);
				qf[ks][i] = cu_bf16x2(fa_q(a, qb, ok, iq, qsl, c) * a.scale,
				                      fa_q(a, qb, ok, iq, qsl, c + 1) * a.scale);
			}
	}
	/* O: [16, DP] as NT accumulators (rows g, g + 8; columns 8 n + 2 t, + 1);
	 * l: the sums of rows g, g + 8 as an accumulator (every column the
	 * same); mb: the stabilisers of rows g, g + 8 (log2 units; -inf until
	 * the row has a live key), nb = -mb (0 until then) */
	float o[NT][4], l[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
	float mb[2] = { -INFINITY, -INFINITY }, nb[2] = { 0.0f, 0.0f };
	for (int n = 0; n < NT; n++)
		for (int e = 0; e < 4; e++) o[n][e] = 0.0f;

	uint16_t *kb = (uint16_t *)(fa_smem + y.kb), *vb = (uint16_t *)(fa_smem + y.vb);
	float *madd = (float *)(fa_smem + y.madd);
	int *drop = (int *)(fa_smem + y.drop);
	const int cvr = tid / KC, cvc = tid % KC * 4;   /* this thread's first row and columns to convert */
	for (int kt = 0; kt < nkt; kt++) {
		const int st = kt & 1, j0 = kt * FA_BK;
		cu_cp_async_wait<0>();
		__syncthreads();   /* tile kt landed; tile kt - 1 consumed */
		if (kt + 1 < nkt) issue(kt + 1, st ^ 1);

		/* k (rotated) and v to bf16; the dropped keys */
		const float *kr = (const float *)(fa_smem + st * y.stage);
		const float *vr = (const float *)(fa_smem + st * y.stage + y.vraw);
		if (a.rope) {
			for (int e = tid; e < rb * FA_BK * KC; e += nthr) {
				int row = e / KC, c = e % KC * 4, rot = j0 + row % FA_BK < Lk;
				const float *kx = kr + row * DP;
				float k4[4];   /* rows past Lk are zero, and the table ends at Lk */
				for (int u = 0; u < 4; u++)
					k4[u] = rot && c + u < D ? cu_rope(kx, c + u, D, a.rope, j0 + row % FA_BK) : kx[c + u];
				uint32_t *kd = (uint32_t *)(kb + row * LDK + c);
				kd[0] = cu_bf16x2(k4[0], k4[1]);
				kd[1] = cu_bf16x2(k4[2], k4[3]);
			}
		} else {
			for (int row = cvr; row < rb * FA_BK; row += nthr / KC) {
				const float *kx = kr + row * DP + cvc;
				uint32_t *kd = (uint32_t *)(kb + row * LDK + cvc);
				kd[0] = cu_bf16x2(kx[0], kx[1]);
				kd[1] = cu_bf16x2(kx[2], kx[3]);
			}
		}
		for (int row = cvr; row < rb * FA_BK; row += nthr / KC) {
			const float *vx = vr + row * DP + cvc;
			uint32_t *vd = (uint32_t *)(vb + row * LDK + cvc);
			vd[0] = cu_bf16x2(vx[0], vx[1]);
			vd[1] = cu_bf16x2(vx[2], vx[3]);
		}
		if (qw == 0) {   /* the first warp of each row: its keys' mask */
			int dropped = 0;
			for (int jj = lane; jj < FA_BK; jj += 32) {
				int j = j0 + jj;
				int live = b < B && j < Lk && (!a.mask || a.mask[b * a.mask_sb + j] != 0.0f);
				madd[r * FA_BK + jj] = live ? 0.0f : -INFINITY;
				dropped |= !live;
			}
			for (int s = 16; s > 0; s >>= 1) dropped |= __shfl_xor_sync(0xffffffffu, dropped, s);
			if (lane == 0) drop[r] = dropped;
		}
		__syncthreads();

		/* S = bias + Q K^T: FA_BK / 8 accumulators, key 8 n + 2 t (+1) */
		float s[FA_BK / 8][4];
		const float *br = (const float *)(fa_smem + st * y.stage + y.braw) + (qw * 16 + g) * FA_BK + 2 * t;
		for (int n = 0; n < FA_BK / 8; n++)   /* 8-byte loads: straight into the accumulators' pairs */
			for (int rh = 0; rh < 2; rh++) {
				float2 b2 = *(const float2 *)(br + rh * 8 * FA_BK + 8 * n);
				s[n][2 * rh] = b2.x;
				s[n][2 * rh + 1] = b2.y;
			}
		/* ldmatrix: lane 8 mi + ri addresses key 8 n + ri, columns 8 mi on */
		const uint16_t *krow = kb + (r * FA_BK + lane % 8) * LDK + lane / 8 * 8;
		for (int n = 0; n < FA_BK / 8; n++) {
			const uint16_t *kn = krow + 8 * n * LDK;
			if (KS == 1) {
				uint32_t kf[2];
				cu_ldmatrix_x2(kf, kn);
				cu_mma_16816_bf16(s[n], qf[0], kf, s[n]);
			} else {
				for (int kp = 0; kp < KS / 2; kp++) {
					uint32_t kf[4];
					cu_ldmatrix_x4(kf, kn + 32 * kp);
					cu_mma_16816_bf16(s[n], qf[2 * kp], kf, s[n]);
					cu_mma_16816_bf16(s[n], qf[2 * kp + 1], kf + 2, s[n]);
				}
			}
		}
		if (drop[r]) {
			const float *mr = madd + r * FA_BK + 2 * t;
			for (int n = 0; n < FA_BK / 8; n++)
				for (int e = 0; e < 4; e++) s[n][e] += mr[8 * n + e % 2];
		}

		/* online softmax of rows g (hr 0) and g + 8 (hr 1), in log2 units:
		 * the stabiliser mb is renewed only in a tile where a row's
		 * maximum exceeds it by more than FA_SLACK (P is then at most
		 * 2^FA_SLACK: no overflow, the same relative roundings) */
		float mx[2];
		for (int hr = 0; hr < 2; hr++) {
			float v = -INFINITY;
			for (int n = 0; n < FA_BK / 8; n++) v = fmaxf(v, fmaxf(s[n][2 * hr], s[n][2 * hr + 1]));
			v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
			v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
			mx[hr] = v * L2E;
		}
		if (__any_sync(0xffffffffu, mx[0] > mb[0] + FA_SLACK || mx[1] > mb[1] + FA_SLACK)) {
			for (int hr = 0; hr < 2; hr++) {
				float mn = fmaxf(mb[hr], mx[hr]), mu = mn == -INFINITY ? 0.0f : mn;
				float corr = cu_exp2(mb[hr] - mu);   /* 0 while the row had no live key */
				mb[hr] = mn;
				nb[hr] = -mu;
				l[2 * hr] *= corr;
				l[2 * hr + 1] *= corr;
				for (int n = 0; n < NT; n++) {
					o[n][2 * hr] *= corr;
					o[n][2 * hr + 1] *= corr;
				}
			}
		}
		/* O += P V, P of keys 16 kk .. 16 kk + 15 as an A fragment:
		 * accumulators 2 kk and 2 kk + 1 of S; l += P 1 (the row sums on the
		 * tensor cores, of the rounded P that weighs v); ldmatrix.trans:
		 * lane 8 mi + ri addresses key 16 kk + 8 (mi % 2) + ri, columns
		 * 8 (mi / 2) on */
		const uint16_t *vrow = vb + (r * FA_BK + lane % 8 + 8 * (lane / 8 % 2)) * LDK + lane / 16 * 8;
		const uint32_t ones[2] = { 0x3f803f80u, 0x3f803f80u };   /* bf16 pairs of 1 */
		for (int kk = 0; kk < FA_BK / 16; kk++) {
			uint32_t pf[4];
			for (int i = 0; i < 4; i++) {
				const float *sv = s[2 * kk + i / 2] + 2 * (i % 2);
				pf[i] = cu_bf16x2(cu_exp2(fmaf(sv[0], L2E, nb[i % 2])), cu_exp2(fmaf(sv[1], L2E, nb[i % 2])));
			}
			cu_mma_16816_bf16(l, pf, ones, l);
			for (int dn = 0; dn < NT / 2; dn++) {
				uint32_t vf[4];
				cu_ldmatrix_x4_trans(vf, vrow + 16 * kk * LDK + 16 * dn);
				cu_mma_16816_bf16(o[2 * dn], pf, vf, o[2 * dn]);
				cu_mma_16816_bf16(o[2 * dn + 1], pf, vf + 2, o[2 * dn + 1]);
			}
		}
	}

	/* o = O / l, gated, written once: rows g, g + 8, columns 8 n + 2 t (+1) */
	for (int hr = 0; hr < 2; hr++) {
		float ls = l[2 * hr];
		int iq = i0 + qw * 16 + g + 8 * hr;
		if (b >= B || iq >= a.Lq) continue;
		float inv = ls > 0.0f ? 1.0f / ls : 0.0f;
		int64_t off = (int64_t)b * a.o_sb + (int64_t)iq * a.o_sl + (int64_t)h * a.o_sh;
		for (int n = 0; n < NT; n++)
			for (int e = 0; e < 2; e++) {
				int c = 8 * n + 2 * t + e;
				if (c >= D) continue;
				float x = o[n][2 * hr + e] * inv;
				a.o[off + c] = a.g ? x / (1.0f + expf(-a.g[off + c])) : x;   /* the BE_GATE formula */
			}
	}
}

/* every stride a multiple of 4 floats and the base on 16 bytes */
static int fa_vec4(const float *p, int64_t s1, int64_t s2, int64_t s3)
{
	return (uintptr_t)p % 16 == 0 && s1 % 4 == 0 && s2 % 4 == 0 && s3 % 4 == 0;
}

template <int DP, int RB>
static int flash_launch(cudaStream_t s, const be_attn_t *a)
{
	const int rb = RB;
	int ntiles = (a->Lq + FA_BQ - 1) / FA_BQ;
	int64_t nblocks = (int64_t)ntiles * a->H * ((a->B + rb - 1) / rb);
	size_t smem = (size_t)fa_layout(DP, rb).bytes;
	unsigned vec = (a->D % 4 == 0 && fa_vec4(a->k, a->k_sb, a->k_sl, a->k_sh) &&
	                fa_vec4(a->v, a->v_sb, a->v_sl, a->v_sh) ? FA_VEC_KV : 0) |
	               (a->bias && fa_vec4(a->bias, a->bias_sb, a->bias_sh, a->bias_sq) ? FA_VEC_BIAS : 0);
	/* the kernel's 32-bit offsets within a block's rows */
	const int64_t lim = INT32_MAX;
	if (nblocks > lim || (rb - 1) * a->k_sb + (int64_t)a->Lk * a->k_sl > lim ||
	    (rb - 1) * a->v_sb + (int64_t)a->Lk * a->v_sl > lim || (int64_t)a->Lq * a->q_sl > lim ||
	    (a->bias && (int64_t)a->Lq * a->bias_sq > lim) || (a->mask && (int64_t)a->B * a->mask_sb > lim))
		return -EINVAL;
	CU_LAUNCH((unsigned)nblocks, 128 * RB, smem, s, k_flash_attn<DP, RB>)(*a, ntiles, vec);
	return cu_launched();
}

extern "C" int cu_flash_attn(cudaStream_t s, const be_attn_t *a)
{
	if (a->B < 0 || a->H < 0 || a->Lq < 0 || a->Lk < 0 || a->D <= 0 || a->D > CU_FLASH_DMAX)
		return -EINVAL;
	if ((int64_t)a->B * a->H * a->Lq == 0) return 0;
	/* two batch rows a block where they share the bias (or have none) */
	if (a->B >= 2 && (!a->bias || !a->bias_sb)) {
		if (a->D <= 16) return flash_launch<16, 2>(s, a);
		if (a->D <= 32) return flash_launch<32, 2>(s, a);
		return flash_launch<64, 2>(s, a);
	}
	if (a->D <= 16) return flash_launch<16, 1>(s, a);
	if (a->D <= 32) return flash_launch<32, 1>(s, a);
	return flash_launch<64, 1>(s, a);
}

/* the instances cu_flash_attn launches */
extern "C" int cu_flash_attn_smem_init(int bytes)
{
	int rc = cu_smem_allow((const void *)k_flash_attn<16, 1>, bytes);
	if (!rc) rc = cu_smem_allow((const void *)k_flash_attn<32, 1>, bytes);
	if (!rc) rc = cu_smem_allow((const void *)k_flash_attn<64, 1>, bytes);
	if (!rc) rc = cu_smem_allow((const void *)k_flash_attn<16, 2>, bytes);
	if (!rc) rc = cu_smem_allow((const void *)k_flash_attn<32, 2>, bytes);
	if (!rc) rc = cu_smem_allow((const void *)k_flash_attn<64, 2>, bytes);
	return rc;
}
