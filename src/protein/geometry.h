/* geometry.h (prefix geom_) - rigid-body geometry and the structure-module tail, on host floats.
 *
 * Conventions (those of the reference's Rigid/Rotation):
 *  - a quaternion is (w, x, y, z), w the real part;
 *  - a rigid transform T = (R, t) maps a point p to R p + t, R row-major;
 *  - compose(a, b) = a o b: first b, then a (R = Ra Rb, t = Ra tb + ta);
 *  - "tensor7" is (w, x, y, z, tx, ty, tz), "4x4" the homogeneous matrix
 *    [R t; 0 0 0 1] row-major.
 *
 * The tail turns the structure module's last backbone frames and torsion
 * angles into all-atom coordinates:
 *   geom_torsion_angles_to_frames -> geom_frames_to_atom14 -> geom_atom14_to_atom37,
 * with the per-residue atom masks from geom_atom_masks.  geom_structure_tail
 * runs the whole chain.  All functions compute in float and return 0, or
 * negative on bad arguments (L < 0, aatype outside 0..20).
 */
#ifndef ESMBATCH_PROTEIN_GEOMETRY_H
#define ESMBATCH_PROTEIN_GEOMETRY_H

typedef struct {
	float r[3][3];   /* rotation, row-major */
	float t[3];      /* translation */
} geom_rigid_t;

/* q /= |q| (left as is when |q| == 0) */
void geom_quat_normalize(float q[4]);
/* rotation matrix of a unit quaternion (q is not normalised here) */
void geom_quat_to_rot(const float q[4], float r[3][3]);
/* unit quaternion of a rotation matrix, sign chosen so that w >= 0 */
void geom_rot_to_quat(const float r[3][3], float q[4]);

/* out = a o b; out may alias a or b */
void geom_rigid_compose(const geom_rigid_t *a, const geom_rigid_t *b, geom_rigid_t *out);
/* out = R p + t; out may alias p */
void geom_rigid_apply(const geom_rigid_t *a, const float p[3], float out[3]);
/* t7: [7] (quaternion as stored, not renormalised; translation) */
void geom_rigid_from_tensor7(const float t7[7], geom_rigid_t *out);
/* m: [4][4] row-major homogeneous */
void geom_rigid_from_4x4(const float m[16], geom_rigid_t *out);
void geom_rigid_to_4x4(const geom_rigid_t *a, float m[16]);

/* frames: [L,7] backbone frames (quat w,x,y,z + translation, Angstrom);
 * angles: [L,7,2] (sin, cos) of omega, phi, psi, chi1..chi4, normalised;
 * aatype: [L] (0..20)
 * -> sidechain: [L,8,4,4] the 8 rigid-group frames of each residue in the
 *    global frame (chi2..chi4 chained on chi1..chi3). */
int geom_torsion_angles_to_frames(int L, const float *frames, const float *angles,
                                  const int *aatype, float *sidechain);

/* sidechain: [L,8,4,4] (from geom_torsion_angles_to_frames); aatype: [L]
 * -> atom14: [L,14,3] literature positions placed by their group's frame,
 *    0 in empty slots. */
int geom_frames_to_atom14(int L, const float *sidechain, const int *aatype, float *atom14);

/* atom14: [L,14,3]; aatype: [L] -> atom37: [L,37,3], 0 where the residue
 * has no such atom. */
int geom_atom14_to_atom37(int L, const float *atom14, const int *aatype, float *atom37);

/* aatype: [L] -> atom14_mask: [L,14], atom37_mask: [L,37] (1 = atom exists);
 * either output may be NULL. */
int geom_atom_masks(int L, const int *aatype, float *atom14_mask, float *atom37_mask);

/* Multiply per-atom outputs by a per-residue mask (multimer linker residues
 * are 0): res_mask: [L]; atom37_mask: [L,37] and atom37: [L,37,3], either
 * may be NULL. */
int geom_apply_residue_mask(int L, const float *res_mask, float *atom37_mask, float *atom37);

/* The whole tail: frames [L,7], angles [L,7,2], aatype [L]
 * -> sidechain [L,8,4,4], atom14 [L,14,3], atom37 [L,37,3] (all required),
 *    atom14_mask [L,14], atom37_mask [L,37] (either may be NULL). */
int geom_structure_tail(int L, const float *frames, const float *angles, const int *aatype,
                        float *sidechain, float *atom14, float *atom37,
                        float *atom14_mask, float *atom37_mask);

#endif
