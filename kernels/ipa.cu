/* ipa.cu - the structure module's point steps on the device (be_t.ipa_in,
 * ipa_out, ipa_rigid; see backend.h): rigids from the frame state with
 * translations about their mean, the augmented point vectors of the IPA
 * logits, the attended points back in each frame, the backbone update.
 * Everything is per residue but the mean, one block's reduction; nothing
 * here waits for the host.
 */
#include <math.h>

#include "common.cuh"

#define IPA_THREADS 256   /* threads of every block; the mean's block reduces over them */
#define IPA_MAX_BLOCKS 65535

static unsigned ipa_blocks(int64_t n)
{
	int64_t b = (n + IPA_THREADS - 1) / IPA_THREADS;
	return (unsigned)(b < IPA_MAX_BLOCKS ? b : IPA_MAX_BLOCKS);
}

/* (s, c) += x * x, compensated: the product's rounding error (fmaf) and
 * the sum's (TwoSum) go to c, so s + c is the sum of squares as if
 * accumulated in twice the precision, then rounded (Ogita, Rump and
 * Oishi's Dot2: error <= u |sum| + O(n^2 u^2) |sum|).  The _rn
 * intrinsics keep nvcc from contracting the TwoSum into fmas. */
static __device__ __forceinline__ void ipa_sq(float *s, float *c, float x)
{
	float p = __fmul_rn(x, x), e = fmaf(x, x, -p), t = __fadd_rn(*s, p), z = __fsub_rn(t, *s);

	*c += __fadd_rn(__fsub_rn(*s, __fsub_rn(t, z)), __fsub_rn(p, z)) + e;
	*s = t;
}

/* rotation matrix of the quaternion q (w, x, y, z), row-major r[9] */
static __device__ __forceinline__ void ipa_rot(const float *q, float *r)
{
	float w = q[0], x = q[1], y = q[2], z = q[3];
	r[0] = w * w + x * x - y * y - z * z;
	r[1] = 2.0f * (x * y - w * z);
	r[2] = 2.0f * (x * z + w * y);
	r[3] = 2.0f * (x * y + w * z);
	r[4] = w * w - x * x + y * y - z * z;
	r[5] = 2.0f * (y * z - w * x);
	r[6] = 2.0f * (x * z - w * y);
	r[7] = 2.0f * (y * z + w * x);
	r[8] = w * w - x * x - y * y + z * z;
}

/* g = R p + t of the rigid rg: [12] (R row-major, t) */
static __device__ __forceinline__ void ipa_apply(const float *rg, float p0, float p1, float p2, float *g)
{
	for (int k = 0; k < 3; k++)
		g[k] = rg[3 * k] * p0 + rg[3 * k + 1] * p1 + rg[3 * k + 2] * p2 + rg[9 + k];
}

/* one block of IPA_THREADS: the mean translation (sums in double), then
 * rig: [L, 12] of state: [L, 7] */
static __global__ void k_ipa_rig(float *rig, const float *state, int L)
{
	__shared__ double sum[3][IPA_THREADS];
	int t = threadIdx.x;
	double a[3] = { 0.0, 0.0, 0.0 };

	for (int i = t; i < L; i += IPA_THREADS)
		for (int k = 0; k < 3; k++) a[k] += state[7 * (int64_t)i + 4 + k];
	for (int k = 0; k < 3; k++) sum[k][t] = a[k];
	__syncthreads();
	/* every thread adds the partial sums itself (shared-memory broadcasts,
	 * the same order everywhere): one barrier, no divergent one */
	double ctr[3] = { 0.0, 0.0, 0.0 };
	for (int w = 0; w < IPA_THREADS; w++)
		for (int k = 0; k < 3; k++) ctr[k] += sum[k][w];
	for (int k = 0; k < 3; k++) ctr[k] /= L;
	for (int i = t; i < L; i += IPA_THREADS) {
		const float *q = state + 7 * (int64_t)i;
		float *rg = rig + 12 * (int64_t)i;
		ipa_rot(q, rg);
		for (int k = 0; k < 3; k++) rg[9 + k] = (float)(q[4 + k] - ctr[k]);
	}
}

/* one (residue i, head h) per thread: qa, ka: [L, H, 3 Pq + 2], vp: [L,
 * H, 3 Pv] from qp: [L, 3, H Pq], kvp: [L, 3, H (Pq + Pv)], rig: [L, 12];
 * hw, bb: [H] */
static __global__ void k_ipa_pts(float *qa, float *ka, float *vp, const float *rig, const float *qp,
                                 const float *kvp, const float *hw, const float *bb, int L, int H,
                                 int Pq, int Pv)
{
	int Dp = 3 * Pq + 2, nq = H * Pq, nkv = H * (Pq + Pv);
	const float sb = sqrtf(1.0f / 3.0f);

	for (int64_t ih = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; ih < (int64_t)L * H;
	     ih += (int64_t)gridDim.x * blockDim.x) {
		int64_t i = ih / H;
		int h = (int)(ih % H);
		const float *rg = rig + 12 * i, *qpi = qp + i * 3 * nq, *kvpi = kvp + i * 3 * nkv;
		double x = hw[h], sp = x > 20.0 ? x : log1p(exp(x));   /* nn.Softplus */
		float wh = (float)(sp * sqrt(2.0 / (27.0 * Pq)));
		float *q = qa + ih * Dp, *k = ka + ih * Dp, *v = vp + ih * 3 * Pv, s = 0.0f, c = 0.0f, g[3];

		for (int p = 0; p < Pq; p++) {
			int n = h * Pq + p;
			ipa_apply(rg, qpi[n], qpi[nq + n], qpi[2 * nq + n], g);
			for (int e = 0; e < 3; e++) {
				q[3 * p + e] = wh * g[e];
				ipa_sq(&s, &c, g[e]);
			}
		}
		q[3 * Pq] = -0.5f * wh * (s + c) + sb * bb[h];
		q[3 * Pq + 1] = 1.0f;
		s = c = 0.0f;
		for (int p = 0; p < Pq + Pv; p++) {
			int n = h * (Pq + Pv) + p;
			ipa_apply(rg, kvpi[n], kvpi[nkv + n], kvpi[2 * nkv + n], g);
			for (int e = 0; e < 3; e++) {
				if (p >= Pq) {
					v[3 * (p - Pq) + e] = g[e];
				} else {
					k[3 * p + e] = g[e];
					ipa_sq(&s, &c, g[e]);
				}
			}
		}
		k[3 * Pq] = 1.0f;
		k[3 * Pq + 1] = -0.5f * wh * (s + c);
	}
}

/* one (residue, point) per thread: cat: [L, ldc] point columns of op:
 * [L, n, 3] in the frames of rig: [L, 12] */
static __global__ void k_ipa_out(float *cat, int64_t ldc, const float *op, const float *rig, int L,
                                 int n, float eps)
{
	for (int64_t ip = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; ip < (int64_t)L * n;
	     ip += (int64_t)gridDim.x * blockDim.x) {
		int64_t i = ip / n;
		int p = (int)(ip % n);
		const float *R = rig + 12 * i, *t = R + 9, *g = op + 3 * ip;
		float v0 = g[0] - t[0], v1 = g[1] - t[1], v2 = g[2] - t[2], l[3];
		float *row = cat + i * ldc;
		for (int k = 0; k < 3; k++)   /* R^T v */
			l[k] = R[k] * v0 + R[3 + k] * v1 + R[6 + k] * v2;
		row[p] = l[0];
		row[n + p] = l[1];
		row[2 * n + p] = l[2];
		row[3 * n + p] = sqrtf(l[0] * l[0] + l[1] * l[1] + l[2] * l[2] + eps);
	}
}

/* one residue per thread: state: [L, 7] composed with upd: [L, 6] (NULL:
 * identity), frame: [L, 7] (or NULL) the new state, translation scaled */
static __global__ void k_ipa_rigid(float *state, float *frame, const float *upd, int L, float scale)
{
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < L;
	     i += (int64_t)gridDim.x * blockDim.x) {
		float *q = state + 7 * i, *t = q + 4, r[9];
		const float *u = upd ? upd + 6 * i : NULL;
		if (!u) {
			q[0] = 1.0f;
			q[1] = q[2] = q[3] = t[0] = t[1] = t[2] = 0.0f;
			continue;
		}
		ipa_rot(q, r);
		for (int k = 0; k < 3; k++)
			t[k] += r[3 * k] * u[3] + r[3 * k + 1] * u[4] + r[3 * k + 2] * u[5];
		float w = q[0] - (q[1] * u[0] + q[2] * u[1] + q[3] * u[2]);
		float x = q[1] + q[0] * u[0] + q[2] * u[2] - q[3] * u[1];
		float y = q[2] + q[0] * u[1] + q[3] * u[0] - q[1] * u[2];
		float z = q[3] + q[0] * u[2] + q[1] * u[1] - q[2] * u[0];
		float nq = sqrtf(w * w + x * x + y * y + z * z);
		if (nq > 0.0f) { w /= nq; x /= nq; y /= nq; z /= nq; }
		q[0] = w; q[1] = x; q[2] = y; q[3] = z;
		if (!frame) continue;
		float *f = frame + 7 * i;
		f[0] = w; f[1] = x; f[2] = y; f[3] = z;
		for (int k = 0; k < 3; k++) f[4 + k] = t[k] * scale;
	}
}

extern "C" int cu_ipa_in(cudaStream_t s, float *qa, float *ka, float *vp, float *rig, const float *state,
                         const float *qp, const float *kvp, const float *hw, const float *bb,
                         int L, int H, int Pq, int Pv)
{
	if (L < 0 || H < 0 || Pq < 0 || Pv < 0) return -EINVAL;
	if (L == 0) return 0;
	CU_LAUNCH(1, IPA_THREADS, 0, s, k_ipa_rig)(rig, state, L);
	int rc = cu_launched();
	if (rc || H == 0) return rc;
	CU_LAUNCH(ipa_blocks((int64_t)L * H), IPA_THREADS, 0, s, k_ipa_pts)(qa, ka, vp, rig, qp, kvp, hw, bb,
	                                                                    L, H, Pq, Pv);
	return cu_launched();
}

extern "C" int cu_ipa_out(cudaStream_t s, float *cat, int64_t ldc, const float *op, const float *rig,
                          int L, int n, float eps)
{
	if (L < 0 || n < 0 || ldc < 4 * (int64_t)n) return -EINVAL;
	if ((int64_t)L * n == 0) return 0;
	CU_LAUNCH(ipa_blocks((int64_t)L * n), IPA_THREADS, 0, s, k_ipa_out)(cat, ldc, op, rig, L, n, eps);
	return cu_launched();
}

extern "C" int cu_ipa_rigid(cudaStream_t s, float *state, float *frame, const float *upd, int L, float scale)
{
	if (L < 0) return -EINVAL;
	if (L == 0) return 0;
	CU_LAUNCH(ipa_blocks(L), IPA_THREADS, 0, s, k_ipa_rigid)(state, frame, upd, L, scale);
	return cu_launched();
}
