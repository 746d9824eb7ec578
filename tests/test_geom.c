/* test_geom.c - unit tests of the rigid-body helpers, and the golden test of
 * the structure-module tail: from each fixture sequence's last-block frames
 * and angles, reproduce sidechain_frames, positions[-1], atom37_positions,
 * atom37_mask and atom14_mask within the fixtures' tolerance rule. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "protein/geometry.h"
#include "golden_json.h"
#include "protein/residue.h"
#include "io/safetensors.h"

#define LINKER_LEN 25

/* ---- unit tests ---------------------------------------------------------- */

static void random_quat(float q[4], unsigned *seed)
{
	for (int i = 0; i < 4; i++)
		q[i] = (float)rand_r(seed) / (float)RAND_MAX - 0.5f;
	geom_quat_normalize(q);
}

static void test_quat_roundtrip(void **state)
{
	(void)state;
	unsigned seed = 7;
	for (int n = 0; n < 1000; n++) {
		float q[4], r[3][3], q2[4];
		random_quat(q, &seed);
		geom_quat_to_rot(q, r);
		/* orthonormal with determinant +1 */
		for (int i = 0; i < 3; i++)
			for (int j = 0; j < 3; j++) {
				float d = r[0][i] * r[0][j] + r[1][i] * r[1][j] + r[2][i] * r[2][j];
				assert_true(fabsf(d - (i == j ? 1.0f : 0.0f)) < 1e-5f);
			}
		float det = r[0][0] * (r[1][1] * r[2][2] - r[1][2] * r[2][1]) -
		            r[0][1] * (r[1][0] * r[2][2] - r[1][2] * r[2][0]) +
		            r[0][2] * (r[1][0] * r[2][1] - r[1][1] * r[2][0]);
		assert_true(fabsf(det - 1.0f) < 1e-5f);
		geom_rot_to_quat(r, q2);
		float sign = q[0] < 0.0f ? -1.0f : 1.0f;
		for (int i = 0; i < 4; i++)
			assert_true(fabsf(q2[i] - sign * q[i]) < 1e-5f);
	}
}

static void test_rigid_compose_apply(void **state)
{
	(void)state;
	unsigned seed = 11;
	for (int n = 0; n < 200; n++) {
		float t7a[7], t7b[7], p[3], m[16];
		random_quat(t7a, &seed);
		random_quat(t7b, &seed);
		for (int i = 0; i < 3; i++) {
			t7a[4 + i] = (float)rand_r(&seed) / (float)RAND_MAX * 20.0f - 10.0f;
			t7b[4 + i] = (float)rand_r(&seed) / (float)RAND_MAX * 20.0f - 10.0f;
			p[i] = (float)rand_r(&seed) / (float)RAND_MAX * 4.0f - 2.0f;
		}
		geom_rigid_t a, b, ab, back;
		geom_rigid_from_tensor7(t7a, &a);
		geom_rigid_from_tensor7(t7b, &b);
		geom_rigid_compose(&a, &b, &ab);
		float x1[3], x2[3];
		geom_rigid_apply(&b, p, x1);
		geom_rigid_apply(&a, x1, x1);       /* aliasing allowed */
		geom_rigid_apply(&ab, p, x2);
		for (int i = 0; i < 3; i++)
			assert_true(fabsf(x1[i] - x2[i]) < 1e-4f);
		geom_rigid_to_4x4(&ab, m);
		assert_true(m[12] == 0.0f && m[13] == 0.0f && m[14] == 0.0f && m[15] == 1.0f);
		geom_rigid_from_4x4(m, &back);
		assert_memory_equal(&back, &ab, sizeof ab);
	}
}

static void test_bad_aatype(void **state)
{
	(void)state;
	int aatype[2] = { 0, 21 };
	float mask[2 * RESIDUE_NUM_ATOM37];
	assert_true(geom_atom_masks(2, aatype, NULL, mask) < 0);
	assert_true(geom_atom_masks(-1, aatype, NULL, mask) < 0);
	aatype[1] = RESIDUE_UNK;
	assert_int_equal(geom_atom_masks(2, aatype, NULL, mask), 0);
	for (int k = 0; k < RESIDUE_NUM_ATOM37; k++)
		assert_true(mask[RESIDUE_NUM_ATOM37 + k] == 0.0f);   /* X has no atoms */
}

/* ---- golden test --------------------------------------------------------- */

enum { T_SIDECHAIN, T_POSITIONS, T_ATOM37, T_ATOM37_MASK, T_ATOM14_MASK, T_COUNT };
static const char *const tensor_names[T_COUNT] = {
	"sidechain_frames", "positions", "atom37_positions", "atom37_mask", "atom14_mask",
};
static double worst_ratio[T_COUNT];

/* whole tensor as floats / doubles (malloc'd) */
static float *load_f32(const safetensors_t *st, const char *seq, const char *tensor, int64_t *numel)
{
	char key[256];
	snprintf(key, sizeof key, "%s/%s", seq, tensor);
	const safetensors_tensor_t *t = safetensors_find(st, key);
	if (!t)
		return NULL;
	float *v = malloc(sizeof *v * (size_t)(t->numel ? t->numel : 1));
	assert_non_null(v);
	safetensors_to_f32(t, v);
	if (numel)
		*numel = t->numel;
	return v;
}

static double *load_f64(const safetensors_t *st, const char *seq, const char *tensor, int64_t *numel)
{
	char key[256];
	snprintf(key, sizeof key, "%s/%s", seq, tensor);
	const safetensors_tensor_t *t = safetensors_find(st, key);
	assert_non_null(t);
	double *v = malloc(sizeof *v * (size_t)(t->numel ? t->numel : 1));
	assert_non_null(v);
	safetensors_to_f64(t, v);
	*numel = t->numel;
	return v;
}

/* compare got[n] with the last n values of SEQ/TENSOR (the last block) */
static void compare(const safetensors_t *st, json_t *jseq, const char *seq, int which,
                    const float *got, int64_t n)
{
	int64_t total;
	double *exp = load_f64(st, seq, tensor_names[which], &total);
	assert_true(total >= n && total % n == 0);
	const double *last = exp + (total - n);
	double tol = golden_json_tol(jseq, tensor_names[which]);
	assert_true(tol > 0.0);
	double worst = 0.0;
	int64_t at = 0;
	for (int64_t i = 0; i < n; i++) {
		double d = fabs((double)got[i] - last[i]);
		if (!(d <= worst))   /* NaN counts as worst */
			worst = d, at = i;
	}
	double ratio = worst / tol;
	printf("  %-8s %-17s max|diff| %.3e  tol %.3e  ratio %.3f\n", seq,
	       tensor_names[which], worst, tol, ratio);
	if (!(ratio <= worst_ratio[which]))
		worst_ratio[which] = ratio;
	if (!(worst <= tol))
		fail_msg("%s/%s: element %lld got %.9g expected %.9g (tol %.3g)", seq,
		         tensor_names[which], (long long)at, got[at], last[at], tol);
	free(exp);
}

/* 1 for chain residues, 0 for the 25-glycine linkers between ':' chains */
static void linker_mask(const char *sequence, int L, float *mask)
{
	int i = 0;
	for (const char *p = sequence; *p; p++) {
		if (*p == ':') {
			for (int k = 0; k < LINKER_LEN; k++, i++) {
				assert_true(i < L);
				mask[i] = 0.0f;
			}
			continue;
		}
		assert_true(i < L);
		mask[i++] = 1.0f;
	}
	assert_int_equal(i, L);
}

static void golden_fixture(const char *fixture)
{
	safetensors_t *st;
	json_t *root;
	assert_int_equal(golden_open(fixture, &st, &root), 0);

	int checked = 0;
	size_t si;
	json_t *jseq;
	json_array_foreach(json_object_get(root, "sequences"), si, jseq) {
		const char *name = json_string_value(json_object_get(jseq, "name"));
		const char *sequence = json_string_value(json_object_get(jseq, "sequence"));
		const char *mode = json_string_value(json_object_get(jseq, "mode"));
		assert_non_null(name);
		assert_non_null(sequence);
		assert_non_null(mode);
		int64_t nf, na, L;
		float *frames = load_f32(st, name, "frames", &nf);
		float *angles = load_f32(st, name, "angles", &na);
		if (!frames || !angles) {
			free(frames);
			free(angles);
			continue;
		}
		double *aa64 = load_f64(st, name, "aatype", &L);
		int *aatype = malloc(sizeof *aatype * (size_t)(L ? L : 1));
		assert_non_null(aatype);
		for (int64_t i = 0; i < L; i++)
			aatype[i] = (int)aa64[i];
		assert_true(nf % (L * 7) == 0 && na % (L * 14) == 0);

		float *side = malloc(sizeof(float) * (size_t)L * RESIDUE_NUM_GROUPS * 16);
		float *a14 = malloc(sizeof(float) * (size_t)L * RESIDUE_NUM_ATOM14 * 3);
		float *a37 = malloc(sizeof(float) * (size_t)L * RESIDUE_NUM_ATOM37 * 3);
		float *m14 = malloc(sizeof(float) * (size_t)L * RESIDUE_NUM_ATOM14);
		float *m37 = malloc(sizeof(float) * (size_t)L * RESIDUE_NUM_ATOM37);
		float *rmask = malloc(sizeof(float) * (size_t)L);
		assert_true(side && a14 && a37 && m14 && m37 && rmask);
		assert_int_equal(geom_structure_tail((int)L, frames + (nf - L * 7),
		                                     angles + (na - L * 14), aatype,
		                                     side, a14, a37, m14, m37), 0);
		/* fair-esm post-processing: linker residues masked out */
		if (strcmp(mode, "esm") == 0 && strchr(sequence, ':')) {
			linker_mask(sequence, (int)L, rmask);
			assert_int_equal(geom_apply_residue_mask((int)L, rmask, m37, a37), 0);
		}
		compare(st, jseq, name, T_SIDECHAIN, side, L * RESIDUE_NUM_GROUPS * 16);
		compare(st, jseq, name, T_POSITIONS, a14, L * RESIDUE_NUM_ATOM14 * 3);
		compare(st, jseq, name, T_ATOM37, a37, L * RESIDUE_NUM_ATOM37 * 3);
		compare(st, jseq, name, T_ATOM37_MASK, m37, L * RESIDUE_NUM_ATOM37);
		compare(st, jseq, name, T_ATOM14_MASK, m14, L * RESIDUE_NUM_ATOM14);
		checked++;
		free(frames), free(angles), free(aa64), free(aatype);
		free(side), free(a14), free(a37), free(m14), free(m37), free(rmask);
	}
	assert_true(checked > 0);
	json_decref(root);
	safetensors_close(st);
}

static void test_golden_tiny_a(void **state)
{
	(void)state;
	golden_fixture("tiny_a");
}

static void test_golden_tiny_b(void **state)
{
	(void)state;
	golden_fixture("tiny_b");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quat_roundtrip),
		cmocka_unit_test(test_rigid_compose_apply),
		cmocka_unit_test(test_bad_aatype),
		cmocka_unit_test(test_golden_tiny_a),
		cmocka_unit_test(test_golden_tiny_b),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	printf("worst diff/tolerance over all sequences:\n");
	for (int i = 0; i < T_COUNT; i++)
		printf("  %-17s %.3f\n", tensor_names[i], worst_ratio[i]);
	return rc;
}
