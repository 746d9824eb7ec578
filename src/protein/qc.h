/* qc.h (prefix qc_) - what summary.tsv says about a predicted structure
 * beyond its means: residues per AlphaFold DB pLDDT band, the sequence's
 * CRC64 as UniProt computes it, and sanity flags.
 *
 * Bands (a residue's pLDDT is its CA's, 0-100 scale), as the AlphaFold DB
 * colours them:
 *   very low  p < 50     low  50 <= p <= 70
 *   confident 70 < p <= 90     very high  p > 90
 * so frac_plddt_gt70 = (confident + very high) / residues.
 *
 * Flags (qc_flags):
 *   ptm_plddt_mismatch  pTM > 0.9 with mean pLDDT < 50 (a confident fold
 *                       of nothing: the known silent failure of long
 *                       unchunked folds)
 *   ca_break:N          N pairs of consecutive residues of one chain whose
 *                       CA-CA distance is outside [3.0, 4.5] A
 *   clash:N             N pairs of heavy atoms of different residues closer
 *                       than 1.5 A (the peptide bond C(i)-N(i+1) of one
 *                       chain excluded), found on a grid of 1.5 A cells: a
 *                       pass over the atoms, not over their pairs
 *
 * Measured on the values as the structure files write them (coordinates
 * to 0.001 A, pLDDT to 0.01), so a reader who recounts a flag or a band
 * from a PDB or mmCIF gets the same number.
 *
 * Pure functions on host arrays; nothing is kept between calls.
 */
#ifndef ESMBATCH_PROTEIN_QC_H
#define ESMBATCH_PROTEIN_QC_H

#include <stddef.h>
#include <stdint.h>

enum { QC_VERY_LOW, QC_LOW, QC_CONFIDENT, QC_VERY_HIGH, QC_NBANDS };

#define QC_CA_MIN    3.0   /* A: a CA-CA distance outside [MIN, MAX] is a break */
#define QC_CA_MAX    4.5
#define QC_CLASH     1.5   /* A: heavy atoms closer than this clash */
#define QC_PTM_HIGH  0.9   /* ptm_plddt_mismatch: pTM above ... */
#define QC_PLDDT_LOW 50.0  /* ... with mean pLDDT (0-100) below */

/* one structure's (or, merged, one record's) figures */
typedef struct {
	int64_t band[QC_NBANDS];   /* residues per band */
	int64_t ca_breaks;
	int64_t clashes;
} qc_t;

/* A predicted structure, as the model leaves it. */
typedef struct {
	int          L;            /* residues, linkers included */
	const float *atom37;       /* [L, 37, 3] A */
	const float *atom37_mask;  /* [L, 37] 1 present; linker residues 0 */
	const float *plddt;        /* [L, 37] 0..1 */
	const int   *chain;        /* [L] chain index */
} qc_input_t;

/* *q = the figures of one structure (residues whose CA is masked are left
 * out; so are atoms with a coordinate that is not finite).  0, or -1 when
 * out of memory (the clash grid; *q then zero). */
int  qc_measure(const qc_input_t *in, qc_t *q);
/* the band (QC_VERY_LOW ..) of a pLDDT on the 0-100 scale */
int  qc_band(double p);
/* into += q (a split record's fragments) */
void qc_merge(qc_t *into, const qc_t *q);
/* residues counted in the bands */
int64_t qc_residues(const qc_t *q);
/* The flags of a record into buf (cap bytes): a comma list in the order
 * above, "-" when none.  mean_plddt on the 0-100 scale. */
void qc_flags(const qc_t *q, double mean_plddt, double ptm, char *buf, size_t cap);

/* The SWISS-PROT / UniProt CRC64 of seq[0..n) (ISO 3309 polynomial
 * x^64 + x^4 + x^3 + x + 1, bit-reflected, initial value 0, no final xor),
 * and its text as UniProt prints it: 16 upper-case hex digits (out[17]). */
uint64_t qc_crc64(const char *seq, size_t n);
void     qc_crc64_hex(const char *seq, size_t n, char out[17]);

#endif
