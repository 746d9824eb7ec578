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
 * block) and bias (fp32, shared by the rows) are in flight, each thread's
 * copies a contiguous run of 16-byte chunks from pointers advanced a tile
 * at a time (no per-tile index arithmetic; a full tile's bias without a
 * size test).  Per tile the block converts k (rotated on load where
 * be_attn_t.rope is given: the ROPE instances) and v to bf16 once,
 * straight-line 16-byte loads and stores, and, where keys can drop, the
 * dropped keys of each row to an additive 0 / -inf; then each warp, in
 * registers:
 *   S = bias + q k^T             (mma m16n8k16; the accumulators start at
 *                                 the bias, ldmatrix of k)
 *   S += mask                    (only in tiles where a row drops keys)
 *   P = 2^(S log2 e - mb)        (one FFMA and one ex2 a score, rounded to
 *                                 bf16 as A fragments; the tile's row sums
 *                                 lt = P 1 by mma)
 *   stabiliser mb                (the running row maximum, from S's row
 *                                 maxima (shuffles over the quad) only in
 *                                 the first tile a row has live keys, or
 *                                 where a tile's lt exceeds FA_SLACK_SUM:
 *                                 then S and P again, O and l rescaled; a
 *                                 tile within it costs no maximum at all)
 *   O += P V, l += lt            (ldmatrix.trans of v)
 * and at the end writes o = O / l, gated by 1 / (1 + exp(-g)) where
 * be_attn_t.g is given (the BE_GATE formula, cu_gate), once; q
 * read and o, g written by 8-byte accesses where rows are whole.  Only a
 * [16, 64] tile of scores exists per warp, never an [Lq, Lk] matrix.
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
 * pointer and stride allows them (k and v: D = DP too), 4-byte copies
 * otherwise.
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
#define FA_VEC_Q 4u    /* q by 8-byte loads (D = DP) */
#define FA_VEC_O 8u    /* o and g by 8-byte loads and stores (D = DP) */
#define FA_MASKED 16u  /* a mask is given (every tile's keys may drop) */
#define FA_SLACK_SUM 0x1p64f  /* the largest row sum of a tile's P before the stabiliser is renewed */

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

/* element c of query row iq: rotated (ROPE: a.rope is given), 0 past D, Lq */
template <bool ROPE>
static __device__ __forceinline__ float fa_q(const be_attn_t &a, const float *qb, int ok, int iq,
                                             int qsl, int c)
{
	if (!ok || iq >= a.Lq || c >= a.D) return 0.0f;
	const float *qr = qb + iq * qsl;
	return ROPE ? cu_rope(qr, c, a.D, a.rope, iq) : qr[c];
}

/* d[0 .. 7] = (a, b) rounded to bf16, one 16-byte store */
static __device__ __forceinline__ void fa_put8(uint16_t *d, float4 a, float4 b)
{
	uint4 u = { cu_bf16x2(a.x, a.y), cu_bf16x2(a.z, a.w), cu_bf16x2(b.x, b.y), cu_bf16x2(b.z, b.w) };
	*(uint4 *)d = u;
}

/* grid: (query tile, h, batch group of rb rows); block: 128 RB threads
 * (RB = rb, 1 or 2); ROPE: a.rope is given; vec: FA_VEC_* bits */
template <int DP, int RB, bool ROPE>
static __global__ void __launch_bounds__(RB * 128, 1)
k_flash_attn(be_attn_t a, unsigned vec)
{
	CU_DYN_SHARED(unsigned char, fa_smem);
	const int LDK = DP + 8, KS = DP / 16, NT = DP / 8;
	const int rb = RB, nthr = RB * 128, tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
	const int g = lane / 4, t = lane % 4;
	const int tile = blockIdx.x, h = blockIdx.y, bg = blockIdx.z;
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

	/* the 16-byte copies of this thread in every tile, each run of them
	 * contiguous: k / v row kvr of the block's rb x FA_BK (batch row kvr
	 * / FA_BK, key kvj), columns kvc .. kvc + DP / 2 - 1 as KCH chunks,
	 * read at kp / vp; bias row bq of the tile, keys bc .. bc + 4 BCH - 1
	 * as BCH chunks, read at bp; the pointers at the next tile's (each
	 * issue advances them a tile), at the block's base where the row is
	 * past B (kok clear) or Lq (never read).  Bias chunks where every one
	 * is whole (a full tile) take 16 bytes without a test */
	enum { KCH = DP / 8, BTPR = RB * 128 / FA_BQ, BCH = FA_BK / 4 / BTPR };
	const int kvr = tid / 2, kvj = kvr % FA_BK, kvc = tid % 2 * (DP / 2), kok = kvr / FA_BK < nrows;
	const int bq = tid / BTPR, bc = tid % BTPR * (4 * BCH);
	const float *kp = kbase + (kok ? kvr / FA_BK * ksb + kvj * ksl + kvc : 0);
	const float *vp = vbase + (kok ? kvr / FA_BK * vsb + kvj * vsl + kvc : 0);
	const float *bp = bbase ? bbase + (bq < nq ? bq * bsq + bc : 0) : NULL;

	/* tile kt's raw k, v and bias into stage st, one cp.async group (the
	 * tiles in order) */
	auto issue = [&](int kt, int st) {
		int j0 = kt * FA_BK, nk = Lk - j0 < FA_BK ? Lk - j0 : FA_BK;
		float *kr = (float *)(fa_smem + st * y.stage), *vr = (float *)(fa_smem + st * y.stage + y.vraw);
		float *br = (float *)(fa_smem + st * y.stage + y.braw);
		if (vec & FA_VEC_KV) {   /* D = DP: a row's chunks all copied or all zero */
			int n = kok && kvj < nk ? 16 : 0;
#pragma unroll
			for (int u = 0; u < KCH; u++) {
				cu_cp_async_16(kr + kvr * DP + kvc + 4 * u, kp + 4 * u, n);
				cu_cp_async_16(vr + kvr * DP + kvc + 4 * u, vp + 4 * u, n);
			}
			kp += FA_BK * ksl;
			vp += FA_BK * vsl;
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
			auto bias = [&](auto bytes) {
#pragma unroll
				for (int u = 0; u < BCH; u++) cu_cp_async_16(br + bq * FA_BK + bc + 4 * u, bp + 4 * u, bytes(u));
			};
			if (bq < nq && nk == FA_BK) bias([](int) { return 16; });
			else bias([&](int u) {
				int c = bc + 4 * u;
				return bq < nq && c < nk ? (nk - c < 4 ? nk - c : 4) * 4 : 0;
			});
			bp += FA_BK;
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
	issue(0, 0);   /* (Lk = 0: copies nothing) */

	/* this warp's 16 queries as A fragments: register i of k-step ks holds
	 * (q[r][k], q[r][k + 1]) with r = g + 8 (i % 2), k = 16 ks + 2 t + 8 (i / 2) */
	uint32_t qf[KS][4];
	{
		const float *qb = a.q + (int64_t)b * a.q_sb + (int64_t)h * a.q_sh;
		const int qsl = (int)a.q_sl, ok = b < B, iq0 = i0 + qw * 16 + g;
		if ((vec & FA_VEC_Q) && !ROPE && ok && iq0 + 8 < a.Lq) {   /* 8-byte loads of whole rows */
#pragma unroll
			for (int ks = 0; ks < KS; ks++)
#pragma unroll
				for (int i = 0; i < 4; i++) {
					float2 x = *(const float2 *)(qb + (iq0 + 8 * (i % 2)) * qsl + 16 * ks + 2 * t + 8 * (i / 2));
					qf[ks][i] = cu_bf16x2(x.x * a.scale, x.y * a.scale);
				}
		} else {
			for (int ks = 0; ks < KS; ks++)
				for (int i = 0; i < 4; i++) {
					int iq = iq0 + 8 * (i % 2), c = 16 * ks + 2 * t + 8 * (i / 2);
					qf[ks][i] = cu_bf16x2(fa_q<ROPE>(a, qb, ok, iq, qsl, c) * a.scale,
					                      fa_q<ROPE>(a, qb, ok, iq, qsl, c + 1) * a.scale);
				}
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
	/* the rows cvr + i CVSTEP (i < NCV) of k and v this thread converts, columns cvc .. cvc + 7 */
	enum { NCV = DP / 16, CVSTEP = RB * 128 / (DP / 8) };
	const int cvr = tid / (DP / 8), cvc = tid % (DP / 8) * 8;
	if (tid < rb) drop[tid] = 0;   /* (seen after the loop's first barrier) */
	for (int kt = 0; kt < nkt; kt++) {
		const int st = kt & 1, j0 = kt * FA_BK;
		cu_cp_async_wait<0>();
		__syncthreads();   /* tile kt landed; tile kt - 1 consumed */
		if (kt + 1 < nkt) issue(kt + 1, st ^ 1);

		/* k (rotated) and v to bf16; the dropped keys */
		const float *kr = (const float *)(fa_smem + st * y.stage);
		const float *vr = (const float *)(fa_smem + st * y.stage + y.vraw);
#pragma unroll
		for (int i = 0; i < NCV; i++) {
			const float *vx = vr + (cvr + i * CVSTEP) * DP + cvc;
			fa_put8(vb + (cvr + i * CVSTEP) * LDK + cvc, *(const float4 *)vx, *(const float4 *)(vx + 4));
		}
		if (!ROPE) {
#pragma unroll
			for (int i = 0; i < NCV; i++) {
				const float *kx = kr + (cvr + i * CVSTEP) * DP + cvc;
				fa_put8(kb + (cvr + i * CVSTEP) * LDK + cvc, *(const float4 *)kx, *(const float4 *)(kx + 4));
			}
		} else {   /* rows past Lk stay zero, and the table ends at Lk */
#pragma unroll
			for (int i = 0; i < NCV; i++) {
				int row = cvr + i * CVSTEP, j = j0 + row % FA_BK;
				const float *kx = kr + row * DP;
				float k8[8];
#pragma unroll
				for (int u = 0; u < 8; u++)
					k8[u] = j < Lk && cvc + u < D ? cu_rope(kx, cvc + u, D, a.rope, j) : kx[cvc + u];
				float4 k0 = { k8[0], k8[1], k8[2], k8[3] }, k1 = { k8[4], k8[5], k8[6], k8[7] };
				fa_put8(kb + row * LDK + cvc, k0, k1);
			}
		}
		/* the first warp of each row: its keys' mask, lane and lane + 32,
		 * where one can drop (with a mask, or in the last tile: keys past
		 * Lk, rows past B; drop stays 0 else) */
		const int dropping = (vec & FA_MASKED) || kt == nkt - 1;
		if (qw == 0 && dropping) {
			int dead = 0;
#pragma unroll
			for (int i = 0; i < FA_BK / 32; i++) {
				int j = j0 + lane + 32 * i;
				int live = b < B && j < Lk && (!a.mask || a.mask[b * a.mask_sb + j] != 0.0f);
				madd[r * FA_BK + lane + 32 * i] = live ? 0.0f : -INFINITY;
				dead |= !live;
			}
			dead = __any_sync(0xffffffffu, dead);
			if (lane == 0) drop[r] = dead;
		}
		__syncthreads();

		/* S = bias + Q K^T: FA_BK / 8 accumulators, key 8 n + 2 t (+1) */
		const float *br = (const float *)(fa_smem + st * y.stage + y.braw) + (qw * 16 + g) * FA_BK + 2 * t;
		const uint16_t *krow = kb + (r * FA_BK + lane % 8) * LDK + lane / 8 * 8;
		int dropped = 0;
		if (dropping) dropped = drop[r];
		auto scores = [&](float (&s)[FA_BK / 8][4]) {
			for (int n = 0; n < FA_BK / 8; n++)   /* 8-byte loads: straight into the accumulators' pairs */
				for (int rh = 0; rh < 2; rh++) {
					float2 b2 = *(const float2 *)(br + rh * 8 * FA_BK + 8 * n);
					s[n][2 * rh] = b2.x;
					s[n][2 * rh + 1] = b2.y;
				}
			/* ldmatrix: lane 8 mi + ri addresses key 8 n + ri, columns 8 mi on */
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
			if (dropped) {
				const float *mr = madd + r * FA_BK + 2 * t;
				for (int n = 0; n < FA_BK / 8; n++)
					for (int e = 0; e < 4; e++) s[n][e] += mr[8 * n + e % 2];
			}
		};
		/* P = 2^(S log2 e - mb) rounded to bf16 as A fragments (keys 16 kk
		 * .. 16 kk + 15: accumulators 2 kk and 2 kk + 1 of S), and the
		 * tile's row sums lt = P 1 on the tensor cores (of the rounded P
		 * that weighs v; every column the same) */
		uint32_t pf[FA_BK / 16][4];
		float lt[4];
		auto probs = [&](const float (&s)[FA_BK / 8][4]) {
			const uint32_t ones[2] = { 0x3f803f80u, 0x3f803f80u };   /* bf16 pairs of 1 */
			for (int e = 0; e < 4; e++) lt[e] = 0.0f;
			for (int kk = 0; kk < FA_BK / 16; kk++) {
				for (int i = 0; i < 4; i++) {
					const float *sv = s[2 * kk + i / 2] + 2 * (i % 2);
					pf[kk][i] = cu_bf16x2(cu_exp2(fmaf(sv[0], CU_LOG2E, nb[i % 2])),
					                      cu_exp2(fmaf(sv[1], CU_LOG2E, nb[i % 2])));
				}
				cu_mma_16816_bf16(lt, pf[kk], ones, lt);
			}
		};
		/* the stabiliser mb of rows g (hr 0) and g + 8 (hr 1), in log2
		 * units, a running maximum: set from S where a row has no live
		 * key yet (mb -inf: the first tile), else renewed only where a
		 * tile's P sums over FA_SLACK_SUM (no overflow: P and the sums stay
		 * within that of their sizes at the stabiliser, the same relative
		 * roundings), then S again; O and l rescaled as it rises */
		auto renew = [&](const float (&s)[FA_BK / 8][4]) {
			for (int hr = 0; hr < 2; hr++) {
				float v = fmaxf(s[0][2 * hr], s[0][2 * hr + 1]);
				for (int n = 1; n < FA_BK / 8; n++) v = fmaxf(v, fmaxf(s[n][2 * hr], s[n][2 * hr + 1]));
				v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
				v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
				float mn = fmaxf(mb[hr], v * CU_LOG2E), mu = mn == -INFINITY ? 0.0f : mn;
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
		};
		{
			float s[FA_BK / 8][4];
			scores(s);
			if (__any_sync(0xffffffffu, mb[0] == -INFINITY || mb[1] == -INFINITY)) renew(s);
			probs(s);
		}
		if (__any_sync(0xffffffffu, !(lt[0] <= FA_SLACK_SUM) || !(lt[2] <= FA_SLACK_SUM))) {
			float s[FA_BK / 8][4];
			scores(s);
			renew(s);
			probs(s);
		}
		for (int e = 0; e < 4; e++) l[e] += lt[e];
		/* O += P V; ldmatrix.trans: lane 8 mi + ri addresses key 16 kk + 8
		 * (mi % 2) + ri, columns 8 (mi / 2) on */
		const uint16_t *vrow = vb + (r * FA_BK + lane % 8 + 8 * (lane / 8 % 2)) * LDK + lane / 16 * 8;
		for (int kk = 0; kk < FA_BK / 16; kk++)
			for (int dn = 0; dn < NT / 2; dn++) {
				uint32_t vf[4];
				cu_ldmatrix_x4_trans(vf, vrow + 16 * kk * LDK + 16 * dn);
				cu_mma_16816_bf16(o[2 * dn], pf[kk], vf, o[2 * dn]);
				cu_mma_16816_bf16(o[2 * dn + 1], pf[kk], vf + 2, o[2 * dn + 1]);
			}
	}

	/* o = O / l, gated, written once: rows g, g + 8, columns 8 n + 2 t (+1),
	 * by 8-byte loads and stores where both rows are whole */
	const int iq0 = i0 + qw * 16 + g, whole = (vec & FA_VEC_O) && b < B && iq0 + 8 < a.Lq;
	for (int hr = 0; hr < 2; hr++) {
		float ls = l[2 * hr];
		int iq = iq0 + 8 * hr;
		if (b >= B || iq >= a.Lq) continue;
		float inv = ls > 0.0f ? cu_rcp(ls) : 0.0f;
		int64_t off = (int64_t)b * a.o_sb + (int64_t)iq * a.o_sl + (int64_t)h * a.o_sh;
		if (whole) {
#pragma unroll
			for (int n = 0; n < NT; n++) {
				float2 x = { o[n][2 * hr] * inv, o[n][2 * hr + 1] * inv };
				if (a.g) {
					float2 gv = *(const float2 *)(a.g + off + 8 * n + 2 * t);
					x.x = cu_gate(x.x, gv.x);
					x.y = cu_gate(x.y, gv.y);
				}
				*(float2 *)(a.o + off + 8 * n + 2 * t) = x;
			}
			continue;
		}
		for (int n = 0; n < NT; n++)
			for (int e = 0; e < 2; e++) {
				int c = 8 * n + 2 * t + e;
				if (c >= D) continue;
				float x = o[n][2 * hr + e] * inv;
				a.o[off + c] = a.g ? cu_gate(x, a.g[off + c]) : x;
			}
	}
}

/* every stride a multiple of n floats and the base on 4 n bytes */
static int fa_vec(const float *p, int n, int64_t s1, int64_t s2, int64_t s3)
{
	return (uintptr_t)p % (4 * n) == 0 && s1 % n == 0 && s2 % n == 0 && s3 % n == 0;
}

template <int DP, int RB, bool ROPE>
static int flash_launch(cudaStream_t s, const be_attn_t *a)
{
	const int rb = RB;
	int64_t ntiles = (a->Lq + FA_BQ - 1) / FA_BQ, ngroups = (a->B + rb - 1) / rb;
	size_t smem = (size_t)fa_layout(DP, rb).bytes;
	unsigned vec = (a->D == DP && fa_vec(a->k, 4, a->k_sb, a->k_sl, a->k_sh) &&
	                fa_vec(a->v, 4, a->v_sb, a->v_sl, a->v_sh) ? FA_VEC_KV : 0) |
	               (a->bias && fa_vec(a->bias, 4, a->bias_sb, a->bias_sh, a->bias_sq) ? FA_VEC_BIAS : 0) |
	               (a->D == DP && fa_vec(a->q, 2, a->q_sb, a->q_sl, a->q_sh) ? FA_VEC_Q : 0) |
	               (a->D == DP && fa_vec(a->o, 2, a->o_sb, a->o_sl, a->o_sh) &&
	                (!a->g || fa_vec(a->g, 2, 0, 0, 0)) ? FA_VEC_O : 0) | (a->mask ? FA_MASKED : 0);
	/* the grid's extent; the kernel's 32-bit offsets within a block's rows */
	const int64_t lim = INT32_MAX;
	if (ntiles > lim || a->H > 65535 || ngroups > 65535 || (rb - 1) * a->k_sb + (int64_t)a->Lk * a->k_sl > lim ||
	    (rb - 1) * a->v_sb + (int64_t)a->Lk * a->v_sl > lim || (int64_t)a->Lq * a->q_sl > lim ||
	    (a->bias && (int64_t)a->Lq * a->bias_sq > lim) || (a->mask && (int64_t)a->B * a->mask_sb > lim))
		return -EINVAL;
	CU_LAUNCH(dim3((unsigned)ntiles, (unsigned)a->H, (unsigned)ngroups), 128 * RB, smem, s,
	          k_flash_attn<DP, RB, ROPE>)(*a, vec);
	return cu_launched();
}

/* the instance for a's head width and rotary table */
template <int RB>
static int flash_pick(cudaStream_t s, const be_attn_t *a)
{
	if (a->D <= 16) return a->rope ? flash_launch<16, RB, true>(s, a) : flash_launch<16, RB, false>(s, a);
	if (a->D <= 32) return a->rope ? flash_launch<32, RB, true>(s, a) : flash_launch<32, RB, false>(s, a);
	return a->rope ? flash_launch<64, RB, true>(s, a) : flash_launch<64, RB, false>(s, a);
}

extern "C" int cu_flash_attn(cudaStream_t s, const be_attn_t *a)
{
	if (a->B < 0 || a->H < 0 || a->Lq < 0 || a->Lk < 0 || a->D <= 0 || a->D > CU_FLASH_DMAX)
		return -EINVAL;
	if ((int64_t)a->B * a->H * a->Lq == 0) return 0;
	/* two batch rows a block where they share the bias (or have none) */
	return a->B >= 2 && (!a->bias || !a->bias_sb) ? flash_pick<2>(s, a) : flash_pick<1>(s, a);
}

/* the instances of RB rows a block, ROPE, cu_flash_attn launches */
template <int RB, bool ROPE>
static int fa_allow(int bytes)
{
	int rc = cu_smem_allow((const void *)k_flash_attn<16, RB, ROPE>, bytes);
	if (!rc) rc = cu_smem_allow((const void *)k_flash_attn<32, RB, ROPE>, bytes);
	if (!rc) rc = cu_smem_allow((const void *)k_flash_attn<64, RB, ROPE>, bytes);
	return rc;
}

extern "C" int cu_flash_attn_smem_init(int bytes)
{
	int rc = fa_allow<1, false>(bytes);
	if (!rc) rc = fa_allow<2, false>(bytes);
	if (!rc) rc = fa_allow<1, true>(bytes);
	if (!rc) rc = fa_allow<2, true>(bytes);
	return rc;
}
