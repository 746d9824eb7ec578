/* test_pdb.c - the PDB writer: golden comparison with every fixture's
 * expected_NAME.esm.pdb (fair-esm flavour), the HEADER/REMARK block, the
 * atomic write and bad input. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "golden_json.h"
#include "protein/cif.h"
#include "protein/pdb.h"
#include "protein/residue.h"
#include "io/safetensors.h"
#include "tmpdir.h"

#define LINKER_LEN 25
/* one print quantum of the %8.3f coordinate columns */
#define COORD_QUANTUM 1e-3

static double worst_coord_ratio;
static int n_bfactor_text_diff, n_coord_text_diff, n_atoms_total;

typedef struct {
	int L;
	int *aatype, *residue_index, *chain_index;
	float *atom37, *mask, *plddt;
} seq_data_t;

static void *load(const safetensors_t *st, const char *seq, const char *tensor, int64_t want, int as_int)
{
	char key[256];
	snprintf(key, sizeof key, "%s/%s", seq, tensor);
	const safetensors_tensor_t *t = safetensors_find(st, key);
	assert_non_null(t);
	assert_int_equal(t->numel, want);
	double *d = malloc(sizeof *d * (size_t)(want ? want : 1));
	assert_non_null(d);
	safetensors_to_f64(t, d);
	if (as_int) {
		int *v = malloc(sizeof *v * (size_t)(want ? want : 1));
		assert_non_null(v);
		for (int64_t i = 0; i < want; i++)
			v[i] = (int)d[i];
		free(d);
		return v;
	}
	float *v = malloc(sizeof *v * (size_t)(want ? want : 1));
	assert_non_null(v);
	for (int64_t i = 0; i < want; i++)
		v[i] = (float)d[i];
	free(d);
	return v;
}

/* chain of each residue: ':' separates chains; the 25-glycine linker after
 * chain c belongs to chain c (fair-esm's encoding) */
static void chains_of(const char *sequence, int L, int *chain_index)
{
	int i = 0, chain = 0;
	for (const char *p = sequence; *p; p++) {
		if (*p == ':') {
			for (int k = 0; k < LINKER_LEN; k++, i++) {
				assert_true(i < L);
				chain_index[i] = chain;
			}
			chain++;
			continue;
		}
		assert_true(i < L);
		chain_index[i++] = chain;
	}
	assert_int_equal(i, L);
}

static void seq_load(const safetensors_t *st, const char *name, const char *sequence, seq_data_t *s)
{
	char key[256];
	snprintf(key, sizeof key, "%s/aatype", name);
	const safetensors_tensor_t *t = safetensors_find(st, key);
	assert_non_null(t);
	int L = s->L = (int)t->numel;
	s->aatype = load(st, name, "aatype", L, 1);
	s->residue_index = load(st, name, "residue_index", L, 1);
	s->atom37 = load(st, name, "atom37_positions", (int64_t)L * RESIDUE_NUM_ATOM37 * 3, 0);
	s->mask = load(st, name, "atom37_mask", (int64_t)L * RESIDUE_NUM_ATOM37, 0);
	s->plddt = load(st, name, "plddt", (int64_t)L * RESIDUE_NUM_ATOM37, 0);
	s->chain_index = malloc(sizeof(int) * (size_t)(L ? L : 1));
	assert_non_null(s->chain_index);
	chains_of(sequence, L, s->chain_index);
}

static void seq_free(seq_data_t *s)
{
	free(s->aatype), free(s->residue_index), free(s->chain_index);
	free(s->atom37), free(s->mask), free(s->plddt);
}

static pdb_input_t input_of(const seq_data_t *s)
{
	pdb_input_t in = {
		.L = s->L, .aatype = s->aatype, .atom37 = s->atom37, .atom37_mask = s->mask,
		.plddt = s->plddt, .residue_index = s->residue_index,
		.chain_index = s->chain_index, .meta = NULL,
	};
	return in;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	long n = ftell(f);
	assert_true(n >= 0);
	rewind(f);
	char *buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static char *render(const pdb_input_t *in, size_t *len)
{
	char *text = NULL;
	FILE *f = open_memstream(&text, len);
	assert_non_null(f);
	assert_int_equal(pdb_write(f, in), 0);
	assert_int_equal(fclose(f), 0);
	return text;
}

/* next line of *p (without '\n') into a NUL-terminated copy; NULL at the end */
static char *next_line(char **p)
{
	if (!**p)
		return NULL;
	char *start = *p, *nl = strchr(start, '\n');
	assert_non_null(nl);   /* every line ends with a newline */
	*nl = '\0';
	*p = nl + 1;
	return start;
}

/* ATOM lines: columns identical except x, y, z (31-54) within tol (plus one
 * print quantum), and the B-factor (61-66) where float noise on pLDDT may
 * move the last printed digit: there within 0.01. */
static void compare_atom(const char *got, const char *exp, double tol, const char *where)
{
	assert_int_equal(strlen(got), 80);
	assert_int_equal(strlen(exp), 80);
	if (memcmp(got, exp, 30) != 0 || memcmp(got + 54, exp + 54, 6) != 0 ||
	    memcmp(got + 66, exp + 66, 14) != 0)
		fail_msg("%s: record differs\n got: %s\n exp: %s", where, got, exp);
	n_atoms_total++;
	for (int c = 0; c < 3; c++) {
		char a[9], b[9];
		memcpy(a, got + 30 + 8 * c, 8), a[8] = '\0';
		memcpy(b, exp + 30 + 8 * c, 8), b[8] = '\0';
		if (strcmp(a, b) != 0)
			n_coord_text_diff++;
		double r = fabs(atof(a) - atof(b)) / (tol + COORD_QUANTUM);
		if (r > worst_coord_ratio)
			worst_coord_ratio = r;
		if (!(r <= 1.0))
			fail_msg("%s: coordinate %s vs %s beyond %.3g\n got: %s\n exp: %s", where, a, b,
			         tol, got, exp);
	}
	if (memcmp(got + 60, exp + 60, 6) != 0) {
		char a[7], b[7];
		memcpy(a, got + 60, 6), a[6] = '\0';
		memcpy(b, exp + 60, 6), b[6] = '\0';
		n_bfactor_text_diff++;
		if (!(fabs(atof(a) - atof(b)) <= 0.0100001))
			fail_msg("%s: B-factor %s vs %s\n got: %s\n exp: %s", where, a, b, got, exp);
	}
}

static void golden_fixture(const char *fixture)
{
	char path[1024];
	safetensors_t *st;
	json_t *root;
	assert_int_equal(golden_open(fixture, &st, &root), 0);

	int checked = 0;
	size_t si;
	json_t *jseq;
	json_array_foreach(json_object_get(root, "sequences"), si, jseq) {
		const char *name = json_string_value(json_object_get(jseq, "name"));
		const char *sequence = json_string_value(json_object_get(jseq, "sequence"));
		assert_non_null(name);
		assert_non_null(sequence);
		snprintf(path, sizeof path, "%s/%s/expected_%s.esm.pdb", TEST_DATA, fixture, name);
		char *expected = slurp(path);
		assert_non_null(expected);
		double tol = golden_json_tol(jseq, "atom37_positions");
		assert_true(tol > 0.0);

		seq_data_t s;
		seq_load(st, name, sequence, &s);
		pdb_input_t in = input_of(&s);
		size_t len;
		char *text = render(&in, &len);
		assert_int_equal(strlen(text), len);

		char *pg = text, *pe = expected, *lg, *le;
		int line = 0;
		while ((le = next_line(&pe)) != NULL) {
			line++;
			lg = next_line(&pg);
			char where[128];
			snprintf(where, sizeof where, "%s/%s line %d", fixture, name, line);
			if (!lg)
				fail_msg("%s: output ends early", where);
			if (strncmp(le, "ATOM  ", 6) == 0)
				compare_atom(lg, le, tol, where);
			else if (strcmp(lg, le) != 0)
				fail_msg("%s:\n got: %s\n exp: %s", where, lg, le);
		}
		assert_null(next_line(&pg));
		printf("  %s/%s: %d lines match\n", fixture, name, line);
		checked++;
		free(text);
		free(expected);
		seq_free(&s);
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

/* a 2-residue, 2-chain protein: GLY A 1, ALA B 2 */
static void tiny_input(pdb_input_t *in, int *aatype, int *resi, int *chain, float *xyz,
                       float *mask, float *plddt)
{
	aatype[0] = residue_aatype_of('G'), aatype[1] = residue_aatype_of('A');
	resi[0] = 0, resi[1] = 1;
	chain[0] = 0, chain[1] = 1;
	for (int i = 0; i < 2 * RESIDUE_NUM_ATOM37; i++) {
		mask[i] = residue_atom37_mask[aatype[i / RESIDUE_NUM_ATOM37]][i % RESIDUE_NUM_ATOM37];
		plddt[i] = 0.5f;
		for (int d = 0; d < 3; d++)
			xyz[3 * i + d] = (float)(i + d);
	}
	pdb_input_t t = { .L = 2, .aatype = aatype, .atom37 = xyz, .atom37_mask = mask,
	                  .plddt = plddt, .residue_index = resi, .chain_index = chain };
	*in = t;
}

static void test_meta_and_atomic(void **state)
{
	(void)state;
	int aatype[2], resi[2], chain[2];
	float xyz[2 * RESIDUE_NUM_ATOM37 * 3], mask[2 * RESIDUE_NUM_ATOM37], plddt[2 * RESIDUE_NUM_ATOM37];
	pdb_input_t in;
	tiny_input(&in, aatype, resi, chain, xyz, mask, plddt);
	pdb_meta_t meta = { .version = "0.1.0", .weights = "sha256:0123abcd", .mean_plddt = 50.0,
	                    .ptm = 0.25, .recycles = 3, .chunk_size = 0 };
	in.meta = &meta;
	size_t len;
	char *text = render(&in, &len);
	assert_true(strncmp(text, "HEADER    ", 10) == 0);
	assert_non_null(strstr(text, "REMARK 250 PREDICTED WITH ESMBATCH 0.1.0"));
	assert_non_null(strstr(text, "REMARK 250 WEIGHTS sha256:0123abcd"));
	assert_non_null(strstr(text, "REMARK 250 MEAN PLDDT 50.00"));
	assert_non_null(strstr(text, "REMARK 250 PTM 0.2500"));
	assert_non_null(strstr(text, "REMARK 250 RECYCLES 3"));
	assert_non_null(strstr(text, "REMARK 250 CHUNK SIZE NONE"));
	/* SEQRES per chain and the unit cell of predicted models; no PARENT
	 * lines (no PDB records); END padded like the header records */
	assert_non_null(strstr(text, "\nSEQRES   1 A    1  GLY    "));
	assert_non_null(strstr(text, "\nSEQRES   1 B    1  ALA    "));
	assert_non_null(strstr(text, "\nCRYST1    1.000    1.000    1.000  90.00  90.00  90.00 "
	                             "P 1           1          \nATOM      1"));
	assert_null(strstr(text, "PARENT"));
	assert_non_null(strstr(text, "\nTER       5      GLY A   1      "));
	assert_non_null(strstr(text, "      \nATOM      6"));
	assert_non_null(strstr(text, "\nTER      11      ALA B   2      "));
	assert_non_null(strstr(text, "      \nEND     "));
	/* the header records, TER and END are full 80-column lines */
	for (char *p = text; *p; p = strchr(p, '\n') + 1)
		if (strncmp(p, "ATOM", 4) != 0) assert_int_equal(strchr(p, '\n') - p, 80);
	assert_int_equal(strlen(strstr(text, "\nEND ")), 82);

	char dir[200];
	assert_non_null(mkdtemp(tmpdir_template(dir, sizeof dir, "test_pdb")));
	char path[256], tmp[320];
	snprintf(path, sizeof path, "%s/out.pdb", dir);
	snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
	assert_int_equal(pdb_write_atomic(path, &in), 0);
	char *back = slurp(path);
	assert_non_null(back);
	assert_string_equal(back, text);
	assert_int_equal(access(tmp, F_OK), -1);
	free(back);

	/* a failing write leaves neither the file nor the temporary */
	aatype[1] = 99;
	char path2[300];
	snprintf(path2, sizeof path2, "%s/bad.pdb", dir);
	assert_true(pdb_write_atomic(path2, &in) < 0);
	assert_int_equal(access(path2, F_OK), -1);
	snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path2, (long)getpid());
	assert_int_equal(access(tmp, F_OK), -1);
	/* unwritable place */
	snprintf(path2, sizeof path2, "%s/no/such/dir.pdb", dir);
	aatype[1] = residue_aatype_of('A');
	assert_true(pdb_write_atomic(path2, &in) < 0);

	unlink(path);
	rmdir(dir);
	free(text);
}

/* SEQRES: 13 residues a record, every record with the chain's count, the
 * linker residues (linker_mask 0) left out; X as UNK.  A linker residue
 * with an atom is refused. */
static void test_seqres(void **state)
{
	(void)state;
	enum { L = 32 };   /* chain A: 27 residues and a 3-residue linker; chain B: 2 */
	int aatype[L], resi[L], chain[L];
	float xyz[L * RESIDUE_NUM_ATOM37 * 3] = { 0 }, mask[L * RESIDUE_NUM_ATOM37] = { 0 };
	float plddt[L * RESIDUE_NUM_ATOM37] = { 0 }, linker[L];
	for (int i = 0; i < L; i++) {
		aatype[i] = residue_aatype_of(i >= 27 && i < 30 ? 'G' : i == 5 ? 'X' : 'A');
		resi[i] = i < 30 ? i : i - 30;
		chain[i] = i < 30 ? 0 : 1;
		linker[i] = i >= 27 && i < 30 ? 0.0f : 1.0f;
	}
	pdb_meta_t meta = { .version = "0.2.0" };
	pdb_input_t in = { .L = L, .aatype = aatype, .atom37 = xyz, .atom37_mask = mask,
	                   .plddt = plddt, .residue_index = resi, .chain_index = chain,
	                   .linker_mask = linker, .meta = &meta };
	size_t len;
	char *text = render(&in, &len);
	assert_non_null(strstr(text, "\nSEQRES   1 A   27  ALA ALA ALA ALA ALA UNK ALA ALA ALA ALA "
	                             "ALA ALA ALA          \nSEQRES   2 A   27  ALA"));
	assert_non_null(strstr(text, "\nSEQRES   3 A   27  ALA                "));
	assert_non_null(strstr(text, "\nSEQRES   1 B    2  ALA ALA    "));
	assert_null(strstr(text, "SEQRES   4"));
	/* TER names the chain's last residue, not the linker's last one */
	assert_non_null(strstr(text, "\nTER       1      ALA A  27      "));
	assert_non_null(strstr(text, "\nTER       2      ALA B   2      "));
	*strstr(text, "CRYST1") = 0;   /* the SEQRES records before it */
	assert_null(strstr(text, "GLY"));
	free(text);
	/* without a meta, the reference's: the model's last residue */
	in.meta = NULL;
	text = render(&in, &len);
	assert_non_null(strstr(text, "\nTER       1      GLY A  30\nPARENT N/A\n"));
	assert_non_null(strstr(text, "\nTER       2      ALA B   2\nEND\n"));
	free(text);
	in.meta = &meta;
	mask[28 * RESIDUE_NUM_ATOM37 + 1] = 1.0f;   /* a CA on the linker */
	FILE *f = fopen("/dev/null", "w");
	assert_non_null(f);
	assert_true(pdb_write(f, &in) < 0);
	assert_true(cif_write(f, &in) < 0);
	fclose(f);
}

/* the global pLDDT: the mean over the chains' residues of their CA's
 * pLDDT; the other atoms, linker residues and residues without a CA (X)
 * count for nothing */
static void test_mean_plddt(void **state)
{
	(void)state;
	enum { L = 5 };   /* A A X G(linker) A */
	int aatype[L], resi[L], chain[L] = { 0, 0, 0, 0, 1 };
	float xyz[L * RESIDUE_NUM_ATOM37 * 3] = { 0 }, mask[L * RESIDUE_NUM_ATOM37] = { 0 };
	float plddt[L * RESIDUE_NUM_ATOM37], linker[L] = { 1, 1, 1, 0, 1 };
	static const float ca[L] = { 0.2f, 0.4f, 0.9f, 0.9f, 0.9f };
	for (int i = 0; i < L; i++) {
		aatype[i] = residue_aatype_of("AAXGA"[i]);
		resi[i] = i;
		for (int k = 0; k < RESIDUE_NUM_ATOM37; k++) {
			size_t at = (size_t)i * RESIDUE_NUM_ATOM37 + k;
			mask[at] = linker[i] ? residue_atom37_mask[aatype[i]][k] : 0.0f;
			plddt[at] = k == RESIDUE_ATOM37_CA ? ca[i] : 0.01f;
		}
	}
	pdb_input_t in = { .L = L, .aatype = aatype, .atom37 = xyz, .atom37_mask = mask,
	                   .plddt = plddt, .residue_index = resi, .chain_index = chain,
	                   .linker_mask = linker };
	assert_true(fabs(pdb_mean_plddt(&in) - 100.0 * (0.2 + 0.4 + 0.9) / 3) < 1e-4);
	memset(mask, 0, sizeof mask);
	assert_true(isnan(pdb_mean_plddt(&in)));
}

/* mmCIF needs the run facts; values with quotes or spaces, or beginning
 * like a reserved word, are quoted */
static void test_cif(void **state)
{
	(void)state;
	int aatype[2], resi[2], chain[2];
	float xyz[2 * RESIDUE_NUM_ATOM37 * 3], mask[2 * RESIDUE_NUM_ATOM37], plddt[2 * RESIDUE_NUM_ATOM37];
	pdb_input_t in;
	tiny_input(&in, aatype, resi, chain, xyz, mask, plddt);
	char *text = NULL;
	size_t len;
	FILE *f = open_memstream(&text, &len);
	assert_non_null(f);
	assert_true(cif_write(f, &in) < 0);   /* no meta */
	pdb_meta_t meta = { .version = "0.2.0", .weights = "it's", .mean_plddt = 50.0,
	                    .ptm = 0.25, .recycles = 3, .name = "data_1" };
	in.meta = &meta;
	assert_int_equal(cif_write(f, &in), 0);
	assert_int_equal(fclose(f), 0);
	/* a name that is a reserved word's prefix is quoted as a value */
	assert_true(strncmp(text, "data_data_1\n", 12) == 0);
	assert_non_null(strstr(text, "\n_entry.id 'data_1'\n"));
	assert_non_null(strstr(text, "\n_ma_protocol_step.details \"ESMFold v1 (Lin et al. 2023), "
	                             "weights it's, recycles 3, chunk size none\"\n"));
	assert_non_null(strstr(text, "\n1 1 1 50.00\n2 1 2 0.2500\n"));
	/* GLY A 1 and ALA B 2: two entities, the second numbered 1 in its entity, 2 as written */
	assert_non_null(strstr(text, "\n1 polymer man 'chain A' 1\n2 polymer man 'chain B' 1\n"));
	assert_non_null(strstr(text, "\nA 1 ?\nB 2 ?\n"));
	/* what AlphaFold DB files and python-modelcif write beside: the atoms
	 * and elements present, the chains as targets, the numbering scheme */
	assert_non_null(strstr(text, "\n_chem_comp_atom.type_symbol\nALA N N\nALA CA C\nALA C C\n"
	                             "ALA CB C\nALA O O\nGLY N N\nGLY CA C\nGLY C C\nGLY O O\n#\n"));
	assert_non_null(strstr(text, "\nloop_\n_atom_type.symbol\nC\nN\nO\n#\n"));
	assert_non_null(strstr(text, "\n_pdbx_poly_seq_scheme.hetero\nA 1 1 GLY 1 1 GLY GLY A ? n\n"
	                             "B 2 1 ALA 2 2 ALA ALA B ? n\n#\n"));
	assert_non_null(strstr(text, "\n_ma_target_entity.origin\n1 1 designed\n2 1 designed\n#\n"));
	assert_non_null(strstr(text, "\n_ma_target_entity_instance.details\nA 1 .\nB 2 .\n#\n"));
	assert_non_null(strstr(text, "\n1 'Target sequences' target\n2 Model 'model coordinates'\n"));
	assert_non_null(strstr(text, "\n_ma_model_list.data_id 2\n"));
	assert_non_null(strstr(text, "\nATOM 5 N N . ALA B 2 1 ? "));
	assert_non_null(strstr(text, " 1.00 50.00 ? 2 ALA B N 1\n"));
	free(text);
}

static void test_bad_input(void **state)
{
	(void)state;
	int aatype[2], resi[2], chain[2];
	float xyz[2 * RESIDUE_NUM_ATOM37 * 3], mask[2 * RESIDUE_NUM_ATOM37], plddt[2 * RESIDUE_NUM_ATOM37];
	pdb_input_t in;
	FILE *f = fopen("/dev/null", "w");
	assert_non_null(f);

	tiny_input(&in, aatype, resi, chain, xyz, mask, plddt);
	assert_int_equal(pdb_write(f, &in), 0);
	chain[1] = PDB_MAX_CHAINS;
	assert_true(pdb_write(f, &in) < 0);
	chain[1] = 1;
	aatype[0] = -1;
	assert_true(pdb_write(f, &in) < 0);
	aatype[0] = 7;
	xyz[4] = NAN;                    /* CA of residue 0 */
	assert_true(pdb_write(f, &in) < 0);
	mask[1] = 0.0f;                  /* ... unless that atom is masked out */
	assert_int_equal(pdb_write(f, &in), 0);
	fclose(f);
}

/* every line at most 80 columns, ATOM lines exactly 80 */
static void assert_columns(char *text)
{
	for (char *p = text, *line; (line = next_line(&p));) {
		size_t n = strlen(line);
		if (n > 80 || (!strncmp(line, "ATOM  ", 6) && n != 80))
			fail_msg("line of %zu columns: %s", n, line);
	}
}

/* residue numbers of 10000 and more: the number mod 10000 in columns
 * 23-26 and an insertion code in 27, coordinates still in 31-54; beyond
 * PDB_MAX_RESNUM, and coordinates beyond the 8 columns, refused */
static void test_wide_numbers(void **state)
{
	(void)state;
	enum { N = 4 };
	static const int resi[N] = { 9998, 9999, 10239, PDB_MAX_RESNUM - 1 };
	static const char *want[N] = { "9999 ", "   0A", " 240A", "9999Z" };
	int aatype[N], chain[N], ri[N];
	float xyz[N * RESIDUE_NUM_ATOM37 * 3], mask[N * RESIDUE_NUM_ATOM37], plddt[N * RESIDUE_NUM_ATOM37];

	for (int i = 0; i < N; i++) {
		aatype[i] = residue_aatype_of('G');
		chain[i] = i;
		ri[i] = resi[i];
	}
	for (int i = 0; i < N * RESIDUE_NUM_ATOM37; i++) {
		mask[i] = residue_atom37_mask[aatype[0]][i % RESIDUE_NUM_ATOM37];
		plddt[i] = 0.5f;
		for (int d = 0; d < 3; d++)
			xyz[3 * i + d] = d == 0 ? -999.0f : 9999.0f;
	}
	pdb_input_t in = { .L = N, .aatype = aatype, .atom37 = xyz, .atom37_mask = mask,
	                   .plddt = plddt, .residue_index = ri, .chain_index = chain };
	size_t len;
	char *text = render(&in, &len), *p = text, *line;
	int seen[N] = { 0 };
	while ((line = next_line(&p))) {
		assert_true(strlen(line) <= 80);
		if (strncmp(line, "ATOM  ", 6))
			continue;
		assert_int_equal(strlen(line), 80);
		int c = line[21] - 'A';
		assert_true(c >= 0 && c < N);
		if (strncmp(line + 22, want[c], 5))
			fail_msg("chain %c: resSeq+iCode \"%.5s\", want \"%s\"", line[21], line + 22, want[c]);
		assert_true(!strncmp(line + 30, "-999.000", 8) && !strncmp(line + 38, "9999.000", 8));
		seen[c]++;
	}
	for (int i = 0; i < N; i++)
		assert_int_equal(seen[i], 4);   /* N CA C O of glycine */
	free(text);

	FILE *f = fopen("/dev/null", "w");
	assert_non_null(f);
	ri[3] = PDB_MAX_RESNUM;
	assert_true(pdb_write(f, &in) < 0);
	ri[3] = resi[3];
	xyz[3 * 1] = 10000.0f;               /* CA x of residue 0 */
	assert_true(pdb_write(f, &in) < 0);
	xyz[3 * 1] = -1000.0f;
	assert_true(pdb_write(f, &in) < 0);
	xyz[3 * 1] = 0.0f;
	assert_int_equal(pdb_write(f, &in), 0);
	fclose(f);
}

/* more than 99999 atoms: serials continue from 0, columns kept */
static void test_many_atoms(void **state)
{
	(void)state;
	enum { L = 25001 };   /* 4 atoms each: 100004 atoms, then TER */
	int *aatype = calloc(L, sizeof *aatype), *ri = calloc(L, sizeof *ri);
	float *xyz = calloc((size_t)L * RESIDUE_NUM_ATOM37 * 3, sizeof *xyz);
	float *mask = calloc((size_t)L * RESIDUE_NUM_ATOM37, sizeof *mask);
	float *plddt = calloc((size_t)L * RESIDUE_NUM_ATOM37, sizeof *plddt);

	assert_true(aatype && ri && xyz && mask && plddt);
	for (int i = 0; i < L; i++) {
		aatype[i] = residue_aatype_of('G');
		ri[i] = i;
		for (int k = 0; k < RESIDUE_NUM_ATOM37; k++)
			mask[(size_t)i * RESIDUE_NUM_ATOM37 + k] = residue_atom37_mask[aatype[i]][k];
	}
	pdb_input_t in = { .L = L, .aatype = aatype, .atom37 = xyz, .atom37_mask = mask,
	                   .plddt = plddt, .residue_index = ri };
	size_t len;
	char *text = render(&in, &len);
	/* residue 25000 (5000 with code B): serials 99997-99999, then 0 */
	assert_non_null(strstr(text, "\nATOM  99999  C   GLY A5000B    "));
	assert_non_null(strstr(text, "\nATOM      0  O   GLY A5000B    "));
	assert_non_null(strstr(text, "\nTER       5      GLY A5001B\nEND\n"));
	assert_columns(text);
	free(text);
	free(aatype);
	free(ri);
	free(xyz);
	free(mask);
	free(plddt);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_golden_tiny_a),
		cmocka_unit_test(test_golden_tiny_b),
		cmocka_unit_test(test_meta_and_atomic),
		cmocka_unit_test(test_mean_plddt),
		cmocka_unit_test(test_seqres),
		cmocka_unit_test(test_cif),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_wide_numbers),
		cmocka_unit_test(test_many_atoms),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	printf("atoms compared: %d; coordinates printed differently: %d; worst "
	       "|diff|/(tol + 0.001): %.3f; B-factors printed differently (within 0.01): %d\n",
	       n_atoms_total, n_coord_text_diff, worst_coord_ratio, n_bfactor_text_diff);
	return rc;
}
