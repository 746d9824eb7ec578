/* torch_zip.h (prefix torch_zip_) - PyTorch zip checkpoints (torch.save of a state dict), read-only.
 *
 * A checkpoint written by torch.save since PyTorch 1.6 is a zip archive:
 * PREFIX/data.pkl (a pickle of the object saved), PREFIX/data/KEY (one
 * entry per storage, the raw little-endian bytes) and a few small records
 * (PREFIX/version, PREFIX/byteorder).  The container is read with libzip;
 * the pickle by a strict reader of our own that understands exactly what
 * torch.save emits for a state dict: the protocol 2 opcodes (and the few of
 * protocols 3-4 that carry the same values), dicts and
 * collections.OrderedDict, torch._utils._rebuild_tensor_v2 (and
 * _rebuild_parameter), storages by persistent id of the classes
 * torch.HalfStorage / FloatStorage / BFloat16Storage / DoubleStorage /
 * LongStorage / IntStorage.  A few configuration classes that fair-esm
 * checkpoints carry beside the weights (argparse.Namespace, omegaconf's
 * containers, typing.Any, builtins.dict/list) become inert placeholders: they
 * are never called, only their recorded state is kept.  Any other global is
 * refused.  No code is ever executed, nesting is bounded (64), every
 * storage offset, size and stride is checked against the archive, and no
 * allocation is larger than the file.
 *
 * The saved object is either the state dict itself or a dict holding it under
 * "model" or "state_dict" (fair-esm); tensors must be contiguous.  Storages
 * stored uncompressed (as torch writes them) are read in place through an
 * mmap of the whole file; a compressed one is inflated into memory once,
 * however many tensors view it, and refused when it inflates to more bytes
 * than its tensors reach (or than the whole file).
 *
 * torch_zip_open() logs one line naming the file (and the tensor or opcode)
 * on any failure and returns NULL; a legacy (pre-1.6, non-zip) torch file
 * is refused with a line that says so.
 *
 * Ownership: the torch_zip_t owns the mapping, the names and any inflated
 * storage; tensor data pointers stay valid until torch_zip_close().
 */
#ifndef ESMBATCH_IO_TORCH_ZIP_H
#define ESMBATCH_IO_TORCH_ZIP_H

#include "io/safetensors.h"

typedef struct torch_zip torch_zip_t;

torch_zip_t *torch_zip_open(const char *path);
void torch_zip_close(torch_zip_t *tz);

/* 1 if the file starts like a zip archive or a legacy torch pickle (not a
 * safetensors file), 0 otherwise or if it cannot be read */
int torch_zip_sniff(const char *path);

/* The state dict's tensors in the order of the pickle: 0..count-1.  The
 * safetensors_tensor_t form is shared with the safetensors reader (dtype
 * F16, BF16, F32, F64, I64 or I32; data in the mapping). */
int torch_zip_count(const torch_zip_t *tz);
const safetensors_tensor_t *torch_zip_at(const torch_zip_t *tz, int i);
const safetensors_tensor_t *torch_zip_find(const torch_zip_t *tz, const char *name);
const char *torch_zip_path(const torch_zip_t *tz);

/* The saved object's "cfg" entry as JSON text (dicts, lists, strings,
 * numbers, booleans, None; an inert placeholder's recorded state as its
 * dict), or NULL when there is none or it holds nothing that can be
 * written so.  Owned by tz. */
const char *torch_zip_cfg_json(const torch_zip_t *tz);

/* Run the pickle reader over n bytes of a data.pkl (what: its name for
 * messages) and discard the result: 0 if it is a pickle the reader accepts,
 * negative (one logged line) otherwise.  For the fuzzer and the tests. */
int torch_zip_pickle_check(const void *p, size_t n, const char *what);

/* Drop t's pages of the mapping from the resident set (see safetensors_release). */
void torch_zip_release(const torch_zip_t *tz, const safetensors_tensor_t *t);

#endif
