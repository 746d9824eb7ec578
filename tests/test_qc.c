/* test_qc.c - the figures summary.tsv adds per record (protein/qc.h), each
 * on a constructed structure: pLDDT bands at their edges, every flag
 * triggered (and not triggered next to its threshold), the clash grid
 * against a count over all pairs, and the CRC64 against published values
 * (a UniProt entry, and the SWISS-PROT library's own example). */
#include <math.h>
#include <stdio.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "protein/qc.h"
#include "protein/residue.h"

#define NA RESIDUE_NUM_ATOM37
#define MAXL 256

/* a structure of L residues, no atom present */
typedef struct {
	int   L;
	float x[MAXL * NA * 3], mask[MAXL * NA], plddt[MAXL * NA];
	int   chain[MAXL];
} mol_t;

static void put(mol_t *m, int i, int k, float x, float y, float z)
{
	float *p = m->x + ((size_t)i * NA + k) * 3;
	p[0] = x;
	p[1] = y;
	p[2] = z;
	m->mask[i * NA + k] = 1;
}

/* a straight chain: CA every 3.8 A on x, N and C 1.3 A from it, so that
 * C(i)-N(i+1) is 1.4 A (a peptide bond, shorter than the clash limit);
 * one chain, pLDDT 80 */
static mol_t *straight(int L)
{
	mol_t *m = calloc(1, sizeof *m);
	m->L = L;
	for (int i = 0; i < L; i++) {
		put(m, i, RESIDUE_ATOM37_N, 3.8f * i - 1.2f, 0.5f, 0);
		put(m, i, RESIDUE_ATOM37_CA, 3.8f * i, 0, 0);
		put(m, i, RESIDUE_ATOM37_C, 3.8f * i + 1.2f, 0.5f, 0);
		for (int k = 0; k < NA; k++) m->plddt[i * NA + k] = 0.8f;
	}
	return m;
}

static qc_t measure(const mol_t *m)
{
	qc_input_t in = { .L = m->L, .atom37 = m->x, .atom37_mask = m->mask, .plddt = m->plddt,
	                  .chain = m->chain };
	qc_t q;
	assert_int_equal(qc_measure(&in, &q), 0);
	return q;
}

static void test_clean_chain(void **state)
{
	(void)state;
	mol_t *m = straight(40);
	qc_t q = measure(m);
	char f[64];

	assert_int_equal(q.ca_breaks, 0);
	assert_int_equal(q.clashes, 0);   /* the 1.4 A peptide bonds are not clashes */
	assert_int_equal(q.band[QC_CONFIDENT], 40);
	qc_flags(&q, 80, 0.95, f, sizeof f);
	assert_string_equal(f, "-");
	free(m);
}

static void test_bands(void **state)
{
	(void)state;
	/* exactly representable values at and around the AFDB band edges */
	static const float p[] = { 0.25f, 0.5f, 0.625f, 0.75f, 0.875f, 0.9375f, 0.70f + 1e-3f };
	mol_t *m = straight(7);
	for (int i = 0; i < 7; i++) m->plddt[i * NA + RESIDUE_ATOM37_CA] = p[i];
	m->plddt[0 * NA + RESIDUE_ATOM37_N] = 0.99f;   /* only CA counts */
	qc_t q = measure(m);
	assert_int_equal(q.band[QC_VERY_LOW], 1);      /* 25 */
	assert_int_equal(q.band[QC_LOW], 2);           /* 50 (low), 62.5 */
	assert_int_equal(q.band[QC_CONFIDENT], 3);     /* 75, 87.5, 70.1 */
	assert_int_equal(q.band[QC_VERY_HIGH], 1);     /* 93.75 */
	assert_int_equal(qc_residues(&q), 7);
	/* 70.004 is written 70.00, low in the file and here; 70.006 is 70.01 */
	m->plddt[6 * NA + RESIDUE_ATOM37_CA] = 0.70004f;
	q = measure(m);
	assert_int_equal(q.band[QC_LOW], 3);
	m->plddt[6 * NA + RESIDUE_ATOM37_CA] = 0.70006f;
	q = measure(m);
	assert_int_equal(q.band[QC_CONFIDENT], 3);
	/* a masked (linker) residue is in no band */
	m->mask[3 * NA + RESIDUE_ATOM37_CA] = 0;
	q = measure(m);
	assert_int_equal(qc_residues(&q), 6);
	free(m);
}

static void test_ptm_plddt_mismatch(void **state)
{
	(void)state;
	qc_t q = { { 0 }, 0, 0 };
	char f[64];

	qc_flags(&q, 45.0, 0.95, f, sizeof f);
	assert_string_equal(f, "ptm_plddt_mismatch");
	qc_flags(&q, 50.0, 0.95, f, sizeof f);   /* mean pLDDT not below 50 */
	assert_string_equal(f, "-");
	qc_flags(&q, 45.0, 0.90, f, sizeof f);   /* pTM not above 0.9 */
	assert_string_equal(f, "-");
}

static void test_ca_break(void **state)
{
	(void)state;
	mol_t *m = straight(20);
	char f[64];

	/* residues 10.. moved 2 A further: one CA-CA of 5.8 A */
	for (int i = 10; i < 20; i++)
		for (int k = 0; k < 3; k++) m->x[((size_t)i * NA + k) * 3] += 2.0f;
	qc_t q = measure(m);
	assert_int_equal(q.ca_breaks, 1);
	/* residue 4 moved back 1 A: CA3-CA4 2.8 A (too short) and CA4-CA5 4.8 A */
	m->x[((size_t)4 * NA + RESIDUE_ATOM37_CA) * 3] -= 1.0f;
	q = measure(m);
	assert_int_equal(q.ca_breaks, 3);
	qc_flags(&q, 80, 0.5, f, sizeof f);
	assert_string_equal(f, "ca_break:3");
	/* within 3.0-4.5 A at both ends: 3.0 and 4.5 are no break */
	mol_t *e = straight(3);
	e->x[((size_t)1 * NA + RESIDUE_ATOM37_CA) * 3] = 3.0f;   /* CA0-CA1 3.0 */
	e->x[((size_t)2 * NA + RESIDUE_ATOM37_CA) * 3] = 7.5f;   /* CA1-CA2 4.5 */
	q = measure(e);
	assert_int_equal(q.ca_breaks, 0);
	/* 4.50004 A is written 4.500: no break in the file, none here */
	e->x[((size_t)2 * NA + RESIDUE_ATOM37_CA) * 3] = 7.50004f;
	q = measure(e);
	assert_int_equal(q.ca_breaks, 0);
	e->x[((size_t)2 * NA + RESIDUE_ATOM37_CA) * 3] = 7.5006f;   /* 4.501 */
	q = measure(e);
	assert_int_equal(q.ca_breaks, 1);
	free(e);
	free(m);
}

static void test_ca_break_chains(void **state)
{
	(void)state;
	mol_t *m = straight(30);
	/* chain B from residue 15 on, 40 A away: no break between chains */
	for (int i = 15; i < 30; i++) {
		m->chain[i] = 1;
		for (int k = 0; k < 3; k++) m->x[((size_t)i * NA + k) * 3 + 1] += 40.0f;
	}
	qc_t q = measure(m);
	assert_int_equal(q.ca_breaks, 0);
	/* the same jump within one chain is a break */
	for (int i = 15; i < 30; i++) m->chain[i] = 0;
	q = measure(m);
	assert_int_equal(q.ca_breaks, 1);
	/* nor across a masked (linker) residue */
	for (int k = 0; k < NA; k++) m->mask[14 * NA + k] = 0;
	q = measure(m);
	assert_int_equal(q.ca_breaks, 0);
	free(m);
}

/* arrays of exactly one residue (ASan and valgrind see a read outside):
 * its first residue has no predecessor */
static void test_one_residue(void **state)
{
	(void)state;
	float *x = calloc(NA * 3, sizeof *x), *mask = calloc(NA, sizeof *mask);
	float *plddt = calloc(NA, sizeof *plddt);
	int *chain = calloc(1, sizeof *chain);
	qc_input_t in = { .L = 1, .atom37 = x, .atom37_mask = mask, .plddt = plddt, .chain = chain };
	qc_t q;

	mask[RESIDUE_ATOM37_CA] = 1;
	assert_int_equal(qc_measure(&in, &q), 0);
	assert_int_equal(q.ca_breaks, 0);
	assert_int_equal(q.clashes, 0);
	assert_int_equal(q.band[QC_VERY_LOW], 1);
	free(x);
	free(mask);
	free(plddt);
	free(chain);
}

static void test_clash(void **state)
{
	(void)state;
	mol_t *m = straight(20);
	char f[64];

	/* a CB of residue 2 1.0 A above residue 9's CA: one pair (its N and C
	 * are 1.64 A away) */
	put(m, 2, 3, 3.8f * 9, 0, 1.0f);
	qc_t q = measure(m);
	assert_int_equal(q.clashes, 1);
	qc_flags(&q, 80, 0.5, f, sizeof f);
	assert_string_equal(f, "clash:1");
	/* 1.5 A is no clash */
	put(m, 2, 3, 3.8f * 9, 0, 1.5f);
	q = measure(m);
	assert_int_equal(q.clashes, 0);
	/* 1.49996 A is written 1.500 A apart: no clash in the file, none here */
	put(m, 2, 3, 3.8f * 9, 0, 1.49996f);
	q = measure(m);
	assert_int_equal(q.clashes, 0);
	put(m, 2, 3, 3.8f * 9, 0, 1.4994f);   /* 1.499 */
	q = measure(m);
	assert_int_equal(q.clashes, 1);
	put(m, 2, 3, 3.8f * 9, 0, 1.5f);
	/* the C(i)-N(i+1) distance of a peptide bond counts across chains */
	m->chain[10] = 1;
	for (int i = 11; i < 20; i++) m->chain[i] = 1;   /* break between 9 and 10 */
	q = measure(m);
	assert_int_equal(q.clashes, 1);
	/* an atom that is not finite is left out */
	put(m, 2, 3, NAN, 0, 1.0f);
	put(m, 3, 3, 3.8f * 9, 0, 1.0f);
	q = measure(m);
	assert_int_equal(q.clashes, 2);   /* CB3-CA9, and C9-N10 */
	free(m);
}

static void test_all_flags(void **state)
{
	(void)state;
	qc_t q = { { 0 }, 2, 7 };
	char f[64], small[8];

	qc_flags(&q, 30.0, 0.95, f, sizeof f);
	assert_string_equal(f, "ptm_plddt_mismatch,ca_break:2,clash:7");
	qc_flags(&q, 30.0, 0.95, small, sizeof small);   /* truncated, terminated */
	assert_int_equal(strlen(small), sizeof small - 1);
	qc_t a = { { 1, 2, 3, 4 }, 1, 2 };
	qc_merge(&q, &a);
	assert_int_equal(q.ca_breaks, 3);
	assert_int_equal(q.clashes, 9);
	assert_int_equal(qc_residues(&q), 10);
}

/* a coordinate as a PDB writes it */
static double written(float x)
{
	char buf[32];
	snprintf(buf, sizeof buf, "%.3f", (double)x);
	return strtod(buf, NULL);
}

/* pairs closer than 1.5 A over all pairs, the definition written directly,
 * on the coordinates as a PDB prints them */
static int64_t brute_clashes(const mol_t *m)
{
	int64_t n = 0;
	for (int i = 0; i < m->L; i++)
		for (int a = 0; a < NA; a++) {
			if (!m->mask[i * NA + a]) continue;
			for (int j = i + 1; j < m->L; j++)
				for (int b = 0; b < NA; b++) {
					if (!m->mask[j * NA + b]) continue;
					if (j == i + 1 && m->chain[i] == m->chain[j] && a == RESIDUE_ATOM37_C &&
					    b == RESIDUE_ATOM37_N)
						continue;
					const float *p = m->x + ((size_t)i * NA + a) * 3;
					const float *q = m->x + ((size_t)j * NA + b) * 3;
					double d = 0;
					for (int c = 0; c < 3; c++)
						d += (written(p[c]) - written(q[c])) * (written(p[c]) - written(q[c]));
					n += d < 1.5 * 1.5;
				}
		}
	return n;
}

static void test_clash_grid(void **state)
{
	(void)state;
	unsigned seed = 5;
	mol_t *m = calloc(1, sizeof *m);
	/* 256 residues of 6 atoms in a 24 A box, some at negative coordinates:
	 * many pairs in neighbouring cells */
	m->L = MAXL;
	for (int i = 0; i < MAXL; i++) {
		m->chain[i] = i / 100;
		for (int k = 0; k < 6; k++)
			put(m, i, k, 24.0f * rand_r(&seed) / RAND_MAX - 8, 24.0f * rand_r(&seed) / RAND_MAX - 8,
			    24.0f * rand_r(&seed) / RAND_MAX - 8);
	}
	int64_t want = brute_clashes(m);
	qc_t q = measure(m);
	assert_true(want > 100);
	assert_int_equal(q.clashes, want);
	free(m);
}

static void test_crc64(void **state)
{
	(void)state;
	char h[17];
	/* UniProtKB P60137 (PSBL_ORYSJ): SQ   SEQUENCE   38 AA;  4497 MW;  55537AEC50D25E8D CRC64; */
	const char *psbl = "MTQSNPNEQNVELNRTSLYWGLLLIFVLAVLFSNYFFN";
	qc_crc64_hex(psbl, strlen(psbl), h);
	assert_string_equal(h, "55537AEC50D25E8D");
	/* the SWISS::CRC64 module's documented example */
	qc_crc64_hex("IHATEMATH", 9, h);
	assert_string_equal(h, "E3DCADD69B01ADD1");
	qc_crc64_hex("", 0, h);
	assert_string_equal(h, "0000000000000000");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clean_chain),
		cmocka_unit_test(test_bands),
		cmocka_unit_test(test_ptm_plddt_mismatch),
		cmocka_unit_test(test_ca_break),
		cmocka_unit_test(test_ca_break_chains),
		cmocka_unit_test(test_one_residue),
		cmocka_unit_test(test_clash),
		cmocka_unit_test(test_all_flags),
		cmocka_unit_test(test_clash_grid),
		cmocka_unit_test(test_crc64),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
