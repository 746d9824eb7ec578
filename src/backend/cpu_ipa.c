/* cpu_ipa.c - the structure module's point ops on the CPU (see cpu_ipa.h
 * and backend.h): rigids from the frame state, points into and out of the
 * frames, the backbone update.  One residue per OpenMP iteration; the
 * geometry is protein/geometry.h's, so the CUDA kernels (kernels/ipa.cu)
 * are checked against the formulas the rest of the program uses.
 */
#include "backend/cpu_ipa.h"

#include <math.h>
#include <string.h>

#include "protein/geometry.h"

/* (s, c) += x * x, compensated: the product's rounding error from fmaf
 * and the sum's from TwoSum go to c, so s + c is the sum of squares as
 * if accumulated in twice the precision (Ogita, Rump and Oishi's Dot2) */
static void cpu_ipa_sq(float *s, float *c, float x)
{
	float p = x * x, e = fmaf(x, x, -p), t = *s + p, z = t - *s;

	*c += ((*s - (t - z)) + (p - z)) + e;
	*s = t;
}

int cpu_ipa_in(be_t *be, const be_ipa_in_t *a)
{
	float *qa = a->qa, *ka = a->ka, *vp = a->vp, *rig = a->rig;
	const float *state = a->state, *qp = a->qp, *kvp = a->kvp, *hw = a->hw, *bb = a->bb;
	int L = a->L, H = a->H, Pq = a->Pq, Pv = a->Pv;
	int Dp = 3 * Pq + 2, nq = H * Pq, nkv = H * (Pq + Pv);
	double ctr[3] = { 0, 0, 0 };
	const float sb = sqrtf(1.0f / 3.0f);

	for (int i = 0; i < L; i++)
		for (int k = 0; k < 3; k++) ctr[k] += state[7 * i + 4 + k];
	for (int k = 0; k < 3; k++) ctr[k] /= L;
	#pragma omp parallel for schedule(static)
	for (int i = 0; i < L; i++) {
		geom_rigid_t r;
		const float *qpi = qp + (size_t)i * 3 * nq, *kvpi = kvp + (size_t)i * 3 * nkv;

		geom_quat_to_rot(state + 7 * i, r.r);
		for (int k = 0; k < 3; k++) r.t[k] = (float)(state[7 * i + 4 + k] - ctr[k]);
		memcpy(rig + 12 * (size_t)i, r.r, sizeof r.r);
		memcpy(rig + 12 * (size_t)i + 9, r.t, sizeof r.t);
		for (int h = 0; h < H; h++) {
			double x = hw[h], sp = x > 20.0 ? x : log1p(exp(x));   /* nn.Softplus */
			float wh = (float)(sp * sqrt(2.0 / (27.0 * Pq)));
			float *q = qa + ((size_t)i * H + h) * Dp, *k = ka + ((size_t)i * H + h) * Dp;
			float *v = vp + ((size_t)i * H + h) * 3 * Pv, s = 0.0f, c = 0.0f;
			for (int p = 0; p < Pq; p++) {
				int n = h * Pq + p;
				float loc[3] = { qpi[n], qpi[nq + n], qpi[2 * nq + n] }, g[3];
				geom_rigid_apply(&r, loc, g);
				for (int e = 0; e < 3; e++) {
					q[3 * p + e] = wh * g[e];
					cpu_ipa_sq(&s, &c, g[e]);
				}
			}
			q[3 * Pq] = -0.5f * wh * (s + c) + sb * bb[h];
			q[3 * Pq + 1] = 1.0f;
			s = c = 0.0f;
			for (int p = 0; p < Pq + Pv; p++) {
				int n = h * (Pq + Pv) + p;
				float loc[3] = { kvpi[n], kvpi[nkv + n], kvpi[2 * nkv + n] }, g[3];
				geom_rigid_apply(&r, loc, g);
				if (p >= Pq) {
					memcpy(v + 3 * (p - Pq), g, sizeof g);
					continue;
				}
				for (int e = 0; e < 3; e++) {
					k[3 * p + e] = g[e];
					cpu_ipa_sq(&s, &c, g[e]);
				}
			}
			k[3 * Pq] = 1.0f;
			k[3 * Pq + 1] = -0.5f * wh * (s + c);
		}
	}
	return 0;
}

int cpu_ipa_out(be_t *be, const be_ipa_out_t *a)
{
	float *cat = a->cat, eps = a->eps;
	const float *op = a->op, *rig = a->rig;
	int64_t ldc = a->ldc;
	int L = a->L, n_pts = a->n_pts;

	#pragma omp parallel for schedule(static)
	for (int i = 0; i < L; i++) {
		const float *R = rig + 12 * (size_t)i, *t = R + 9;
		float *row = cat + (size_t)i * ldc;
		for (int n = 0; n < n_pts; n++) {
			const float *g = op + ((size_t)i * n_pts + n) * 3;
			float v[3] = { g[0] - t[0], g[1] - t[1], g[2] - t[2] }, l[3];
			for (int k = 0; k < 3; k++)   /* R^T v */
				l[k] = R[k] * v[0] + R[3 + k] * v[1] + R[6 + k] * v[2];
			row[n] = l[0];
			row[n_pts + n] = l[1];
			row[2 * n_pts + n] = l[2];
			row[3 * n_pts + n] = sqrtf(l[0] * l[0] + l[1] * l[1] + l[2] * l[2] + eps);
		}
	}
	return 0;
}

int cpu_ipa_rigid(be_t *be, const be_ipa_rigid_t *a)
{
	float *state = a->state, *frame = a->frame, scale = a->scale;
	const float *upd = a->upd;
	int L = a->L;

	#pragma omp parallel for schedule(static)
	for (int i = 0; i < L; i++) {
		float *q = state + 7 * (size_t)i, *t = q + 4, r[3][3];
		const float *u = upd ? upd + 6 * (size_t)i : NULL;
		if (!u) {
			q[0] = 1.0f;
			q[1] = q[2] = q[3] = t[0] = t[1] = t[2] = 0.0f;
			continue;
		}
		geom_quat_to_rot(q, r);
		for (int k = 0; k < 3; k++)
			t[k] += r[k][0] * u[3] + r[k][1] * u[4] + r[k][2] * u[5];
		float w = q[0] - (q[1] * u[0] + q[2] * u[1] + q[3] * u[2]);
		float x = q[1] + q[0] * u[0] + q[2] * u[2] - q[3] * u[1];
		float y = q[2] + q[0] * u[1] + q[3] * u[0] - q[1] * u[2];
		float z = q[3] + q[0] * u[2] + q[1] * u[1] - q[2] * u[0];
		q[0] = w; q[1] = x; q[2] = y; q[3] = z;
		geom_quat_normalize(q);
		if (!frame) continue;
		memcpy(frame + 7 * (size_t)i, q, sizeof(float) * 4);
		for (int k = 0; k < 3; k++) frame[7 * (size_t)i + 4 + k] = t[k] * scale;
	}
	return 0;
}
