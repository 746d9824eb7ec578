/* torch_zip.c - PyTorch zip checkpoints: libzip for the container, a strict pickle reader of our own (see torch_zip.h).
 *
 * The pickle reader is a stack machine over the opcodes of the pickle
 * protocol (Python's Lib/pickletools.py documents them) restricted to what
 * torch.save writes for a state dict.  Its values live in one list owned by
 * the reader and are freed together, so memo references and shared values
 * need no reference counts; nothing the pickle names is ever called.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <zip.h>

#include "util/grow.h"
#include "util/log.h"
#include "io/torch_zip.h"

#define TORCH_ZIP_MAX_DEPTH 64      /* nesting of containers */
#define TORCH_ZIP_MAX_MARKS 64      /* open MARKs */
#define TORCH_ZIP_MAX_STACK (1 << 20)

/* --- pickle values ------------------------------------------------------ */

typedef enum {
	TZV_NONE, TZV_BOOL, TZV_INT, TZV_FLOAT, TZV_STR, TZV_TUPLE, TZV_LIST, TZV_DICT,
	TZV_GLOBAL, TZV_STORAGE, TZV_TENSOR, TZV_OPAQUE
} torch_zip_kind_t;

/* the globals a pickle may name */
typedef enum {
	TZG_ODICT, TZG_REBUILD, TZG_REBUILD_PARAM, TZG_STORAGE, TZG_INERT
} torch_zip_gid_t;

typedef struct torch_zip_val torch_zip_val_t;
struct torch_zip_val {
	torch_zip_kind_t kind;
	int              depth;       /* containers: 1 + deepest child */
	int64_t          i;           /* INT, BOOL; STORAGE: numel */
	double           f;
	char            *s;           /* STR; GLOBAL/OPAQUE: "module.name"; STORAGE: key */
	size_t           slen;
	torch_zip_val_t **item;       /* TUPLE, LIST: n items; DICT: n key/value pairs (2n) */
	size_t           n, cap;
	torch_zip_gid_t  gid;         /* GLOBAL */
	safetensors_dtype_t dtype;    /* GLOBAL storage class, STORAGE */
	torch_zip_val_t *storage;     /* TENSOR */
	int64_t          offset;      /* TENSOR: storage offset, elements */
	int              nd;
	int64_t          shape[SAFETENSORS_MAX_DIMS], stride[SAFETENSORS_MAX_DIMS];
	torch_zip_val_t *state;       /* OPAQUE: what BUILD gave it */
};

typedef struct {
	const char       *path;
	const unsigned char *p;
	size_t            len, pos;
	torch_zip_val_t **all;        /* every value made; freed together */
	size_t            nall, capall;
	torch_zip_val_t **stack;
	size_t            sp, capstack;
	size_t            mark[TORCH_ZIP_MAX_MARKS];
	int               nmark;
	torch_zip_val_t **memo;
	size_t            nmemo;      /* allocated */
	size_t            nput;       /* 1 + highest index set */
	size_t            budget;     /* values the cfg walk may still visit */
	torch_zip_val_t  *result;
} torch_zip_pickle_t;

/* --- the checkpoint ------------------------------------------------------ */

typedef struct {
	char   *name;
	size_t  data;     /* offset of the data in the file (stored entries) */
	size_t  csize, usize;
	int     method;
} torch_zip_entry_t;

struct torch_zip {
	char                 *path;
	void                 *map;
	size_t                map_size;
	zip_t                *za;
	torch_zip_entry_t    *ent;        /* central directory, sorted by name */
	size_t                nent;
	char                 *prefix;     /* "archive/" */
	safetensors_tensor_t *t;          /* [n] in pickle order */
	char                **tname;      /* [n] owned names */
	int                   n;
	const safetensors_tensor_t **byname; /* [n] sorted by name */
	void                **inflated;   /* [nent] each compressed storage inflated once, or NULL */
	char                 *cfg_json;
	torch_zip_pickle_t    pk;
};

/* ------------------------------------------------------------------------ */

static torch_zip_val_t *torch_zip_new(torch_zip_pickle_t *pk, torch_zip_kind_t kind)
{
	torch_zip_val_t *v;

	if (grow_array(&pk->all, &pk->capall, pk->nall + 1, sizeof *pk->all) < 0 || !(v = calloc(1, sizeof *v)))
		return NULL;
	v->kind = kind;
	pk->all[pk->nall++] = v;
	return v;
}

static void torch_zip_pickle_free(torch_zip_pickle_t *pk)
{
	for (size_t i = 0; i < pk->nall; i++) {
		free(pk->all[i]->s);
		free(pk->all[i]->item);
		free(pk->all[i]);
	}
	free(pk->all);
	free(pk->stack);
	free(pk->memo);
	memset(pk, 0, sizeof *pk);
}

static const char *torch_zip_kind_name(torch_zip_kind_t k)
{
	static const char *const names[] = { "None", "bool", "int", "float", "str", "tuple", "list",
		"dict", "global", "storage", "tensor", "object" };
	return names[k];
}

/* append child to container c (items, or one dict key/value pair as two) */
static int torch_zip_add(torch_zip_pickle_t *pk, torch_zip_val_t *c, torch_zip_val_t *a, torch_zip_val_t *b)
{
	size_t need = c->n + 1 + (b != NULL);

	if (grow_array(&c->item, &c->cap, need, sizeof *c->item) < 0) {
		log_error("%s: out of memory reading the pickle", pk->path);
		return -1;
	}
	c->item[c->n++] = a;
	if (b) c->item[c->n++] = b;
	if (a->depth + 1 > c->depth) c->depth = a->depth + 1;
	if (b && b->depth + 1 > c->depth) c->depth = b->depth + 1;
	if (c->depth > TORCH_ZIP_MAX_DEPTH) {
		log_error("%s: data.pkl: containers nested deeper than %d", pk->path, TORCH_ZIP_MAX_DEPTH);
		return -1;
	}
	return 0;
}

static int torch_zip_push(torch_zip_pickle_t *pk, torch_zip_val_t *v)
{
	if (!v) {
		log_error("%s: out of memory reading the pickle", pk->path);
		return -1;
	}
	if (pk->sp == TORCH_ZIP_MAX_STACK) {
		log_error("%s: data.pkl: pickle stack deeper than %d", pk->path, TORCH_ZIP_MAX_STACK);
		return -1;
	}
	if (grow_array(&pk->stack, &pk->capstack, pk->sp + 1, sizeof *pk->stack) < 0) {
		log_error("%s: out of memory reading the pickle", pk->path);
		return -1;
	}
	pk->stack[pk->sp++] = v;
	return 0;
}

/* the stack floor: the last MARK, or 0 */
static size_t torch_zip_floor(const torch_zip_pickle_t *pk)
{
	return pk->nmark ? pk->mark[pk->nmark - 1] : 0;
}

static torch_zip_val_t *torch_zip_pop(torch_zip_pickle_t *pk, unsigned char op)
{
	if (pk->sp <= torch_zip_floor(pk)) {
		log_error("%s: data.pkl: opcode 0x%02x at byte %zu pops an empty stack", pk->path, op, pk->pos - 1);
		return NULL;
	}
	return pk->stack[--pk->sp];
}

/* read n bytes of the pickle */
static const unsigned char *torch_zip_take(torch_zip_pickle_t *pk, size_t n)
{
	const unsigned char *r;

	if (n > pk->len - pk->pos) {
		log_error("%s: data.pkl: truncated at byte %zu", pk->path, pk->pos);
		return NULL;
	}
	r = pk->p + pk->pos;
	pk->pos += n;
	return r;
}

static uint64_t torch_zip_le(const unsigned char *b, int n)
{
	uint64_t v = 0;
	for (int i = n - 1; i >= 0; i--) v = (v << 8) | b[i];
	return v;
}

/* a global the pickle may name: its id (and storage dtype); -1 if refused */
static int torch_zip_global(const char *mod, const char *name, torch_zip_gid_t *gid, safetensors_dtype_t *dt)
{
	static const struct { const char *name; safetensors_dtype_t dt; } storages[] = {
		{ "HalfStorage", SAFETENSORS_F16 }, { "FloatStorage", SAFETENSORS_F32 },
		{ "BFloat16Storage", SAFETENSORS_BF16 }, { "DoubleStorage", SAFETENSORS_F64 },
		{ "LongStorage", SAFETENSORS_I64 }, { "IntStorage", SAFETENSORS_I32 },
	};
	/* configuration objects fair-esm stores beside the weights: kept as inert data */
	static const char *const inert[] = {
		"argparse.Namespace", "typing.Any", "builtins.dict", "builtins.list", "builtins.object",
		"builtins.int", "builtins.str", "builtins.float", "builtins.bool",
	};
	char full[256];

	if (!strcmp(mod, "collections") && !strcmp(name, "OrderedDict")) { *gid = TZG_ODICT; return 0; }
	if (!strcmp(mod, "torch._utils") && !strcmp(name, "_rebuild_tensor_v2")) { *gid = TZG_REBUILD; return 0; }
	if (!strcmp(mod, "torch._utils") && !strcmp(name, "_rebuild_parameter")) { *gid = TZG_REBUILD_PARAM; return 0; }
	if (!strcmp(mod, "torch"))
		for (size_t i = 0; i < sizeof storages / sizeof *storages; i++)
			if (!strcmp(name, storages[i].name)) { *gid = TZG_STORAGE; *dt = storages[i].dt; return 0; }
	if (!strcmp(mod, "omegaconf") || !strncmp(mod, "omegaconf.", 10)) { *gid = TZG_INERT; return 0; }
	snprintf(full, sizeof full, "%s.%s", mod, name);
	for (size_t i = 0; i < sizeof inert / sizeof *inert; i++)
		if (!strcmp(full, inert[i])) { *gid = TZG_INERT; return 0; }
	return -1;
}

/* a printable copy of a pickle string for messages */
static void torch_zip_printable(char *dst, size_t n, const char *s, size_t len)
{
	size_t o = 0;
	for (size_t i = 0; i < len && o + 1 < n; i++)
		dst[o++] = (s[i] >= 32 && s[i] < 127) ? s[i] : '?';
	dst[o] = 0;
}

static int torch_zip_op_global(torch_zip_pickle_t *pk, const char *mod, size_t mlen, const char *name, size_t nlen)
{
	char m[128], nm[128], pm[128], pn[128];
	torch_zip_val_t *v;
	torch_zip_gid_t gid;
	safetensors_dtype_t dt = SAFETENSORS_F32;

	torch_zip_printable(pm, sizeof pm, mod, mlen);
	torch_zip_printable(pn, sizeof pn, name, nlen);
	if (mlen >= sizeof m || nlen >= sizeof nm || memchr(mod, 0, mlen) || memchr(name, 0, nlen)) {
		log_error("%s: data.pkl: global '%s.%s' is not allowed in a checkpoint", pk->path, pm, pn);
		return -1;
	}
	memcpy(m, mod, mlen);
	m[mlen] = 0;
	memcpy(nm, name, nlen);
	nm[nlen] = 0;
	if (torch_zip_global(m, nm, &gid, &dt) < 0) {
		log_error("%s: data.pkl: global '%s.%s' is not allowed in a checkpoint (not a state dict torch.save writes)",
		          pk->path, pm, pn);
		return -1;
	}
	if (!(v = torch_zip_new(pk, TZV_GLOBAL)) || asprintf(&v->s, "%s.%s", m, nm) < 0) {
		if (v) v->s = NULL;
		log_error("%s: out of memory reading the pickle", pk->path);
		return -1;
	}
	v->slen = strlen(v->s);
	v->gid = gid;
	v->dtype = dt;
	return torch_zip_push(pk, v);
}

/* an integer argument, for messages naming the role */
static int torch_zip_want_int(torch_zip_pickle_t *pk, const torch_zip_val_t *v, const char *role, int64_t *out)
{
	if (!v || v->kind != TZV_INT) {
		log_error("%s: data.pkl: %s is a %s, expected an int", pk->path, role, v ? torch_zip_kind_name(v->kind) : "nothing");
		return -1;
	}
	*out = v->i;
	return 0;
}

/* torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, metadata]) */
static torch_zip_val_t *torch_zip_rebuild(torch_zip_pickle_t *pk, const torch_zip_val_t *a)
{
	torch_zip_val_t *t;
	const torch_zip_val_t *sz, *st;

	if (a->n != 6 && a->n != 7) {
		log_error("%s: data.pkl: _rebuild_tensor_v2 with %zu arguments", pk->path, a->n);
		return NULL;
	}
	sz = a->item[2];
	st = a->item[3];
	if (a->item[0]->kind != TZV_STORAGE || sz->kind != TZV_TUPLE || st->kind != TZV_TUPLE ||
	    sz->n != st->n || sz->n > SAFETENSORS_MAX_DIMS) {
		log_error("%s: data.pkl: _rebuild_tensor_v2 needs a storage and size and stride tuples of equal length (at most %d)",
		          pk->path, SAFETENSORS_MAX_DIMS);
		return NULL;
	}
	if (!(t = torch_zip_new(pk, TZV_TENSOR))) {
		log_error("%s: out of memory reading the pickle", pk->path);
		return NULL;
	}
	t->storage = a->item[0];
	t->nd = (int)sz->n;
	if (torch_zip_want_int(pk, a->item[1], "a storage offset", &t->offset) < 0) return NULL;
	for (int d = 0; d < t->nd; d++)
		if (torch_zip_want_int(pk, sz->item[d], "a tensor size", &t->shape[d]) < 0 ||
		    torch_zip_want_int(pk, st->item[d], "a tensor stride", &t->stride[d]) < 0)
			return NULL;
	t->depth = 1;
	return t;
}

/* callable(args) for REDUCE and NEWOBJ: only the allowed globals, never called */
static int torch_zip_call(torch_zip_pickle_t *pk, torch_zip_val_t *fn, torch_zip_val_t *args, unsigned char op)
{
	torch_zip_val_t *r = NULL;

	if (fn->kind != TZV_GLOBAL || args->kind != TZV_TUPLE) {
		log_error("%s: data.pkl: opcode 0x%02x applies a %s to a %s", pk->path, op,
		          torch_zip_kind_name(fn->kind), torch_zip_kind_name(args->kind));
		return -1;
	}
	switch (fn->gid) {
	case TZG_ODICT:
		if (args->n != 0) {
			log_error("%s: data.pkl: OrderedDict with arguments", pk->path);
			return -1;
		}
		r = torch_zip_new(pk, TZV_DICT);
		break;
	case TZG_REBUILD:
		if (!(r = torch_zip_rebuild(pk, args))) return -1;
		break;
	case TZG_REBUILD_PARAM:
		if (args->n < 1 || args->item[0]->kind != TZV_TENSOR) {
			log_error("%s: data.pkl: _rebuild_parameter without a tensor", pk->path);
			return -1;
		}
		r = args->item[0];
		break;
	case TZG_STORAGE:
		log_error("%s: data.pkl: a storage class is called (only persistent ids may name storages)", pk->path);
		return -1;
	case TZG_INERT:
		if ((r = torch_zip_new(pk, TZV_OPAQUE)) && !(r->s = strdup(fn->s))) r = NULL;
		break;
	}
	return torch_zip_push(pk, r);
}

/* BINPERSID: ('storage', class, key, location, numel) */
static int torch_zip_persid(torch_zip_pickle_t *pk, const torch_zip_val_t *pid)
{
	torch_zip_val_t *s;
	const torch_zip_val_t *const *a = (const torch_zip_val_t *const *)pid->item;

	if (pid->kind != TZV_TUPLE || pid->n != 5 || a[0]->kind != TZV_STR || strcmp(a[0]->s, "storage") ||
	    a[1]->kind != TZV_GLOBAL || a[1]->gid != TZG_STORAGE || a[2]->kind != TZV_STR ||
	    a[3]->kind != TZV_STR || a[4]->kind != TZV_INT || a[4]->i < 0 ||
	    strlen(a[2]->s) != a[2]->slen || !a[2]->slen || strchr(a[2]->s, '/')) {
		log_error("%s: data.pkl: a persistent id that is not a storage ('storage', type, key, location, numel)",
		          pk->path);
		return -1;
	}
	if (!(s = torch_zip_new(pk, TZV_STORAGE)) || !(s->s = strdup(a[2]->s))) {
		log_error("%s: out of memory reading the pickle", pk->path);
		return -1;
	}
	s->slen = a[2]->slen;
	s->dtype = a[1]->dtype;
	s->i = a[4]->i;
	return torch_zip_push(pk, s);
}

static int torch_zip_memo_put(torch_zip_pickle_t *pk, uint64_t idx)
{
	if (!pk->sp) {
		log_error("%s: data.pkl: memo put with an empty stack", pk->path);
		return -1;
	}
	/* the pickler numbers memo entries from 0 up, one per put: never past the pickle's length */
	if (idx >= pk->len) {
		log_error("%s: data.pkl: memo index %llu out of range", pk->path, (unsigned long long)idx);
		return -1;
	}
	if (idx >= pk->nmemo) {
		size_t n = pk->nmemo ? pk->nmemo : 64;
		torch_zip_val_t **nm;
		while (n <= idx) n *= 2;
		if (n > pk->len) n = pk->len;
		if (!(nm = realloc(pk->memo, n * sizeof *nm))) {
			log_error("%s: out of memory reading the pickle", pk->path);
			return -1;
		}
		memset(nm + pk->nmemo, 0, (n - pk->nmemo) * sizeof *nm);
		pk->memo = nm;
		pk->nmemo = n;
	}
	pk->memo[idx] = pk->stack[pk->sp - 1];
	if (idx >= pk->nput) pk->nput = idx + 1;
	return 0;
}

static int torch_zip_memo_get(torch_zip_pickle_t *pk, uint64_t idx)
{
	if (idx >= pk->nmemo || !pk->memo[idx]) {
		log_error("%s: data.pkl: memo index %llu was never set", pk->path, (unsigned long long)idx);
		return -1;
	}
	return torch_zip_push(pk, pk->memo[idx]);
}

/* the items above the last MARK into a new container of kind k; the MARK is dropped */
static int torch_zip_collect(torch_zip_pickle_t *pk, torch_zip_val_t *c, unsigned char op)
{
	size_t lo;

	if (!pk->nmark) {
		log_error("%s: data.pkl: opcode 0x%02x without a MARK", pk->path, op);
		return -1;
	}
	lo = pk->mark[--pk->nmark];
	if (!c) {
		log_error("%s: out of memory reading the pickle", pk->path);
		return -1;
	}
	if (c->kind == TZV_DICT && (pk->sp - lo) % 2) {
		log_error("%s: data.pkl: SETITEMS with an odd number of items", pk->path);
		return -1;
	}
	for (size_t i = lo; i < pk->sp; i += c->kind == TZV_DICT ? 2 : 1)
		if (torch_zip_add(pk, c, pk->stack[i], c->kind == TZV_DICT ? pk->stack[i + 1] : NULL) < 0) return -1;
	pk->sp = lo;
	return 0;
}

static torch_zip_val_t *torch_zip_top(torch_zip_pickle_t *pk, torch_zip_kind_t want, unsigned char op)
{
	torch_zip_val_t *t = pk->sp > torch_zip_floor(pk) ? pk->stack[pk->sp - 1] : NULL;

	if (!t || t->kind != want) {
		log_error("%s: data.pkl: opcode 0x%02x needs a %s, found %s", pk->path, op, torch_zip_kind_name(want),
		          t ? torch_zip_kind_name(t->kind) : "nothing");
		return NULL;
	}
	return t;
}

/* run the pickle to its STOP */
static int torch_zip_unpickle(torch_zip_pickle_t *pk)
{
	const unsigned char *b;
	torch_zip_val_t *v, *k, *c;

	for (;;) {
		unsigned char op;
		if (!(b = torch_zip_take(pk, 1))) return -1;
		op = *b;
		switch (op) {
		case 0x80:   /* PROTO */
			if (!(b = torch_zip_take(pk, 1))) return -1;
			if (*b < 2 || *b > 4) {
				log_error("%s: data.pkl: pickle protocol %d (torch.save writes 2)", pk->path, *b);
				return -1;
			}
			break;
		case 0x95:   /* FRAME (protocol 4): a length we need not use */
			if (!torch_zip_take(pk, 8)) return -1;
			break;
		case '.':    /* STOP */
			if (pk->sp != 1 || pk->nmark) {
				log_error("%s: data.pkl: STOP with %zu values and %d marks left", pk->path, pk->sp, pk->nmark);
				return -1;
			}
			pk->result = pk->stack[0];
			return 0;
		case '(':    /* MARK */
			if (pk->nmark == TORCH_ZIP_MAX_MARKS) {
				log_error("%s: data.pkl: more than %d open MARKs", pk->path, TORCH_ZIP_MAX_MARKS);
				return -1;
			}
			pk->mark[pk->nmark++] = pk->sp;
			break;
		case '}':    /* EMPTY_DICT */
			if (torch_zip_push(pk, torch_zip_new(pk, TZV_DICT)) < 0) return -1;
			break;
		case ']':    /* EMPTY_LIST */
			if (torch_zip_push(pk, torch_zip_new(pk, TZV_LIST)) < 0) return -1;
			break;
		case ')':    /* EMPTY_TUPLE */
			if (torch_zip_push(pk, torch_zip_new(pk, TZV_TUPLE)) < 0) return -1;
			break;
		case 't':    /* TUPLE */
			c = torch_zip_new(pk, TZV_TUPLE);
			if (torch_zip_collect(pk, c, op) < 0 || torch_zip_push(pk, c) < 0) return -1;
			break;
		case 0x85: case 0x86: case 0x87: {   /* TUPLE1..3 */
			int n = op - 0x84;
			if (pk->sp < torch_zip_floor(pk) + (size_t)n) {
				log_error("%s: data.pkl: TUPLE%d with too few values", pk->path, n);
				return -1;
			}
			if (!(c = torch_zip_new(pk, TZV_TUPLE))) return torch_zip_push(pk, NULL);
			for (int i = 0; i < n; i++)
				if (torch_zip_add(pk, c, pk->stack[pk->sp - n + i], NULL) < 0) return -1;
			pk->sp -= n;
			if (torch_zip_push(pk, c) < 0) return -1;
			break;
		}
		case 'N':
			if (torch_zip_push(pk, torch_zip_new(pk, TZV_NONE)) < 0) return -1;
			break;
		case 0x88: case 0x89:   /* NEWTRUE, NEWFALSE */
			if (!(v = torch_zip_new(pk, TZV_BOOL))) return torch_zip_push(pk, NULL);
			v->i = op == 0x88;
			if (torch_zip_push(pk, v) < 0) return -1;
			break;
		case 'J': case 'K': case 'M': {   /* BININT, BININT1, BININT2 */
			int n = op == 'J' ? 4 : op == 'K' ? 1 : 2;
			if (!(b = torch_zip_take(pk, n))) return -1;
			if (!(v = torch_zip_new(pk, TZV_INT))) return torch_zip_push(pk, NULL);
			v->i = op == 'J' ? (int64_t)(int32_t)(uint32_t)torch_zip_le(b, 4) : (int64_t)torch_zip_le(b, n);
			if (torch_zip_push(pk, v) < 0) return -1;
			break;
		}
		case 0x8a: {   /* LONG1 */
			int n;
			uint64_t u;
			if (!(b = torch_zip_take(pk, 1))) return -1;
			n = *b;
			if (n > 8) {
				log_error("%s: data.pkl: an integer of %d bytes", pk->path, n);
				return -1;
			}
			if (!(b = torch_zip_take(pk, n))) return -1;
			u = torch_zip_le(b, n);
			if (n && n < 8 && (b[n - 1] & 0x80)) u |= ~0ull << (8 * n);   /* sign */
			if (!(v = torch_zip_new(pk, TZV_INT))) return torch_zip_push(pk, NULL);
			v->i = (int64_t)u;
			if (torch_zip_push(pk, v) < 0) return -1;
			break;
		}
		case 'G': {   /* BINFLOAT, big-endian */
			uint64_t u = 0;
			if (!(b = torch_zip_take(pk, 8))) return -1;
			for (int i = 0; i < 8; i++) u = (u << 8) | b[i];
			if (!(v = torch_zip_new(pk, TZV_FLOAT))) return torch_zip_push(pk, NULL);
			memcpy(&v->f, &u, sizeof v->f);
			if (torch_zip_push(pk, v) < 0) return -1;
			break;
		}
		case 'X': case 0x8c: {   /* BINUNICODE, SHORT_BINUNICODE */
			size_t n;
			if (!(b = torch_zip_take(pk, op == 'X' ? 4 : 1))) return -1;
			n = op == 'X' ? (size_t)torch_zip_le(b, 4) : *b;
			if (!(b = torch_zip_take(pk, n))) return -1;
			if (!(v = torch_zip_new(pk, TZV_STR)) || !(v->s = malloc(n + 1))) return torch_zip_push(pk, NULL);
			memcpy(v->s, b, n);
			v->s[n] = 0;
			v->slen = n;
			if (torch_zip_push(pk, v) < 0) return -1;
			break;
		}
		case 'c': {   /* GLOBAL module\nname\n */
			const unsigned char *m = pk->p + pk->pos, *e1, *e2;
			e1 = memchr(m, '\n', pk->len - pk->pos);
			e2 = e1 ? memchr(e1 + 1, '\n', pk->len - (size_t)(e1 + 1 - pk->p)) : NULL;
			if (!e2) {
				log_error("%s: data.pkl: truncated GLOBAL", pk->path);
				return -1;
			}
			pk->pos = (size_t)(e2 + 1 - pk->p);
			if (torch_zip_op_global(pk, (const char *)m, (size_t)(e1 - m), (const char *)e1 + 1,
			                        (size_t)(e2 - e1 - 1)) < 0)
				return -1;
			break;
		}
		case 0x93:   /* STACK_GLOBAL (protocol 4) */
			if (!(v = torch_zip_pop(pk, op)) || !(k = torch_zip_pop(pk, op))) return -1;
			if (k->kind != TZV_STR || v->kind != TZV_STR) {
				log_error("%s: data.pkl: STACK_GLOBAL without two strings", pk->path);
				return -1;
			}
			if (torch_zip_op_global(pk, k->s, k->slen, v->s, v->slen) < 0) return -1;
			break;
		case 'q': case 'r': case 0x94: {   /* BINPUT, LONG_BINPUT, MEMOIZE */
			uint64_t idx;
			if (op == 0x94) {
				idx = pk->nput;
			} else {
				if (!(b = torch_zip_take(pk, op == 'q' ? 1 : 4))) return -1;
				idx = torch_zip_le(b, op == 'q' ? 1 : 4);
			}
			if (torch_zip_memo_put(pk, idx) < 0) return -1;
			break;
		}
		case 'h': case 'j':   /* BINGET, LONG_BINGET */
			if (!(b = torch_zip_take(pk, op == 'h' ? 1 : 4))) return -1;
			if (torch_zip_memo_get(pk, torch_zip_le(b, op == 'h' ? 1 : 4)) < 0) return -1;
			break;
		case 'R': case 0x81:   /* REDUCE, NEWOBJ */
			if (!(v = torch_zip_pop(pk, op)) || !(k = torch_zip_pop(pk, op))) return -1;
			if (torch_zip_call(pk, k, v, op) < 0) return -1;
			break;
		case 'Q':   /* BINPERSID */
			if (!(v = torch_zip_pop(pk, op)) || torch_zip_persid(pk, v) < 0) return -1;
			break;
		case 'b':   /* BUILD: the state of an OrderedDict (_metadata), a tensor or a placeholder */
			if (!(v = torch_zip_pop(pk, op))) return -1;
			c = pk->sp > torch_zip_floor(pk) ? pk->stack[pk->sp - 1] : NULL;
			if (!c || (c->kind != TZV_DICT && c->kind != TZV_TENSOR && c->kind != TZV_OPAQUE)) {
				log_error("%s: data.pkl: BUILD on a %s", pk->path, c ? torch_zip_kind_name(c->kind) : "nothing");
				return -1;
			}
			if (c->kind == TZV_OPAQUE) {
				c->state = v;
				if (v->depth + 1 > c->depth) c->depth = v->depth + 1;
				if (c->depth > TORCH_ZIP_MAX_DEPTH) {
					log_error("%s: data.pkl: containers nested deeper than %d", pk->path, TORCH_ZIP_MAX_DEPTH);
					return -1;
				}
			}
			break;
		case 's':   /* SETITEM */
			if (!(v = torch_zip_pop(pk, op)) || !(k = torch_zip_pop(pk, op))) return -1;
			if (!(c = torch_zip_top(pk, TZV_DICT, op)) || torch_zip_add(pk, c, k, v) < 0) return -1;
			break;
		case 'u': case 'e': {   /* SETITEMS, APPENDS */
			torch_zip_kind_t want = op == 'u' ? TZV_DICT : TZV_LIST;
			size_t lo;
			if (!pk->nmark) {
				log_error("%s: data.pkl: opcode 0x%02x without a MARK", pk->path, op);
				return -1;
			}
			lo = pk->mark[pk->nmark - 1];
			c = lo > (pk->nmark > 1 ? pk->mark[pk->nmark - 2] : 0) ? pk->stack[lo - 1] : NULL;
			if (!c || c->kind != want) {
				log_error("%s: data.pkl: opcode 0x%02x needs a %s below its MARK", pk->path, op,
				          torch_zip_kind_name(want));
				return -1;
			}
			if (torch_zip_collect(pk, c, op) < 0) return -1;
			break;
		}
		case 'a':   /* APPEND */
			if (!(v = torch_zip_pop(pk, op))) return -1;
			if (!(c = torch_zip_top(pk, TZV_LIST, op)) || torch_zip_add(pk, c, v, NULL) < 0) return -1;
			break;
		default:
			log_error("%s: data.pkl: pickle opcode 0x%02x at byte %zu is not one torch.save writes for a state dict",
			          pk->path, op, pk->pos - 1);
			return -1;
		}
	}
}

int torch_zip_pickle_check(const void *p, size_t n, const char *what)
{
	torch_zip_pickle_t pk = { .path = what, .p = p, .len = n };
	int rc = torch_zip_unpickle(&pk);

	torch_zip_pickle_free(&pk);
	return rc < 0 ? -1 : 0;
}

/* --- the zip container --------------------------------------------------- */

static int torch_zip_cmp_entry(const void *a, const void *b)
{
	return strcmp(((const torch_zip_entry_t *)a)->name, ((const torch_zip_entry_t *)b)->name);
}

static const torch_zip_entry_t *torch_zip_entry(const torch_zip_t *tz, const char *name)
{
	torch_zip_entry_t key = { .name = (char *)name };
	return bsearch(&key, tz->ent, tz->nent, sizeof *tz->ent, torch_zip_cmp_entry);
}

/* Locate each entry's data in the mapping: the central directory (and its
 * zip64 fields) gives each local header, the local header the data.  libzip
 * has already checked the archive's consistency (ZIP_CHECKCONS); this only
 * finds offsets, each checked against the file. */
static int torch_zip_directory(torch_zip_t *tz)
{
	const unsigned char *m = tz->map;
	size_t size = tz->map_size, eocd = SIZE_MAX, cd, cdsize, count, o;

	if (size < 22) goto bad;
	for (size_t i = size - 22 + 1; i-- > 0 && size - i <= 22 + 65535;)
		if (torch_zip_le(m + i, 4) == 0x06054b50) { eocd = i; break; }
	if (eocd == SIZE_MAX) goto bad;
	count = torch_zip_le(m + eocd + 10, 2);
	cdsize = torch_zip_le(m + eocd + 12, 4);
	cd = torch_zip_le(m + eocd + 16, 4);
	if (count == 0xffff || cdsize == 0xffffffffu || cd == 0xffffffffu) {
		size_t z;
		if (eocd < 20 || torch_zip_le(m + eocd - 20, 4) != 0x07064b50) goto bad;
		z = torch_zip_le(m + eocd - 20 + 8, 8);
		if (z > size - 56 || torch_zip_le(m + z, 4) != 0x06064b50) goto bad;
		count = torch_zip_le(m + z + 32, 8);
		cdsize = torch_zip_le(m + z + 40, 8);
		cd = torch_zip_le(m + z + 48, 8);
	}
	if (cd > size || cdsize > size - cd || count > cdsize / 46) goto bad;
	if (!(tz->ent = calloc(count + 1, sizeof *tz->ent))) goto oom;
	o = cd;
	for (size_t e = 0; e < count; e++) {
		torch_zip_entry_t *x = &tz->ent[e];
		size_t nlen, xlen, clen, lho, p;
		if (o > cd + cdsize - 46 || torch_zip_le(m + o, 4) != 0x02014b50) goto bad;
		x->method = (int)torch_zip_le(m + o + 10, 2);
		x->csize = torch_zip_le(m + o + 20, 4);
		x->usize = torch_zip_le(m + o + 24, 4);
		nlen = torch_zip_le(m + o + 28, 2);
		xlen = torch_zip_le(m + o + 30, 2);
		clen = torch_zip_le(m + o + 32, 2);
		lho = torch_zip_le(m + o + 42, 4);
		if (46 + nlen + xlen + clen > cd + cdsize - o) goto bad;
		if (!(x->name = strndup((const char *)m + o + 46, nlen))) goto oom;
		tz->nent++;
		/* zip64 extended information: the fields that overflowed, in order */
		for (p = o + 46 + nlen; p + 4 <= o + 46 + nlen + xlen;) {
			size_t id = torch_zip_le(m + p, 2), sz = torch_zip_le(m + p + 2, 2), q = p + 4;
			if (sz > o + 46 + nlen + xlen - q) goto bad;
			if (id == 1) {
				size_t *f[3] = { &x->usize, &x->csize, &lho };
				size_t lim[3] = { 0xffffffffu, 0xffffffffu, 0xffffffffu };
				for (int k = 0; k < 3; k++) {
					if (*f[k] != lim[k]) continue;
					if (q + 8 > p + 4 + sz) goto bad;
					*f[k] = torch_zip_le(m + q, 8);
					q += 8;
				}
			}
			p += 4 + sz;
		}
		if (lho > size - 30 || torch_zip_le(m + lho, 4) != 0x04034b50) goto bad;
		x->data = lho + 30 + torch_zip_le(m + lho + 26, 2) + torch_zip_le(m + lho + 28, 2);
		if (x->data > size || x->csize > size - x->data) goto bad;
		o += 46 + nlen + xlen + clen;
	}
	qsort(tz->ent, tz->nent, sizeof *tz->ent, torch_zip_cmp_entry);
	for (size_t e = 1; e < tz->nent; e++)
		if (!strcmp(tz->ent[e - 1].name, tz->ent[e].name)) {
			log_error("%s: zip entry '%s' appears twice", tz->path, tz->ent[e].name);
			return -1;
		}
	return 0;
bad:
	log_error("%s: zip central directory is malformed or points outside the file", tz->path);
	return -1;
oom:
	log_error("%s: out of memory reading the zip directory", tz->path);
	return -1;
}

/* The whole of entry NAME read through libzip (inflated if compressed) into a
 * new buffer of *n bytes (+1 NUL); at most the file's size. */
static void *torch_zip_read_entry(torch_zip_t *tz, const char *name, size_t *n)
{
	zip_stat_t zs;
	zip_file_t *zf = NULL;
	char *buf = NULL;
	zip_int64_t got;

	zip_stat_init(&zs);
	if (zip_stat(tz->za, name, ZIP_FL_ENC_RAW, &zs) < 0 || !(zs.valid & ZIP_STAT_SIZE)) {
		log_error("%s: zip entry '%s': %s", tz->path, name, zip_strerror(tz->za));
		return NULL;
	}
	if (zs.size > tz->map_size) {
		log_error("%s: zip entry '%s' declares %llu bytes, more than the whole file (%zu): refused",
		          tz->path, name, (unsigned long long)zs.size, tz->map_size);
		return NULL;
	}
	if (!(buf = malloc(zs.size + 1))) {
		log_error("%s: out of memory reading '%s'", tz->path, name);
		return NULL;
	}
	if (!(zf = zip_fopen(tz->za, name, ZIP_FL_ENC_RAW))) {
		log_error("%s: zip entry '%s': %s", tz->path, name, zip_strerror(tz->za));
		goto fail;
	}
	got = zip_fread(zf, buf, zs.size);
	if (got < 0 || (zip_uint64_t)got != zs.size) {
		log_error("%s: zip entry '%s': %s", tz->path, name,
		          got < 0 ? zip_file_strerror(zf) : "shorter than its declared size");
		goto fail;
	}
	/* one more byte would mean the entry is longer than declared */
	if (zs.size && zip_fread(zf, buf + zs.size, 1) != 0) {
		log_error("%s: zip entry '%s' is longer than its declared size", tz->path, name);
		goto fail;
	}
	zip_fclose(zf);
	buf[zs.size] = 0;
	*n = zs.size;
	return buf;
fail:
	if (zf) zip_fclose(zf);
	free(buf);
	return NULL;
}

/* --- cfg as JSON ---------------------------------------------------------- */

static json_t *torch_zip_json(torch_zip_pickle_t *pk, const torch_zip_val_t *v, int depth)
{
	json_t *j;

	/* bounded in depth and in values visited (shared values could make a walk exponential) */
	if (depth > TORCH_ZIP_MAX_DEPTH || !pk->budget) return NULL;
	pk->budget--;
	switch (v->kind) {
	case TZV_NONE: return json_null();
	case TZV_BOOL: return json_boolean(v->i);
	case TZV_INT: return json_integer(v->i);
	case TZV_FLOAT: return json_real(v->f);
	case TZV_STR: return json_stringn(v->s, v->slen);
	case TZV_TUPLE: case TZV_LIST:
		if (!(j = json_array())) return NULL;
		for (size_t i = 0; i < v->n; i++) {
			json_t *e = torch_zip_json(pk, v->item[i], depth + 1);
			json_array_append_new(j, e ? e : json_null());
		}
		return j;
	case TZV_DICT:
		if (!(j = json_object())) return NULL;
		for (size_t i = 0; i + 1 < v->n; i += 2) {
			json_t *e;
			if (v->item[i]->kind != TZV_STR || strlen(v->item[i]->s) != v->item[i]->slen) continue;
			e = torch_zip_json(pk, v->item[i + 1], depth + 1);
			json_object_set_new(j, v->item[i]->s, e ? e : json_null());
		}
		return j;
	case TZV_OPAQUE:
		return v->state ? torch_zip_json(pk, v->state, depth + 1) : NULL;
	default:
		return NULL;
	}
}

/* --- open ----------------------------------------------------------------- */

/* a legacy torch file opens with a pickled magic number: PROTO 2, LONG1 of
 * 10 bytes 0x1950a86a20f9469cfc6c */
static const unsigned char torch_zip_legacy_magic[14] = {
	0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19
};

int torch_zip_sniff(const char *path)
{
	unsigned char b[sizeof torch_zip_legacy_magic] = { 0 };
	FILE *f = fopen(path, "rb");
	size_t n;

	if (!f) return 0;
	n = fread(b, 1, sizeof b, f);
	fclose(f);
	if (n >= 4 && b[0] == 'P' && b[1] == 'K' && b[2] == 3 && b[3] == 4) return 1;
	return n == sizeof b && !memcmp(b, torch_zip_legacy_magic, sizeof b);
}

static const torch_zip_val_t *torch_zip_dict_get(const torch_zip_val_t *d, const char *key)
{
	for (size_t i = 0; d->kind == TZV_DICT && i + 1 < d->n; i += 2)
		if (d->item[i]->kind == TZV_STR && !strcmp(d->item[i]->s, key)) return d->item[i + 1];
	return NULL;
}

/* the state dict: the saved dict if its values are tensors, else its "model" / "state_dict" */
static const torch_zip_val_t *torch_zip_state_dict(const torch_zip_val_t *top)
{
	static const char *const keys[] = { "model", "state_dict" };
	int all = top->kind == TZV_DICT && top->n > 0;

	for (size_t i = 1; all && i < top->n; i += 2) all = top->item[i]->kind == TZV_TENSOR;
	if (all) return top;
	for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
		const torch_zip_val_t *d = top->kind == TZV_DICT ? torch_zip_dict_get(top, keys[k]) : NULL;
		if (d && d->kind == TZV_DICT) return d;
	}
	return NULL;
}

static int torch_zip_cmp_byname(const void *a, const void *b)
{
	return strcmp((*(const safetensors_tensor_t *const *)a)->name, (*(const safetensors_tensor_t *const *)b)->name);
}

/* where a tensor of a compressed storage lies until torch_zip_inflate: its
 * entry (SIZE_MAX: stored, t->data already set) and byte offset in it */
typedef struct {
	size_t ent, off;
} torch_zip_src_t;

/* one state-dict entry into tz->t[i]; *src says where its data lie */
static int torch_zip_tensor(torch_zip_t *tz, int i, const torch_zip_val_t *key, const torch_zip_val_t *v,
                            torch_zip_src_t *src)
{
	safetensors_tensor_t *t = &tz->t[i];
	const torch_zip_val_t *s;
	const torch_zip_entry_t *e;
	char ename[512], kname[128];
	size_t esize, sbytes;
	int64_t numel = 1, expect = 1;

	if (key->kind != TZV_STR || strlen(key->s) != key->slen || !key->slen) {
		log_error("%s: state dict key %d is not a name", tz->path, i);
		return -1;
	}
	if (!(tz->tname[i] = strdup(key->s))) return -1;
	t->name = tz->tname[i];
	if (v->kind != TZV_TENSOR) {
		log_error("%s: state dict entry '%s' is a %s, not a tensor", tz->path, t->name, torch_zip_kind_name(v->kind));
		return -1;
	}
	s = v->storage;
	t->dtype = s->dtype;
	t->nd = v->nd;
	esize = safetensors_dtype_size(s->dtype);
	/* the tensor must be the contiguous row-major view of [offset, offset + numel) */
	for (int d = v->nd - 1; d >= 0; d--) {
		if (v->shape[d] < 0 || v->stride[d] < 0) goto badview;
		if (v->shape[d] != 1 && v->stride[d] != expect) {
			log_error("%s: tensor '%s' is not contiguous (stride %lld in dimension %d); save it after .contiguous()",
			          tz->path, t->name, (long long)v->stride[d], d);
			return -1;
		}
		if (__builtin_mul_overflow(expect, v->shape[d], &expect)) goto badview;
		t->shape[d] = v->shape[d];
	}
	numel = expect;
	t->numel = numel;
	torch_zip_printable(kname, sizeof kname, s->s, s->slen);
	if (snprintf(ename, sizeof ename, "%sdata/%s", tz->prefix, s->s) >= (int)sizeof ename ||
	    !(e = torch_zip_entry(tz, ename))) {
		log_error("%s: tensor '%s': storage '%s' has no zip entry", tz->path, t->name, kname);
		return -1;
	}
	if (__builtin_mul_overflow((size_t)s->i, esize, &sbytes) || sbytes != e->usize) {
		log_error("%s: tensor '%s': storage '%s' declares %lld elements of %zu bytes, its entry holds %zu bytes",
		          tz->path, t->name, kname, (long long)s->i, esize, e->usize);
		return -1;
	}
	if (v->offset < 0 || v->offset > s->i || numel > s->i - v->offset) {
		log_error("%s: tensor '%s': elements [%lld, %lld + %lld) lie outside its storage '%s' of %lld",
		          tz->path, t->name, (long long)v->offset, (long long)v->offset, (long long)numel, kname,
		          (long long)s->i);
		return -1;
	}
	t->nbytes = (size_t)numel * esize;
	src->ent = SIZE_MAX;
	src->off = (size_t)v->offset * esize;
	if (e->method == 0 && e->csize == e->usize)
		t->data = (const char *)tz->map + e->data + src->off;
	else
		src->ent = (size_t)(e - tz->ent);   /* compressed (torch never does this) */
	return 0;
badview:
	log_error("%s: tensor '%s' has a negative or overflowing size or stride", tz->path, t->name);
	return -1;
}

/* Inflate each compressed storage once, however many tensors view it, and
 * point them into it.  A storage that inflates to more bytes than its
 * tensors reach is refused before any is inflated (with the file-size bound
 * of torch_zip_read_entry, what an archive inflates to is what its tensors
 * need).  0, or -1 after one logged line. */
static int torch_zip_inflate(torch_zip_t *tz, const torch_zip_src_t *src)
{
	size_t *reach = calloc(tz->nent + 1, sizeof *reach);   /* 1 + bytes used; 0: none */
	char kname[128];
	int rc = -1;

	if (!reach) {
		log_error("%s: out of memory", tz->path);
		return -1;
	}
	for (int i = 0; i < tz->n; i++)
		if (src[i].ent != SIZE_MAX && src[i].off + tz->t[i].nbytes + 1 > reach[src[i].ent])
			reach[src[i].ent] = src[i].off + tz->t[i].nbytes + 1;
	for (size_t e = 0; e < tz->nent; e++)
		if (reach[e] && tz->ent[e].usize > reach[e] - 1) {
			torch_zip_printable(kname, sizeof kname, tz->ent[e].name, strlen(tz->ent[e].name));
			log_error("%s: compressed storage '%s' inflates to %zu bytes, its tensors use %zu: refused",
			          tz->path, kname, tz->ent[e].usize, reach[e] - 1);
			goto done;
		}
	for (size_t e = 0; e < tz->nent; e++) {
		size_t n;
		if (reach[e] && !(tz->inflated[e] = torch_zip_read_entry(tz, tz->ent[e].name, &n))) goto done;
	}
	for (int i = 0; i < tz->n; i++)
		if (src[i].ent != SIZE_MAX) tz->t[i].data = (const char *)tz->inflated[src[i].ent] + src[i].off;
	rc = 0;
done:
	free(reach);
	return rc;
}

torch_zip_t *torch_zip_open(const char *path)
{
	torch_zip_t *tz = calloc(1, sizeof *tz);
	const torch_zip_val_t *sd, *cfg;
	struct stat sb;
	char *pkl = NULL, *name = NULL, *bo = NULL;
	torch_zip_src_t *src = NULL;
	size_t plen, n;
	int fd = -1, zerr = 0;

	if (!tz || !(tz->path = strdup(path))) {
		log_error("%s: out of memory", path);
		goto fail;
	}
	if ((fd = open(path, O_RDONLY)) < 0 || fstat(fd, &sb) < 0) {
		log_error("%s: cannot open: %s", path, strerror(errno));
		goto fail;
	}
	tz->map_size = (size_t)sb.st_size;
	if (tz->map_size < 4) {
		log_error("%s: too short to be a PyTorch checkpoint", path);
		goto fail;
	}
	if ((tz->map = mmap(NULL, tz->map_size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED) {
		tz->map = NULL;
		log_error("%s: cannot map: %s", path, strerror(errno));
		goto fail;
	}
	if (memcmp(tz->map, "PK\3\4", 4)) {
		if (tz->map_size >= sizeof torch_zip_legacy_magic &&
		    !memcmp(tz->map, torch_zip_legacy_magic, sizeof torch_zip_legacy_magic))
			log_error("%s: a legacy (pre-1.6, non-zip) PyTorch file: not supported; re-save it with a current torch.save",
			          path);
		else
			log_error("%s: not a PyTorch zip checkpoint", path);
		goto fail;
	}
	if (!(tz->za = zip_fdopen(fd, ZIP_RDONLY | ZIP_CHECKCONS, &zerr))) {
		zip_error_t ze;
		zip_error_init_with_code(&ze, zerr);
		log_error("%s: not a readable zip archive: %s", path, zip_error_strerror(&ze));
		zip_error_fini(&ze);
		goto fail;
	}
	fd = -1;   /* zip_fdopen owns it now */
	if (torch_zip_directory(tz) < 0) goto fail;
	/* PREFIX/data.pkl: the one pickle */
	for (size_t i = 0; i < tz->nent; i++) {
		const char *s = tz->ent[i].name, *sl = strchr(s, '/');
		if (!sl || strcmp(sl + 1, "data.pkl")) continue;
		if (tz->prefix) {
			log_error("%s: more than one data.pkl in the archive", path);
			goto fail;
		}
		if (!(tz->prefix = strndup(s, (size_t)(sl + 1 - s)))) goto fail;
	}
	if (!tz->prefix) {
		log_error("%s: a zip archive without PREFIX/data.pkl: not a PyTorch checkpoint", path);
		goto fail;
	}
	if (asprintf(&name, "%sbyteorder", tz->prefix) < 0) { name = NULL; goto fail; }
	if (torch_zip_entry(tz, name)) {
		if (!(bo = torch_zip_read_entry(tz, name, &n))) goto fail;
		if (strcmp(bo, "little")) {
			log_error("%s: byte order '%.16s' (only little-endian checkpoints are read)", path, bo);
			goto fail;
		}
	}
	free(name);
	if (asprintf(&name, "%sdata.pkl", tz->prefix) < 0) { name = NULL; goto fail; }
	if (!(pkl = torch_zip_read_entry(tz, name, &plen))) goto fail;
	tz->pk.path = tz->path;
	tz->pk.p = (const unsigned char *)pkl;
	tz->pk.len = plen;
	if (torch_zip_unpickle(&tz->pk) < 0) goto fail;
	if (!(sd = torch_zip_state_dict(tz->pk.result))) {
		log_error("%s: the saved object is a %s, not a state dict (nor a dict with one under \"model\")", path,
		          torch_zip_kind_name(tz->pk.result->kind));
		goto fail;
	}
	n = sd->n / 2;
	if (n > INT_MAX / 2 ||
	    !(tz->t = calloc(n + 1, sizeof *tz->t)) || !(tz->tname = calloc(n + 1, sizeof *tz->tname)) ||
	    !(tz->inflated = calloc(tz->nent + 1, sizeof *tz->inflated)) ||
	    !(tz->byname = calloc(n + 1, sizeof *tz->byname)) || !(src = calloc(n + 1, sizeof *src))) {
		log_error("%s: out of memory", path);
		goto fail;
	}
	tz->n = (int)n;
	for (int i = 0; i < tz->n; i++)
		if (torch_zip_tensor(tz, i, sd->item[2 * i], sd->item[2 * i + 1], &src[i]) < 0) goto fail;
	for (int i = 0; i < tz->n; i++) tz->byname[i] = &tz->t[i];
	qsort(tz->byname, tz->n, sizeof *tz->byname, torch_zip_cmp_byname);
	for (int i = 1; i < tz->n; i++)
		if (!strcmp(tz->byname[i - 1]->name, tz->byname[i]->name)) {
			log_error("%s: tensor '%s' appears twice", path, tz->byname[i]->name);
			goto fail;
		}
	if (torch_zip_inflate(tz, src) < 0) goto fail;
	if (tz->pk.result != sd && (cfg = torch_zip_dict_get(tz->pk.result, "cfg"))) {
		json_t *j;
		tz->pk.budget = tz->pk.nall < 100000 ? 4 * tz->pk.nall + 16 : 400000;
		j = torch_zip_json(&tz->pk, cfg, 0);
		if (!tz->pk.budget) log_warn("%s: its \"cfg\" is too large to read; ignored", path);
		else if (j && (json_is_object(j) || json_is_array(j))) tz->cfg_json = json_dumps(j, JSON_COMPACT);
		json_decref(j);
	}
	free(name);
	free(bo);
	free(pkl);
	free(src);
	torch_zip_pickle_free(&tz->pk);
	return tz;
fail:
	if (fd >= 0) close(fd);
	free(name);
	free(bo);
	free(pkl);
	free(src);
	torch_zip_close(tz);
	return NULL;
}

void torch_zip_close(torch_zip_t *tz)
{
	if (!tz) return;
	torch_zip_pickle_free(&tz->pk);
	if (tz->za) zip_discard(tz->za);
	if (tz->map) munmap(tz->map, tz->map_size);
	for (size_t i = 0; i < tz->nent; i++) {
		free(tz->ent[i].name);
		if (tz->inflated) free(tz->inflated[i]);
	}
	free(tz->ent);
	for (int i = 0; i < tz->n; i++) free(tz->tname[i]);
	free(tz->t);
	free(tz->tname);
	free(tz->inflated);
	free(tz->byname);
	free(tz->prefix);
	free(tz->cfg_json);
	free(tz->path);
	free(tz);
}

int torch_zip_count(const torch_zip_t *tz) { return tz->n; }
const safetensors_tensor_t *torch_zip_at(const torch_zip_t *tz, int i) { return &tz->t[i]; }
const char *torch_zip_path(const torch_zip_t *tz) { return tz->path; }
const char *torch_zip_cfg_json(const torch_zip_t *tz) { return tz->cfg_json; }

const safetensors_tensor_t *torch_zip_find(const torch_zip_t *tz, const char *name)
{
	int lo = 0, hi = tz->n - 1;

	while (lo <= hi) {
		int mid = (lo + hi) / 2, c = strcmp(tz->byname[mid]->name, name);
		if (!c) return tz->byname[mid];
		if (c < 0) lo = mid + 1;
		else hi = mid - 1;
	}
	return NULL;
}

void torch_zip_release(const torch_zip_t *tz, const safetensors_tensor_t *t)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo, hi, base = (uintptr_t)tz->map, end = base + tz->map_size;

	if (!t->nbytes || (uintptr_t)t->data < base || (uintptr_t)t->data >= end) return;   /* inflated */
	lo = (uintptr_t)t->data / pg * pg;
	hi = ((uintptr_t)t->data + t->nbytes + pg - 1) / pg * pg;
	if (hi > end) hi = end;
	madvise((void *)lo, hi - lo, MADV_DONTNEED);
}
