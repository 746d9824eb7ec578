/* st.h - safetensors files: read-only mmap reader and a small writer.
 *
 * st_open() maps the file and validates the whole header before returning:
 * header length within the file, JSON well formed, every entry with a known
 * dtype, a shape, and data_offsets inside the data area, dtype size x shape
 * equal to the byte length, and no two tensors overlapping.  On any failure
 * it logs one line naming the file (and the tensor) and returns NULL.
 *
 * Ownership: the st_t owns the mapping; tensor data pointers stay valid
 * until st_close().  Names are owned by the st_t.
 */
#ifndef ESMBATCH_ST_H
#define ESMBATCH_ST_H

#include <stddef.h>
#include <stdint.h>

typedef enum { ST_F64, ST_F32, ST_F16, ST_BF16, ST_I64, ST_I32, ST_U8, ST_BOOL } st_dtype_t;

#define ST_MAX_DIMS 8

typedef struct {
	const char *name;
	st_dtype_t  dtype;
	int         nd;
	int64_t     shape[ST_MAX_DIMS];
	int64_t     numel;
	size_t      nbytes;
	const void *data;       /* inside the mapping */
} st_tensor_t;

typedef struct st st_t;

st_t *st_open(const char *path);
void  st_close(st_t *st);

int                st_count(const st_t *st);
const st_tensor_t *st_at(const st_t *st, int i);
const st_tensor_t *st_find(const st_t *st, const char *name);
/* value of key in __metadata__, or NULL */
const char        *st_meta(const st_t *st, const char *key);
const char        *st_path(const st_t *st);

size_t      st_dtype_size(st_dtype_t t);
const char *st_dtype_name(st_dtype_t t);

/* Drop t's pages of the mapping from the process's resident set (its data
 * stays readable: a later read maps the file again).  For a tensor copied
 * elsewhere, so that the file's pages do not count as the process's memory
 * (or vanish from it under memory pressure) while it runs. */
void st_release(const st_t *st, const st_tensor_t *t);

/* Convert n elements of any floating or integer dtype to float / double. */
void st_to_f32(const st_tensor_t *t, float *dst);
void st_to_f64(const st_tensor_t *t, double *dst);

/* half-precision helpers, exposed for the backends */
float st_f16_to_f32(uint16_t h);
float st_bf16_to_f32(uint16_t h);
/* and back, rounding to nearest even (overflow gives infinity) */
uint16_t st_f32_to_f16(float f);
uint16_t st_f32_to_bf16(float f);

/* --- writer: collect tensors, then write one file atomically ------------- */
typedef struct st_writer st_writer_t;

st_writer_t *st_writer_init(void);
/* copies the data; returns 0 or negative */
int  st_writer_add(st_writer_t *w, const char *name, st_dtype_t dtype,
                   int nd, const int64_t *shape, const void *data);
int  st_writer_add_meta(st_writer_t *w, const char *key, const char *value);
/* writes PATH.tmp then renames it to PATH; returns 0 or negative */
int  st_writer_save(st_writer_t *w, const char *path);
void st_writer_free(st_writer_t *w);

#endif
