/* geometry.c - quaternions, rigid transforms and the structure-module tail
 * (torsions -> rigid-group frames -> atom14 -> atom37).  See geometry.h. */
#include "protein/geometry.h"

#include <math.h>
#include <string.h>

#include "util/log.h"
#include "protein/residue.h"

void geom_quat_normalize(float q[4])
{
	float n = sqrtf(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
	if (n > 0.0f)
		for (int i = 0; i < 4; i++)
			q[i] /= n;
}

void geom_quat_to_rot(const float q[4], float r[3][3])
{
	float w = q[0], x = q[1], y = q[2], z = q[3];
	r[0][0] = w * w + x * x - y * y - z * z;
	r[0][1] = 2.0f * (x * y - w * z);
	r[0][2] = 2.0f * (x * z + w * y);
	r[1][0] = 2.0f * (x * y + w * z);
	r[1][1] = w * w - x * x + y * y - z * z;
	r[1][2] = 2.0f * (y * z - w * x);
	r[2][0] = 2.0f * (x * z - w * y);
	r[2][1] = 2.0f * (y * z + w * x);
	r[2][2] = w * w - x * x - y * y + z * z;
}

/* Shepperd's method: pivot on the largest of w^2, x^2, y^2, z^2. */
void geom_rot_to_quat(const float r[3][3], float q[4])
{
	float tr = r[0][0] + r[1][1] + r[2][2];
	float w, x, y, z;
	if (tr >= r[0][0] && tr >= r[1][1] && tr >= r[2][2]) {
		float s = 2.0f * sqrtf(1.0f + tr);          /* 4w */
		w = 0.25f * s;
		x = (r[2][1] - r[1][2]) / s;
		y = (r[0][2] - r[2][0]) / s;
		z = (r[1][0] - r[0][1]) / s;
	} else if (r[0][0] >= r[1][1] && r[0][0] >= r[2][2]) {
		float s = 2.0f * sqrtf(1.0f + r[0][0] - r[1][1] - r[2][2]);   /* 4x */
		w = (r[2][1] - r[1][2]) / s;
		x = 0.25f * s;
		y = (r[0][1] + r[1][0]) / s;
		z = (r[0][2] + r[2][0]) / s;
	} else if (r[1][1] >= r[2][2]) {
		float s = 2.0f * sqrtf(1.0f + r[1][1] - r[0][0] - r[2][2]);   /* 4y */
		w = (r[0][2] - r[2][0]) / s;
		x = (r[0][1] + r[1][0]) / s;
		y = 0.25f * s;
		z = (r[1][2] + r[2][1]) / s;
	} else {
		float s = 2.0f * sqrtf(1.0f + r[2][2] - r[0][0] - r[1][1]);   /* 4z */
		w = (r[1][0] - r[0][1]) / s;
		x = (r[0][2] + r[2][0]) / s;
		y = (r[1][2] + r[2][1]) / s;
		z = 0.25f * s;
	}
	float sign = w < 0.0f ? -1.0f : 1.0f;
	q[0] = sign * w;
	q[1] = sign * x;
	q[2] = sign * y;
	q[3] = sign * z;
	geom_quat_normalize(q);
}

void geom_rigid_compose(const geom_rigid_t *a, const geom_rigid_t *b, geom_rigid_t *out)
{
	geom_rigid_t o;
	for (int i = 0; i < 3; i++) {
		for (int j = 0; j < 3; j++)
			o.r[i][j] = a->r[i][0] * b->r[0][j] + a->r[i][1] * b->r[1][j] +
			            a->r[i][2] * b->r[2][j];
		o.t[i] = a->r[i][0] * b->t[0] + a->r[i][1] * b->t[1] + a->r[i][2] * b->t[2] +
		         a->t[i];
	}
	*out = o;
}

void geom_rigid_apply(const geom_rigid_t *a, const float p[3], float out[3])
{
	float o[3];
	for (int i = 0; i < 3; i++)
		o[i] = a->r[i][0] * p[0] + a->r[i][1] * p[1] + a->r[i][2] * p[2] + a->t[i];
	memcpy(out, o, sizeof o);
}

void geom_rigid_from_tensor7(const float t7[7], geom_rigid_t *out)
{
	geom_quat_to_rot(t7, out->r);
	for (int i = 0; i < 3; i++)
		out->t[i] = t7[4 + i];
}

void geom_rigid_from_4x4(const float m[16], geom_rigid_t *out)
{
	for (int i = 0; i < 3; i++) {
		for (int j = 0; j < 3; j++)
			out->r[i][j] = m[4 * i + j];
		out->t[i] = m[4 * i + 3];
	}
}

void geom_rigid_to_4x4(const geom_rigid_t *a, float m[16])
{
	for (int i = 0; i < 3; i++) {
		for (int j = 0; j < 3; j++)
			m[4 * i + j] = a->r[i][j];
		m[4 * i + 3] = a->t[i];
	}
	m[12] = m[13] = m[14] = 0.0f;
	m[15] = 1.0f;
}

/* 0 when L >= 0 and every aatype is in 0..20, else -1 (logged) */
static int check_args(const char *fn, int L, const int *aatype)
{
	if (L < 0) {
		log_error("%s: negative length %d", fn, L);
		return -1;
	}
	for (int i = 0; i < L; i++) {
		if (aatype[i] < 0 || aatype[i] >= RESIDUE_NUM_RESTYPES) {
			log_error("%s: aatype %d at residue %d is outside 0..%d", fn, aatype[i], i,
			          RESIDUE_NUM_RESTYPES - 1);
			return -1;
		}
	}
	return 0;
}

int geom_torsion_angles_to_frames(int L, const float *frames, const float *angles,
                                  const int *aatype, float *sidechain)
{
	if (check_args(__func__, L, aatype) < 0)
		return -1;
	for (int i = 0; i < L; i++) {
		const int aa = aatype[i];
		geom_rigid_t bb, local[RESIDUE_NUM_GROUPS];
		geom_rigid_from_tensor7(frames + 7 * i, &bb);

		/* group g = default frame o rotation about x by its torsion;
		 * group 0 (backbone) has the torsion (sin, cos) = (0, 1). */
		for (int g = 0; g < RESIDUE_NUM_GROUPS; g++) {
			float s = 0.0f, c = 1.0f;
			if (g > 0) {
				s = angles[(i * RESIDUE_NUM_TORSIONS + g - 1) * 2 + 0];
				c = angles[(i * RESIDUE_NUM_TORSIONS + g - 1) * 2 + 1];
			}
			geom_rigid_t def, rx = {
				.r = { { 1.0f, 0.0f, 0.0f }, { 0.0f, c, -s }, { 0.0f, s, c } },
				.t = { 0.0f, 0.0f, 0.0f },
			};
			geom_rigid_from_4x4(&residue_rigid_group_default_frame[aa][g][0][0], &def);
			geom_rigid_compose(&def, &rx, &local[g]);
		}
		/* chi2..chi4 frames are relative to the previous chi frame */
		for (int g = 5; g < RESIDUE_NUM_GROUPS; g++)
			geom_rigid_compose(&local[g - 1], &local[g], &local[g]);
		for (int g = 0; g < RESIDUE_NUM_GROUPS; g++) {
			geom_rigid_t glob;
			geom_rigid_compose(&bb, &local[g], &glob);
			geom_rigid_to_4x4(&glob, sidechain + ((size_t)i * RESIDUE_NUM_GROUPS + g) * 16);
		}
	}
	return 0;
}

int geom_frames_to_atom14(int L, const float *sidechain, const int *aatype, float *atom14)
{
	if (check_args(__func__, L, aatype) < 0)
		return -1;
	for (int i = 0; i < L; i++) {
		const int aa = aatype[i];
		for (int a = 0; a < RESIDUE_NUM_ATOM14; a++) {
			float *out = atom14 + ((size_t)i * RESIDUE_NUM_ATOM14 + a) * 3;
			if (residue_atom14_mask[aa][a] == 0.0f) {
				out[0] = out[1] = out[2] = 0.0f;
				continue;
			}
			geom_rigid_t fr;
			int g = residue_atom14_to_rigid_group[aa][a];
			geom_rigid_from_4x4(sidechain + ((size_t)i * RESIDUE_NUM_GROUPS + g) * 16, &fr);
			geom_rigid_apply(&fr, residue_atom14_rigid_group_positions[aa][a], out);
		}
	}
	return 0;
}

int geom_atom14_to_atom37(int L, const float *atom14, const int *aatype, float *atom37)
{
	if (check_args(__func__, L, aatype) < 0)
		return -1;
	for (int i = 0; i < L; i++) {
		const int aa = aatype[i];
		for (int k = 0; k < RESIDUE_NUM_ATOM37; k++) {
			float *out = atom37 + ((size_t)i * RESIDUE_NUM_ATOM37 + k) * 3;
			if (residue_atom37_mask[aa][k] == 0.0f) {
				out[0] = out[1] = out[2] = 0.0f;
				continue;
			}
			const float *in = atom14 + ((size_t)i * RESIDUE_NUM_ATOM14 +
			                            residue_atom37_to_atom14[aa][k]) * 3;
			out[0] = in[0];
			out[1] = in[1];
			out[2] = in[2];
		}
	}
	return 0;
}

int geom_atom_masks(int L, const int *aatype, float *atom14_mask, float *atom37_mask)
{
	if (check_args(__func__, L, aatype) < 0)
		return -1;
	for (int i = 0; i < L; i++) {
		if (atom14_mask)
			memcpy(atom14_mask + (size_t)i * RESIDUE_NUM_ATOM14, residue_atom14_mask[aatype[i]],
			       sizeof residue_atom14_mask[0]);
		if (atom37_mask)
			memcpy(atom37_mask + (size_t)i * RESIDUE_NUM_ATOM37, residue_atom37_mask[aatype[i]],
			       sizeof residue_atom37_mask[0]);
	}
	return 0;
}

int geom_apply_residue_mask(int L, const float *res_mask, float *atom37_mask, float *atom37)
{
	if (L < 0)
		return -1;
	for (int i = 0; i < L; i++) {
		for (int k = 0; k < RESIDUE_NUM_ATOM37; k++) {
			size_t at = (size_t)i * RESIDUE_NUM_ATOM37 + k;
			if (atom37_mask)
				atom37_mask[at] *= res_mask[i];
			if (atom37)
				for (int d = 0; d < 3; d++)
					atom37[at * 3 + d] *= res_mask[i];
		}
	}
	return 0;
}

int geom_structure_tail(int L, const float *frames, const float *angles, const int *aatype,
                        float *sidechain, float *atom14, float *atom37,
                        float *atom14_mask, float *atom37_mask)
{
	if (geom_torsion_angles_to_frames(L, frames, angles, aatype, sidechain) < 0 ||
	    geom_frames_to_atom14(L, sidechain, aatype, atom14) < 0 ||
	    geom_atom14_to_atom37(L, atom14, aatype, atom37) < 0 ||
	    geom_atom_masks(L, aatype, atom14_mask, atom37_mask) < 0)
		return -1;
	return 0;
}
