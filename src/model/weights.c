/* weights.c - weights from safetensors or a manifest (see weights.h). */
#include "model/weights.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "util/grow.h"
#include "util/hash.h"
#include "util/hugemem.h"
#include "util/lines.h"
#include "util/log.h"
#include "util/sysmem.h"
#include "io/safetensors.h"
#include "io/torch_zip.h"
#include "model/ckpt_names.h"

/* at most this many files make one weights_t (esmfold + its language model) */
#define WEIGHTS_MAX_FILES 2

typedef struct {
	const char *name;
	int         nd;
	int64_t     shape[SAFETENSORS_MAX_DIMS];
	int         used;
} weights_entry_t;

/* a tensor of a file under the model's (Hugging Face) name */
typedef struct {
	char       *name;      /* owned */
	const safetensors_tensor_t *t;
	int         file;      /* index into st[] / tz[] */
	int         used;
} weights_tensor_t;

struct wt {
	char       *path;
	safetensors_t       *st;        /* a safetensors file, or NULL */
	torch_zip_t *tz[WEIGHTS_MAX_FILES]; /* PyTorch checkpoints, or NULL */
	weights_tensor_t *tt;  /* a file's tensors (either kind), sorted by name */
	int         ntt;
	json_t     *manifest;  /* owns manifest names */
	weights_entry_t *e;         /* manifest or recorded entries */
	int         ne;
	size_t      cape;
	int         recording; /* weights_open_record: e[].name owned, appended */
	hparams_t   cfg;
	char       *cfg_json;  /* the configuration's text */
	char       *cfg_from;  /* where it came from, for messages: a config.json's path, or NULL:
	                          the checkpoints' cfg or the published one (cfg_json says) */
	char        fp[17];
	int64_t     f32_bytes; /* float32 bytes of the tensors asked for */
	int64_t     mat_elems; /* of which elements of Linear matrices */
	int64_t     half_elems;  /* of which binary16 ones that may stay so (weights_lin_f16) */
	struct { be_t *be; void *p; int host; } *buf;   /* host: be->host_alloc's */
	int         nbuf;
	size_t      capbuf;
	int         widen_logged;   /* the widening path's log line written */
	int         drop_cache;     /* copied tensors' file pages leave the page cache */
};

/* FNV-1a, 64 bits (weights.h) */
uint64_t weights_fnv(uint64_t h, const void *data, size_t n)
{
	for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)data)[i]) * 1099511628211ull;
	return h;
}

static int weights_cmp_tensor(const void *a, const void *b)
{
	return strcmp(((const weights_tensor_t *)a)->name, ((const weights_tensor_t *)b)->name);
}

static weights_tensor_t *weights_find(const weights_t *w, const char *name)
{
	weights_tensor_t key = { .name = (char *)name };
	return w->ntt ? bsearch(&key, w->tt, w->ntt, sizeof *w->tt, weights_cmp_tensor) : NULL;
}

/* append the tensors of one file under their model names */
static int weights_add_file(weights_t *w, int file, int count, const safetensors_tensor_t *(*at)(const void *, int),
                            const void *src, int lm)
{
	weights_tensor_t *nt = realloc(w->tt, (w->ntt + count + 1) * sizeof *nt);

	if (!nt) return -1;
	w->tt = nt;
	for (int i = 0; i < count; i++) {
		weights_tensor_t *x = &w->tt[w->ntt];
		memset(x, 0, sizeof *x);
		x->t = at(src, i);
		x->file = file;
		if (!(x->name = ckpt_canonical(x->t->name, lm))) return -1;
		w->ntt++;
	}
	return 0;
}

static const safetensors_tensor_t *weights_st_at(const void *st, int i) { return safetensors_at(st, i); }
static const safetensors_tensor_t *weights_tz_at(const void *tz, int i) { return torch_zip_at(tz, i); }

/* a fair-esm language model file: its token embedding under fairseq's or fair-esm's name */
static int weights_is_lm(const torch_zip_t *tz)
{
	return torch_zip_find(tz, "encoder.sentence_encoder.embed_tokens.weight") ||
	       torch_zip_find(tz, "encoder.embed_tokens.weight") || torch_zip_find(tz, "embed_tokens.weight");
}

/* the published configuration overlaid with what the checkpoints' cfg say
 * (fair-esm: the folding file's cfg.model is esmfold_config, the language
 * model file's cfg.model has encoder_layers, encoder_embed_dim,
 * encoder_ffn_embed_dim, encoder_attention_heads); 0, or -1 if no cfg was
 * usable (then *text is the published configuration alone) */
static int weights_cfg_from_checkpoints(const weights_t *w, char **text)
{
	static const struct { const char *fair, *hf; } lm_keys[] = {
		{ "encoder_layers", "num_hidden_layers" }, { "encoder_embed_dim", "hidden_size" },
		{ "encoder_ffn_embed_dim", "intermediate_size" }, { "encoder_attention_heads", "num_attention_heads" },
	};
	json_t *root = json_loads(hparams_published_json(), 0, NULL), *c, *m;
	int found = 0;

	*text = NULL;
	if (!root) return -1;
	for (int f = 0; f < WEIGHTS_MAX_FILES && w->tz[f]; f++) {
		const char *js = torch_zip_cfg_json(w->tz[f]);
		if (!js || !(c = json_loads(js, 0, NULL))) continue;
		m = json_object_get(c, "model");
		if (json_is_object(m) && json_is_object(json_object_get(m, "trunk"))) {
			json_object_update_recursive(json_object_get(root, "esmfold_config"), m);
			found = 1;
		} else if (json_is_object(m)) {
			for (size_t k = 0; k < sizeof lm_keys / sizeof *lm_keys; k++) {
				json_t *v = json_object_get(m, lm_keys[k].fair);
				if (json_is_integer(v)) {
					json_object_set(root, lm_keys[k].hf, v);
					found = 1;
				}
			}
		}
		json_decref(c);
	}
	*text = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	return *text && found ? 0 : -1;
}

/* config.json beside PATH, else __metadata__["config"], else the checkpoints' cfg, else the published one */
static int weights_load_cfg(weights_t *w, const char *first)
{
	char *dir = strdup(first), *slash, *cpath = NULL, *text = NULL;
	const char *meta;
	struct stat cs;
	int rc = -1;

	if (!dir) return -1;
	slash = strrchr(dir, '/');
	if (slash) slash[1] = 0;
	if (asprintf(&cpath, "%sconfig.json", slash ? dir : "") < 0) cpath = NULL;
	/* there (whatever it is: hparams_load refuses all but a regular file) or absent */
	if (cpath && (stat(cpath, &cs) == 0 || errno != ENOENT)) {
		json_t *j;
		rc = hparams_load(&w->cfg, cpath);
		w->cfg_from = cpath;
		cpath = NULL;
		if (rc == 0 && (j = json_load_file(w->cfg_from, 0, NULL))) {
			w->cfg_json = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
			json_decref(j);
		}
	} else if (w->st && (meta = safetensors_meta(w->st, "config"))) {
		rc = hparams_parse(&w->cfg, meta, w->path);
		w->cfg_json = strdup(meta);
	} else if (w->st) {
		log_error("%s: no config.json beside the weights and no \"config\" in its metadata", w->path);
	} else if (weights_cfg_from_checkpoints(w, &text) == 0) {
		log_info("%s: no config.json beside it: configuration from the checkpoint's cfg (the rest as published esmfold_v1)",
		         w->path);
		rc = hparams_parse(&w->cfg, text, w->path);
		w->cfg_json = text;
		text = NULL;
	} else {
		log_info("%s: no config.json beside it and no cfg in the checkpoint that esmbatch reads: "
		         "the published esmfold_v1 configuration", w->path);
		rc = hparams_parse(&w->cfg, hparams_published_json(), w->path);
		w->cfg_json = strdup(hparams_published_json());
	}
	free(text);
	free(cpath);
	free(dir);
	return rc;
}

/* The fingerprint cache: $ESMBATCH_FP_CACHE, else
 * $XDG_CACHE_HOME/esmbatch/fingerprints, else ~/.cache/esmbatch/fingerprints;
 * lines "tensors1 DEV INO SIZE MTIME_NS CTIME_NS [+ the same of a second file]
 * DIGEST".  NULL when none can be named. */
static char *weights_cache_path(int mkdirs)
{
	const char *env = getenv("ESMBATCH_FP_CACHE"), *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");
	char *dir = NULL, *p = NULL;

	if (env && *env) return strdup(env);
	if (xdg && *xdg) { if (asprintf(&dir, "%s/esmbatch", xdg) < 0) dir = NULL; }
	else if (home && *home) {
		if (asprintf(&dir, "%s/.cache/esmbatch", home) < 0) dir = NULL;
		else if (mkdirs) {
			char *c = NULL;
			if (asprintf(&c, "%s/.cache", home) >= 0) mkdir(c, 0755);
			free(c);
		}
	}
	if (!dir) return NULL;
	if (mkdirs) mkdir(dir, 0755);
	if (asprintf(&p, "%s/fingerprints", dir) < 0) p = NULL;
	free(dir);
	return p;
}

/* the cache key of a file: device, inode, size, mtime and ctime (ctime
 * changes with any write or touch, and cannot be set back) */
static int weights_cache_key(const char *path, char *key, size_t n)
{
	struct stat sb;

	if (stat(path, &sb) < 0) return -1;
	snprintf(key, n, "%llu %llu %lld %lld %lld", (unsigned long long)sb.st_dev,
	         (unsigned long long)sb.st_ino, (long long)sb.st_size,
	         (long long)sb.st_mtim.tv_sec * 1000000000ll + sb.st_mtim.tv_nsec,
	         (long long)sb.st_ctim.tv_sec * 1000000000ll + sb.st_ctim.tv_nsec);
	return 0;
}

/* a tensor's file pages leave the resident set (once copied or hashed) */
static void weights_release(const weights_t *w, const weights_tensor_t *x)
{
	if (w->st) safetensors_release(w->st, x->t);
	else torch_zip_release(w->tz[x->file], x->t);
}

/* the digest of the tensors: each one's model name, dtype, shape and every
 * byte of its data, in name order, so that the same weights give the same
 * digest in either format and naming */
static uint64_t weights_tensor_digest(const weights_t *w)
{
	uint64_t h = 0;

	for (int i = 0; i < w->ntt; i++) {
		const safetensors_tensor_t *t = w->tt[i].t;
		h = hash_bytes(h, w->tt[i].name, strlen(w->tt[i].name) + 1);
		h = hash_bytes(h, &t->dtype, sizeof t->dtype);
		h = hash_bytes(h, t->shape, t->nd * sizeof *t->shape);
		h = hash_bytes(h, t->data, t->nbytes);
		weights_release(w, &w->tt[i]);
	}
	return h;
}

/* the tensor digest of w, opened from files[0..nf), from the cache when
 * the files' keys match, else computed and appended to the cache (a cache
 * that cannot be read or written only costs the time) */
static uint64_t weights_digest(const weights_t *w, char *const *files, int nf)
{
	char key[WEIGHTS_MAX_FILES * 96], *cp;
	unsigned long long d;
	uint64_t h = 0;
	struct stat cs;
	size_t kn = 0;
	FILE *f;
	int hit = 0;

	/* the digest's kind first: a cache line of another kind never matches */
	kn = (size_t)snprintf(key, sizeof key, "tensors1 ");
	for (int i = 0; i < nf; i++) {
		if (i) kn += (size_t)snprintf(key + kn, sizeof key - kn, " + ");
		if (weights_cache_key(files[i], key + kn, sizeof key - kn) < 0) return weights_tensor_digest(w);
		kn = strlen(key);
	}
	if ((cp = weights_cache_path(0)) && (f = fopen(cp, "r"))) {
		lines_t ln;
		lines_init(&ln, f, cp, NULL);
		while (lines_next(&ln) > 0)   /* a cache that cannot be read is a miss */
			if (ln.n > kn && !strncmp(ln.s, key, kn) && ln.s[kn] == ' ' &&
			    sscanf(ln.s + kn + 1, "%llx", &d) == 1)
				hit = 1, h = d;   /* the latest line wins */
		lines_free(&ln);
		fclose(f);
	}
	free(cp);
	if (hit) {
		log_debug("%s: fingerprint digest from the cache", w->path);
		return h;
	}
	h = weights_tensor_digest(w);
	/* one short append; a cache grown past 1 MB (some 10000 files) starts afresh */
	if ((cp = weights_cache_path(1)) &&
	    (f = fopen(cp, stat(cp, &cs) == 0 && cs.st_size > (1 << 20) ? "w" : "a"))) {
		fprintf(f, "%s %016llx\n", key, (unsigned long long)h);
		fclose(f);
	}
	free(cp);
	return h;
}

/* A checkpoint whose configuration came from elsewhere: a few tensors
 * that every size hangs on checked first, so that a wrong configuration is
 * one line, not one per tensor.  0 or -1. */
static int weights_cfg_fits(const weights_t *w)
{
	const hparams_t *c = &w->cfg;
	const struct { const char *name; int nd; int64_t d0, d1; } key[] = {
		{ "esm.embeddings.word_embeddings.weight", 2, c->vocab, c->lm_dim },
		{ "esm.encoder.layer.0.intermediate.dense.weight", 2, c->lm_ffn, c->lm_dim },
		{ "esm_s_combine", 1, c->lm_layers + 1, 0 },
		{ "trunk.recycle_s_norm.weight", 1, c->c_s, 0 },
		{ "trunk.recycle_z_norm.weight", 1, c->c_z, 0 },
		{ "trunk.structure_module.layer_norm_s.weight", 1, c->sm_c_s, 0 },
	};

	for (size_t i = 0; i < sizeof key / sizeof *key; i++) {
		const weights_tensor_t *x = weights_find(w, key[i].name);
		if (!x) continue;
		if (x->t->nd != key[i].nd || x->t->shape[0] != key[i].d0 || (key[i].nd == 2 && x->t->shape[1] != key[i].d1)) {
			if (w->cfg_from)
				log_error("%s: tensor '%s' does not fit the configuration of %s: it is another model's "
				          "config.json", w->path, key[i].name, w->cfg_from);
			else
				log_error("%s: tensor '%s' does not fit the configuration (%s): put the model's "
				          "config.json beside the weights", w->path, key[i].name,
				          w->cfg_json && strcmp(w->cfg_json, hparams_published_json()) ?
				          "the checkpoint's cfg" : "the published esmfold_v1 one");
			return -1;
		}
	}
	return 0;
}

/* open one file of PATH (a safetensors file or a PyTorch checkpoint) as file number i */
static int weights_open_file(weights_t *w, int i, const char *path)
{
	if (!torch_zip_sniff(path)) {
		if (i > 0 || w->tz[0]) {
			log_error("%s: a safetensors file must be the only weights file", path);
			return -1;
		}
		if (!(w->st = safetensors_open(path))) return -1;
		return weights_add_file(w, i, safetensors_count(w->st), weights_st_at, w->st, 0);
	}
	if (w->st) {
		log_error("%s: a safetensors file must be the only weights file", path);
		return -1;
	}
	if (!(w->tz[i] = torch_zip_open(path))) return -1;
	return weights_add_file(w, i, torch_zip_count(w->tz[i]), weights_tz_at, w->tz[i], weights_is_lm(w->tz[i]));
}

static weights_t *weights_open_files(const char *path, int fingerprint)
{
	weights_t *w = calloc(1, sizeof *w);
	char *list = NULL, *files[WEIGHTS_MAX_FILES] = { NULL }, *save = NULL, *tok;
	int nf = 0;

	if (!w || !(w->path = strdup(path)) || !(list = strdup(path))) goto fail;
	/* PATH, or a comma-separated list (a file whose name has a comma is taken whole) */
	if (access(path, F_OK) == 0 || !strchr(path, ',')) {
		files[nf++] = list;
	} else {
		for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			if (nf == WEIGHTS_MAX_FILES) {
				log_error("%s: at most %d weights files (the folding model and its language model)", path,
				          WEIGHTS_MAX_FILES);
				goto fail;
			}
			files[nf++] = tok;
		}
	}
	if (!nf) {
		log_error("'%s': no weights file named", path);
		goto fail;
	}
	for (int i = 0; i < nf; i++)
		if (weights_open_file(w, i, files[i]) < 0) goto fail;
	qsort(w->tt, w->ntt, sizeof *w->tt, weights_cmp_tensor);
	for (int i = 1; i < w->ntt; i++)
		if (!strcmp(w->tt[i - 1].name, w->tt[i].name)) {
			log_error("%s: tensor '%s' is given twice (as '%s' and '%s')", path, w->tt[i].name,
			          w->tt[i - 1].t->name, w->tt[i].t->name);
			goto fail;
		}
	if (weights_load_cfg(w, files[0]) < 0) goto fail;
	if (!w->st && weights_cfg_fits(w) < 0) goto fail;
	/* fingerprint: the tensors (weights_tensor_digest), then the effective
	 * config (the parsed hparams_t, wherever it came from) */
	if (fingerprint) {
		uint64_t h = hash_bytes(weights_digest(w, files, nf), &w->cfg, sizeof w->cfg);
		snprintf(w->fp, sizeof w->fp, "%016llx", (unsigned long long)h);
	} else {
		strcpy(w->fp, "-");
	}
	free(list);
	return w;
fail:
	free(list);
	weights_close(w);
	return NULL;
}

weights_t *weights_open(const char *path) { return weights_open_files(path, 1); }
weights_t *weights_open_shapes(const char *path) { return weights_open_files(path, 0); }

weights_t *weights_open_manifest(const char *path)
{
	json_error_t err;
	weights_t *w = calloc(1, sizeof *w);
	json_t *tl, *cfgj, *e;
	char *ctext = NULL;
	size_t i;

	if (!w || !(w->path = strdup(path))) goto fail;
	if (!(w->manifest = json_load_file(path, 0, &err))) {
		log_error("%s: cannot read manifest: %s", path, err.text);
		goto fail;
	}
	tl = json_object_get(w->manifest, "tensors");
	cfgj = json_object_get(w->manifest, "config");
	if (!json_is_array(tl) || !json_is_object(cfgj)) {
		log_error("%s: manifest needs \"tensors\" and \"config\"", path);
		goto fail;
	}
	if (!(ctext = json_dumps(cfgj, 0)) || hparams_parse(&w->cfg, ctext, path) < 0) goto fail;
	if (!(w->e = calloc(json_array_size(tl) + 1, sizeof *w->e))) goto fail;
	json_array_foreach(tl, i, e) {
		json_t *sh = json_object_get(e, "shape"), *d;
		size_t k;
		weights_entry_t *x = &w->e[w->ne];
		x->name = json_string_value(json_object_get(e, "name"));
		if (!x->name || !json_is_array(sh) || json_array_size(sh) > SAFETENSORS_MAX_DIMS) {
			log_error("%s: manifest entry %zu malformed", path, i);
			goto fail;
		}
		x->nd = (int)json_array_size(sh);
		json_array_foreach(sh, k, d) x->shape[k] = json_integer_value(d);
		w->ne++;
	}
	snprintf(w->fp, sizeof w->fp, "%016llx",
	         (unsigned long long)weights_fnv(WEIGHTS_FNV_SEED, ctext, strlen(ctext)));
	free(ctext);
	return w;
fail:
	free(ctext);
	weights_close(w);
	return NULL;
}

weights_t *weights_open_record(const char *cfg_json, const char *what)
{
	weights_t *w = calloc(1, sizeof *w);

	if (!w || !(w->path = strdup(what))) goto fail;
	w->recording = 1;
	if (hparams_parse(&w->cfg, cfg_json, what) < 0) goto fail;
	snprintf(w->fp, sizeof w->fp, "%016llx",
	         (unsigned long long)weights_fnv(WEIGHTS_FNV_SEED, cfg_json, strlen(cfg_json)));
	return w;
fail:
	weights_close(w);
	return NULL;
}

/* append a recorded entry; 0 or -1 */
static int weights_record(weights_t *w, const char *name, int nd, const int64_t *shape)
{
	weights_entry_t *x;

	if (nd > SAFETENSORS_MAX_DIMS) return -1;
	if (grow_array(&w->e, &w->cape, (size_t)w->ne + 1, sizeof *w->e) < 0) return -1;
	x = &w->e[w->ne];
	memset(x, 0, sizeof *x);
	if (!(x->name = strdup(name))) return -1;
	x->nd = nd;
	memcpy(x->shape, shape, nd * sizeof *shape);
	x->used = 1;
	w->ne++;
	return 0;
}

int weights_count(const weights_t *w) { return w->ne; }

const char *weights_entry(const weights_t *w, int i, int *nd, const int64_t **shape)
{
	*nd = w->e[i].nd;
	*shape = w->e[i].shape;
	return w->e[i].name;
}

void weights_close(weights_t *w)
{
	if (!w) return;
	if (w->recording)
		for (int i = 0; i < w->ne; i++) free((char *)w->e[i].name);
	for (int i = 0; i < w->nbuf; i++)
		(w->buf[i].host ? w->buf[i].be->host_free : w->buf[i].be->free)(w->buf[i].be, w->buf[i].p);
	free(w->buf);
	safetensors_close(w->st);
	for (int i = 0; i < WEIGHTS_MAX_FILES; i++) torch_zip_close(w->tz[i]);
	for (int i = 0; i < w->ntt; i++) free(w->tt[i].name);
	free(w->tt);
	json_decref(w->manifest);
	free(w->e);
	free(w->cfg_json);
	free(w->cfg_from);
	free(w->path);
	free(w);
}

const hparams_t *weights_cfg(const weights_t *w) { return &w->cfg; }
const char  *weights_cfg_json(const weights_t *w) { return w->cfg_json; }
int          weights_tensor_count(const weights_t *w) { return w->ntt; }

const safetensors_tensor_t *weights_tensor(const weights_t *w, int i, const char **name)
{
	*name = w->tt[i].name;
	return w->tt[i].t;
}
const char *weights_fingerprint(const weights_t *w) { return w->fp; }
int64_t     weights_bytes(const weights_t *w, const be_t *be)
{
	return w->f32_bytes - (be->weights_bf16 ? 2 * w->mat_elems : be->weights_f16 ? 2 * w->half_elems : 0);
}
const char *weights_path(const weights_t *w) { return w->path; }

static void weights_shape_str(char *buf, size_t n, int nd, const int64_t *shape)
{
	size_t o = 0;
	o += snprintf(buf + o, n - o, "[");
	for (int i = 0; i < nd && o < n; i++)
		o += snprintf(buf + o, n - o, i ? ", %lld" : "%lld", (long long)shape[i]);
	if (o < n) snprintf(buf + o, n - o, "]");
}

/* w->buf += p (of be; host: be->host_alloc's), freed at weights_close;
 * -1 when out of memory */
static int weights_keep(weights_t *w, be_t *be, void *p, int host)
{
	if (grow_array(&w->buf, &w->capbuf, (size_t)w->nbuf + 1, sizeof *w->buf) < 0) return -1;
	w->buf[w->nbuf].be = be;
	w->buf[w->nbuf].p = p;
	w->buf[w->nbuf].host = host;
	w->nbuf++;
	return 0;
}

/* 1 where the safetensors file and the copies be keeps of its tensors in
 * host memory together exceed the memory available: then the kernel would
 * reclaim the file's pages (unread ones too) while the copies are made, so
 * each copied tensor's pages are dropped at once instead.  Copies: none
 * on a device; else float32, binary16 ones at 2 bytes where weights_f16,
 * those of 2+ dimensions where weights_bf16 (a few are not held so: < 0.1%) */
static int weights_drop_decide(const weights_t *w, const be_t *be, int64_t *need, int64_t *avail)
{
	*need = 0;
	*avail = sysmem_available();
	if (!w->st) return 0;
	for (int i = 0; i < w->ntt; i++) {
		const safetensors_tensor_t *t = w->tt[i].t;
		int half = (be->weights_f16 && t->dtype == SAFETENSORS_F16) || (be->weights_bf16 && t->nd >= 2);
		*need += (int64_t)t->nbytes + (be->host_mem ? (half ? 2 : 4) * t->numel : 0);
	}
	return *avail >= 0 && *need > *avail;
}

/* the first call's log line: how loading runs */
static void weights_log_path(weights_t *w, const be_t *be, widen_path_t path)
{
	int threads = 1;
	int64_t need, avail;

#ifdef _OPENMP
	threads = omp_get_max_threads();
#endif
	w->drop_cache = weights_drop_decide(w, be, &need, &avail);
	log_debug("%s: loading on %d thread%s, huge pages %s (THP %s), half precision widened on the %s path; "
	          "file and host copies %.1f GB, %.1f GB available: copied tensors' pages %s",
	          w->path, threads, threads == 1 ? "" : "s", hugemem_on() ? "on" : "off", hugemem_mode(),
	          widen_path_name(path), need / 1e9, avail / 1e9,
	          w->drop_cache ? "dropped from the page cache" : "kept in the page cache");
	w->widen_logged = 1;
}

/* dst[0..numel) = t as float32 (convert 0: dst is t's own float32 data,
 * only scanned) on all threads (widen_tensor); the first NaN's or
 * infinity's index, or -1 */
static int64_t weights_widen(weights_t *w, const be_t *be, const safetensors_tensor_t *t, float *dst, int convert)
{
	widen_path_t path = widen_best();

	if (!w->widen_logged) weights_log_path(w, be, path);
	return widen_tensor(t, dst, convert, path);
}

/* any, Linear (bf16?), kept binary16 too, or held in host memory (bf16?) */
enum { WEIGHTS_ANY, WEIGHTS_MAT, WEIGHTS_MAT_F16, WEIGHTS_MAT_HOST };

/* *p (into, or an allocation of be's kept by w: in host memory where mat
 * is WEIGHTS_MAT_HOST) = host's numel floats uploaded (copied), as bf16
 * where mat and be->weights_bf16; frees host where staged (a malloc); -1
 * when out of memory */
static int weights_place(weights_t *w, be_t *be, void **p, void *into, int mat, float *host, int staged,
                         int64_t numel)
{
	size_t esize = sizeof(float);
	int rc = -1;

	if (mat && be->weights_bf16) {
		/* bf16, converted once here: in place over a float32 copy of our
		 * own (element i's two bytes never reach an unread float) */
		const float *f = host;
		uint16_t *h16 = staged ? (uint16_t *)host : malloc(sizeof *h16 * (numel ? numel : 1));
		if (!h16) return -1;
		for (int64_t i = 0; i < numel; i++) h16[i] = safetensors_f32_to_bf16(f[i]);
		host = (float *)h16;
		staged = 1;
		esize = sizeof *h16;
	}
	*p = into;
	if (mat == WEIGHTS_MAT_HOST) {
		if (be->host_alloc(be, esize * (numel ? numel : 1), p) < 0) goto done;
		memcpy(*p, host, esize * numel);
		if (weights_keep(w, be, *p, 1) < 0) { be->host_free(be, *p); goto done; }
	} else {
		if (!into && be->alloc(be, esize * (numel ? numel : 1), p) < 0) goto done;
		if (be->upload(be, *p, host, esize * numel) < 0 || (!into && weights_keep(w, be, *p, 0) < 0)) {
			if (!into) be->free(be, *p);
			goto done;
		}
	}
	rc = 0;
done:
	if (staged) free(host);
	if (rc < 0) *p = NULL;
	return rc;
}

/* *dst = t's binary16 data as it is (be->weights_f16; *half = 1), in an
 * allocation of be's kept by w; x: t's entry, released once copied */
static int weights_get_f16(weights_t *w, be_t *be, float **dst, int *half, const safetensors_tensor_t *t,
                           weights_tensor_t *x, const char *name)
{
	void *p = NULL;
	int64_t bad;

	if (!w->widen_logged) weights_log_path(w, be, widen_best());
	if (be->alloc(be, sizeof(uint16_t) * (size_t)(t->numel ? t->numel : 1), &p) < 0) goto oom;
	if ((bad = widen_copy_f16(t, p)) >= 0) {
		log_error("%s: tensor '%s' holds %s at element %lld: the weights are damaged", w->path, name,
		          ((const uint16_t *)p)[bad] & 0x3ff ? "NaN" : "an infinity", (long long)bad);
		be->free(be, p);
		return -1;
	}
	if (weights_keep(w, be, p, 0) < 0) { be->free(be, p); goto oom; }
	weights_release(w, x);
	if (w->drop_cache) safetensors_drop_cache(w->st, t);
	*dst = p;
	if (half) *half = 1;
	return 0;
oom:
	log_error("%s: cannot place tensor '%s' (%lld binary16 values) on %s", w->path, name,
	          (long long)t->numel, be->name);
	return -1;
}

/* mat: WEIGHTS_*; into: where its data goes in backend memory (inside a
 * group's allocation, owned by w), NULL: an allocation of its own (the
 * only kind a WEIGHTS_MAT_F16 matrix may be); *half (or NULL) = 1 where it stayed binary16 */
static int weights_vget(weights_t *w, be_t *be, float **dst, int *half, int optional, int mat, void *into, int nd,
                        const int64_t *shape, const char *fmt, va_list ap)
{
	char name[256], want[96], have[96];
	const int64_t *hs;
	int hnd = 0;
	const safetensors_tensor_t *t = NULL;
	weights_tensor_t *x = NULL;
	weights_entry_t *m = NULL;
	float *host = NULL;
	void *p = NULL;
	int64_t numel = 1;
	int fresh = 0;   /* not asked for before */

	*dst = NULL;
	if (half) *half = 0;
	vsnprintf(name, sizeof name, fmt, ap);
	if (w->tt) {
		if ((x = weights_find(w, name))) {
			t = x->t;
			hs = t->shape;
			hnd = t->nd;
			fresh = !x->used;
			x->used = 1;
		}
	} else {
		for (int i = 0; i < w->ne && !m; i++)
			if (!strcmp(w->e[i].name, name)) m = &w->e[i];
		if (m) { hs = m->shape; hnd = m->nd; fresh = !m->used; m->used = 1; }
	}
	if (!t && !m && w->recording) {
		if (optional) return 0;
		if (weights_record(w, name, nd, shape) == 0) return 0;
		log_error("%s: out of memory recording '%s'", w->path, name);
		return -1;
	}
	if (!t && !m) {
		if (optional) return 0;
		log_error("%s: tensor '%s' missing", w->path, name);
		return -1;
	}
	int same = hnd == nd;
	for (int i = 0; same && i < nd; i++) same = hs[i] == shape[i];
	if (!same) {
		weights_shape_str(want, sizeof want, nd, shape);
		weights_shape_str(have, sizeof have, hnd, hs);
		log_error("%s: tensor '%s' has shape %s, the config needs %s", w->path, name, have, want);
		return -1;
	}
	for (int i = 0; i < nd; i++) numel *= shape[i];
	if (fresh) {
		w->f32_bytes += (int64_t)sizeof(float) * numel;
		if (mat) w->mat_elems += numel;
		if (mat == WEIGHTS_MAT_F16 && t && t->dtype == SAFETENSORS_F16) w->half_elems += numel;
	}
	if (!t || !be) return 0;
	if (t->dtype != SAFETENSORS_F32 && t->dtype != SAFETENSORS_F16 && t->dtype != SAFETENSORS_BF16 && t->dtype != SAFETENSORS_F64) {
		log_error("%s: tensor '%s' has dtype %s, expected a float type", w->path, name,
		          safetensors_dtype_name(t->dtype));
		return -1;
	}
	if (mat == WEIGHTS_MAT_F16 && be->weights_f16 && t->dtype == SAFETENSORS_F16 && !into)
		return weights_get_f16(w, be, dst, half, t, x, name);
	if (mat == WEIGHTS_MAT_HOST && (into || !be_supports(be, BE_OP_FETCH)))
		return log_error("%s: tensor '%s': %s holds no weights in host memory", w->path, name, be->name), -1;
	/* on the CPU (backend memory is host memory) straight into the final
	 * buffer; elsewhere, and for matrices held as bf16, staged on the host */
	int direct = be->host_mem && !(mat && be->weights_bf16);
	int staged = 0;   /* host is a malloc of ours */
	if (direct) {
		if (into) p = into;
		else if (be->alloc(be, sizeof(float) * (numel ? numel : 1), &p) < 0) goto oom;
		host = p;
	} else if (t->dtype == SAFETENSORS_F32 && ((uintptr_t)t->data & 3) == 0) {
		host = (float *)t->data;
	} else if (!(host = malloc(sizeof(float) * (numel ? numel : 1)))) {
		goto oom;
	} else {
		staged = 1;
	}
	int64_t bad = weights_widen(w, be, t, host, host != t->data);
	if (bad >= 0) {
		log_error("%s: tensor '%s' holds %s at element %lld: the weights are damaged", w->path, name,
		          isnan(host[bad]) ? "NaN" : "an infinity", (long long)bad);
		if (staged) free(host);
		if (direct && !into) be->free(be, p);
		return -1;
	}
	if (direct) {
		if (!into && weights_keep(w, be, p, 0) < 0) { be->free(be, p); goto oom; }
	} else if (weights_place(w, be, &p, into, mat, host, staged, numel) < 0) {
		goto oom;
	}
	weights_release(w, x);   /* copied */
	if (w->drop_cache) safetensors_drop_cache(w->st, t);   /* copied: not needed again */
	*dst = p;
	return 0;
oom:
	log_error("%s: cannot place tensor '%s' (%lld floats) on %s", w->path, name, (long long)numel, be->name);
	return -1;
}

/* weights_get of a Linear matrix (mat 1) or another required tensor, at
 * into (weights_vget) */
static int weights_getm(weights_t *w, be_t *be, float **dst, int *half, int mat, void *into, int nd,
                        const int64_t *shape, const char *fmt, ...) __attribute__((format(printf, 9, 10)));
static int weights_getm(weights_t *w, be_t *be, float **dst, int *half, int mat, void *into, int nd,
                        const int64_t *shape, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = weights_vget(w, be, dst, half, 0, mat, into, nd, shape, fmt, ap);
	va_end(ap);
	return rc;
}

int weights_get(weights_t *w, be_t *be, float **dst, int optional, int nd, const int64_t *shape,
           const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = weights_vget(w, be, dst, NULL, optional, WEIGHTS_ANY, NULL, nd, shape, fmt, ap);
	va_end(ap);
	return rc;
}

/* PREFIX.SUFFIX, a Linear matrix where mat */
static int weights_sub(weights_t *w, be_t *be, float **dst, int *half, int mat, int nd, const int64_t *shape,
                       const char *prefix, const char *suffix)
{
	return weights_getm(w, be, dst, half, mat, NULL, nd, shape, "%s.%s", prefix, suffix);
}

/* the Linear or LayerNorm PREFIX.weight [w0, w1?] (of kind mat: WEIGHTS_*;
 * *half as weights_vget's) and PREFIX.bias [b0] */
static int weights_pair(weights_t *w, be_t *be, float **wp, int *half, float **bp, int mat, int nd,
                        const int64_t *wshape, int64_t bdim, const char *fmt, va_list ap)
{
	char prefix[256];
	int rc;

	vsnprintf(prefix, sizeof prefix, fmt, ap);
	rc = weights_sub(w, be, wp, half, mat, nd, wshape, prefix, "weight");
	if (bp) rc |= weights_sub(w, be, bp, NULL, WEIGHTS_ANY, 1, (int64_t[]){ bdim }, prefix, "bias");
	return rc ? -1 : 0;
}

/* weights_lin and weights_lin_f16: the matrix of kind mat */
static int weights_vlin(weights_t *w, be_t *be, lin_t *l, int mat, int out, int in, int bias,
                        const char *fmt, va_list ap)
{
	float *wp = NULL, *bp = NULL;
	int rc, half = 0;

	*l = (lin_t){ NULL, NULL, out, in, 0, 0 };
	if (!w) return 0;
	rc = weights_pair(w, be, &wp, &half, bias ? &bp : NULL, mat, 2, (int64_t[]){ out, in }, out, fmt, ap);
	*l = (lin_t){ wp, bp, out, in, wp && be->weights_bf16, wp && half };
	return rc;
}

#define WEIGHTS_LIN_FN(NAME, MAT) \
	int NAME(weights_t *w, be_t *be, lin_t *l, int out, int in, int bias, const char *fmt, ...) \
	{ \
		va_list ap; \
		va_start(ap, fmt); \
		int rc = weights_vlin(w, be, l, MAT, out, in, bias, fmt, ap); \
		va_end(ap); \
		return rc; \
	}
WEIGHTS_LIN_FN(weights_lin, WEIGHTS_MAT)
WEIGHTS_LIN_FN(weights_lin_f16, WEIGHTS_MAT_F16)
WEIGHTS_LIN_FN(weights_lin_host, WEIGHTS_MAT_HOST)

int weights_lin_group(weights_t *w, be_t *be, lin_t *all, const weights_part_t *parts, int n, int in,
                      const char *fmt, ...)
{
	char prefix[256], *base = NULL;
	size_t esize = be && be->weights_bf16 ? 2 : sizeof(float);
	int64_t rows = 0;
	va_list ap;
	int rc = 0;

	for (int i = 0; i < n; i++) {
		*parts[i].l = (lin_t){ NULL, NULL, parts[i].out, in, 0, 0 };
		rows += parts[i].out;
	}
	*all = (lin_t){ NULL, NULL, (int)rows, in, 0, 0 };
	if (!w) return 0;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof prefix, fmt, ap);
	va_end(ap);
	if (be && w->tt) {   /* data to place: one allocation for every matrix */
		void *p = NULL;
		if (be->alloc(be, esize * (size_t)(rows * in > 0 ? rows * in : 1), &p) < 0) {
			log_error("%s: cannot place the %lld x %d weights of '%s' on %s", w->path, (long long)rows, in,
			          prefix, be->name);
			return -1;
		}
		if (weights_keep(w, be, p, 0) < 0) {
			be->free(be, p);
			log_error("%s: out of memory placing '%s'", w->path, prefix);
			return -1;
		}
		base = p;
	}
	rows = 0;
	for (int i = 0; i < n; i++) {
		float *wp = NULL, *bp = NULL;
		int out = parts[i].out;
		rc |= weights_getm(w, be, &wp, NULL, WEIGHTS_MAT, base ? base + esize * (size_t)(rows * in) : NULL, 2,
		                   (int64_t[]){ out, in }, "%s.%s.weight", prefix, parts[i].name);
		if (parts[i].bias)
			rc |= weights_getm(w, be, &bp, NULL, WEIGHTS_ANY, NULL, 1, (int64_t[]){ out }, "%s.%s.bias", prefix,
			                   parts[i].name);
		*parts[i].l = (lin_t){ wp, bp, out, in, wp && be->weights_bf16, 0 };
		rows += out;
	}
	*all = (lin_t){ (const float *)base, NULL, (int)rows, in, base && be->weights_bf16, 0 };
	return rc ? -1 : 0;
}

int weights_ln(weights_t *w, be_t *be, ln_t *ln, int d, float eps, const char *fmt, ...)
{
	float *wp = NULL, *bp = NULL;
	va_list ap;
	int rc;

	*ln = (ln_t){ NULL, NULL, d, eps };
	if (!w) return 0;
	va_start(ap, fmt);
	rc = weights_pair(w, be, &wp, NULL, &bp, WEIGHTS_ANY, 1, (int64_t[]){ d }, d, fmt, ap);
	va_end(ap);
	*ln = (ln_t){ wp, bp, d, eps };
	return rc;
}

static int weights_ignored(const char *name, const char *const *ignore)
{
	for (; ignore && *ignore; ignore++)
		if (!strncmp(name, *ignore, strlen(*ignore))) return 1;
	return 0;
}

int weights_unused(const weights_t *w, const char *const *ignore)
{
	int n = 0;
	if (w->tt) {
		for (int i = 0; i < w->ntt; i++)
			if (!w->tt[i].used && !weights_ignored(w->tt[i].name, ignore)) {
				log_debug("%s: tensor '%s' is not used by the model", w->path, w->tt[i].name);
				n++;
			}
	} else {
		for (int i = 0; i < w->ne; i++)
			if (!w->e[i].used && !weights_ignored(w->e[i].name, ignore)) {
				log_debug("%s: tensor '%s' is not used by the model", w->path, w->e[i].name);
				n++;
			}
	}
	return n;
}
