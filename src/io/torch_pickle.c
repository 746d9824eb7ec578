/* torch_pickle.c - the strict pickle reader of PyTorch checkpoints (see torch_pickle.h). */
#include "io/torch_pickle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/grow.h"
#include "util/log.h"

/* the opcodes read, by their names in Python's pickletools; any other is refused */
typedef enum {
	TPO_MARK = '(', TPO_STOP = '.', TPO_EMPTY_TUPLE = ')', TPO_EMPTY_LIST = ']', TPO_EMPTY_DICT = '}',
	TPO_TUPLE = 't', TPO_NONE = 'N', TPO_BININT = 'J', TPO_BININT1 = 'K', TPO_BININT2 = 'M',
	TPO_BINFLOAT = 'G', TPO_BINUNICODE = 'X', TPO_GLOBAL = 'c', TPO_BINPUT = 'q', TPO_LONG_BINPUT = 'r',
	TPO_BINGET = 'h', TPO_LONG_BINGET = 'j', TPO_REDUCE = 'R', TPO_BINPERSID = 'Q', TPO_BUILD = 'b',
	TPO_SETITEM = 's', TPO_SETITEMS = 'u', TPO_APPEND = 'a', TPO_APPENDS = 'e',
	/* protocol 2 */
	TPO_PROTO = 0x80, TPO_NEWOBJ = 0x81, TPO_TUPLE1 = 0x85, TPO_TUPLE2 = 0x86, TPO_TUPLE3 = 0x87,
	TPO_NEWTRUE = 0x88, TPO_NEWFALSE = 0x89, TPO_LONG1 = 0x8a,
	/* protocol 4 */
	TPO_SHORT_BINUNICODE = 0x8c, TPO_STACK_GLOBAL = 0x93, TPO_MEMOIZE = 0x94, TPO_FRAME = 0x95
} torch_pickle_op_t;

static torch_pickle_val_t *torch_pickle_new(torch_pickle_t *pk, torch_pickle_kind_t kind)
{
	torch_pickle_val_t *v;

	if (grow_array(&pk->all, &pk->capall, pk->nall + 1, sizeof *pk->all) < 0 || !(v = calloc(1, sizeof *v)))
		return NULL;
	v->kind = kind;
	pk->all[pk->nall++] = v;
	return v;
}

void torch_pickle_free(torch_pickle_t *pk)
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

const char *torch_pickle_kind_name(torch_pickle_kind_t k)
{
	static const char *const names[] = { "None", "bool", "int", "float", "str", "tuple", "list",
		"dict", "global", "storage", "tensor", "object" };
	return names[k];
}

/* append child to container c (items, or one dict key/value pair as two) */
static int torch_pickle_add(torch_pickle_t *pk, torch_pickle_val_t *c, torch_pickle_val_t *a, torch_pickle_val_t *b)
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
	if (c->depth > TORCH_PICKLE_MAX_DEPTH) {
		log_error("%s: data.pkl: containers nested deeper than %d", pk->path, TORCH_PICKLE_MAX_DEPTH);
		return -1;
	}
	return 0;
}

static int torch_pickle_push(torch_pickle_t *pk, torch_pickle_val_t *v)
{
	if (!v) {
		log_error("%s: out of memory reading the pickle", pk->path);
		return -1;
	}
	if (pk->sp == TORCH_PICKLE_MAX_STACK) {
		log_error("%s: data.pkl: pickle stack deeper than %d", pk->path, TORCH_PICKLE_MAX_STACK);
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
static size_t torch_pickle_floor(const torch_pickle_t *pk)
{
	return pk->nmark ? pk->mark[pk->nmark - 1] : 0;
}

static torch_pickle_val_t *torch_pickle_pop(torch_pickle_t *pk, unsigned char op)
{
	if (pk->sp <= torch_pickle_floor(pk)) {
		log_error("%s: data.pkl: opcode 0x%02x at byte %zu pops an empty stack", pk->path, op, pk->pos - 1);
		return NULL;
	}
	return pk->stack[--pk->sp];
}

/* read n bytes of the pickle */
static const unsigned char *torch_pickle_take(torch_pickle_t *pk, size_t n)
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

uint64_t torch_pickle_le(const unsigned char *b, int n)
{
	uint64_t v = 0;
	for (int i = n - 1; i >= 0; i--) v = (v << 8) | b[i];
	return v;
}

/* a global the pickle may name: its id (and storage dtype); -1 if refused */
static int torch_pickle_global(const char *mod, const char *name, torch_pickle_gid_t *gid, safetensors_dtype_t *dt)
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

	if (!strcmp(mod, "collections") && !strcmp(name, "OrderedDict")) { *gid = TPG_ODICT; return 0; }
	if (!strcmp(mod, "torch._utils") && !strcmp(name, "_rebuild_tensor_v2")) { *gid = TPG_REBUILD; return 0; }
	if (!strcmp(mod, "torch._utils") && !strcmp(name, "_rebuild_parameter")) { *gid = TPG_REBUILD_PARAM; return 0; }
	if (!strcmp(mod, "torch"))
		for (size_t i = 0; i < sizeof storages / sizeof *storages; i++)
			if (!strcmp(name, storages[i].name)) { *gid = TPG_STORAGE; *dt = storages[i].dt; return 0; }
	if (!strcmp(mod, "omegaconf") || !strncmp(mod, "omegaconf.", 10)) { *gid = TPG_INERT; return 0; }
	snprintf(full, sizeof full, "%s.%s", mod, name);
	for (size_t i = 0; i < sizeof inert / sizeof *inert; i++)
		if (!strcmp(full, inert[i])) { *gid = TPG_INERT; return 0; }
	return -1;
}

/* a printable copy of a pickle string for messages */
void torch_pickle_printable(char *dst, size_t n, const char *s, size_t len)
{
	size_t o = 0;
	for (size_t i = 0; i < len && o + 1 < n; i++)
		dst[o++] = (s[i] >= 32 && s[i] < 127) ? s[i] : '?';
	dst[o] = 0;
}

static int torch_pickle_op_global(torch_pickle_t *pk, const char *mod, size_t mlen, const char *name, size_t nlen)
{
	char m[128], nm[128], pm[128], pn[128];
	torch_pickle_val_t *v;
	torch_pickle_gid_t gid;
	safetensors_dtype_t dt = SAFETENSORS_F32;

	torch_pickle_printable(pm, sizeof pm, mod, mlen);
	torch_pickle_printable(pn, sizeof pn, name, nlen);
	if (mlen >= sizeof m || nlen >= sizeof nm || memchr(mod, 0, mlen) || memchr(name, 0, nlen)) {
		log_error("%s: data.pkl: global '%s.%s' is not allowed in a checkpoint", pk->path, pm, pn);
		return -1;
	}
	memcpy(m, mod, mlen);
	m[mlen] = 0;
	memcpy(nm, name, nlen);
	nm[nlen] = 0;
	if (torch_pickle_global(m, nm, &gid, &dt) < 0) {
		log_error("%s: data.pkl: global '%s.%s' is not allowed in a checkpoint (not a state dict torch.save writes)",
		          pk->path, pm, pn);
		return -1;
	}
	if (!(v = torch_pickle_new(pk, TPV_GLOBAL)) || asprintf(&v->s, "%s.%s", m, nm) < 0) {
		if (v) v->s = NULL;
		log_error("%s: out of memory reading the pickle", pk->path);
		return -1;
	}
	v->slen = strlen(v->s);
	v->gid = gid;
	v->dtype = dt;
	return torch_pickle_push(pk, v);
}

/* an integer argument, for messages naming the role */
static int torch_pickle_want_int(torch_pickle_t *pk, const torch_pickle_val_t *v, const char *role, int64_t *out)
{
	if (!v || v->kind != TPV_INT) {
		log_error("%s: data.pkl: %s is a %s, expected an int", pk->path, role, v ? torch_pickle_kind_name(v->kind) : "nothing");
		return -1;
	}
	*out = v->i;
	return 0;
}

/* torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, metadata]) */
static torch_pickle_val_t *torch_pickle_rebuild(torch_pickle_t *pk, const torch_pickle_val_t *a)
{
	torch_pickle_val_t *t;
	const torch_pickle_val_t *sz, *st;

	if (a->n != 6 && a->n != 7) {
		log_error("%s: data.pkl: _rebuild_tensor_v2 with %zu arguments", pk->path, a->n);
		return NULL;
	}
	sz = a->item[2];
	st = a->item[3];
	if (a->item[0]->kind != TPV_STORAGE || sz->kind != TPV_TUPLE || st->kind != TPV_TUPLE ||
	    sz->n != st->n || sz->n > SAFETENSORS_MAX_DIMS) {
		log_error("%s: data.pkl: _rebuild_tensor_v2 needs a storage and size and stride tuples of equal length (at most %d)",
		          pk->path, SAFETENSORS_MAX_DIMS);
		return NULL;
	}
	if (!(t = torch_pickle_new(pk, TPV_TENSOR))) {
		log_error("%s: out of memory reading the pickle", pk->path);
		return NULL;
	}
	t->storage = a->item[0];
	t->nd = (int)sz->n;
	if (torch_pickle_want_int(pk, a->item[1], "a storage offset", &t->offset) < 0) return NULL;
	for (int d = 0; d < t->nd; d++)
		if (torch_pickle_want_int(pk, sz->item[d], "a tensor size", &t->shape[d]) < 0 ||
		    torch_pickle_want_int(pk, st->item[d], "a tensor stride", &t->stride[d]) < 0)
			return NULL;
	t->depth = 1;
	return t;
}

/* callable(args) for REDUCE and NEWOBJ: only the allowed globals, never called */
static int torch_pickle_call(torch_pickle_t *pk, torch_pickle_val_t *fn, torch_pickle_val_t *args, unsigned char op)
{
	torch_pickle_val_t *r = NULL;

	if (fn->kind != TPV_GLOBAL || args->kind != TPV_TUPLE) {
		log_error("%s: data.pkl: opcode 0x%02x applies a %s to a %s", pk->path, op,
		          torch_pickle_kind_name(fn->kind), torch_pickle_kind_name(args->kind));
		return -1;
	}
	switch (fn->gid) {
	case TPG_ODICT:
		if (args->n != 0) {
			log_error("%s: data.pkl: OrderedDict with arguments", pk->path);
			return -1;
		}
		r = torch_pickle_new(pk, TPV_DICT);
		break;
	case TPG_REBUILD:
		if (!(r = torch_pickle_rebuild(pk, args))) return -1;
		break;
	case TPG_REBUILD_PARAM:
		if (args->n < 1 || args->item[0]->kind != TPV_TENSOR) {
			log_error("%s: data.pkl: _rebuild_parameter without a tensor", pk->path);
			return -1;
		}
		r = args->item[0];
		break;
	case TPG_STORAGE:
		log_error("%s: data.pkl: a storage class is called (only persistent ids may name storages)", pk->path);
		return -1;
	case TPG_INERT:
		if ((r = torch_pickle_new(pk, TPV_OPAQUE)) && !(r->s = strdup(fn->s))) r = NULL;
		break;
	}
	return torch_pickle_push(pk, r);
}

/* BINPERSID: ('storage', class, key, location, numel) */
static int torch_pickle_persid(torch_pickle_t *pk, const torch_pickle_val_t *pid)
{
	torch_pickle_val_t *s;
	const torch_pickle_val_t *const *a = (const torch_pickle_val_t *const *)pid->item;

	if (pid->kind != TPV_TUPLE || pid->n != 5 || a[0]->kind != TPV_STR || strcmp(a[0]->s, "storage") ||
	    a[1]->kind != TPV_GLOBAL || a[1]->gid != TPG_STORAGE || a[2]->kind != TPV_STR ||
	    a[3]->kind != TPV_STR || a[4]->kind != TPV_INT || a[4]->i < 0 ||
	    strlen(a[2]->s) != a[2]->slen || !a[2]->slen || strchr(a[2]->s, '/')) {
		log_error("%s: data.pkl: a persistent id that is not a storage ('storage', type, key, location, numel)",
		          pk->path);
		return -1;
	}
	if (!(s = torch_pickle_new(pk, TPV_STORAGE)) || !(s->s = strdup(a[2]->s))) {
		log_error("%s: out of memory reading the pickle", pk->path);
		return -1;
	}
	s->slen = a[2]->slen;
	s->dtype = a[1]->dtype;
	s->i = a[4]->i;
	return torch_pickle_push(pk, s);
}

static int torch_pickle_memo_put(torch_pickle_t *pk, uint64_t idx)
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
		torch_pickle_val_t **nm;
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

static int torch_pickle_memo_get(torch_pickle_t *pk, uint64_t idx)
{
	if (idx >= pk->nmemo || !pk->memo[idx]) {
		log_error("%s: data.pkl: memo index %llu was never set", pk->path, (unsigned long long)idx);
		return -1;
	}
	return torch_pickle_push(pk, pk->memo[idx]);
}

/* the items above the last MARK into a new container of kind k; the MARK is dropped */
static int torch_pickle_collect(torch_pickle_t *pk, torch_pickle_val_t *c, unsigned char op)
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
	if (c->kind == TPV_DICT && (pk->sp - lo) % 2) {
		log_error("%s: data.pkl: SETITEMS with an odd number of items", pk->path);
		return -1;
	}
	for (size_t i = lo; i < pk->sp; i += c->kind == TPV_DICT ? 2 : 1)
		if (torch_pickle_add(pk, c, pk->stack[i], c->kind == TPV_DICT ? pk->stack[i + 1] : NULL) < 0) return -1;
	pk->sp = lo;
	return 0;
}

static torch_pickle_val_t *torch_pickle_top(torch_pickle_t *pk, torch_pickle_kind_t want, unsigned char op)
{
	torch_pickle_val_t *t = pk->sp > torch_pickle_floor(pk) ? pk->stack[pk->sp - 1] : NULL;

	if (!t || t->kind != want) {
		log_error("%s: data.pkl: opcode 0x%02x needs a %s, found %s", pk->path, op, torch_pickle_kind_name(want),
		          t ? torch_pickle_kind_name(t->kind) : "nothing");
		return NULL;
	}
	return t;
}

/* run the pickle to its STOP */
int torch_pickle_run(torch_pickle_t *pk)
{
	const unsigned char *b;
	torch_pickle_val_t *v, *k, *c;

	for (;;) {
		unsigned char op;
		if (!(b = torch_pickle_take(pk, 1))) return -1;
		op = *b;
		switch (op) {
		case TPO_PROTO:
			if (!(b = torch_pickle_take(pk, 1))) return -1;
			if (*b < 2 || *b > 4) {
				log_error("%s: data.pkl: pickle protocol %d (torch.save writes 2)", pk->path, *b);
				return -1;
			}
			break;
		case TPO_FRAME:   /* (protocol 4) a length we need not use */
			if (!torch_pickle_take(pk, 8)) return -1;
			break;
		case TPO_STOP:
			if (pk->sp != 1 || pk->nmark) {
				log_error("%s: data.pkl: STOP with %zu values and %d marks left", pk->path, pk->sp, pk->nmark);
				return -1;
			}
			pk->result = pk->stack[0];
			return 0;
		case TPO_MARK:
			if (pk->nmark == TORCH_PICKLE_MAX_MARKS) {
				log_error("%s: data.pkl: more than %d open MARKs", pk->path, TORCH_PICKLE_MAX_MARKS);
				return -1;
			}
			pk->mark[pk->nmark++] = pk->sp;
			break;
		case TPO_EMPTY_DICT:
			if (torch_pickle_push(pk, torch_pickle_new(pk, TPV_DICT)) < 0) return -1;
			break;
		case TPO_EMPTY_LIST:
			if (torch_pickle_push(pk, torch_pickle_new(pk, TPV_LIST)) < 0) return -1;
			break;
		case TPO_EMPTY_TUPLE:
			if (torch_pickle_push(pk, torch_pickle_new(pk, TPV_TUPLE)) < 0) return -1;
			break;
		case TPO_TUPLE:
			c = torch_pickle_new(pk, TPV_TUPLE);
			if (torch_pickle_collect(pk, c, op) < 0 || torch_pickle_push(pk, c) < 0) return -1;
			break;
		case TPO_TUPLE1: case TPO_TUPLE2: case TPO_TUPLE3: {
			int n = op - TPO_TUPLE1 + 1;
			if (pk->sp < torch_pickle_floor(pk) + (size_t)n) {
				log_error("%s: data.pkl: TUPLE%d with too few values", pk->path, n);
				return -1;
			}
			if (!(c = torch_pickle_new(pk, TPV_TUPLE))) return torch_pickle_push(pk, NULL);
			for (int i = 0; i < n; i++)
				if (torch_pickle_add(pk, c, pk->stack[pk->sp - n + i], NULL) < 0) return -1;
			pk->sp -= n;
			if (torch_pickle_push(pk, c) < 0) return -1;
			break;
		}
		case TPO_NONE:
			if (torch_pickle_push(pk, torch_pickle_new(pk, TPV_NONE)) < 0) return -1;
			break;
		case TPO_NEWTRUE: case TPO_NEWFALSE:
			if (!(v = torch_pickle_new(pk, TPV_BOOL))) return torch_pickle_push(pk, NULL);
			v->i = op == TPO_NEWTRUE;
			if (torch_pickle_push(pk, v) < 0) return -1;
			break;
		case TPO_BININT: case TPO_BININT1: case TPO_BININT2: {
			int n = op == TPO_BININT ? 4 : op == TPO_BININT1 ? 1 : 2;
			if (!(b = torch_pickle_take(pk, n))) return -1;
			if (!(v = torch_pickle_new(pk, TPV_INT))) return torch_pickle_push(pk, NULL);
			v->i = op == TPO_BININT ? (int64_t)(int32_t)(uint32_t)torch_pickle_le(b, 4) : (int64_t)torch_pickle_le(b, n);
			if (torch_pickle_push(pk, v) < 0) return -1;
			break;
		}
		case TPO_LONG1: {
			int n;
			uint64_t u;
			if (!(b = torch_pickle_take(pk, 1))) return -1;
			n = *b;
			if (n > 8) {
				log_error("%s: data.pkl: an integer of %d bytes", pk->path, n);
				return -1;
			}
			if (!(b = torch_pickle_take(pk, n))) return -1;
			u = torch_pickle_le(b, n);
			if (n && n < 8 && (b[n - 1] & 0x80)) u |= ~0ull << (8 * n);   /* sign */
			if (!(v = torch_pickle_new(pk, TPV_INT))) return torch_pickle_push(pk, NULL);
			v->i = (int64_t)u;
			if (torch_pickle_push(pk, v) < 0) return -1;
			break;
		}
		case TPO_BINFLOAT: {   /* big-endian */
			uint64_t u = 0;
			if (!(b = torch_pickle_take(pk, 8))) return -1;
			for (int i = 0; i < 8; i++) u = (u << 8) | b[i];
			if (!(v = torch_pickle_new(pk, TPV_FLOAT))) return torch_pickle_push(pk, NULL);
			memcpy(&v->f, &u, sizeof v->f);
			if (torch_pickle_push(pk, v) < 0) return -1;
			break;
		}
		case TPO_BINUNICODE: case TPO_SHORT_BINUNICODE: {
			size_t n;
			if (!(b = torch_pickle_take(pk, op == TPO_BINUNICODE ? 4 : 1))) return -1;
			n = op == TPO_BINUNICODE ? (size_t)torch_pickle_le(b, 4) : *b;
			if (!(b = torch_pickle_take(pk, n))) return -1;
			if (!(v = torch_pickle_new(pk, TPV_STR)) || !(v->s = malloc(n + 1))) return torch_pickle_push(pk, NULL);
			memcpy(v->s, b, n);
			v->s[n] = 0;
			v->slen = n;
			if (torch_pickle_push(pk, v) < 0) return -1;
			break;
		}
		case TPO_GLOBAL: {   /* module\nname\n */
			const unsigned char *m = pk->p + pk->pos, *e1, *e2;
			e1 = memchr(m, '\n', pk->len - pk->pos);
			e2 = e1 ? memchr(e1 + 1, '\n', pk->len - (size_t)(e1 + 1 - pk->p)) : NULL;
			if (!e2) {
				log_error("%s: data.pkl: truncated GLOBAL", pk->path);
				return -1;
			}
			pk->pos = (size_t)(e2 + 1 - pk->p);
			if (torch_pickle_op_global(pk, (const char *)m, (size_t)(e1 - m), (const char *)e1 + 1,
			                        (size_t)(e2 - e1 - 1)) < 0)
				return -1;
			break;
		}
		case TPO_STACK_GLOBAL:   /* (protocol 4) */
			if (!(v = torch_pickle_pop(pk, op)) || !(k = torch_pickle_pop(pk, op))) return -1;
			if (k->kind != TPV_STR || v->kind != TPV_STR) {
				log_error("%s: data.pkl: STACK_GLOBAL without two strings", pk->path);
				return -1;
			}
			if (torch_pickle_op_global(pk, k->s, k->slen, v->s, v->slen) < 0) return -1;
			break;
		case TPO_BINPUT: case TPO_LONG_BINPUT: case TPO_MEMOIZE: {
			uint64_t idx;
			if (op == TPO_MEMOIZE) {
				idx = pk->nput;
			} else {
				if (!(b = torch_pickle_take(pk, op == TPO_BINPUT ? 1 : 4))) return -1;
				idx = torch_pickle_le(b, op == TPO_BINPUT ? 1 : 4);
			}
			if (torch_pickle_memo_put(pk, idx) < 0) return -1;
			break;
		}
		case TPO_BINGET: case TPO_LONG_BINGET:
			if (!(b = torch_pickle_take(pk, op == TPO_BINGET ? 1 : 4))) return -1;
			if (torch_pickle_memo_get(pk, torch_pickle_le(b, op == TPO_BINGET ? 1 : 4)) < 0) return -1;
			break;
		case TPO_REDUCE: case TPO_NEWOBJ:
			if (!(v = torch_pickle_pop(pk, op)) || !(k = torch_pickle_pop(pk, op))) return -1;
			if (torch_pickle_call(pk, k, v, op) < 0) return -1;
			break;
		case TPO_BINPERSID:
			if (!(v = torch_pickle_pop(pk, op)) || torch_pickle_persid(pk, v) < 0) return -1;
			break;
		case TPO_BUILD:   /* the state of an OrderedDict (_metadata), a tensor or a placeholder */
			if (!(v = torch_pickle_pop(pk, op))) return -1;
			c = pk->sp > torch_pickle_floor(pk) ? pk->stack[pk->sp - 1] : NULL;
			if (!c || (c->kind != TPV_DICT && c->kind != TPV_TENSOR && c->kind != TPV_OPAQUE)) {
				log_error("%s: data.pkl: BUILD on a %s", pk->path, c ? torch_pickle_kind_name(c->kind) : "nothing");
				return -1;
			}
			if (c->kind == TPV_OPAQUE) {
				c->state = v;
				if (v->depth + 1 > c->depth) c->depth = v->depth + 1;
				if (c->depth > TORCH_PICKLE_MAX_DEPTH) {
					log_error("%s: data.pkl: containers nested deeper than %d", pk->path, TORCH_PICKLE_MAX_DEPTH);
					return -1;
				}
			}
			break;
		case TPO_SETITEM:
			if (!(v = torch_pickle_pop(pk, op)) || !(k = torch_pickle_pop(pk, op))) return -1;
			if (!(c = torch_pickle_top(pk, TPV_DICT, op)) || torch_pickle_add(pk, c, k, v) < 0) return -1;
			break;
		case TPO_SETITEMS: case TPO_APPENDS: {
			torch_pickle_kind_t want = op == TPO_SETITEMS ? TPV_DICT : TPV_LIST;
			size_t lo;
			if (!pk->nmark) {
				log_error("%s: data.pkl: opcode 0x%02x without a MARK", pk->path, op);
				return -1;
			}
			lo = pk->mark[pk->nmark - 1];
			c = lo > (pk->nmark > 1 ? pk->mark[pk->nmark - 2] : 0) ? pk->stack[lo - 1] : NULL;
			if (!c || c->kind != want) {
				log_error("%s: data.pkl: opcode 0x%02x needs a %s below its MARK", pk->path, op,
				          torch_pickle_kind_name(want));
				return -1;
			}
			if (torch_pickle_collect(pk, c, op) < 0) return -1;
			break;
		}
		case TPO_APPEND:
			if (!(v = torch_pickle_pop(pk, op))) return -1;
			if (!(c = torch_pickle_top(pk, TPV_LIST, op)) || torch_pickle_add(pk, c, v, NULL) < 0) return -1;
			break;
		default:
			log_error("%s: data.pkl: pickle opcode 0x%02x at byte %zu is not one torch.save writes for a state dict",
			          pk->path, op, pk->pos - 1);
			return -1;
		}
	}
}

json_t *torch_pickle_json(torch_pickle_t *pk, const torch_pickle_val_t *v, int depth)
{
	json_t *j;

	/* bounded in depth and in values visited (shared values could make a walk exponential) */
	if (depth > TORCH_PICKLE_MAX_DEPTH || !pk->budget) return NULL;
	pk->budget--;
	switch (v->kind) {
	case TPV_NONE: return json_null();
	case TPV_BOOL: return json_boolean(v->i);
	case TPV_INT: return json_integer(v->i);
	case TPV_FLOAT: return json_real(v->f);
	case TPV_STR: return json_stringn(v->s, v->slen);
	case TPV_TUPLE: case TPV_LIST:
		if (!(j = json_array())) return NULL;
		for (size_t i = 0; i < v->n; i++) {
			json_t *e = torch_pickle_json(pk, v->item[i], depth + 1);
			json_array_append_new(j, e ? e : json_null());
		}
		return j;
	case TPV_DICT:
		if (!(j = json_object())) return NULL;
		for (size_t i = 0; i + 1 < v->n; i += 2) {
			json_t *e;
			if (v->item[i]->kind != TPV_STR || strlen(v->item[i]->s) != v->item[i]->slen) continue;
			e = torch_pickle_json(pk, v->item[i + 1], depth + 1);
			json_object_set_new(j, v->item[i]->s, e ? e : json_null());
		}
		return j;
	case TPV_OPAQUE:
		return v->state ? torch_pickle_json(pk, v->state, depth + 1) : NULL;
	default:
		return NULL;
	}
}

const torch_pickle_val_t *torch_pickle_dict_get(const torch_pickle_val_t *d, const char *key)
{
	for (size_t i = 0; d->kind == TPV_DICT && i + 1 < d->n; i += 2)
		if (d->item[i]->kind == TPV_STR && !strcmp(d->item[i]->s, key)) return d->item[i + 1];
	return NULL;
}
