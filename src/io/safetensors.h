/* safetensors.h (prefix safetensors_) - safetensors files: read-only mmap reader and a small writer.
 *
 * safetensors_open() maps the file and validates the whole header before returning:
 * header length within the file, JSON well formed, every entry with a known
 * dtype, a shape, and data_offsets inside the data area, dtype size x shape
 * equal to the byte length, and no two tensors overlapping.  On any failure
 * it logs one line naming the file (and the tensor) and returns NULL.
 *
 * Ownership: the safetensors_t owns the mapping; tensor data pointers stay valid
 * until safetensors_close().  Names are owned by the safetensors_t.
 */
#ifndef ESMBATCH_IO_SAFETENSORS_H
#define ESMBATCH_IO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "io/widen.h"

typedef enum { SAFETENSORS_F64, SAFETENSORS_F32, SAFETENSORS_F16, SAFETENSORS_BF16, SAFETENSORS_I64, SAFETENSORS_I32, SAFETENSORS_U8, SAFETENSORS_BOOL } safetensors_dtype_t;

#define SAFETENSORS_MAX_DIMS 8

typedef struct safetensors_tensor {
	const char *name;
	safetensors_dtype_t  dtype;
	int         nd;
	int64_t     shape[SAFETENSORS_MAX_DIMS];
	int64_t     numel;
	size_t      nbytes;
	const void *data;       /* inside the mapping */
} safetensors_tensor_t;

typedef struct st safetensors_t;

safetensors_t *safetensors_open(const char *path);
void  safetensors_close(safetensors_t *st);

int                safetensors_count(const safetensors_t *st);
const safetensors_tensor_t *safetensors_at(const safetensors_t *st, int i);
const safetensors_tensor_t *safetensors_find(const safetensors_t *st, const char *name);
/* value of key in __metadata__, or NULL */
const char        *safetensors_meta(const safetensors_t *st, const char *key);
const char        *safetensors_path(const safetensors_t *st);

size_t      safetensors_dtype_size(safetensors_dtype_t t);
const char *safetensors_dtype_name(safetensors_dtype_t t);

/* Drop t's pages of the mapping from the process's resident set (its data
 * stays readable: a later read maps the file again).  For a tensor copied
 * elsewhere, so that the file's pages do not count as the process's memory
 * (or vanish from it under memory pressure) while it runs. */
void safetensors_release(const safetensors_t *st, const safetensors_tensor_t *t);

/* Drop t's pages from the page cache (posix_fadvise DONTNEED), once
 * safetensors_release has unmapped them: where the file and the copies of
 * its tensors do not both fit in memory, a copied tensor's pages go at
 * once instead of the kernel reclaiming (the file's unread pages among
 * them) while the copies are made. */
void safetensors_drop_cache(const safetensors_t *st, const safetensors_tensor_t *t);

/* Convert n elements of any floating or integer dtype to float / double. */
void safetensors_to_f32(const safetensors_tensor_t *t, float *dst);
/* dst[0..n) = elements [lo, lo + n) of t as float, the half-precision
 * dtypes widened on path p (widen.h): one thread's share of a tensor */
void safetensors_to_f32_part(const safetensors_tensor_t *t, int64_t lo, int64_t n, float *dst, widen_path_t p);
void safetensors_to_f64(const safetensors_tensor_t *t, double *dst);

/* half-precision helpers, exposed for the backends */
float safetensors_f16_to_f32(uint16_t h);
float safetensors_bf16_to_f32(uint16_t h);
/* and back, rounding to nearest even (overflow gives infinity) */
uint16_t safetensors_f32_to_f16(float f);
uint16_t safetensors_f32_to_bf16(float f);

/* --- writer: collect tensors, then write one file atomically ------------- */
typedef struct safetensors_writer safetensors_writer_t;

safetensors_writer_t *safetensors_writer_init(void);
/* copies the data; returns 0 or negative */
int  safetensors_writer_add(safetensors_writer_t *w, const char *name, safetensors_dtype_t dtype,
                   int nd, const int64_t *shape, const void *data);
int  safetensors_writer_add_meta(safetensors_writer_t *w, const char *key, const char *value);
/* writes PATH.tmp.PID then renames it to PATH; returns 0 or negative */
int  safetensors_writer_save(safetensors_writer_t *w, const char *path);
void safetensors_writer_free(safetensors_writer_t *w);

#endif
