/* qc.c - pLDDT bands, CRC64 and sanity flags of a predicted structure (see qc.h). */
#include "protein/qc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protein/residue.h"

#define QC_FAR 1e6f   /* A: an atom beyond this is left out, as a non-finite one */

/* one present atom of the clash search */
typedef struct {
	double  x[3];   /* as written (qc_written) */
	int     res, at;
	int64_t cell[3];
} qc_atom_t;

int qc_band(double p)
{
	if (p < 50.0) return QC_VERY_LOW;
	if (p <= 70.0) return QC_LOW;
	if (p <= 90.0) return QC_CONFIDENT;
	return QC_VERY_HIGH;
}

/* a coordinate as the structure files write it (%.3f; the product is
 * exact in double, and rint rounds half to even as printf does): the
 * flags are the files' own, so a reader who recounts them from a PDB or
 * mmCIF gets the same numbers (atoms 1.49996 A apart are 1.500 A apart
 * there, no clash) */
static double qc_written(float x)
{
	return rint((double)x * 1000.0) / 1000.0;
}

/* a pLDDT (0-1) as the files write it: 0-100, %.2f */
static double qc_written_plddt(float p)
{
	return rint(100.0 * (double)p * 100.0) / 100.0;
}

/* atom k of residue i as written */
static void qc_xyz(const qc_input_t *in, int i, int k, double x[3])
{
	const float *p = in->atom37 + ((size_t)i * RESIDUE_NUM_ATOM37 + k) * 3;
	for (int c = 0; c < 3; c++) x[c] = qc_written(p[c]);
}

static double qc_dist2(const double *a, const double *b)
{
	double dx = a[0] - b[0], dy = a[1] - b[1], dz = a[2] - b[2];
	return dx * dx + dy * dy + dz * dz;
}

static int qc_present(const qc_input_t *in, int i, int k)
{
	const float *x = in->atom37 + ((size_t)i * RESIDUE_NUM_ATOM37 + k) * 3;

	if (!(in->atom37_mask[(size_t)i * RESIDUE_NUM_ATOM37 + k] > 0.5f)) return 0;
	for (int c = 0; c < 3; c++)
		if (!(fabsf(x[c]) < QC_FAR)) return 0;
	return 1;
}

/* bucket of a cell in a table of nb (a power of two) buckets */
static size_t qc_cell_hash(const int64_t c[3], size_t nb)
{
	uint64_t h = (uint64_t)c[0] * 73856093u ^ (uint64_t)c[1] * 19349663u ^
	             (uint64_t)c[2] * 83492791u;
	h ^= h >> 29;
	return (size_t)(h & (nb - 1));
}

/* the peptide bond of one chain: C of residue i and N of residue i + 1 */
static int qc_bonded(const qc_input_t *in, const qc_atom_t *a, const qc_atom_t *b)
{
	if (a->res > b->res) {
		const qc_atom_t *t = a;
		a = b;
		b = t;
	}
	return b->res == a->res + 1 && in->chain[a->res] == in->chain[b->res] &&
	       a->at == RESIDUE_ATOM37_C && b->at == RESIDUE_ATOM37_N;
}

/* pairs of atoms of different residues closer than QC_CLASH: every atom
 * hashed by its cell of QC_CLASH A, each pair met once from the 27 cells
 * around its first atom.  The count, or -1 when out of memory. */
static int64_t qc_clashes(const qc_input_t *in)
{
	qc_atom_t *a = NULL;
	size_t n = 0, nb = 1, *head = NULL, *next = NULL;
	int64_t count = -1;
	const double lim2 = QC_CLASH * QC_CLASH;

	if (!(a = malloc(sizeof *a * ((size_t)in->L * RESIDUE_NUM_ATOM37 + 1)))) goto done;
	for (int i = 0; i < in->L; i++)
		for (int k = 0; k < RESIDUE_NUM_ATOM37; k++) {
			if (!qc_present(in, i, k)) continue;
			qc_atom_t *t = &a[n++];
			qc_xyz(in, i, k, t->x);
			t->res = i;
			t->at = k;
			for (int c = 0; c < 3; c++) t->cell[c] = (int64_t)floor(t->x[c] / QC_CLASH);
		}
	while (nb < 2 * n) nb *= 2;
	if (!(head = malloc(sizeof *head * nb)) || !(next = malloc(sizeof *next * (n + 1))))
		goto done;
	for (size_t b = 0; b < nb; b++) head[b] = (size_t)-1;
	for (size_t i = 0; i < n; i++) {
		size_t b = qc_cell_hash(a[i].cell, nb);
		next[i] = head[b];
		head[b] = i;
	}
	count = 0;
	for (size_t i = 0; i < n; i++)
		for (int d = 0; d < 27; d++) {
			int64_t c[3] = { a[i].cell[0] + d % 3 - 1, a[i].cell[1] + d / 3 % 3 - 1,
			                 a[i].cell[2] + d / 9 - 1 };
			for (size_t j = head[qc_cell_hash(c, nb)]; j != (size_t)-1; j = next[j]) {
				/* another cell of the same bucket, or a pair met from its first atom */
				if (j <= i || memcmp(a[j].cell, c, sizeof c)) continue;
				if (a[j].res == a[i].res || qc_bonded(in, &a[i], &a[j])) continue;
				if (qc_dist2(a[i].x, a[j].x) < lim2) count++;
			}
		}
done:
	free(a);
	free(head);
	free(next);
	return count;
}

int qc_measure(const qc_input_t *in, qc_t *q)
{
	const int ca = RESIDUE_ATOM37_CA;
	const double lo2 = QC_CA_MIN * QC_CA_MIN, hi2 = QC_CA_MAX * QC_CA_MAX;
	int prev = -1;

	memset(q, 0, sizeof *q);
	for (int i = 0; i < in->L; i++) {
		if (!(in->atom37_mask[(size_t)i * RESIDUE_NUM_ATOM37 + ca] > 0.5f)) {
			prev = -1;
			continue;
		}
		q->band[qc_band(qc_written_plddt(in->plddt[(size_t)i * RESIDUE_NUM_ATOM37 + ca]))]++;
		if (prev >= 0 && prev == i - 1 && in->chain[prev] == in->chain[i] && qc_present(in, prev, ca) &&
		    qc_present(in, i, ca)) {
			double a[3], b[3];
			qc_xyz(in, prev, ca, a);
			qc_xyz(in, i, ca, b);
			double d2 = qc_dist2(a, b);
			if (!(d2 >= lo2 && d2 <= hi2)) q->ca_breaks++;
		}
		prev = i;
	}
	if ((q->clashes = qc_clashes(in)) < 0) {
		memset(q, 0, sizeof *q);
		return -1;
	}
	return 0;
}

void qc_merge(qc_t *into, const qc_t *q)
{
	for (int b = 0; b < QC_NBANDS; b++) into->band[b] += q->band[b];
	into->ca_breaks += q->ca_breaks;
	into->clashes += q->clashes;
}

int64_t qc_residues(const qc_t *q)
{
	int64_t n = 0;
	for (int b = 0; b < QC_NBANDS; b++) n += q->band[b];
	return n;
}

void qc_flags(const qc_t *q, double mean_plddt, double ptm, char *buf, size_t cap)
{
	size_t n = 0;

	if (!cap) return;
	buf[0] = 0;
	if (ptm > QC_PTM_HIGH && mean_plddt < QC_PLDDT_LOW)
		n += snprintf(buf + n, n < cap ? cap - n : 0, "ptm_plddt_mismatch");
	if (q->ca_breaks)
		n += snprintf(buf + n, n < cap ? cap - n : 0, "%sca_break:%lld", n ? "," : "",
		              (long long)q->ca_breaks);
	if (q->clashes)
		n += snprintf(buf + n, n < cap ? cap - n : 0, "%sclash:%lld", n ? "," : "",
		              (long long)q->clashes);
	if (!n) snprintf(buf, cap, "-");
}

uint64_t qc_crc64(const char *seq, size_t n)
{
	/* x^64 + x^4 + x^3 + x + 1, its bits reversed: 1 + x + x^3 + x^4 -> bits 63, 62, 60, 59 */
	const uint64_t poly = 0xD800000000000000ull;
	uint64_t crc = 0;

	for (size_t i = 0; i < n; i++) {
		crc ^= (unsigned char)seq[i];
		for (int b = 0; b < 8; b++) crc = crc & 1 ? crc >> 1 ^ poly : crc >> 1;
	}
	return crc;
}

void qc_crc64_hex(const char *seq, size_t n, char out[17])
{
	snprintf(out, 17, "%016llX", (unsigned long long)qc_crc64(seq, n));
}
