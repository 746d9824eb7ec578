/* tokenizer.c - ESMFold input encoding (see tokenizer.h). */
#include "model/tokenizer.h"

#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "protein/residue.h"

/* vocabulary id of a one-letter token, or -1 */
static int tok_vocab_id(const hparams_t *c, char letter)
{
	for (int i = 0; i < c->vocab; i++)
		if (c->vocab_list[i][0] == letter && c->vocab_list[i][1] == 0) return i;
	return -1;
}

int tok_encode(tok_t *t, const char *seq, const hparams_t *c)
{
	int esm_of[RESIDUE_NUM_RESTYPES];
	int nres = 0, nchains = 1, L, chain = 0, at = 0;

	memset(t, 0, sizeof *t);
	for (const char *p = seq; *p; p++) {
		if (*p == ':') nchains++;
		else nres++;
	}
	for (int a = 0; a < RESIDUE_NUM_RESTYPES; a++)
		if ((esm_of[a] = tok_vocab_id(c, residue_restypes[a])) < 0) {
			log_error("model vocabulary has no token for '%c'", residue_restypes[a]);
			return -1;
		}
	L = (int)tok_model_len(nres, nchains);
	if (nres == 0) return -1;
	t->L = L;
	t->nchains = nchains;
	t->aatype = malloc(sizeof *t->aatype * L);
	t->residx = malloc(sizeof *t->residx * L);
	t->tokens = malloc(sizeof *t->tokens * (L + 2));
	t->linker_mask = malloc(sizeof *t->linker_mask * L);
	t->chain = malloc(sizeof *t->chain * L);
	if (!t->aatype || !t->residx || !t->tokens || !t->linker_mask || !t->chain) {
		tok_free(t);
		return -1;
	}
	for (const char *p = seq;; p++) {
		if (*p == ':' || *p == 0) {
			if (at == 0 || (p > seq && p[-1] == ':')) { tok_free(t); return -1; }
			if (*p == 0) break;
			for (int k = 0; k < TOK_LINKER_LEN; k++, at++) {
				t->aatype[at] = residue_aatype_of('G');
				t->residx[at] = at + chain * TOK_CHAIN_OFFSET;
				t->linker_mask[at] = 0.0f;
				t->chain[at] = chain;
			}
			chain++;
			continue;
		}
		t->aatype[at] = residue_aatype_of(*p);
		t->residx[at] = at + chain * TOK_CHAIN_OFFSET;
		t->linker_mask[at] = 1.0f;
		t->chain[at] = chain;
		at++;
	}
	t->tokens[0] = c->cls_token;
	for (int i = 0; i < L; i++) t->tokens[i + 1] = esm_of[t->aatype[i]];
	t->tokens[L + 1] = c->eos_token;
	return 0;
}

void tok_number(const tok_t *t, const char *record, int start, int per_chain, int *chain,
                int *num)
{
	int c0 = 0, p0 = 0, first = 0;

	/* the record's chain at start, and how far into it start is */
	for (int k = 0; k < start; k++) {
		if (record[k] == ':') {
			c0++;
			p0 = 0;
		} else {
			p0++;
		}
	}
	/* the record's model position of start: its residues, TOK_LINKER_LEN per break */
	int at0 = start - c0 + TOK_LINKER_LEN * c0;
	for (int i = 0; i < t->L; i++) {
		if (i > 0 && t->chain[i] != t->chain[i - 1]) first = i;
		chain[i] = c0 + t->chain[i];
		if (!per_chain) num[i] = at0 + i + chain[i] * TOK_CHAIN_OFFSET;
		else num[i] = i - first + (t->chain[i] == 0 ? p0 : 0);
	}
}

void tok_free(tok_t *t)
{
	free(t->aatype);
	free(t->residx);
	free(t->tokens);
	free(t->linker_mask);
	free(t->chain);
	memset(t, 0, sizeof *t);
}
