/* torch_pickle.h (prefix torch_pickle_) - the strict pickle reader behind
 * torch_zip.h: a stack machine over the opcodes of the pickle protocol
 * (Python's Lib/pickletools.py documents them) restricted to what
 * torch.save writes for a state dict (see torch_zip.h for what is
 * accepted).  Its values live in one list owned by the reader and are
 * freed together, so memo references and shared values need no reference
 * counts; nothing the pickle names is ever called.
 *
 * Use: a torch_pickle_t with path (for messages), p and len set and the
 * rest zero; torch_pickle_run, then result; torch_pickle_free in any case.
 */
#ifndef ESMBATCH_IO_TORCH_PICKLE_H
#define ESMBATCH_IO_TORCH_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "io/safetensors.h"

#define TORCH_PICKLE_MAX_DEPTH 64      /* nesting of containers */
#define TORCH_PICKLE_MAX_MARKS 64      /* open MARKs */
#define TORCH_PICKLE_MAX_STACK (1 << 20)

typedef enum {
	TPV_NONE, TPV_BOOL, TPV_INT, TPV_FLOAT, TPV_STR, TPV_TUPLE, TPV_LIST, TPV_DICT,
	TPV_GLOBAL, TPV_STORAGE, TPV_TENSOR, TPV_OPAQUE
} torch_pickle_kind_t;

/* the globals a pickle may name */
typedef enum {
	TPG_ODICT, TPG_REBUILD, TPG_REBUILD_PARAM, TPG_STORAGE, TPG_INERT
} torch_pickle_gid_t;

typedef struct torch_pickle_val torch_pickle_val_t;
struct torch_pickle_val {
	torch_pickle_kind_t  kind;
	int                  depth;     /* containers: 1 + deepest child */
	int64_t              i;         /* INT, BOOL; STORAGE: numel */
	double               f;
	char                *s;         /* STR; GLOBAL/OPAQUE: "module.name"; STORAGE: key */
	size_t               slen;
	torch_pickle_val_t **item;      /* TUPLE, LIST: n items; DICT: n key/value pairs (2n) */
	size_t               n, cap;
	torch_pickle_gid_t   gid;       /* GLOBAL */
	safetensors_dtype_t  dtype;     /* GLOBAL storage class, STORAGE */
	torch_pickle_val_t  *storage;   /* TENSOR */
	int64_t              offset;    /* TENSOR: storage offset, elements */
	int                  nd;
	int64_t              shape[SAFETENSORS_MAX_DIMS], stride[SAFETENSORS_MAX_DIMS];
	torch_pickle_val_t  *state;     /* OPAQUE: what BUILD gave it */
};

typedef struct {
	const char          *path;
	const unsigned char *p;
	size_t               len, pos;
	torch_pickle_val_t **all;       /* every value made; freed together */
	size_t               nall, capall;
	torch_pickle_val_t **stack;
	size_t               sp, capstack;
	size_t               mark[TORCH_PICKLE_MAX_MARKS];
	int                  nmark;
	torch_pickle_val_t **memo;
	size_t               nmemo;     /* allocated */
	size_t               nput;      /* 1 + highest index set */
	size_t               budget;    /* values the cfg walk may still visit */
	torch_pickle_val_t  *result;
} torch_pickle_t;

/* run the pickle to its STOP: 0 with pk->result set, or -1 after one
 * logged line naming pk->path (and the opcode) */
int torch_pickle_run(torch_pickle_t *pk);
/* free every value and the stacks; pk is zeroed */
void torch_pickle_free(torch_pickle_t *pk);

/* "None", "dict", ... for messages */
const char *torch_pickle_kind_name(torch_pickle_kind_t k);
/* the value under string key in dict d, or NULL (also when d is no dict) */
const torch_pickle_val_t *torch_pickle_dict_get(const torch_pickle_val_t *d, const char *key);
/* v as JSON (dicts, lists, strings, numbers, booleans, None; a placeholder
 * as its recorded state), visiting at most pk->budget values and nesting
 * TORCH_PICKLE_MAX_DEPTH below depth; NULL for what cannot be written so */
json_t *torch_pickle_json(torch_pickle_t *pk, const torch_pickle_val_t *v, int depth);

/* the little-endian unsigned integer of n bytes (n <= 8) at b */
uint64_t torch_pickle_le(const unsigned char *b, int n);
/* a printable copy of s[0..len) for messages, into dst of n bytes */
void torch_pickle_printable(char *dst, size_t n, const char *s, size_t len);

#endif
