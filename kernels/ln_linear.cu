/* ln_linear.cu - layer norm fused into the linears that consume it
 * (be_ln_linear_t, backend.h): every row of x read once per weight slice,
 * normed in shared memory, multiplied by the concatenated weights of all
 * output groups, each group written through its own strides by the
 * epilogue (bias, gate pair, beta).
 *
 * bf16 weights (be->weights_bf16): tensor cores (bf16 mma.sync, fp32
 * accumulation).  The weight rows are cut into units, 16 features of one
 * group (16 weight rows; a gate pair's 32: p then g), and the units into
 * slices of at most ll_tmax 16-row tiles, as many as the shared memory
 * budget LL_SMEM leaves beside the row tile (esmfold_v1's triangle
 * attention projection, 33 tiles at k 128: 2 slices of 18 and 15).  Block
 * (x, y) stages slice x once (16-byte cp.async where the rows allow) and
 * then loops over the row tiles y, y + gridDim.y, ... (persistent: the
 * weights cross L2 once per block, not once per row tile; the slices of
 * a row tile in consecutive blocks, so that its second read of x is
 * from L2):
 *   Xs: [LL_TM, kp + 8] bf16        the tile's normed rows, kp = k
 *                                   rounded up to 16, zero-padded
 *   Ws: [tiles, 16, kp + 8] bf16    the slice's weight rows
 * Per row tile: each warp loads rows of x whole into registers (16-byte
 * loads where k, the strides and x are on 4 floats), takes the layer-norm
 * statistics from the registers (one read; mean, then the centred sum of
 * squares, as norm.cu, each divided by k in a fast division) and writes
 * the rounded row to Xs.  Then warp w multiplies rows 16 (w % 4).. by
 * batches of up to 4 tiles (every other batch: w / 4), the A fragment
 * loaded once (ldmatrix) for the batch's 8 mma per 16 k, the B fragments
 * by ldmatrix, and the epilogue runs on the accumulator fragments: bias,
 * gate (cu_gate: ex2 and an approximate reciprocal),
 * beta, written channel-last by 16-byte stores (two lanes trade halves so
 * each holds 4 consecutive features of a row) where the group's rows and
 * width are on 4 floats, else by 4-byte stores (channel-major: 8 lanes on
 * 8 consecutive rows, whole 32-byte sectors).  A group with bf16 output
 * (be_lnlin_out_t.bf16: a GEMM's operand, the triangle products') is
 * rounded to nearest even and stored in 2 bytes each (channel-major: 8
 * lanes on 8 consecutive rows, 16 bytes), in either kernel.  Row indices are 32-bit (the
 * launcher refuses more than 2^31 - 1 rows); only addresses are 64-bit.
 *
 * fp32 weights: SIMT, one thread per (row, feature), Xs: [LL_TM, k + 1]
 * fp32, the weights read from global memory (the same row by a whole
 * warp): the checking path of --precision fp32, with the same loads and
 * epilogue arithmetic.
 *
 * The grid: about as many blocks as a 132-SM card holds at once
 * (LL_GRID), each over up to LL_PER row tiles, so that the staging is
 * amortised up to 8x on long inputs while short ones still fill the card
 * (no device query: a launcher knows no more than its stream).
 */
#include "common.cuh"
#include "mma.cuh"

#ifdef __CUDACC__
#include <cuda_bf16.h>
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "ln_linear.cu: bf16 mma.sync needs sm_80 or newer (configure --with-cuda-arch)"
#endif
#endif

typedef __nv_bfloat16 bf16;

#define LL_WARPS 8
#define LL_NT (LL_WARPS * 32)
#define LL_TM 64              /* rows per tile: 4 groups of 16 */
#define LL_UMAX 64            /* units per slice */
#define LL_SMEM (97 * 1024)   /* dynamic shared memory a block aims at (sm_86/89 opt in to 99 KiB) */
#define LL_GRID 264           /* blocks resident on a 132-SM card (2 per SM) */
#define LL_PER 8              /* most row tiles per block */

/* a unit: 16 features f0.. of group g (gate: 2 tiles), weight row w0 of
 * its first, tile t0 of the slice */
typedef struct { int g, f0, w0, t0, gate; } ll_unit_t;

static __host__ __device__ int ll_ld(int kp) { return kp + 8; }

/* 16-row weight tiles one slice may hold beside Xs (at least a gate pair's 2) */
static __host__ __device__ int ll_tmax(int kp)
{
	int t = (LL_SMEM - LL_TM * ll_ld(kp) * 2) / (16 * ll_ld(kp) * 2);
	t = t < 2 ? 2 : t;
	return t > 2 * LL_UMAX ? 2 * LL_UMAX : t;
}

/* the slices of p's units (the count), the units of slice s into u (u
 * NULL: none) and their count into *nu, the most tiles of a slice into
 * *tiles */
static __host__ __device__ int ll_slices(const be_ln_linear_t &p, int kp, int s, ll_unit_t *u, int *nu, int *tiles)
{
	const int tmax = ll_tmax(kp);
	int ns = 0, used = 0, cur = 0, w0 = 0, most = 0;

	for (int g = 0; g < p.ngroups; g++) {
		const int gate = p.out[g].kind == BE_LNLIN_GATE, n = p.out[g].n;
		for (int f0 = 0; f0 < n; f0 += 16) {
			if (used + 1 + gate > tmax || cur == LL_UMAX) {
				ns++;
				used = cur = 0;
			}
			if (ns == s && u) {
				ll_unit_t t = { g, f0, w0 + f0, used, gate };
				u[cur] = t;
			}
			used += 1 + gate;
			cur++;
			most = used > most ? used : most;
			if (ns == s) *nu = cur;
		}
		w0 += (1 + gate) * n;
	}
	*tiles = most;
	return ns + 1;
}

static __device__ __forceinline__ void ll_set(float *p, float v) { *p = v; }
static __device__ __forceinline__ void ll_set(bf16 *p, float v) { *p = __float2bfloat16(v); }
static __device__ __forceinline__ void ll_set4(float *p, float a, float b, float c, float d)
{
	p[0] = a; p[1] = b; p[2] = c; p[3] = d;
}
static __device__ __forceinline__ void ll_set4(bf16 *p, float a, float b, float c, float d)
{
	uint2 t;
	t.x = cu_bf16x2(a, b);
	t.y = cu_bf16x2(c, d);
	*(uint2 *)p = t;
}

static __device__ __forceinline__ float4 ll_f4(float a, float b, float c, float d)
{
	float4 t;
	t.x = a; t.y = b; t.z = c; t.w = d;
	return t;
}

/* row r of x (32-bit r / nj; the address in 64 bits) */
static __device__ __forceinline__ const float *ll_xrow(const be_ln_linear_t &p, int r)
{
	unsigned i = (unsigned)r / (unsigned)p.nj, j = (unsigned)r - i * (unsigned)p.nj;
	return p.x + (int64_t)i * p.x_si + (int64_t)j * p.x_sj;
}

/* the element offset of row r in group q's output (32-bit r / nj) */
static __device__ __forceinline__ int64_t ll_yoff(const be_ln_linear_t &p, const be_lnlin_out_t &q, int r)
{
	unsigned i = (unsigned)r / (unsigned)p.nj, j = (unsigned)r - i * (unsigned)p.nj;
	return (int64_t)i * q.si + (int64_t)j * q.sj;
}

static __device__ __forceinline__ float *ll_yrow(const be_ln_linear_t &p, const be_lnlin_out_t &q, int r)
{
	return q.y + ll_yoff(p, q, r);
}

/* the column of element i of a row in a lane (ll_load) */
template <bool vec>
static __device__ __forceinline__ int ll_col(int i, int lane)
{
	return vec ? 128 * (i / 4) + 4 * lane + i % 4 : 32 * i + lane;
}

/* Xs: [LL_TM, ldx] = rows r0.. of x, layer-normed where p.ln_w (rows past
 * the end and columns k..kp-1: 0); k <= 128 CH.  vec: x, its strides and
 * k on 4 floats (16-byte loads; lane l holds columns 128 i + 4 l ..),
 * else lane l holds columns 32 i + l.  The norm's weights are loaded
 * once, into registers (1 and 0 without a norm, 0 past k) */
template <typename T, bool vec, int CH>
static __device__ void ll_load(const be_ln_linear_t &p, int r0, int rows, T *Xs, int ldx, int kp)
{
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, k = p.k;
	float gw[4 * CH], gb[4 * CH];

#pragma unroll
	for (int i = 0; i < 4 * CH; i++) {
		const int c = ll_col<vec>(i, lane);
		gw[i] = c >= k ? 0.0f : p.ln_w ? p.ln_w[c] : 1.0f;
		gb[i] = c < k && p.ln_w ? p.ln_b[c] : 0.0f;
	}
	for (int rr = warp; rr < LL_TM; rr += LL_WARPS) {
		const int r = r0 + rr;
		float v[4 * CH];
		T *xs = Xs + rr * ldx;
		if (r >= rows) {
			for (int c = lane; c < kp; c += 32) ll_set(xs + c, 0.0f);
			continue;
		}
		const float *xr = ll_xrow(p, r);
#pragma unroll
		for (int i = 0; i < CH; i++) {
			if (vec) {
				const int c = 128 * i + 4 * lane;
				float4 t = c < k ? *(const float4 *)(xr + c) : ll_f4(0.0f, 0.0f, 0.0f, 0.0f);
				v[4 * i] = t.x; v[4 * i + 1] = t.y; v[4 * i + 2] = t.z; v[4 * i + 3] = t.w;
			} else {
#pragma unroll
				for (int e = 0; e < 4; e++) {
					const int c = 32 * (4 * i + e) + lane;
					v[4 * i + e] = c < k ? xr[c] : 0.0f;
				}
			}
		}
		float mean = 0.0f, inv = 1.0f;
		if (p.ln_w) {
			float sum = 0.0f, sq = 0.0f;
#pragma unroll
			for (int i = 0; i < 4 * CH; i++) sum += v[i];
			mean = __fdividef(cu_warp_sum(sum), (float)k);
#pragma unroll
			for (int i = 0; i < 4 * CH; i++) {
				float t = ll_col<vec>(i, lane) < k ? v[i] - mean : 0.0f;
				sq += t * t;
			}
			inv = rsqrtf(__fdividef(cu_warp_sum(sq), (float)k) + p.eps);
		}
#pragma unroll
		for (int i = 0; i < 4 * CH; i++) v[i] = (v[i] - mean) * inv * gw[i] + gb[i];
#pragma unroll
		for (int i = 0; i < CH; i++) {
			if (vec) {
				const int c = 128 * i + 4 * lane;
				if (c < kp) ll_set4(xs + c, v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]);
			} else {
#pragma unroll
				for (int e = 0; e < 4; e++) {
					const int c = 32 * (4 * i + e) + lane;
					if (c < kp) ll_set(xs + c, v[4 * i + e]);
				}
			}
		}
	}
}

/* the epilogue's value of feature f of group q: product v, its gate's u */
static __device__ __forceinline__ float ll_val(const be_lnlin_out_t &q, int f, float v, float u)
{
	v += q.bias ? q.bias[f] : 0.0f;
	return q.kind == BE_LNLIN_GATE ? cu_gate(v, u + (q.bias_g ? q.bias_g[f] : 0.0f)) : v;
}

static __device__ __forceinline__ void ll_out(float *y, float v, float beta)
{
	*y = beta != 0.0f ? v + beta * *y : v;
}

/* v stored at element off of group q's output: fp32 (with beta), or
 * rounded to bf16 (q.bf16; beta 0, the launcher's check) */
static __device__ __forceinline__ void ll_put(const be_lnlin_out_t &q, int64_t off, float v)
{
	if (q.bf16) ((bf16 *)q.y)[off] = __float2bfloat16(v);
	else ll_out(q.y + off, v, q.beta);
}

/* fp32 weights; dynamic shared memory: Xs [LL_TM, k + 1] */
template <bool vec>
static __global__ void __launch_bounds__(LL_NT) k_ln_linear_f32(be_ln_linear_t p, int rows)
{
	CU_DYN_SHARED(float, Xs);
	const int k = p.k, ldx = k + 1, r0 = blockIdx.x * LL_TM;
	const float *w = p.w;

	ll_load<float, vec, CU_LNLIN_KMAX / 128>(p, r0, rows, Xs, ldx, k);
	__syncthreads();
	for (int g = 0; g < p.ngroups; g++) {
		const be_lnlin_out_t &q = p.out[g];
		const int gate = q.kind == BE_LNLIN_GATE;
		for (int e = threadIdx.x; e < q.n * LL_TM; e += LL_NT) {
			const int f = e / LL_TM, rr = e % LL_TM;
			if (r0 + rr >= rows) continue;
			const float *xs = Xs + rr * ldx, *wp = w + (int64_t)f * k, *wg = wp + (int64_t)q.n * k;
			float a = 0.0f, b = 0.0f;
			for (int c = 0; c < k; c++) {
				a += xs[c] * wp[c];
				if (gate) b += xs[c] * wg[c];
			}
			ll_put(q, ll_yoff(p, q, r0 + rr) + (int64_t)f * q.sc, ll_val(q, f, a, b));
		}
		w += (int64_t)(gate ? 2 : 1) * q.n * k;
	}
}

/* Ws: the slice's units' weight rows (zero past a group's n and past k) */
static __device__ void ll_stage(const be_ln_linear_t &p, const ll_unit_t *su, int nu, bf16 *Ws, int ldx, int kp)
{
	const bf16 *w = (const bf16 *)p.w;
	const int k = p.k, vec = k % 8 == 0 && ((uintptr_t)w & 15) == 0, kc = kp / 8;

	for (int u = 0; u < nu; u++) {
		const ll_unit_t &un = su[u];
		const int n = p.out[un.g].n, nr = 16 * (1 + un.gate);
		bf16 *ws = Ws + un.t0 * 16 * ldx;
		for (int e = threadIdx.x; e < nr * kc; e += LL_NT) {
			const int rr = e / kc, c = e % kc * 8, f = un.f0 + rr % 16;
			const int64_t wr = un.w0 + rr % 16 + (rr >= 16 ? n : 0);   /* g rows follow p's n */
			bf16 *d = ws + rr * ldx + c;
			if (vec) {
				const int ok = f < n && c < k;
				cu_cp_async_16(d, ok ? w + wr * k + c : w, ok ? 16 : 0);
			} else {
				for (int i = 0; i < 8; i++)
					d[i] = f < n && c + i < k ? w[wr * k + c + i] : __float2bfloat16(0.0f);
			}
		}
	}
	cu_cp_async_commit();
	cu_cp_async_wait<0>();
}

/* unit un's epilogue from its fragments a (p) and b (its gate's; a
 * plain unit: unused), rows rb.. of this warp's 16 */
static __device__ __forceinline__ void ll_epi(const be_ln_linear_t &p, const ll_unit_t &un, const float a[2][4],
                                              const float b[2][4], int rb, int rows, int lane)
{
	const be_lnlin_out_t &q = p.out[un.g];
	const int t = lane % 4, ra = rb + lane / 4, n = q.n;
	float v[2][4], bp[2][2], bg[2][2];

#pragma unroll
	for (int j = 0; j < 2; j++)   /* the biases of this lane's 4 features (0 past n) */
#pragma unroll
		for (int e = 0; e < 2; e++) {
			const int f = un.f0 + 8 * j + 2 * t + e;
			bp[j][e] = q.bias && f < n ? q.bias[f] : 0.0f;
			bg[j][e] = un.gate && q.bias_g && f < n ? q.bias_g[f] : 0.0f;
		}
#pragma unroll
	for (int j = 0; j < 2; j++)
#pragma unroll
		for (int e = 0; e < 4; e++) v[j][e] = a[j][e] + bp[j][e % 2];
	if (un.gate)   /* a branch of its own: a plain unit skips the gates' math */
#pragma unroll
		for (int j = 0; j < 2; j++)
#pragma unroll
			for (int e = 0; e < 4; e++) v[j][e] = cu_gate(v[j][e], b[j][e] + bg[j][e % 2]);
	if (!q.bf16 && q.sc == 1 && n % 4 == 0 && ((q.si | q.sj) & 3) == 0 && ((uintptr_t)q.y & 15) == 0) {
		/* even lanes: row ra, features 2t..2t+3; odd: row ra + 8, 2t-2.. */
		const int odd = t & 1, r = ra + 8 * odd;
		float *yr = r < rows ? ll_yrow(p, q, r) : q.y;
#pragma unroll
		for (int j = 0; j < 2; j++) {
			/* all four traded, the choice after: a lane-dependent
			 * operand would let a compiler split the call by lane */
			float s[4];
#pragma unroll
			for (int e = 0; e < 4; e++) s[e] = __shfl_xor_sync(0xffffffffu, v[j][e], 1);
			const int f = un.f0 + 8 * j + 4 * (t / 2);
			float4 o = odd ? ll_f4(s[2], s[3], v[j][2], v[j][3]) : ll_f4(v[j][0], v[j][1], s[0], s[1]);
			if (r < rows && f < n) {
				float4 *yp = (float4 *)(yr + f);
				if (q.beta != 0.0f) {
					float4 old = *yp;
					o.x += q.beta * old.x; o.y += q.beta * old.y; o.z += q.beta * old.z; o.w += q.beta * old.w;
				}
				*yp = o;
			}
		}
		return;
	}
#pragma unroll
	for (int h = 0; h < 2; h++) {
		const int r = ra + 8 * h;
		if (r >= rows) continue;
		const int64_t yr = ll_yoff(p, q, r);
#pragma unroll
		for (int j = 0; j < 2; j++)
#pragma unroll
			for (int e = 0; e < 2; e++) {
				const int f = un.f0 + 8 * j + 2 * t + e;
				if (f < n) ll_put(q, yr + (int64_t)f * q.sc, v[j][2 * h + e]);
			}
	}
}

/* a batch of NB tiles (units u..ue-1 of the slice) on this warp's 16 rows:
 * the products, then each unit's epilogue */
template <int NB>
static __device__ void ll_batch(const be_ln_linear_t &p, const ll_unit_t *su, int u, int ue, const bf16 *Xw,
                                const bf16 *Wb, int ldx, int kp, int rb, int rows, int lane)
{
	float acc[NB][2][4];

#pragma unroll
	for (int b = 0; b < NB; b++)
#pragma unroll
		for (int i = 0; i < 8; i++) acc[b][i / 4][i % 4] = 0.0f;
	for (int kt = 0; kt < kp; kt += 16) {
		uint32_t a[4];
		cu_tile_a(a, Xw + kt, ldx, lane);
#pragma unroll
		for (int b = 0; b < NB; b++) {
			uint32_t w[4];
			cu_tile_bt(w, Wb + b * 16 * ldx + kt, ldx, lane);
			cu_tile_mma(acc[b], a, w);
		}
	}
	int tb = 0;
#pragma unroll
	for (int b = 0; b < NB; b++) {
		if (b != tb || u >= ue) continue;
		const ll_unit_t &un = su[u++];
		ll_epi(p, un, acc[b], acc[b + 1 < NB ? b + 1 : b], rb, rows, lane);
		tb += 1 + un.gate;
	}
}

/* bf16 weights (p.w: [N, k] bf16), kp = k rounded up to 16, k <= 128 CH;
 * block (x, y): slice x, row tiles y, y + gridDim.y, ... */
template <bool vec, int CH>
static __global__ void __launch_bounds__(LL_NT, 2) k_ln_linear_bf16(be_ln_linear_t p, int rows, int kp)
{
	CU_DYN_SHARED(char, sm);
	__shared__ ll_unit_t su[LL_UMAX];
	__shared__ int snu;
	const int ldx = ll_ld(kp), warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	const int ntiles = (rows + LL_TM - 1) / LL_TM, rb = 16 * (warp % 4);
	bf16 *Xs = (bf16 *)sm, *Ws = (bf16 *)(sm + LL_TM * ldx * 2);

	if (threadIdx.x == 0) {
		int most;
		ll_slices(p, kp, blockIdx.x, su, &snu, &most);
	}
	__syncthreads();
	const int nu = snu;
	ll_stage(p, su, nu, Ws, ldx, kp);
	for (int tile = blockIdx.y; tile < ntiles; tile += gridDim.y) {
		const int r0 = tile * LL_TM;
		__syncthreads();   /* Ws staged, the previous tile's Xs consumed */
		ll_load<bf16, vec, CH>(p, r0, rows, Xs, ldx, kp);
		__syncthreads();
		for (int u = 0, bi = 0; u < nu; bi++) {
			int ue = u, nt = 0;
			while (ue < nu && nt + 1 + su[ue].gate <= 4) nt += 1 + su[ue++].gate;
			if (bi % 2 == warp / 4) {
				const bf16 *Xw = Xs + rb * ldx, *Wb = Ws + su[u].t0 * 16 * ldx;
				switch (nt) {
				case 4: ll_batch<4>(p, su, u, ue, Xw, Wb, ldx, kp, r0 + rb, rows, lane); break;
				case 3: ll_batch<3>(p, su, u, ue, Xw, Wb, ldx, kp, r0 + rb, rows, lane); break;
				case 2: ll_batch<2>(p, su, u, ue, Xw, Wb, ldx, kp, r0 + rb, rows, lane); break;
				default: ll_batch<1>(p, su, u, ue, Xw, Wb, ldx, kp, r0 + rb, rows, lane); break;
				}
			}
			u = ue;
		}
	}
}

/* the bf16 kernel for vec and CH (kp <= 128 CH) */
typedef void (*ll_kernel_t)(be_ln_linear_t, int, int);
static ll_kernel_t ll_bf16_kernel(int vec, int kp)
{
	static const ll_kernel_t ks[2][3] = {
		{ k_ln_linear_bf16<false, 1>, k_ln_linear_bf16<false, 2>, k_ln_linear_bf16<false, 4> },
		{ k_ln_linear_bf16<true, 1>, k_ln_linear_bf16<true, 2>, k_ln_linear_bf16<true, 4> },
	};
	return ks[vec][kp <= 128 ? 0 : kp <= 256 ? 1 : 2];
}

extern "C" int cu_ln_linear_smem_init(int bytes)
{
	int rc = cu_smem_allow((const void *)k_ln_linear_f32<true>, bytes);
	if (!rc) rc = cu_smem_allow((const void *)k_ln_linear_f32<false>, bytes);
	for (int i = 0; !rc && i < 6; i++) rc = cu_smem_allow((const void *)ll_bf16_kernel(i % 2, 128 << i / 2), bytes);
	return rc;
}
extern "C" int cu_ln_linear(cudaStream_t s, const be_ln_linear_t *p)
{
	int64_t rows = (int64_t)p->ni * p->nj, ntiles = (rows + LL_TM - 1) / LL_TM;
	int ok = p->ni >= 0 && p->nj >= 0 && p->k > 0 && p->k <= CU_LNLIN_KMAX && p->ngroups >= 1 &&
	         p->ngroups <= BE_LNLIN_GROUPS && rows <= 0x7fffffff;
	int kp = (p->k + 15) / 16 * 16, nu, tiles;
	int vec = p->k % 4 == 0 && (p->x_si | p->x_sj) % 4 == 0 && ((uintptr_t)p->x & 15) == 0;

	for (int g = 0; ok && g < p->ngroups; g++) ok = p->out[g].n > 0 && (!p->out[g].bf16 || p->out[g].beta == 0.0f);
	if (!ok) return -EINVAL;
	if (!rows) return 0;
	if (p->w_bf16) {
		int ns = ll_slices(*p, kp, -1, NULL, &nu, &tiles);
		int64_t per = ntiles * ns / LL_GRID, nb;
		per = per < 1 ? 1 : per > LL_PER ? LL_PER : per;
		per = per < (ntiles + 65534) / 65535 ? (ntiles + 65534) / 65535 : per;   /* gridDim.y */
		nb = (ntiles + per - 1) / per;
		size_t smem = (size_t)(LL_TM + 16 * tiles) * ll_ld(kp) * 2;
		dim3 grid((unsigned)ns, (unsigned)nb);
		CU_LAUNCH(grid, LL_NT, smem, s, ll_bf16_kernel(vec, kp))(*p, (int)rows, kp);
	} else {
		size_t smem = sizeof(float) * (size_t)LL_TM * (p->k + 1);
		if (vec) CU_LAUNCH((unsigned)ntiles, LL_NT, smem, s, k_ln_linear_f32<true>)(*p, (int)rows);
		else CU_LAUNCH((unsigned)ntiles, LL_NT, smem, s, k_ln_linear_f32<false>)(*p, (int)rows);
	}
	return cu_launched();
}
