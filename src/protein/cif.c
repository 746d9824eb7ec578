/* cif.c - ModelCIF-style mmCIF writer (see cif.h). */
#include "protein/cif.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

#include "util/log.h"
#include "protein/residue.h"

/* a CIF value: bare when it is a plain word, else quoted ('...', or
 * "..." when it holds a ', or a text field when it holds both); "?" for
 * NULL or empty */
static void cif_value(FILE *f, const char *v)
{
	static const char *const reserved[] = { "data_", "loop_", "save_", "global_", "stop_" };
	int bare = 1;

	if (!v || !*v) {
		fputs("?", f);
		return;
	}
	if (strpbrk(v, " \t\n'\"#") || strchr("_$;[].?", v[0])) bare = 0;
	for (size_t k = 0; k < sizeof reserved / sizeof *reserved; k++)
		if (!strncasecmp(v, reserved[k], strlen(reserved[k]))) bare = 0;
	if (bare) fputs(v, f);
	else if (!strchr(v, '\n') && !strchr(v, '\'')) fprintf(f, "'%s'", v);
	else if (!strchr(v, '\n') && !strchr(v, '"')) fprintf(f, "\"%s\"", v);
	else fprintf(f, "\n;%s\n;", v);
}

/* one "_cat.item value" line each; an item NULL: the "#" between categories */
typedef struct {
	const char *item, *value;
} cif_kv_t;

static void cif_pairs(FILE *f, const cif_kv_t *kv, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!kv[i].item) {
			fputs("#\n", f);
			continue;
		}
		fprintf(f, "%s ", kv[i].item);
		cif_value(f, kv[i].value);
		fputc('\n', f);
	}
}

/* loop_ and its item names, from a list ending in NULL */
static void cif_loop(FILE *f, const char *cat, const char *const *items)
{
	fputs("#\nloop_\n", f);
	for (; *items; items++) fprintf(f, "_%s.%s\n", cat, *items);
}

/* a chain's sequence as one-letter codes in a text field, 80 a line
 * (begins a line) */
static void cif_seq_text(FILE *f, const pdb_input_t *in, int b, int e)
{
	int k = 0;

	fputc(';', f);
	for (int i = b; i < e; i++) {
		if (!pdb_in_seq(in, i)) continue;
		if (k && k % 80 == 0) fputc('\n', f);
		fputc(residue_restypes[in->aatype[i]], f);
		k++;
	}
	fputs("\n;\n", f);
}

static void cif_chem_comp(FILE *f, const pdb_input_t *in)
{
	static const char *const items[] = { "id", "type", "mon_nstd_flag", NULL };
	int seen[RESIDUE_NUM_RESTYPES] = { 0 };

	for (int i = 0; i < in->L; i++)
		if (pdb_in_seq(in, i)) seen[in->aatype[i]] = 1;
	cif_loop(f, "chem_comp", items);
	for (int a = 0; a < RESIDUE_NUM_RESTYPES; a++) {
		if (!seen[a]) continue;
		fprintf(f, "%s '%s' %s\n", residue_restype_name3(a),
		        residue_restypes[a] == 'G' ? "peptide linking" : "L-peptide linking",
		        a < RESIDUE_NUM_AA ? "y" : ".");
	}
}

/* _chem_comp_atom (the atoms written of each residue type, in atom37
 * order) and _atom_type (their elements, in alphabetical order) */
static void cif_atom_types(FILE *f, const pdb_input_t *in)
{
	static const char *const comp_atom[] = { "comp_id", "atom_id", "type_symbol", NULL };
	static const char *const type[] = { "symbol", NULL };
	unsigned char seen[RESIDUE_NUM_RESTYPES][RESIDUE_NUM_ATOM37] = { { 0 } };
	int elem[256] = { 0 };

	for (int i = 0; i < in->L; i++)
		for (int a = 0; a < RESIDUE_NUM_ATOM37; a++)
			if (in->atom37_mask[(size_t)i * RESIDUE_NUM_ATOM37 + a] >= 0.5f)
				seen[in->aatype[i]][a] = 1;
	cif_loop(f, "chem_comp_atom", comp_atom);
	for (int r = 0; r < RESIDUE_NUM_RESTYPES; r++)
		for (int a = 0; a < RESIDUE_NUM_ATOM37; a++) {
			if (!seen[r][a]) continue;
			fprintf(f, "%s %s %c\n", residue_restype_name3(r), residue_atom_types[a],
			        residue_atom_elements[a]);
			elem[(unsigned char)residue_atom_elements[a]] = 1;
		}
	cif_loop(f, "atom_type", type);
	for (int c = 0; c < 256; c++)
		if (elem[c]) fprintf(f, "%c\n", c);
}

/* _entity, _entity_poly, _entity_poly_seq, _struct_asym: entity k (from
 * 1) is the k-th chain of the file */
static void cif_entities(FILE *f, const pdb_input_t *in)
{
	static const char *const ent[] = { "id", "type", "src_method", "pdbx_description",
	                                   "pdbx_number_of_molecules", NULL };
	static const char *const poly[] = { "entity_id", "type", "nstd_linkage", "nstd_monomer",
	                                    "pdbx_strand_id", "pdbx_seq_one_letter_code",
	                                    "pdbx_seq_one_letter_code_can", NULL };
	static const char *const pseq[] = { "entity_id", "num", "mon_id", "hetero", NULL };
	static const char *const asym[] = { "id", "entity_id", "details", NULL };
	int k, b, e;

	cif_loop(f, "entity", ent);
	for (k = 1, b = 0; b < in->L; b = pdb_chain_end(in, b), k++)
		fprintf(f, "%d polymer man 'chain %c' 1\n", k, pdb_chain_id(in, b));
	cif_loop(f, "entity_poly", poly);
	for (k = 1, b = 0; b < in->L; b = e, k++) {
		e = pdb_chain_end(in, b);
		fprintf(f, "%d polypeptide(L) no no %c\n", k, pdb_chain_id(in, b));
		cif_seq_text(f, in, b, e);
		cif_seq_text(f, in, b, e);
	}
	cif_loop(f, "entity_poly_seq", pseq);
	for (k = 1, b = 0; b < in->L; b = e, k++) {
		e = pdb_chain_end(in, b);
		for (int i = b, n = 1; i < e; i++)
			if (pdb_in_seq(in, i))
				fprintf(f, "%d %d %s n\n", k, n++, residue_restype_name3(in->aatype[i]));
	}
	cif_loop(f, "struct_asym", asym);
	for (k = 1, b = 0; b < in->L; b = pdb_chain_end(in, b), k++)
		fprintf(f, "%c %d ?\n", pdb_chain_id(in, b), k);
}

/* _pdbx_poly_seq_scheme: each chain's residues, their entity number and
 * the number written (mon ids "?" for residues without atoms, X, as the PDB
 * has them for residues it did not observe) */
static void cif_seq_scheme(FILE *f, const pdb_input_t *in)
{
	static const char *const items[] = { "asym_id", "entity_id", "seq_id", "mon_id",
	                                     "pdb_seq_num", "auth_seq_num", "pdb_mon_id",
	                                     "auth_mon_id", "pdb_strand_id", "pdb_ins_code",
	                                     "hetero", NULL };

	cif_loop(f, "pdbx_poly_seq_scheme", items);
	for (int k = 1, b = 0, e; b < in->L; b = e, k++) {
		char chain = pdb_chain_id(in, b);
		e = pdb_chain_end(in, b);
		for (int i = b, n = 1; i < e; i++) {
			const char *res = residue_restype_name3(in->aatype[i]);
			const char *pdb = in->atom37_mask[(size_t)i * RESIDUE_NUM_ATOM37 +
			                                  RESIDUE_ATOM37_CA] >= 0.5f ? res : "?";
			if (!pdb_in_seq(in, i)) continue;
			fprintf(f, "%c %d %d %s %d %d %s %s %c ? n\n", chain, k, n++, res,
			        in->residue_index[i] + 1, in->residue_index[i] + 1, pdb, pdb, chain);
		}
	}
}

/* _ma_target_entity, _ma_target_entity_instance: every entity is a target
 * (of the _ma_data target), not taken from a sequence database */
static void cif_targets(FILE *f, const pdb_input_t *in)
{
	static const char *const ent[] = { "entity_id", "data_id", "origin", NULL };
	static const char *const inst[] = { "asym_id", "entity_id", "details", NULL };
	int k, b;

	cif_loop(f, "ma_target_entity", ent);
	for (k = 1, b = 0; b < in->L; b = pdb_chain_end(in, b), k++)
		fprintf(f, "%d 1 designed\n", k);
	cif_loop(f, "ma_target_entity_instance", inst);
	for (k = 1, b = 0; b < in->L; b = pdb_chain_end(in, b), k++)
		fprintf(f, "%c %d .\n", pdb_chain_id(in, b), k);
}

/* _software ... _ma_model_list: what made the model */
static void cif_protocol(FILE *f, const pdb_meta_t *m)
{
	char details[512];
	int n;

	n = snprintf(details, sizeof details, "ESMFold v1 (Lin et al. 2023), weights %s, "
	             "recycles %d, chunk size ", m->weights ? m->weights : "unknown", m->recycles);
	if (m->chunk_size > 0) n += snprintf(details + n, sizeof details - n, "%d", m->chunk_size);
	else n += snprintf(details + n, sizeof details - n, "none");
	if (m->fragment) snprintf(details + n, sizeof details - n, "; fragment: %s", m->fragment);
	const cif_kv_t kv[] = {
		{ NULL, NULL },
		{ "_software.pdbx_ordinal", "1" }, { "_software.name", "esmbatch" },
		{ "_software.version", m->version }, { "_software.type", "program" },
		{ "_software.classification", "other" },
		{ "_software.description", "ESMFold structure prediction" },
		{ NULL, NULL },
		{ "_ma_software_group.ordinal_id", "1" }, { "_ma_software_group.group_id", "1" },
		{ "_ma_software_group.software_id", "1" },
	};
	const cif_kv_t models[] = {
		{ "_ma_protocol_step.ordinal_id", "1" }, { "_ma_protocol_step.protocol_id", "1" },
		{ "_ma_protocol_step.step_id", "1" }, { "_ma_protocol_step.method_type", "modeling" },
		{ "_ma_protocol_step.step_name", "ESMFold" },
		{ "_ma_protocol_step.details", details },
		{ "_ma_protocol_step.software_group_id", "1" },
		{ NULL, NULL },
		{ "_ma_model_list.ordinal_id", "1" }, { "_ma_model_list.model_id", "1" },
		{ "_ma_model_list.model_group_id", "1" },
		{ "_ma_model_list.model_name", "ESMFold model" },
		{ "_ma_model_list.model_group_name", "ESMFold model" },
		{ "_ma_model_list.model_type", "Ab initio model" },
		{ "_ma_model_list.data_id", "2" },
	};
	static const char *const data[] = { "id", "name", "content_type", NULL };

	cif_pairs(f, kv, sizeof kv / sizeof *kv);
	cif_loop(f, "ma_data", data);
	fputs("1 'Target sequences' target\n2 Model 'model coordinates'\n#\n", f);
	cif_pairs(f, models, sizeof models / sizeof *models);
}

/* _ma_qa_metric, _ma_qa_metric_global, _ma_qa_metric_local */
static void cif_qa(FILE *f, const pdb_input_t *in)
{
	static const char *const metric[] = { "id", "name", "description", "type", "mode",
	                                      "software_group_id", NULL };
	static const char *const glob[] = { "ordinal_id", "model_id", "metric_id", "metric_value",
	                                    NULL };
	static const char *const local[] = { "ordinal_id", "model_id", "label_asym_id",
	                                     "label_seq_id", "label_comp_id", "metric_id",
	                                     "metric_value", NULL };
	int ord = 1;

	cif_loop(f, "ma_qa_metric", metric);
	fputs("1 pLDDT 'Predicted lddt' pLDDT global 1\n"
	      "2 pTM 'Predicted TM-score' pTM global 1\n"
	      "3 pLDDT 'Predicted lddt' pLDDT local 1\n", f);
	cif_loop(f, "ma_qa_metric_global", glob);
	fprintf(f, "1 1 1 %.2f\n2 1 2 %.4f\n", in->meta->mean_plddt, in->meta->ptm);
	cif_loop(f, "ma_qa_metric_local", local);
	for (int b = 0, e; b < in->L; b = e) {
		char chain = pdb_chain_id(in, b);
		e = pdb_chain_end(in, b);
		for (int i = b, n = 1; i < e; i++) {
			size_t ca = (size_t)i * RESIDUE_NUM_ATOM37 + RESIDUE_ATOM37_CA;
			if (!pdb_in_seq(in, i)) continue;
			if (in->atom37_mask[ca] >= 0.5f)
				fprintf(f, "%d 1 %c %d %s 3 %.2f\n", ord++, chain, n,
				        residue_restype_name3(in->aatype[i]), 100.0 * (double)in->plddt[ca]);
			n++;
		}
	}
}

static void cif_atoms(FILE *f, const pdb_input_t *in)
{
	static const char *const items[] = {
		"group_PDB", "id", "type_symbol", "label_atom_id", "label_alt_id", "label_comp_id",
		"label_asym_id", "label_entity_id", "label_seq_id", "pdbx_PDB_ins_code", "Cartn_x",
		"Cartn_y", "Cartn_z", "occupancy", "B_iso_or_equiv", "pdbx_formal_charge",
		"auth_seq_id", "auth_comp_id", "auth_asym_id", "auth_atom_id", "pdbx_PDB_model_num",
		NULL };
	long serial = 1;

	cif_loop(f, "atom_site", items);
	for (int b = 0, e, k = 1; b < in->L; b = e, k++) {
		char chain = pdb_chain_id(in, b);
		e = pdb_chain_end(in, b);
		for (int i = b, n = 0; i < e; i++) {
			const char *res = residue_restype_name3(in->aatype[i]);
			if (!pdb_in_seq(in, i)) continue;   /* no atoms (pdb_check) */
			n++;
			for (int a = 0; a < RESIDUE_NUM_ATOM37; a++) {
				size_t at = (size_t)i * RESIDUE_NUM_ATOM37 + a;
				const float *x = in->atom37 + 3 * at;
				if (in->atom37_mask[at] < 0.5f) continue;
				fprintf(f, "ATOM %ld %c %s . %s %c %d %d ? %.3f %.3f %.3f 1.00 %.2f ? %d %s %c "
				        "%s 1\n", serial++, residue_atom_elements[a], residue_atom_types[a],
				        res, chain, k, n, (double)x[0], (double)x[1], (double)x[2],
				        100.0 * (double)in->plddt[at], in->residue_index[i] + 1, res, chain,
				        residue_atom_types[a]);
			}
		}
	}
}

int cif_write(FILE *f, const pdb_input_t *in)
{
	const pdb_meta_t *m = in->meta;
	const char *name = m && m->name ? m->name : "model";
	char title[160];

	if (!m) {
		log_error("cif: no run facts (meta) to write");
		return -1;
	}
	if (pdb_check(in) < 0) return -1;
	snprintf(title, sizeof title, "ESMFold prediction by esmbatch %s%s%s",
	         m->version ? m->version : "(version unknown)",
	         m->fragment ? ", fragment: " : "", m->fragment ? m->fragment : "");
	const cif_kv_t kv[] = {
		{ "_entry.id", name },
		{ NULL, NULL },
		{ "_struct.entry_id", name }, { "_struct.title", title },
		{ NULL, NULL },
		{ "_audit_conform.dict_name", "mmcif_ma.dic" },
		{ "_audit_conform.dict_version", "1.4.5" },
		{ "_audit_conform.dict_location",
		  "https://raw.githubusercontent.com/ihmwg/ModelCIF/master/dist/mmcif_ma.dic" },
	};
	fprintf(f, "data_%s\n#\n", name);
	cif_pairs(f, kv, sizeof kv / sizeof *kv);
	cif_chem_comp(f, in);
	cif_atom_types(f, in);
	cif_entities(f, in);
	cif_seq_scheme(f, in);
	cif_protocol(f, m);
	cif_targets(f, in);
	cif_qa(f, in);
	cif_atoms(f, in);
	fputs("#\n", f);
	if (ferror(f)) {
		log_error("cif: write failed: %s", strerror(errno));
		return -1;
	}
	return 0;
}
