/* pdb.c - fair-esm flavour PDB writer (see pdb.h). */
#include "protein/pdb.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "io/atomic_file.h"
#include "protein/residue.h"

static const char chain_ids[PDB_MAX_CHAINS + 1] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/* one record padded to 80 columns */
static void record80(FILE *f, const char *text)
{
	fprintf(f, "%-80.80s\n", text);
}

char pdb_chain_id(const pdb_input_t *in, int i)
{
	return chain_ids[in->chain_index ? in->chain_index[i] : 0];
}

int pdb_chain_end(const pdb_input_t *in, int i)
{
	int c = in->chain_index ? in->chain_index[i] : 0;

	while (++i < in->L && (!in->chain_index || in->chain_index[i] == c)) continue;
	return i;
}

int pdb_in_seq(const pdb_input_t *in, int i)
{
	return !in->linker_mask || in->linker_mask[i] >= 0.5f;
}

/* SEQRES: each chain's residues, 13 to a record (serial and count mod
 * 1000 and 10000, like the atom serials, to keep the columns) */
static void write_seqres(FILE *f, const pdb_input_t *in)
{
	char line[96];

	for (int b = 0, e; b < in->L; b = e) {
		int n = 0, left, k = 0, ser = 1, len = 0;
		char chain = pdb_chain_id(in, b);
		e = pdb_chain_end(in, b);
		for (int i = b; i < e; i++) n += pdb_in_seq(in, i);
		left = n;
		for (int i = b; i < e; i++) {
			if (!pdb_in_seq(in, i)) continue;
			if (k == 0) len = snprintf(line, sizeof line, "SEQRES %3d %c %4d ", ser++ % 1000,
			                           chain, n % 10000);
			len += snprintf(line + len, sizeof line - len, " %3s",
			                residue_restype_name3(in->aatype[i]));
			left--;
			if (++k == 13 || left == 0) {
				record80(f, line);
				k = 0;
			}
		}
	}
}

static void write_meta(FILE *f, const pdb_meta_t *m)
{
	char line[128];
	record80(f, "HEADER    PREDICTED PROTEIN STRUCTURE");
	if (m->version) {
		snprintf(line, sizeof line, "REMARK 250 PREDICTED WITH ESMBATCH %.50s (ESMFOLD)",
		         m->version);
		record80(f, line);
	}
	if (m->weights) {
		snprintf(line, sizeof line, "REMARK 250 WEIGHTS %.60s", m->weights);
		record80(f, line);
	}
	snprintf(line, sizeof line, "REMARK 250 MEAN PLDDT %.2f (0-100)", m->mean_plddt);
	record80(f, line);
	snprintf(line, sizeof line, "REMARK 250 PTM %.4f", m->ptm);
	record80(f, line);
	snprintf(line, sizeof line, "REMARK 250 RECYCLES %d", m->recycles);
	record80(f, line);
	if (m->chunk_size > 0)
		snprintf(line, sizeof line, "REMARK 250 CHUNK SIZE %d", m->chunk_size);
	else
		snprintf(line, sizeof line, "REMARK 250 CHUNK SIZE NONE");
	record80(f, line);
	if (m->fragment) {
		snprintf(line, sizeof line, "REMARK 250 FRAGMENT %.60s", m->fragment);
		record80(f, line);
	}
}

int pdb_check(const pdb_input_t *in)
{
	if (in->L < 0) {
		log_error("pdb: negative length %d", in->L);
		return -1;
	}
	for (int i = 0; i < in->L; i++) {
		if (in->aatype[i] < 0 || in->aatype[i] >= RESIDUE_NUM_RESTYPES) {
			log_error("pdb: aatype %d at residue %d is outside 0..%d", in->aatype[i], i,
			          RESIDUE_NUM_RESTYPES - 1);
			return -1;
		}
		if (in->chain_index &&
		    (in->chain_index[i] < 0 || in->chain_index[i] >= PDB_MAX_CHAINS)) {
			log_error("pdb: chain index %d at residue %d is outside 0..%d",
			          in->chain_index[i], i, PDB_MAX_CHAINS - 1);
			return -1;
		}
		if (in->residue_index[i] < 0 || in->residue_index[i] >= PDB_MAX_RESNUM) {
			log_error("pdb: residue number %d at residue %d does not fit the PDB's residue number "
			          "and insertion code (1..%d)", in->residue_index[i] + 1, i, PDB_MAX_RESNUM);
			return -1;
		}
		for (int k = 0; k < RESIDUE_NUM_ATOM37; k++) {
			size_t at = (size_t)i * RESIDUE_NUM_ATOM37 + k;
			if (in->atom37_mask[at] < 0.5f)
				continue;
			if (!pdb_in_seq(in, i)) {
				log_error("pdb: linker residue %d has atom %s", i, residue_atom_types[k]);
				return -1;
			}
			if (!isfinite(in->atom37[3 * at]) || !isfinite(in->atom37[3 * at + 1]) ||
			    !isfinite(in->atom37[3 * at + 2]) || !isfinite(in->plddt[at])) {
				log_error("pdb: non-finite coordinate or pLDDT at residue %d atom %s", i,
				          residue_atom_types[k]);
				return -1;
			}
			/* the fixed columns: %8.3f coordinates, %6.2f B-factor */
			for (int d = 0; d < 3; d++) {
				float v = in->atom37[3 * at + d];
				if (!(v > -999.9995f && v < 9999.9995f)) {
					log_error("pdb: coordinate %.3f at residue %d atom %s does not fit "
					          "the PDB's 8 columns (-999.999..9999.999)", (double)v, i,
					          residue_atom_types[k]);
					return -1;
				}
			}
			if (!(in->plddt[at] > -0.999f && in->plddt[at] < 9.999f)) {
				log_error("pdb: pLDDT %g at residue %d atom %s does not fit the B-factor column",
				          (double)in->plddt[at], i, residue_atom_types[k]);
				return -1;
			}
		}
	}
	return 0;
}

/* residue number n (1..PDB_MAX_RESNUM) as the 4 columns of resSeq and the
 * insertion code: below 10000 as is, beyond n mod 10000 with the code
 * 'A' for the first 10000 above, 'B' for the next, ... (pdb.h) */
static int pdb_resseq(int n, char *icode)
{
	*icode = n < 10000 ? ' ' : (char)('A' + n / 10000 - 1);
	return n % 10000;
}

/* the TER record after a chain whose last residue is i: the reference's
 * text (the model's last residue, a linker one included, its line cut after
 * the number) without a meta; with one, the chain's last sequence residue
 * (seq, as SEQRES ends) and the full 80 columns */
static void write_ter(FILE *f, const pdb_input_t *in, int serial, int i, int seq)
{
	char line[96], icode;
	int r = in->meta ? seq : i;
	int resnum = pdb_resseq(in->residue_index[r] + 1, &icode);
	int n = snprintf(line, sizeof line, "TER   %5d      %3s %c%4d%c", serial % 100000,
	                 residue_restype_name3(in->aatype[r]), pdb_chain_id(in, r), resnum, icode);

	if (in->meta) record80(f, line);
	else fprintf(f, "%.*s\n", icode == ' ' ? n - 1 : n, line);
}

int pdb_write(FILE *f, const pdb_input_t *in)
{
	if (pdb_check(in) < 0)
		return -1;
	if (in->meta) {
		write_meta(f, in->meta);
		write_seqres(f, in);
		record80(f, "CRYST1    1.000    1.000    1.000  90.00  90.00  90.00 P 1           1");
	} else {
		fputs("PARENT N/A\n", f);
	}
	int serial = 1, seq = 0;
	for (int i = 0; i < in->L; i++) {
		const char *res = residue_restype_name3(in->aatype[i]);
		int chain = in->chain_index ? in->chain_index[i] : 0;
		char icode;
		int resnum = pdb_resseq(in->residue_index[i] + 1, &icode);
		if (pdb_in_seq(in, i)) seq = i;
		for (int k = 0; k < RESIDUE_NUM_ATOM37; k++) {
			size_t at = (size_t)i * RESIDUE_NUM_ATOM37 + k;
			if (in->atom37_mask[at] < 0.5f)
				continue;
			const float *x = in->atom37 + 3 * at;
			/* serial, name, altLoc, resName, chain, resSeq, iCode, x y z,
			 * occupancy, B-factor, element, charge */
			fprintf(f, "ATOM  %5d  %-3s %3s %c%4d%c   %8.3f%8.3f%8.3f%6.2f%6.2f          %2c  \n",
			        serial++ % 100000, residue_atom_types[k], res, chain_ids[chain], resnum, icode,
			        (double)x[0], (double)x[1], (double)x[2], 1.0,
			        100.0 * (double)in->plddt[at], residue_atom_elements[k]);
		}
		int last = i == in->L - 1;
		if (last || (in->chain_index && in->chain_index[i + 1] != chain)) {
			write_ter(f, in, serial++, i, seq);
			if (!last && !in->meta)
				fputs("PARENT N/A\n", f);
		}
	}
	if (in->meta) record80(f, "END");   /* readers match the 6-column "END   " */
	else fputs("END\n", f);
	if (ferror(f)) {
		log_error("pdb: write failed: %s", strerror(errno));
		return -1;
	}
	return 0;
}

double pdb_mean_plddt(const pdb_input_t *in)
{
	double sum = 0.0;
	int n = 0;

	for (int i = 0; i < in->L; i++) {
		size_t ca = (size_t)i * RESIDUE_NUM_ATOM37 + RESIDUE_ATOM37_CA;
		if (!pdb_in_seq(in, i) || in->atom37_mask[ca] < 0.5f) continue;
		sum += 100.0 * (double)in->plddt[ca];
		n++;
	}
	return n ? sum / n : NAN;
}

int pdb_write_atomic(const char *path, const pdb_input_t *in)
{
	atomic_file_t a;

	if (!atomic_file_open(&a, path)) return -1;
	return atomic_file_close(&a, pdb_write(a.f, in) == 0);
}
