/* ckpt_names.c - fair-esm's tensor names to the model's (see ckpt_names.h). */
#include "model/ckpt_names.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* fair-esm's names of the language model's tensors and the model's (Hugging
 * Face) names: the one table of the mapping (the role of HF's
 * convert_esm.py).  %d is a layer number.  fair-esm's folding tensors
 * (esm_s_combine, trunk.*, heads, af2_to_esm, ...) have the model's names. */
static const struct { const char *fair, *hf; } ckpt_fair_esm[] = {
	{ "esm.embed_tokens.weight", "esm.embeddings.word_embeddings.weight" },
	{ "esm.layers.%d.self_attn.q_proj.weight", "esm.encoder.layer.%d.attention.self.query.weight" },
	{ "esm.layers.%d.self_attn.q_proj.bias", "esm.encoder.layer.%d.attention.self.query.bias" },
	{ "esm.layers.%d.self_attn.k_proj.weight", "esm.encoder.layer.%d.attention.self.key.weight" },
	{ "esm.layers.%d.self_attn.k_proj.bias", "esm.encoder.layer.%d.attention.self.key.bias" },
	{ "esm.layers.%d.self_attn.v_proj.weight", "esm.encoder.layer.%d.attention.self.value.weight" },
	{ "esm.layers.%d.self_attn.v_proj.bias", "esm.encoder.layer.%d.attention.self.value.bias" },
	{ "esm.layers.%d.self_attn.rot_emb.inv_freq", "esm.encoder.layer.%d.attention.self.rotary_embeddings.inv_freq" },
	{ "esm.layers.%d.self_attn.out_proj.weight", "esm.encoder.layer.%d.attention.output.dense.weight" },
	{ "esm.layers.%d.self_attn.out_proj.bias", "esm.encoder.layer.%d.attention.output.dense.bias" },
	{ "esm.layers.%d.self_attn_layer_norm.weight", "esm.encoder.layer.%d.attention.LayerNorm.weight" },
	{ "esm.layers.%d.self_attn_layer_norm.bias", "esm.encoder.layer.%d.attention.LayerNorm.bias" },
	{ "esm.layers.%d.fc1.weight", "esm.encoder.layer.%d.intermediate.dense.weight" },
	{ "esm.layers.%d.fc1.bias", "esm.encoder.layer.%d.intermediate.dense.bias" },
	{ "esm.layers.%d.fc2.weight", "esm.encoder.layer.%d.output.dense.weight" },
	{ "esm.layers.%d.fc2.bias", "esm.encoder.layer.%d.output.dense.bias" },
	{ "esm.layers.%d.final_layer_norm.weight", "esm.encoder.layer.%d.LayerNorm.weight" },
	{ "esm.layers.%d.final_layer_norm.bias", "esm.encoder.layer.%d.LayerNorm.bias" },
	{ "esm.emb_layer_norm_after.weight", "esm.encoder.emb_layer_norm_after.weight" },
	{ "esm.emb_layer_norm_after.bias", "esm.encoder.emb_layer_norm_after.bias" },
};

/* prefixes of a fair-esm language-model file's names (fairseq's), dropped
 * as fair-esm's loader drops them; then "esm." is prepended */
static const char *const ckpt_lm_prefixes[] = { "encoder.sentence_encoder.", "encoder.", NULL };

/* name matches pattern (one %d = a decimal number)?  *num gets it */
static int ckpt_match(const char *pat, const char *name, long *num)
{
	const char *d = strstr(pat, "%d");
	size_t n;
	char *end;

	if (!d) return !strcmp(pat, name);
	n = (size_t)(d - pat);
	if (strncmp(pat, name, n) || name[n] < '0' || name[n] > '9') return 0;
	*num = strtol(name + n, &end, 10);
	return !strcmp(d + 2, end);
}

char *ckpt_canonical(const char *name, int lm)
{
	char *full = NULL, *out = NULL;
	long num = 0;

	if (lm) {
		for (const char *const *p = ckpt_lm_prefixes; *p; p++)
			if (!strncmp(name, *p, strlen(*p))) { name += strlen(*p); break; }
		if (asprintf(&full, "esm.%s", name) < 0) return NULL;
	} else if (!(full = strdup(name))) {
		return NULL;
	}
	for (size_t i = 0; i < sizeof ckpt_fair_esm / sizeof *ckpt_fair_esm; i++)
		if (ckpt_match(ckpt_fair_esm[i].fair, full, &num)) {
			if (asprintf(&out, ckpt_fair_esm[i].hf, (int)num) < 0) out = NULL;
			free(full);
			return out;
		}
	return full;
}
