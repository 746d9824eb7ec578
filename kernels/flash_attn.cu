/* flash_attn.cu - attention on tensor cores (bf16 WMMA, fp32 softmax):
 * the kernel of be_attn_t (backend.h) when the backend's precision is bf16.
 *
 * o = softmax(scale * q k^T + bias + mask) v per (batch b, head h), head
 * dimension D <= CU_FLASH_DMAX, zero-padded to DP = 16, 32 or 64.  A block
 * of FA_WARPS warps streams over the keys in tiles of FA_BK; each warp owns
 * 16 queries of one batch row.  The warps of a block are qt_n query tiles
 * x rb batch rows (rb = 1, 2 or 4, qt_n = FA_WARPS / rb): where the bias is
 * shared by the batch (triangle attention: one [H, L, L] bias for all rows
 * of the pair tensor) a block takes rb rows, so that each bias tile it loads
 * serves rb rows.  Per key tile, in shared memory:
 *   Qs: [FA_WARPS, 16, DP + 8] bf16   each warp's queries (loaded once)
 *   Ks, Vs: [rb, FA_BK, DP + 8] bf16  the rows' keys and values
 *   Bs: [qt_n * 16, FA_BK] fp32       bias of the block's queries
 *   Ms: [rb, FA_BK] fp32              0 for a live key, -inf for a dropped one
 *   Ss: [FA_WARPS, 16, FA_BK + 4] fp32  each warp's scores (S = Q K^T, WMMA)
 *   Ps: [FA_WARPS, 16, FA_BK + 8] bf16  its probabilities
 *   Os: [FA_WARPS, 16, DP + 4] fp32   its unnormalised output (O += P V, WMMA)
 * Two lanes per query row keep the running maximum m and sum l (fp32),
 * rescale the row of Os by exp(m_old - m_new) and write the row's
 * probabilities rounded to bf16; l sums the rounded values, so that o is
 * exactly a convex combination of the bf16 values.  Only a [16, FA_BK] tile
 * of scores exists per warp, never an [Lq, Lk] matrix.  The gate
 * (be_attn_t.g), where given, divides o by 1 + exp(-g) as it is written;
 * the rotary embedding (be_attn_t.rope), where given, rotates q and k in
 * fp32 (cu_rope) before they are rounded to bf16 into Qs and Ks.
 * The leading
 * dimensions keep every WMMA pointer on 32 bytes and ldm on 16 bytes.
 */
#include "common.cuh"

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <mma.h>
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "flash_attn.cu: bf16 WMMA needs sm_80 or newer (configure --with-cuda-arch)"
#endif
#endif

using namespace nvcuda;
typedef __nv_bfloat16 bf16;

#define FA_WARPS 4
#define FA_BK 32

/* byte offsets of the shared arrays of one block (see the top) from the
 * first 128-byte boundary of its dynamic shared memory, each on 128 bytes;
 * bytes: the size to request */
typedef struct {
	int q, k, v, b, m, s, p, o, bytes;
} fa_layout_t;

static __host__ __device__ int fa_up(int n)
{
	return (n + 127) & ~127;
}

static __host__ __device__ fa_layout_t fa_layout(int dp, int rb)
{
	fa_layout_t y;
	int ldh = dp + 8;
	y.q = 0;
	y.k = y.q + fa_up(FA_WARPS * 16 * ldh * 2);
	y.v = y.k + fa_up(rb * FA_BK * ldh * 2);
	y.b = y.v + fa_up(rb * FA_BK * ldh * 2);
	y.m = y.b + fa_up(FA_WARPS / rb * 16 * FA_BK * 4);
	y.s = y.m + fa_up(rb * FA_BK * 4);
	y.p = y.s + fa_up(FA_WARPS * 16 * (FA_BK + 4) * 4);
	y.o = y.p + fa_up(FA_WARPS * 16 * (FA_BK + 8) * 2);
	y.bytes = y.o + fa_up(FA_WARPS * 16 * (dp + 4) * 4) + 112;   /* + the base's alignment */
	return y;
}

/* grid: blockIdx.x = (batch group * H + h) * ntiles + query tile, each
 * batch group rb rows, each query tile qt_n * 16 queries */
template <int DP>
static __global__ void __launch_bounds__(FA_WARPS * 32)
k_flash_attn(be_attn_t a, int rb, int ntiles)
{
	CU_DYN_SHARED(float4, fa_smem4);
	const int LDH = DP + 8, LDS = FA_BK + 4, LDP = FA_BK + 8, LDO = DP + 4, NT = FA_WARPS * 32;
	const int qt_n = FA_WARPS / rb, D = a.D;
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, tid = threadIdx.x;
	const int tile = blockIdx.x % ntiles, h = blockIdx.x / ntiles % a.H, bg = blockIdx.x / ntiles / a.H;
	const int qt = warp % qt_n, r = warp / qt_n, b = bg * rb + r, i0 = tile * qt_n * 16;
	const int rr = lane / 2, hh = lane % 2;   /* this lane's query row of the warp, and half */
	/* dynamic shared memory is only sure to be on 16 bytes: WMMA wants 32 */
	char *sm = (char *)(((uintptr_t)fa_smem4 + 127) & ~(uintptr_t)127);
	const fa_layout_t y = fa_layout(DP, rb);
	bf16 *Qs = (bf16 *)(sm + y.q), *Ks = (bf16 *)(sm + y.k), *Vs = (bf16 *)(sm + y.v);
	bf16 *Ps = (bf16 *)(sm + y.p) + warp * 16 * LDP;
	float *Bs = (float *)(sm + y.b), *Ms = (float *)(sm + y.m);
	float *Ss = (float *)(sm + y.s) + warp * 16 * LDS, *Os = (float *)(sm + y.o) + warp * 16 * LDO;
	float *orow = Os + rr * LDO + hh * (DP / 2);
	/* with rb > 1 the bias is shared by the batch (bias_sb = 0) or absent */
	const float *bias = a.bias ? a.bias + (int64_t)bg * rb * a.bias_sb + h * a.bias_sh : NULL;

	for (int e = tid; e < FA_WARPS * 16 * DP; e += NT) {
		int w = e / (16 * DP), row = e / DP % 16, c = e % DP;
		int bw = bg * rb + w / qt_n, iq = i0 + w % qt_n * 16 + row;
		const float *qr = a.q + bw * a.q_sb + (int64_t)iq * a.q_sl + h * a.q_sh;
		float x = !(bw < a.B && iq < a.Lq && c < D) ? 0.0f
		        : a.rope ? cu_rope(qr, c, D, a.rope, iq) : qr[c];
		Qs[(w * 16 + row) * LDH + c] = __float2bfloat16(x);
	}
	for (int e = lane; e < 16 * LDO; e += 32) Os[e] = 0.0f;
	__syncthreads();
	wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> qf[DP / 16];
	for (int kt = 0; kt < DP / 16; kt++)
		wmma::load_matrix_sync(qf[kt], Qs + warp * 16 * LDH + kt * 16, LDH);

	float m = -INFINITY, l = 0.0f;
	for (int j0 = 0; j0 < a.Lk; j0 += FA_BK) {
		__syncthreads();   /* the previous tile's Ks, Vs, Bs, Ms consumed */
		for (int e = tid; e < rb * FA_BK * DP; e += NT) {
			int rw = e / (FA_BK * DP), jj = e / DP % FA_BK, c = e % DP;
			int bw = bg * rb + rw, j = j0 + jj, ok = bw < a.B && j < a.Lk && c < D;
			const float *kr = a.k + bw * a.k_sb + (int64_t)j * a.k_sl + h * a.k_sh;
			Ks[(rw * FA_BK + jj) * LDH + c] =
				__float2bfloat16(!ok ? 0.0f : a.rope ? cu_rope(kr, c, D, a.rope, j) : kr[c]);
			Vs[(rw * FA_BK + jj) * LDH + c] =
				__float2bfloat16(ok ? a.v[bw * a.v_sb + j * a.v_sl + h * a.v_sh + c] : 0.0f);
		}
		for (int e = tid; e < qt_n * 16 * FA_BK; e += NT) {
			int iq = i0 + e / FA_BK, j = j0 + e % FA_BK;
			Bs[e] = bias && iq < a.Lq && j < a.Lk ? bias[(int64_t)iq * a.bias_sq + j] : 0.0f;
		}
		for (int e = tid; e < rb * FA_BK; e += NT) {
			int bw = bg * rb + e / FA_BK, j = j0 + e % FA_BK;
			int live = bw < a.B && j < a.Lk && (!a.mask || a.mask[bw * a.mask_sb + j] != 0.0f);
			Ms[e] = live ? 0.0f : -INFINITY;
		}
		__syncthreads();

		/* Ss = Q K^T: [16, DP] x [DP, FA_BK] */
		for (int nt = 0; nt < FA_BK / 16; nt++) {
			wmma::fragment<wmma::accumulator, 16, 16, 16, float> sf;
			wmma::fill_fragment(sf, 0.0f);
			for (int kt = 0; kt < DP / 16; kt++) {
				wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> kf;
				wmma::load_matrix_sync(kf, Ks + (r * FA_BK + nt * 16) * LDH + kt * 16, LDH);
				wmma::mma_sync(sf, qf[kt], kf, sf);
			}
			wmma::store_matrix_sync(Ss + nt * 16, sf, LDS, wmma::mem_row_major);
		}
		__syncwarp();

		/* online softmax of row rr over this lane's half of the tile */
		const float *br = Bs + (qt * 16 + rr) * FA_BK, *mr = Ms + r * FA_BK;
		float s[FA_BK / 2], mt = -INFINITY;
		for (int t = 0; t < FA_BK / 2; t++) {
			int jj = hh * (FA_BK / 2) + t;
			s[t] = a.scale * Ss[rr * LDS + jj] + br[jj] + mr[jj];
			mt = fmaxf(mt, s[t]);
		}
		float mn = fmaxf(m, fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1)));
		float corr = mn == -INFINITY ? 1.0f : expf(m - mn), ls = 0.0f;
		for (int t = 0; t < FA_BK / 2; t++) {
			bf16 p = __float2bfloat16(mn == -INFINITY ? 0.0f : expf(s[t] - mn));
			Ps[rr * LDP + hh * (FA_BK / 2) + t] = p;
			ls += __bfloat162float(p);
		}
		l = l * corr + ls + __shfl_xor_sync(0xffffffffu, ls, 1);
		m = mn;
		for (int c = 0; c < DP / 2; c++) orow[c] *= corr;
		__syncwarp();

		/* Os += P V: [16, FA_BK] x [FA_BK, DP] */
		for (int dt = 0; dt < DP / 16; dt++) {
			wmma::fragment<wmma::accumulator, 16, 16, 16, float> of;
			wmma::load_matrix_sync(of, Os + dt * 16, LDO, wmma::mem_row_major);
			for (int kt = 0; kt < FA_BK / 16; kt++) {
				wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> pf;
				wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> vf;
				wmma::load_matrix_sync(pf, Ps + kt * 16, LDP);
				wmma::load_matrix_sync(vf, Vs + (r * FA_BK + kt * 16) * LDH + dt * 16, LDH);
				wmma::mma_sync(of, pf, vf, of);
			}
			wmma::store_matrix_sync(Os + dt * 16, of, LDO, wmma::mem_row_major);
		}
	}
	__syncwarp();

	int iq = i0 + qt * 16 + rr;
	if (b < a.B && iq < a.Lq) {
		float inv = l > 0.0f ? 1.0f / l : 0.0f;
		int64_t off = b * a.o_sb + (int64_t)iq * a.o_sl + h * a.o_sh + hh * (DP / 2);
		for (int c = 0; c < DP / 2 && hh * (DP / 2) + c < D; c++) {
			float r = orow[c] * inv;
			a.o[off + c] = a.g ? r / (1.0f + expf(-a.g[off + c])) : r;   /* the BE_GATE formula */
		}
	}
}

template <int DP>
static int flash_launch(cudaStream_t s, const be_attn_t *a)
{
	int rb = 1;
	if (!a->bias || !a->bias_sb)
		while (2 * rb <= FA_WARPS && 2 * rb <= a->B) rb *= 2;
	int qt_n = FA_WARPS / rb, ntiles = (a->Lq + 16 * qt_n - 1) / (16 * qt_n);
	int64_t nblocks = (int64_t)ntiles * a->H * ((a->B + rb - 1) / rb);
	size_t smem = (size_t)fa_layout(DP, rb).bytes;

	if (nblocks > 0x7fffffff) return -EINVAL;
	CU_LAUNCH((unsigned)nblocks, FA_WARPS * 32, smem, s, k_flash_attn<DP>)(*a, rb, ntiles);
	return cu_launched();
}

extern "C" int cu_flash_attn(cudaStream_t s, const be_attn_t *a)
{
	if (a->B < 0 || a->H < 0 || a->Lq < 0 || a->Lk < 0 || a->D <= 0 || a->D > CU_FLASH_DMAX)
		return -EINVAL;
	if ((int64_t)a->B * a->H * a->Lq == 0) return 0;
	if (a->D <= 16) return flash_launch<16>(s, a);
	if (a->D <= 32) return flash_launch<32>(s, a);
	return flash_launch<64>(s, a);
}

/* the instances cu_flash_attn launches */
extern "C" int cu_flash_attn_smem_init(int bytes)
{
	int rc = cu_smem_allow((const void *)k_flash_attn<16>, bytes);
	if (!rc) rc = cu_smem_allow((const void *)k_flash_attn<32>, bytes);
	if (!rc) rc = cu_smem_allow((const void *)k_flash_attn<64>, bytes);
	return rc;
}
