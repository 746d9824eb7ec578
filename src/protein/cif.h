/* cif.h (prefix cif_) - mmCIF output in the ModelCIF style of the AlphaFold DB.
 *
 * The same input as the PDB writer (pdb_input_t with its meta, which cif
 * needs): one data block named after meta->name holding
 *   _entry, _struct (title; a fragment's range), _audit_conform (ModelCIF),
 *   _chem_comp (the residue types present), _chem_comp_atom (the atoms
 *     written of each) and _atom_type (their elements),
 *   _entity / _entity_poly / _entity_poly_seq / _struct_asym: one polymer
 *     entity and one asym per chain (A, B, ... as in the PDB), its sequence
 *     the chain's residues without the linker, X as UNK,
 *   _pdbx_poly_seq_scheme: each chain's residues, their place in the
 *     entity and the number written (PDB residue names "?" for residues
 *     without atoms, X),
 *   _software, _ma_software_group, _ma_data (1 the target sequences, 2 the
 *     model), _ma_protocol_step (esmbatch's version, the weights
 *     fingerprint, recycles, chunk size), _ma_model_list,
 *   _ma_target_entity (every entity, origin "designed": no database
 *     reference) and _ma_target_entity_instance (every asym),
 *   _ma_qa_metric with _ma_qa_metric_global (meta's mean pLDDT 0-100, the
 *     mean of the local values: pdb_mean_plddt; pTM 0-1) and
 *     _ma_qa_metric_local (per residue: the CA atom's pLDDT, 0-100, as
 *     the PDB's CA B-factor; residues without a CA atom have none),
 *   _atom_site: the atoms the PDB writes, in its order, coordinates and
 *     B-factors (100 x pLDDT) printed as there (3 and 2 decimals),
 *     label_seq_id the residue's place in its entity, auth_seq_id the PDB's
 *     residue number (no insertion codes: mmCIF numbers have no 4-column
 *     limit).
 * Valid against the PDBx and ModelCIF dictionaries, parent items included
 * (tests/test_modelcif.sh: gemmi validate -p).
 */
#ifndef ESMBATCH_PROTEIN_CIF_H
#define ESMBATCH_PROTEIN_CIF_H

#include <stdio.h>

#include "protein/pdb.h"

/* Write the mmCIF text of in to f (in->meta required).  Returns 0, or
 * negative on bad input (pdb_check) or a write error; the reason is
 * logged. */
int cif_write(FILE *f, const pdb_input_t *in);

#endif
