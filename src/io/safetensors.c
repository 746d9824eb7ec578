/* safetensors.c - safetensors: validated read-only mmap reader, and an atomic writer. */
#include "io/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "util/grow.h"
#include "util/log.h"
#include "io/atomic_file.h"

/* a header larger than this is not a safetensors file we will read */
#define SAFETENSORS_MAX_HEADER (100u << 20)

struct st {
	char        *path;
	int          fd;       /* open until safetensors_close (safetensors_drop_cache) */
	void        *map;
	size_t       map_size;
	int          n;
	safetensors_tensor_t *t;        /* [n], sorted by name */
	json_t      *header;   /* owns the name strings */
	json_t      *meta;     /* borrowed from header, or NULL */
};

static const struct { const char *name; safetensors_dtype_t t; size_t size; } safetensors_dtypes[] = {
	{ "F64", SAFETENSORS_F64, 8 }, { "F32", SAFETENSORS_F32, 4 }, { "F16", SAFETENSORS_F16, 2 },
	{ "BF16", SAFETENSORS_BF16, 2 }, { "I64", SAFETENSORS_I64, 8 }, { "I32", SAFETENSORS_I32, 4 },
	{ "U8", SAFETENSORS_U8, 1 }, { "BOOL", SAFETENSORS_BOOL, 1 },
};

size_t safetensors_dtype_size(safetensors_dtype_t t)
{
	for (size_t i = 0; i < sizeof safetensors_dtypes / sizeof *safetensors_dtypes; i++)
		if (safetensors_dtypes[i].t == t) return safetensors_dtypes[i].size;
	return 0;
}

const char *safetensors_dtype_name(safetensors_dtype_t t)
{
	for (size_t i = 0; i < sizeof safetensors_dtypes / sizeof *safetensors_dtypes; i++)
		if (safetensors_dtypes[i].t == t) return safetensors_dtypes[i].name;
	return "?";
}

static int safetensors_dtype_parse(const char *s, safetensors_dtype_t *t)
{
	for (size_t i = 0; i < sizeof safetensors_dtypes / sizeof *safetensors_dtypes; i++)
		if (strcmp(safetensors_dtypes[i].name, s) == 0) { *t = safetensors_dtypes[i].t; return 0; }
	return -1;
}

static int safetensors_cmp_name(const void *a, const void *b)
{
	return strcmp(((const safetensors_tensor_t *)a)->name, ((const safetensors_tensor_t *)b)->name);
}

typedef struct { size_t begin, end; const char *name; } safetensors_range_t;

static int safetensors_cmp_range(const void *a, const void *b)
{
	const safetensors_range_t *x = a, *y = b;
	return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* Parse one header entry into *t; data area is [0, data_size). */
static int safetensors_parse_entry(const char *path, const char *name, json_t *v,
                          size_t data_size, const char *data, safetensors_tensor_t *t)
{
	json_t *jd = json_object_get(v, "dtype"), *js = json_object_get(v, "shape");
	json_t *jo = json_object_get(v, "data_offsets");
	size_t i;
	json_t *e;

	if (!json_is_string(jd) || !json_is_array(js) || !json_is_array(jo) ||
	    json_array_size(jo) != 2) {
		log_error("%s: tensor '%s': header entry needs dtype, shape and data_offsets", path, name);
		return -1;
	}
	if (safetensors_dtype_parse(json_string_value(jd), &t->dtype) < 0) {
		log_error("%s: tensor '%s': unsupported dtype '%s'", path, name, json_string_value(jd));
		return -1;
	}
	if (json_array_size(js) > SAFETENSORS_MAX_DIMS) {
		log_error("%s: tensor '%s': more than %d dimensions", path, name, SAFETENSORS_MAX_DIMS);
		return -1;
	}
	t->name = name;
	t->nd = (int)json_array_size(js);
	t->numel = 1;
	json_array_foreach(js, i, e) {
		json_int_t d = json_is_integer(e) ? json_integer_value(e) : -1;
		if (d < 0 || d > ((json_int_t)1 << 40) || (t->numel && d && t->numel > (INT64_MAX >> 1) / d)) {
			log_error("%s: tensor '%s': bad shape", path, name);
			return -1;
		}
		t->shape[i] = d;
		t->numel *= d;
	}
	/* elements x element size must not wrap (2^61 F64 elements are 0 bytes mod 2^64) */
	if ((uint64_t)t->numel > (uint64_t)INT64_MAX / safetensors_dtype_size(t->dtype)) {
		log_error("%s: tensor '%s': %s x %lld elements overflows a byte count", path, name,
		          safetensors_dtype_name(t->dtype), (long long)t->numel);
		return -1;
	}
	json_int_t b = json_is_integer(json_array_get(jo, 0)) ? json_integer_value(json_array_get(jo, 0)) : -1;
	json_int_t en = json_is_integer(json_array_get(jo, 1)) ? json_integer_value(json_array_get(jo, 1)) : -1;
	if (b < 0 || en < b || (size_t)en > data_size) {
		log_error("%s: tensor '%s': data_offsets [%lld, %lld] outside the data area (%zu bytes): file truncated or corrupt",
		          path, name, (long long)b, (long long)en, data_size);
		return -1;
	}
	t->nbytes = (size_t)(en - b);
	if ((uint64_t)t->numel * safetensors_dtype_size(t->dtype) != t->nbytes) {
		log_error("%s: tensor '%s': %s x %lld elements needs %llu bytes, data_offsets give %zu",
		          path, name, safetensors_dtype_name(t->dtype), (long long)t->numel,
		          (unsigned long long)t->numel * safetensors_dtype_size(t->dtype), t->nbytes);
		return -1;
	}
	t->data = data + b;
	return 0;
}

safetensors_t *safetensors_open(const char *path)
{
	safetensors_t *st = calloc(1, sizeof *st);
	safetensors_range_t *rg = NULL;
	json_error_t jerr;
	struct stat sb;
	uint64_t hlen = 0;
	int fd = -1;

	if (!st) { log_error("%s: out of memory", path); return NULL; }
	st->map = MAP_FAILED;
	st->fd = -1;
	if (!(st->path = strdup(path))) goto fail;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(fd, &sb) < 0) {
		log_error("%s: cannot open: %s", path, strerror(errno));
		goto fail;
	}
	if (sb.st_size < 8) {
		log_error("%s: not a safetensors file (%lld bytes)", path, (long long)sb.st_size);
		goto fail;
	}
	st->map_size = (size_t)sb.st_size;
	st->map = mmap(NULL, st->map_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (st->map == MAP_FAILED) {
		log_error("%s: cannot map: %s", path, strerror(errno));
		goto fail;
	}
	memcpy(&hlen, st->map, 8);   /* little-endian u64 on every supported host */
	if (hlen > SAFETENSORS_MAX_HEADER || hlen > st->map_size - 8) {
		log_error("%s: header length %llu exceeds the file (%zu bytes) or the %u-byte limit",
		          path, (unsigned long long)hlen, st->map_size, SAFETENSORS_MAX_HEADER);
		goto fail;
	}
	st->header = json_loadb((const char *)st->map + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
	if (!st->header || !json_is_object(st->header)) {
		if (st->header)
			log_error("%s: malformed header: not a JSON object", path);
		else
			log_error("%s: malformed JSON header: %s (line %d)", path, jerr.text, jerr.line);
		goto fail;
	}
	size_t data_size = st->map_size - 8 - (size_t)hlen;
	const char *data = (const char *)st->map + 8 + hlen;
	size_t cap = json_object_size(st->header);
	st->t = calloc(cap ? cap : 1, sizeof *st->t);
	rg = calloc(cap ? cap : 1, sizeof *rg);
	if (!st->t || !rg) { log_error("%s: out of memory", path); goto fail; }

	const char *key;
	json_t *v;
	json_object_foreach(st->header, key, v) {
		if (strcmp(key, "__metadata__") == 0) {
			st->meta = json_is_object(v) ? v : NULL;
			continue;
		}
		if (!json_is_object(v)) {
			log_error("%s: tensor '%s': header entry is not an object", path, key);
			goto fail;
		}
		if (safetensors_parse_entry(path, key, v, data_size, data, &st->t[st->n]) < 0)
			goto fail;
		rg[st->n].begin = (size_t)((const char *)st->t[st->n].data - data);
		rg[st->n].end = rg[st->n].begin + st->t[st->n].nbytes;
		rg[st->n].name = key;
		st->n++;
	}
	qsort(rg, st->n, sizeof *rg, safetensors_cmp_range);
	/* sorted by start: a non-empty range overlaps an earlier one exactly
	 * when it starts before the furthest end seen so far */
	for (int i = 0, far = -1; i < st->n; i++) {
		if (rg[i].end == rg[i].begin) continue;
		if (far >= 0 && rg[i].begin < rg[far].end) {
			log_error("%s: tensors '%s' and '%s' overlap", path, rg[far].name, rg[i].name);
			goto fail;
		}
		if (far < 0 || rg[i].end > rg[far].end) far = i;
	}
	qsort(st->t, st->n, sizeof *st->t, safetensors_cmp_name);
	free(rg);
	st->fd = fd;
	return st;

fail:
	free(rg);
	if (fd >= 0) close(fd);
	safetensors_close(st);
	return NULL;
}

void safetensors_release(const safetensors_t *st, const safetensors_tensor_t *t)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = (uintptr_t)t->data / pg * pg;
	uintptr_t hi = ((uintptr_t)t->data + t->nbytes + pg - 1) / pg * pg;
	uintptr_t end = (uintptr_t)st->map + st->map_size;

	if (!t->nbytes) return;
	if (hi > end) hi = end;   /* the tail page of the mapping is still mapped */
	madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

void safetensors_drop_cache(const safetensors_t *st, const safetensors_tensor_t *t)
{
	if (!t->nbytes || st->fd < 0) return;
	/* whole pages only: the kernel keeps a page that holds a neighbour's bytes */
	posix_fadvise(st->fd, (off_t)((const char *)t->data - (const char *)st->map), (off_t)t->nbytes,
	              POSIX_FADV_DONTNEED);
}

void safetensors_close(safetensors_t *st)
{
	if (!st) return;
	if (st->fd >= 0) close(st->fd);
	if (st->map && st->map != MAP_FAILED) munmap(st->map, st->map_size);
	json_decref(st->header);
	free(st->t);
	free(st->path);
	free(st);
}

int safetensors_count(const safetensors_t *st) { return st->n; }
const safetensors_tensor_t *safetensors_at(const safetensors_t *st, int i) { return i >= 0 && i < st->n ? &st->t[i] : NULL; }
const char *safetensors_path(const safetensors_t *st) { return st->path; }

const safetensors_tensor_t *safetensors_find(const safetensors_t *st, const char *name)
{
	safetensors_tensor_t key = { .name = name };
	return bsearch(&key, st->t, st->n, sizeof key, safetensors_cmp_name);
}

const char *safetensors_meta(const safetensors_t *st, const char *key)
{
	json_t *v = st->meta ? json_object_get(st->meta, key) : NULL;
	return json_is_string(v) ? json_string_value(v) : NULL;
}

float safetensors_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
	float f;

	if (exp == 0) {
		if (man == 0) {
			bits = sign;
		} else { /* subnormal: renormalise */
			exp = 127 - 15 + 1;
			while (!(man & 0x400)) { man <<= 1; exp--; }
			bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
		}
	} else if (exp == 31) {
		bits = sign | 0x7f800000u | (man << 13);
	} else {
		bits = sign | ((exp - 15 + 127) << 23) | (man << 13);
	}
	memcpy(&f, &bits, 4);
	return f;
}

uint16_t safetensors_f32_to_f16(float f)
{
	uint32_t x, sign, man;
	int exp;

	memcpy(&x, &f, 4);
	sign = (x >> 16) & 0x8000;
	exp = (int)((x >> 23) & 0xff) - 127 + 15;
	man = x & 0x7fffff;
	if (((x >> 23) & 0xff) == 0xff)            /* inf, nan */
		return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
	if (exp >= 31) return (uint16_t)(sign | 0x7c00);
	if (exp <= 0) {                             /* subnormal or zero */
		if (exp < -10) return (uint16_t)sign;
		man |= 0x800000;
		int shift = 14 - exp;
		uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
		if (rem > half || (rem == half && (h & 1))) h++;
		return (uint16_t)(sign | h);
	}
	{
		uint32_t h = ((uint32_t)exp << 10) | (man >> 13), rem = man & 0x1fff;
		if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;   /* may carry into inf */
		return (uint16_t)(sign | h);
	}
}

uint16_t safetensors_f32_to_bf16(float f)
{
	uint32_t x;

	memcpy(&x, &f, 4);
	if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);   /* nan */
	x += 0x7fff + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

float safetensors_bf16_to_f32(uint16_t h)
{
	uint32_t bits = (uint32_t)h << 16;
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

/* element i of t as double */
static double safetensors_get(const safetensors_tensor_t *t, int64_t i)
{
	const char *p = (const char *)t->data + i * (int64_t)safetensors_dtype_size(t->dtype);
	union { double d; float f; uint16_t h; int64_t l; int32_t w; } u;

	switch (t->dtype) {
	case SAFETENSORS_F64:  memcpy(&u.d, p, 8); return u.d;
	case SAFETENSORS_F32:  memcpy(&u.f, p, 4); return u.f;
	case SAFETENSORS_F16:  memcpy(&u.h, p, 2); return safetensors_f16_to_f32(u.h);
	case SAFETENSORS_BF16: memcpy(&u.h, p, 2); return safetensors_bf16_to_f32(u.h);
	case SAFETENSORS_I64:  memcpy(&u.l, p, 8); return (double)u.l;
	case SAFETENSORS_I32:  memcpy(&u.w, p, 4); return u.w;
	case SAFETENSORS_U8: case SAFETENSORS_BOOL: return *(const uint8_t *)p;
	}
	return 0;
}

void safetensors_to_f32(const safetensors_tensor_t *t, float *dst)
{
	safetensors_to_f32_part(t, 0, t->numel, dst, widen_best());
}

void safetensors_to_f32_part(const safetensors_tensor_t *t, int64_t lo, int64_t n, float *dst, widen_path_t p)
{
	const char *src = (const char *)t->data + lo * (int64_t)safetensors_dtype_size(t->dtype);

	switch (t->dtype) {
	case SAFETENSORS_F32:  memcpy(dst, src, sizeof *dst * n); return;
	case SAFETENSORS_F16:  widen_f16(dst, src, n, p); return;
	case SAFETENSORS_BF16: widen_bf16(dst, src, n, p); return;
	default:
		for (int64_t i = 0; i < n; i++) dst[i] = (float)safetensors_get(t, lo + i);
	}
}

void safetensors_to_f64(const safetensors_tensor_t *t, double *dst)
{
	if (t->dtype == SAFETENSORS_F64) { memcpy(dst, t->data, t->nbytes); return; }
	for (int64_t i = 0; i < t->numel; i++) dst[i] = safetensors_get(t, i);
}

/* --- writer ---------------------------------------------------------------- */

typedef struct {
	char      *name;
	safetensors_dtype_t dtype;
	int        nd;
	int64_t    shape[SAFETENSORS_MAX_DIMS];
	size_t     nbytes;
	void      *data;
} safetensors_entry_t;

struct safetensors_writer {
	safetensors_entry_t *e;
	int         n;
	size_t      cap;
	json_t     *meta;
};

safetensors_writer_t *safetensors_writer_init(void)
{
	safetensors_writer_t *w = calloc(1, sizeof *w);
	if (w && !(w->meta = json_object())) { free(w); w = NULL; }
	return w;
}

int safetensors_writer_add(safetensors_writer_t *w, const char *name, safetensors_dtype_t dtype,
                  int nd, const int64_t *shape, const void *data)
{
	safetensors_entry_t *e;
	size_t n = safetensors_dtype_size(dtype);

	if (nd < 0 || nd > SAFETENSORS_MAX_DIMS) return -1;
	if (grow_array(&w->e, &w->cap, (size_t)w->n + 1, sizeof *w->e) < 0) return -1;
	e = &w->e[w->n];
	memset(e, 0, sizeof *e);
	e->dtype = dtype;
	e->nd = nd;
	for (int i = 0; i < nd; i++) { e->shape[i] = shape[i]; n *= (size_t)shape[i]; }
	e->nbytes = n;
	e->name = strdup(name);
	e->data = malloc(n ? n : 1);
	if (!e->name || !e->data) { free(e->name); free(e->data); return -1; }
	memcpy(e->data, data, n);
	w->n++;
	return 0;
}

int safetensors_writer_add_meta(safetensors_writer_t *w, const char *key, const char *value)
{
	return json_object_set_new(w->meta, key, json_string(value));
}

int safetensors_writer_save(safetensors_writer_t *w, const char *path)
{
	json_t *h = json_object();
	char *text = NULL;
	size_t off = 0, hlen;
	atomic_file_t a;
	uint64_t hl;
	int ret = -1;

	if (!h) return -1;
	if (json_object_size(w->meta)) json_object_set(h, "__metadata__", w->meta);
	for (int i = 0; i < w->n; i++) {
		json_t *shape = json_array();
		for (int d = 0; d < w->e[i].nd; d++) json_array_append_new(shape, json_integer(w->e[i].shape[d]));
		json_object_set_new(h, w->e[i].name, json_pack("{s:s, s:o, s:[I,I]}",
			"dtype", safetensors_dtype_name(w->e[i].dtype), "shape", shape,
			"data_offsets", (json_int_t)off, (json_int_t)(off + w->e[i].nbytes)));
		off += w->e[i].nbytes;
	}
	if (!(text = json_dumps(h, JSON_COMPACT | JSON_SORT_KEYS))) goto done;
	hlen = strlen(text);
	hl = (hlen + 7) & ~(uint64_t)7;   /* pad the header with spaces to 8 bytes */
	if (!atomic_file_open(&a, path)) goto done;
	fwrite(&hl, 8, 1, a.f);
	fwrite(text, 1, hlen, a.f);
	for (size_t i = hlen; i < hl; i++) fputc(' ', a.f);
	for (int i = 0; i < w->n; i++) fwrite(w->e[i].data, 1, w->e[i].nbytes, a.f);
	ret = atomic_file_close(&a, 1);
done:
	free(text);
	json_decref(h);
	return ret;
}

void safetensors_writer_free(safetensors_writer_t *w)
{
	if (!w) return;
	for (int i = 0; i < w->n; i++) { free(w->e[i].name); free(w->e[i].data); }
	free(w->e);
	json_decref(w->meta);
	free(w);
}
