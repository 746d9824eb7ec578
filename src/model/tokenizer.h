/* tokenizer.h (prefix tok_) - ESMFold's input encoding of one sequence (fair-esm flavour).
 *
 * Chains are separated by ':' and joined by a 25-glycine linker; residue
 * indices jump by 512 per chain (the linker after chain i belongs to chain
 * i's offset); linker residues have linker_mask 0 and the chain index of the
 * chain before them.  Letters outside the 20 amino acids (B Z U O J X, any
 * other) become X (aatype 20); the caller upper-cases.  ESM-2 tokens are
 * <cls>, the vocabulary id of each residue's letter ("X" for aatype 20),
 * <eos>.  A sequence without ':' encodes exactly as Hugging Face's infer().
 */
#ifndef ESMBATCH_MODEL_TOKENIZER_H
#define ESMBATCH_MODEL_TOKENIZER_H

#include <stdint.h>

#include "model/hparams.h"

#define TOK_LINKER_LEN   25
#define TOK_CHAIN_OFFSET 512

typedef struct {
	int      L;            /* residues, linkers included */
	int      nchains;
	int     *aatype;       /* [L] AF2 order, 20 = X */
	int32_t *residx;       /* [L] */
	int32_t *tokens;       /* [L+2] ESM-2 ids */
	float   *linker_mask;  /* [L] 1 residue, 0 linker */
	int     *chain;        /* [L] chain index */
} tok_t;

/* The model's length of a sequence: its residues and a linker of
 * TOK_LINKER_LEN per chain break (what buckets, quotas and plans go by). */
static inline int64_t tok_model_len(int64_t residues, int nchains)
{
	return residues + (int64_t)TOK_LINKER_LEN * (nchains - 1);
}

/* Encode seq (upper case, chains split by ':').  0, or negative on an empty
 * chain, a vocabulary without the needed letters, or no memory. */
int  tok_encode(tok_t *t, const char *seq, const hparams_t *c);

/* The chains and residue numbers a structure file gives the residues of
 * t, the encoding of the characters record[start..] of a whole record
 * (start 0: the record itself; else a fragment of it, which never begins
 * with ':').  chain[i]: the record's chain index of residue i.  num[i]:
 * its residue number - 1; per_chain: counted from 0 in each of the
 * record's chains (a fragment's first chain goes on from where it begins
 * in the record; a linker continues the chain before it); else the
 * record's model index (the reference's: TOK_CHAIN_OFFSET per chain on top
 * of the position, linkers counted, as t->residx of the whole record).
 * chain and num: [t->L], the caller's. */
void tok_number(const tok_t *t, const char *record, int start, int per_chain, int *chain,
                int *num);
void tok_free(tok_t *t);

#endif
