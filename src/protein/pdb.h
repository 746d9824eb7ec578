/* pdb.h (prefix pdb_) - PDB output in the fair-esm flavour.
 *
 * The body is the text fair-esm's output_to_pdb writes: "PARENT N/A" before
 * each chain, one ATOM record per atom37 slot whose mask is >= 0.5, atom
 * serials from 1 (a TER record takes a serial too), residue numbers
 * residue_index + 1 (see PDB_MAX_RESNUM), chain ids A, B, ... from chain_index, a TER record
 * after each chain's last residue, B-factor = 100 x pLDDT, occupancy 1.00,
 * element from the atom name, then END.  Residues without atoms (X, the
 * linker glycines of a multimer once masked) write no ATOM record but still
 * count for the TER record of their chain, as in the reference (with a
 * meta the linker residues do not: see below).
 *
 * When a pdb_meta_t is given, a header comes first, as predicted-model files
 * have it (tools that reject bare PDBs need it; AlphaFill reads SEQRES):
 * HEADER and REMARK 250 lines describing the run, SEQRES records for every
 * chain (its residues, linker residues left out, X as UNK) and CRYST1 with
 * the unit cell 1 1 1, space group P 1; and the PARENT lines, which are
 * no PDB records (Biopython warns on them), are left out; END and TER are
 * padded to 80 columns as the other records, and each TER names its
 * chain's last residue (the last of its SEQRES; the reference's names the
 * linker's last glycine in every chain of a multimer but the last one).
 * Without a meta
 * the text is exactly the reference's.
 *
 * The input and meta structs, their check and the chain walk are shared
 * with the mmCIF writer (cif.h).
 */
#ifndef ESMBATCH_PROTEIN_PDB_H
#define ESMBATCH_PROTEIN_PDB_H

#include <stdio.h>

/* Run facts written as HEADER / REMARK 250 lines before the atoms. */
typedef struct {
	const char *version;        /* esmbatch version, e.g. "0.1.0"; NULL: omitted */
	const char *weights;        /* weights fingerprint; NULL: omitted */
	double      mean_plddt;     /* 0..100: the global pLDDT, pdb_mean_plddt */
	double      ptm;            /* 0..1 */
	int         recycles;       /* recycles run (trunk passes - 1) */
	int         chunk_size;     /* trunk chunk size; 0 = unchunked */
	const char *fragment;       /* e.g. "SEQUENCE 1-350 OF 700, RECORD CHAINS AND NUMBERS"
	                               for one half of a split record; NULL: omitted */
	const char *name;           /* the record's file-safe name: the mmCIF's data
	                               block and entry id; NULL: "model" */
} pdb_meta_t;

typedef struct {
	int          L;              /* residues, linker included */
	const int   *aatype;         /* [L] 0..20 (AF2 order, 20 = X) */
	const float *atom37;         /* [L,37,3] coordinates, Angstrom */
	const float *atom37_mask;    /* [L,37] atoms with mask < 0.5 are not written */
	const float *plddt;          /* [L,37] 0..1; written as 100 x plddt */
	const int   *residue_index;  /* [L] residue number - 1, as written (cli/fold_out.c:
	                                per chain from 0, or the model's index) */
	const int   *chain_index;    /* [L] 0, 1, ... -> chain A, B, ...; NULL: all A */
	const float *linker_mask;    /* [L] < 0.5: a linker residue, in no chain's
	                                sequence (SEQRES, _entity_poly_seq); NULL: none */
	const pdb_meta_t *meta;      /* NULL: no HEADER/REMARK lines */
} pdb_input_t;

/* Fixed columns: a residue number of 10000 or more is written as its
 * value mod 10000 with insertion code 'A' (10000-19999), 'B' (20000-29999),
 * ... (a multimer of 20 chains reaches 10000 at +512 per chain); beyond
 * PDB_MAX_RESNUM, or a coordinate outside -999.999..9999.999, the record is
 * refused.  Atom serials past 99999 continue from 0 (mod 100000).  No line
 * is longer than 80 columns. */
#define PDB_MAX_RESNUM 269999

/* Most chains a PDB can name (chain ids A-Z, a-z, 0-9). */
#define PDB_MAX_CHAINS 62

/* 0 when in can be written (as a PDB or an mmCIF); else negative, the
 * reason logged: aatype or chain index out of range, a residue number
 * beyond PDB_MAX_RESNUM, a non-finite or too large written coordinate or
 * pLDDT. */
int pdb_check(const pdb_input_t *in);

/* The chain id of residue i (A-Z, a-z, 0-9 for chain index 0, 1, ...;
 * A without a chain index); in checked (pdb_check). */
char pdb_chain_id(const pdb_input_t *in, int i);

/* The end of the chain that begins at residue i: the first residue after
 * i of another chain, or L. */
int pdb_chain_end(const pdb_input_t *in, int i);

/* Residue i belongs to its chain's sequence (is not a linker residue). */
int pdb_in_seq(const pdb_input_t *in, int i);

/* The global pLDDT, 0-100, as the AlphaFold DB has it: the mean over the
 * chains' residues of the per-residue pLDDT, a residue's being its CA's (the
 * mmCIF's _ma_qa_metric_local values; residues without a CA, X, have none).
 * NaN when no residue has a CA.  (fair-esm's mean_plddt averages over atoms
 * instead.) */
double pdb_mean_plddt(const pdb_input_t *in);

/* Write the PDB text to f.  Returns 0, or negative on bad input (aatype or
 * chain index out of range, a non-finite written coordinate) or a write error;
 * the reason is logged. */
int pdb_write(FILE *f, const pdb_input_t *in);

/* Write PATH.tmp.PID, flush it to disk and rename it to PATH, so PATH is either
 * absent or complete.  Returns 0 or negative (PATH.tmp.PID removed). */
int pdb_write_atomic(const char *path, const pdb_input_t *in);

#endif
