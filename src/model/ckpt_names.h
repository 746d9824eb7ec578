/* ckpt_names.h (prefix ckpt_) - the model's (Hugging Face) names for the tensors of fair-esm's checkpoints.
 *
 * One table maps fair-esm's language-model names to the model's (the role
 * of Hugging Face's convert_esm.py); fair-esm's folding tensors
 * (esm_s_combine, trunk.*, heads, ...) already have the model's names.
 */
#ifndef ESMBATCH_MODEL_CKPT_NAMES_H
#define ESMBATCH_MODEL_CKPT_NAMES_H

/* the model's name for a checkpoint's tensor NAME: a new string (the
 * caller frees it), NULL when out of memory.  lm: the file is fair-esm's
 * language model (its names carry no "esm." and fairseq's prefixes) */
char *ckpt_canonical(const char *name, int lm);

#endif
