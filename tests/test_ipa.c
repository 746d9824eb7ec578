/* test_ipa.c - the CPU backend's structure-module point ops (ipa_in,
 * ipa_out, ipa_rigid; backend.h) against geometry computed here
 * independently in double: rotations as quaternion products q p q*
 * (not the rotation matrix the ops use), softplus from its definition
 * log(1 + e^x), the IPA point logit -w/2 sum_p |Tq_ip - Tk_jp|^2 from
 * the distances themselves (not the expanded form the ops feed to the
 * GEMM).  Bounds are fp32 rounding: a few units of u = 2^-24 relative to
 * the magnitudes the float arithmetic went through. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "xorshift.h"

#define U (FLT_EPSILON / 2)   /* fp32 unit roundoff */

static uint64_t rng = 0x853c49e6748fea9bull;

/* Hamilton product o = a b (w, x, y, z) */
static void qmul(const double a[4], const double b[4], double o[4])
{
	double r[4] = {
		a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3],
		a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2],
		a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1],
		a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0],
	};
	memcpy(o, r, sizeof r);
}

/* o = q p q* of the unit quaternion q (a float frame) */
static void qrot(const float *qf, const double p[3], double o[3])
{
	double q[4] = { qf[0], qf[1], qf[2], qf[3] }, c[4] = { q[0], -q[1], -q[2], -q[3] };
	double v[4] = { 0.0, p[0], p[1], p[2] }, t[4];
	qmul(q, v, t);
	qmul(t, c, t);
	o[0] = t[1]; o[1] = t[2]; o[2] = t[3];
}

static double norm3(const double v[3]) { return sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]); }

/* L frames [L, 7]: random unit quaternions, translations in +-tscale */
static void frames(float *st, int L, double tscale)
{
	for (int i = 0; i < L; i++) {
		double q[4], n = 0.0;
		for (int k = 0; k < 4; k++) {
			q[k] = xs_unif_d(&rng);
			n += q[k] * q[k];
		}
		n = sqrt(n);
		for (int k = 0; k < 4; k++) st[7 * i + k] = (float)(q[k] / n);
		for (int k = 0; k < 3; k++) st[7 * i + 4 + k] = (float)(tscale * xs_unif_d(&rng));
	}
}

/* ipa_in: the rigids' translations about their mean, the value points,
 * and q'_i . k'_j of the augmented vectors = sqrt(1/3) b_h - w_h / 2
 * sum_p |Tq_ip - Tk_jp|^2 for every pair and head */
static void test_ipa_in(void **state)
{
	const int L = 33, H = 3, Pq = 4, Pv = 5, Dp = 3 * Pq + 2, nq = H * Pq, nkv = H * (Pq + Pv);
	be_t *be = be_cpu_init(2);
	float st[33 * 7], qp[33 * 3 * 12], kvp[33 * 3 * 27], hw[3], bb[3];
	float qa[33 * 3 * 14], ka[33 * 3 * 14], vp[33 * 3 * 15], rig[33 * 12];
	double ctr[3] = { 0, 0, 0 }, worst = 0.0;

	(void)state;
	assert_non_null(be);
	frames(st, L, 60.0);
	for (int i = 0; i < L * 3 * nq; i++) qp[i] = (float)(8.0 * xs_unif_d(&rng));
	for (int i = 0; i < L * 3 * nkv; i++) kvp[i] = (float)(8.0 * xs_unif_d(&rng));
	for (int h = 0; h < H; h++) hw[h] = (float)(3.0 * xs_unif_d(&rng)), bb[h] = (float)xs_unif_d(&rng);
	hw[0] = 25.0f;   /* softplus's linear branch */
	assert_int_equal(be->ipa_in(be, &(be_ipa_in_t){
		.qa = qa, .ka = ka, .vp = vp, .rig = rig, .state = st, .qp = qp, .kvp = kvp,
		.hw = hw, .bb = bb, .L = L, .H = H, .Pq = Pq, .Pv = Pv,
	}), 0);

	for (int i = 0; i < L; i++)
		for (int k = 0; k < 3; k++) ctr[k] += st[7 * i + 4 + k] / (double)L;
	/* global points (translation about the mean), in double */
	double (*tq)[3] = malloc(sizeof *tq * L * nq), (*tk)[3] = malloc(sizeof *tk * L * nkv);
	assert_true(tq && tk);
	for (int i = 0; i < L; i++) {
		double t[3] = { st[7 * i + 4] - ctr[0], st[7 * i + 5] - ctr[1], st[7 * i + 6] - ctr[2] };
		for (int k = 0; k < 3; k++)
			assert_true(fabs(rig[12 * i + 9 + k] - t[k]) <= 2 * U * (fabs(st[7 * i + 4 + k]) + fabs(ctr[k])));
		for (int n = 0; n < nq + nkv; n++) {
			const float *src = n < nq ? qp + (size_t)i * 3 * nq : kvp + (size_t)i * 3 * nkv;
			int m = n < nq ? nq : nkv, c = n < nq ? n : n - nq;
			double loc[3] = { src[c], src[m + c], src[2 * m + c] }, g[3];
			qrot(st + 7 * i, loc, g);
			for (int k = 0; k < 3; k++) g[k] += t[k];
			memcpy(n < nq ? tq[(size_t)i * nq + c] : tk[(size_t)i * nkv + c], g, sizeof g);
		}
	}
	for (int i = 0; i < L; i++)
		for (int h = 0; h < H; h++)
			for (int p = 0; p < Pv; p++)
				for (int k = 0; k < 3; k++) {
					const double *g = tk[(size_t)i * nkv + h * (Pq + Pv) + Pq + p];
					float v = vp[((size_t)i * H + h) * 3 * Pv + 3 * p + k];
					assert_true(fabs(v - g[k]) <= 16 * U * (norm3(g) + 8.0 * sqrt(3.0) + 120.0));
				}
	/* the squared norms are summed compensated: -w/2 sum |g|^2 of the
	 * op's own fp32 points g (ka's entries) within the two roundings of
	 * the sum and the product by w (2 u; a plain fp32 sum of 3 Pq terms
	 * may be off by up to (3 Pq - 1) u more) */
	double worst_sq = 0.0;
	for (int i = 0; i < L; i++)
		for (int h = 0; h < H; h++) {
			const float *k = ka + ((size_t)i * H + h) * Dp;
			double sp = log(1.0 + exp((double)hw[h]));
			float wf = (float)(sp * sqrt(1.0 / (3.0 * (Pq * 9.0 / 2.0))));
			double sq = 0.0;
			for (int e = 0; e < 3 * Pq; e++) sq += (double)k[e] * k[e];
			double ref = -0.5 * wf * sq, err = fabs(k[3 * Pq + 1] - ref) / fabs(ref);
			worst_sq = fmax(worst_sq, err / U);
			assert_true(err <= 2 * U * (1 + U));
		}
	printf("  ipa_in: -w/2 sum |g|^2 within %.2f u (bound 2 u)\n", worst_sq);
	for (int h = 0; h < H; h++) {
		double sp = log(1.0 + exp((double)hw[h])), w = sp * sqrt(1.0 / (3.0 * (Pq * 9.0 / 2.0)));
		for (int i = 0; i < L; i++)
			for (int j = 0; j < L; j++) {
				const float *a = qa + ((size_t)i * H + h) * Dp, *b = ka + ((size_t)j * H + h) * Dp;
				double dot = 0.0, d2 = 0.0, mag = 0.0;
				for (int e = 0; e < Dp; e++) dot += (double)a[e] * b[e];
				for (int p = 0; p < Pq; p++) {
					const double *x = tq[(size_t)i * nq + h * Pq + p], *y = tk[(size_t)j * nkv + h * (Pq + Pv) + p];
					double dd[3] = { x[0] - y[0], x[1] - y[1], x[2] - y[2] };
					d2 += dd[0] * dd[0] + dd[1] * dd[1] + dd[2] * dd[2];
					mag += (norm3(x) + norm3(y)) * (norm3(x) + norm3(y));
				}
				double ref = sqrt(1.0 / 3.0) * bb[h] - 0.5 * w * d2;
				/* every term of the expansion is a few roundings of
				 * magnitude w (|Tq| + |Tk|)^2 */
				double err = fabs(dot - ref) / (w * mag + 1.0);
				worst = fmax(worst, err / U);
				assert_true(err <= 8 * U);
			}
	}
	printf("  ipa_in: logit point term within %.1f u of w (|Tq| + |Tk|)^2 (bound 8 u)\n", worst);
	free(tq), free(tk);
	be_free(be);
}

/* ipa_out: points placed at R l + t of each rigid come back as l, with
 * sqrt(|l|^2 + eps), in their columns of a wider row */
static void test_ipa_out(void **state)
{
	const int L = 7, n = 10, ldc = 4 * n + 3;
	be_t *be = be_cpu_init(2);
	float st[7 * 7], rig[7 * 12], op[7 * 10 * 3], cat[7 * 43];
	double loc[7 * 10][3];
	const float eps = 1e-8f;

	(void)state;
	assert_non_null(be);
	frames(st, L, 30.0);
	for (int i = 0; i < L; i++) {   /* rigids as ipa_in leaves them: rotation, then translation */
		float *r = rig + 12 * i;
		double e[3][3] = { { 1, 0, 0 }, { 0, 1, 0 }, { 0, 0, 1 } }, c[3];
		for (int k = 0; k < 3; k++) {
			qrot(st + 7 * i, e[k], c);   /* column k of R */
			for (int m = 0; m < 3; m++) r[3 * m + k] = (float)c[m];
			r[9 + k] = st[7 * i + 4 + k];
		}
		for (int p = 0; p < n; p++) {
			double g[3];
			for (int k = 0; k < 3; k++) loc[i * n + p][k] = 10.0 * xs_unif_d(&rng);
			qrot(st + 7 * i, loc[i * n + p], g);
			for (int k = 0; k < 3; k++) op[(i * n + p) * 3 + k] = (float)(g[k] + st[7 * i + 4 + k]);
		}
	}
	for (int k = 0; k < L * ldc; k++) cat[k] = -7.0f;
	assert_int_equal(be->ipa_out(be, &(be_ipa_out_t){
		.cat = cat + 2, .ldc = ldc, .op = op, .rig = rig, .L = L, .n_pts = n, .eps = eps,
	}), 0);
	for (int i = 0; i < L; i++) {
		const float *row = cat + (size_t)i * ldc;
		assert_true(row[0] == -7.0f && row[1] == -7.0f && row[ldc - 1] == -7.0f);
		for (int p = 0; p < n; p++) {
			const double *l = loc[i * n + p];
			double tol = 16 * U * (norm3(l) + 2 * 30.0 * sqrt(3.0));
			for (int k = 0; k < 3; k++) assert_true(fabs(row[2 + k * n + p] - l[k]) <= tol);
			assert_true(fabs(row[2 + 3 * n + p] - sqrt(norm3(l) * norm3(l) + eps)) <= tol);
		}
	}
	be_free(be);
}

/* ipa_rigid: the identity, then updates composed as OpenFold defines
 * them: q <- normalise(q (1, b, c, d)), t <- t + q t_upd q*; the frame
 * carries the scaled translation */
static void test_ipa_rigid(void **state)
{
	const int L = 5;
	be_t *be = be_cpu_init(1);
	float st[5 * 7], fr[5 * 7], upd[5 * 6];
	double q[5][4], t[5][3];

	(void)state;
	assert_non_null(be);
	assert_int_equal(be->ipa_rigid(be, &(be_ipa_rigid_t){
		.state = st, .frame = NULL, .upd = NULL, .L = L, .scale = 0.0f,
	}), 0);
	for (int i = 0; i < L; i++) {
		assert_true(st[7 * i] == 1.0f);
		for (int k = 1; k < 7; k++) assert_true(st[7 * i + k] == 0.0f);
		q[i][0] = 1.0; q[i][1] = q[i][2] = q[i][3] = t[i][0] = t[i][1] = t[i][2] = 0.0;
	}
	for (int blk = 0; blk < 8; blk++) {
		for (int k = 0; k < L * 6; k++) upd[k] = (float)(xs_unif_d(&rng) * (k % 6 < 3 ? 0.5 : 3.0));
		assert_int_equal(be->ipa_rigid(be, &(be_ipa_rigid_t){
			.state = st, .frame = fr, .upd = upd, .L = L, .scale = 10.0f,
		}), 0);
		for (int i = 0; i < L; i++) {
			const float *u = upd + 6 * i;
			float qf[4] = { (float)q[i][0], (float)q[i][1], (float)q[i][2], (float)q[i][3] };
			double du[4] = { 1.0, u[0], u[1], u[2] }, tu[3] = { u[3], u[4], u[5] }, rt[3], n = 0.0;
			qrot(qf, tu, rt);
			for (int k = 0; k < 3; k++) t[i][k] += rt[k];
			qmul(q[i], du, q[i]);
			for (int k = 0; k < 4; k++) n += q[i][k] * q[i][k];
			for (int k = 0; k < 4; k++) q[i][k] /= sqrt(n);
			/* each block's rounding compounds: bound by blocks */
			double tol = 32 * U * (blk + 1);
			for (int k = 0; k < 4; k++) {
				assert_true(fabs(st[7 * i + k] - q[i][k]) <= tol);
				assert_true(fr[7 * i + k] == st[7 * i + k]);
			}
			for (int k = 0; k < 3; k++) {
				assert_true(fabs(st[7 * i + 4 + k] - t[i][k]) <= tol * (norm3(t[i]) + 3.0 * (blk + 1)));
				assert_true(fabs(fr[7 * i + 4 + k] - 10.0 * st[7 * i + 4 + k]) <= 2 * U * 10.0 * fabs(st[7 * i + 4 + k]));
			}
		}
	}
	be_free(be);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ipa_in),
		cmocka_unit_test(test_ipa_out),
		cmocka_unit_test(test_ipa_rigid),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
