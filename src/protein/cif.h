/* cif.h (prefix cif_) - mmCIF output in the ModelCIF style of the AlphaFold DB.
 *
 * The same input as the PDB writer (pdb_input_t with its meta, which cif
 * needs): one data block named after meta->name holding
 *   _entry, _struct (title; a fragment's range), _audit_conform (ModelCIF),
 *   _chem_comp (the residue types present),
 *   _entity / _entity_poly / _entity_poly_seq / _struct_asym: one polymer
 *     entity and one asym per chain (A, B, ... as in the PDB), its sequence
 *     the chain's residues without the linker, X as UNK,
 *   _software, _ma_software_group, _ma_protocol_step (esmbatch's version,
 *     the weights fingerprint, recycles, chunk size), _ma_data,
 *     _ma_model_list,
 *   _ma_qa_metric with _ma_qa_metric_global (mean pLDDT 0-100, pTM 0-1)
 *     and _ma_qa_metric_local (per residue: the CA atom's pLDDT, 0-100, as
 *     the PDB's CA B-factor; residues without a CA atom have none),
 *   _atom_site: the atoms the PDB writes, in its order, coordinates and
 *     B-factors (100 x pLDDT) printed as there (3 and 2 decimals),
 *     label_seq_id the residue's place in its entity, auth_seq_id the PDB's
 *     residue number (no insertion codes: mmCIF numbers have no 4-column
 *     limit).
 */
#ifndef ESMBATCH_CIF_H
#define ESMBATCH_CIF_H

#include <stdio.h>

#include "protein/pdb.h"

/* Write the mmCIF text of in to f (in->meta required).  Returns 0, or
 * negative on bad input (pdb_check) or a write error; the reason is
 * logged. */
int cif_write(FILE *f, const pdb_input_t *in);

#endif
