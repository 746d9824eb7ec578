/* weights.h (prefix weights_) - model weights: the tensors the model asks for, by checkpoint name.
 *
 * A weights_t is either a safetensors file (its config from config.json beside it,
 * or from a "config" entry of its __metadata__) or a manifest: a JSON list
 * of names and shapes with a config and no data, against which the loaders
 * can be checked without the 14 GB checkpoint, or a recorder that lists
 * what the loaders ask for (the random-weights writer, random_weights.h, uses it).
 *
 * The model's loaders ask for every tensor with the shape the config implies
 * (weights_get / weights_lin / weights_ln); a missing, mis-shaped or unconvertible tensor,
 * or one holding a NaN or an infinity (each is scanned as it is converted), is
 * one logged error naming it.  Data is converted to float32 (Linear
 * matrices to bfloat16 where the backend holds them so: be->weights_bf16,
 * lin_t.bf16; the language model's binary16 matrices kept as they are
 * where the backend widens them as it multiplies: be->weights_f16,
 * lin_t.f16, weights_lin_f16) and copied into backend memory, and its pages of the file leave the resident set
 * (safetensors_release); the weights_t owns those buffers until weights_close(), which frees them
 * through their backends: close the weights before freeing those.  With be ==
 * NULL, or on a manifest, the calls only check names and shapes.
 *
 * Where weights live: copied into anonymous memory (on the CPU straight
 * into the final buffer, widened and scanned in chunks on all threads),
 * never used from the file's mapping, whose pages the kernel drops under
 * page-cache pressure and reads again from disk mid-fold; mlock is not
 * used (RLIMIT_MEMLOCK is 8 MB for ordinary users).  Huge pages
 * (MADV_HUGEPAGE) were measured slower (compaction: 9.7-10.4 s of CPU vs
 * 2.3 s for 1.2 GB of f16 weights) and are not asked for.
 */
#ifndef ESMBATCH_MODEL_WEIGHTS_H
#define ESMBATCH_MODEL_WEIGHTS_H

#include <stdint.h>

#include "io/safetensors.h"
#include "backend/backend.h"
#include "model/hparams.h"
#include "compute/ops.h"

typedef struct wt weights_t;

weights_t *weights_open(const char *path);
/* weights_open without the fingerprint (it reads every byte of the file):
 * for what needs the shapes and config only (plan); fingerprint "-" */
weights_t *weights_open_shapes(const char *path);
weights_t *weights_open_manifest(const char *path);
/* A recorder: no tensors; every required weights_get succeeds (no data, like a
 * manifest) and appends its name and shape, so a loader run against it
 * (model_load with be == NULL) lists exactly the tensors it needs.
 * cfg_json: config.json text; what: its name for messages. */
weights_t *weights_open_record(const char *cfg_json, const char *what);
void  weights_close(weights_t *w);

/* Entries of a manifest or a recorder, in order: 0..weights_count()-1.
 * weights_entry returns the name and sets *nd and *shape (owned by w). */
int         weights_count(const weights_t *w);
const char *weights_entry(const weights_t *w, int i, int *nd, const int64_t **shape);

const hparams_t *weights_cfg(const weights_t *w);
/* The configuration's JSON text: config.json's, the metadata's, or the one
 * built from a checkpoint's cfg or the published defaults (owned by w). */
const char  *weights_cfg_json(const weights_t *w);

/* The tensors of a weights file (safetensors or checkpoints; 0 for a
 * manifest or a recorder) in model-name order: 0..weights_tensor_count()-1.
 * *name gets the model's name (t->name is the file's own); owned by w. */
int                         weights_tensor_count(const weights_t *w);
const safetensors_tensor_t *weights_tensor(const weights_t *w, int i, const char **name);
/* 16 hex digits identifying the weights: a hash (util/hash.h) of every
 * tensor's model name, dtype, shape and data in name order (so the same
 * weights give the same fingerprint as safetensors or as a checkpoint),
 * then of the effective config.  The tensors' part is cached by the files'
 * device, inode, size, mtime and ctime in $ESMBATCH_FP_CACHE, else
 * $XDG_CACHE_HOME/esmbatch/fingerprints, else ~/.cache/esmbatch/fingerprints.
 * "-" for weights_open_shapes; a manifest's or recorder's: the hash of its
 * config text. */
const char  *weights_fingerprint(const weights_t *w);
const char  *weights_path(const weights_t *w);
/* Bytes of the tensors the loaders asked for so far (each counted once)
 * as device be holds them: Linear matrices at 2 bytes an element where
 * bf16 (be->weights_bf16), binary16 ones of weights_lin_f16 at 2 where
 * be->weights_f16, every other tensor at 4 (float32).  What the model
 * occupies on each device it is loaded on, known after model_load (also
 * one with be == NULL, or from a manifest: there no dtypes, so the
 * binary16 matrices count at 4). */
int64_t      weights_bytes(const weights_t *w, const be_t *be);

/* FNV-1a (64 bits) of data[0..n) continuing from h; start from WEIGHTS_FNV_SEED.
 * The fingerprint's hash, also used for sequences (fold's resume journal). */
#define WEIGHTS_FNV_SEED 1469598103934665603ull
uint64_t weights_fnv(uint64_t h, const void *data, size_t n);

/* *dst = tensor NAME (printf format) of shape [nd] as float32 in backend
 * memory.  optional: a missing tensor gives 0 and *dst = NULL. */
int weights_get(weights_t *w, be_t *be, float **dst, int optional, int nd, const int64_t *shape,
           const char *fmt, ...) __attribute__((format(printf, 7, 8)));
/* PREFIX.weight [out, in] and, if bias, PREFIX.bias [out].  weights_lin and
 * weights_ln with w == NULL only fill in the sizes (pointers NULL): enough to
 * plan a pass without any weights. */
int weights_lin(weights_t *w, be_t *be, lin_t *l, int out, int in, int bias,
           const char *fmt, ...) __attribute__((format(printf, 7, 8)));
/* weights_lin of a matrix that only op_linear multiplies (a plain GEMM):
 * where the file holds it as binary16 and be->weights_f16, kept so
 * (lin_t.f16: half the memory, the same products, as be_gemm_t.b_f16
 * widens it exactly) */
int weights_lin_f16(weights_t *w, be_t *be, lin_t *l, int out, int in, int bias,
               const char *fmt, ...) __attribute__((format(printf, 7, 8)));
/* weights_lin of a matrix held in host memory (be->host_alloc; bf16 where
 * be->weights_bf16), which a pass copies to the device as it needs it
 * (op_fetch); its bias in backend memory.  Only on a backend that
 * fetches (be_supports(be, BE_OP_FETCH)). */
int weights_lin_host(weights_t *w, be_t *be, lin_t *l, int out, int in, int bias,
                const char *fmt, ...) __attribute__((format(printf, 7, 8)));
/* One member of weights_lin_group: PREFIX.NAME.weight [out, in] and, if
 * bias, PREFIX.NAME.bias [out], loaded into *l. */
typedef struct { lin_t *l; const char *name; int out, bias; } weights_part_t;
/* Linears that share their input, their matrices loaded into ONE
 * allocation (fp32, or bf16 where be->weights_bf16), in the order given:
 * all->w is the whole [sum of out, in] matrix (all->b NULL), each
 * parts[i].l a view of its rows in it (and its own bias), so that one
 * product (be_ln_linear_t) computes them all; no tensor is held twice.
 * Owned by w like every other tensor.  w == NULL: sizes only. */
int weights_lin_group(weights_t *w, be_t *be, lin_t *all, const weights_part_t *parts, int n, int in,
                      const char *fmt, ...) __attribute__((format(printf, 7, 8)));
/* PREFIX.weight and PREFIX.bias [d] */
int weights_ln(weights_t *w, be_t *be, ln_t *ln, int d, float eps,
          const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* Tensors of the file that no loader asked for: logged (debug level),
 * counted.  Names in `ignore` (NULL-terminated prefixes) are not counted. */
int weights_unused(const weights_t *w, const char *const *ignore);

#endif
