/* weights.c - weights from safetensors or a manifest (see weights.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "util/hash.h"
#include "util/log.h"
#include "io/safetensors.h"
#include "model/weights.h"

typedef struct {
	const char *name;
	int         nd;
	int64_t     shape[SAFETENSORS_MAX_DIMS];
	int         used;
} weights_entry_t;

struct wt {
	char       *path;
	safetensors_t       *st;        /* NULL for a manifest */
	json_t     *manifest;  /* owns manifest names */
	weights_entry_t *e;         /* manifest or recorded entries */
	int         ne, cape;
	int         recording; /* weights_open_record: e[].name owned, appended */
	char       *used;      /* [safetensors_count] for a file */
	cfg_t       cfg;
	char        fp[17];
	int64_t     f32_bytes; /* float32 bytes of the tensors asked for */
	struct { be_t *be; void *p; } *buf;
	int         nbuf, capbuf;
};

/* FNV-1a, 64 bits (weights.h) */
uint64_t weights_fnv(uint64_t h, const void *data, size_t n)
{
	for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)data)[i]) * 1099511628211ull;
	return h;
}

/* config.json beside PATH, else __metadata__["config"] */
static int weights_load_cfg(weights_t *w)
{
	char *dir = strdup(w->path), *slash, *cpath = NULL;
	const char *meta;
	FILE *f;
	int rc = -1;

	if (!dir) return -1;
	slash = strrchr(dir, '/');
	if (slash) slash[1] = 0;
	if (asprintf(&cpath, "%sconfig.json", slash ? dir : "") < 0) cpath = NULL;
	if (cpath && (f = fopen(cpath, "r"))) {
		fclose(f);
		rc = cfg_load(&w->cfg, cpath);
	} else if ((meta = safetensors_meta(w->st, "config"))) {
		rc = cfg_parse(&w->cfg, meta, w->path);
	} else {
		log_error("%s: no config.json beside the weights and no \"config\" in its metadata", w->path);
	}
	free(cpath);
	free(dir);
	return rc;
}

/* The fingerprint cache: $ESMBATCH_FP_CACHE, else
 * $XDG_CACHE_HOME/esmbatch/fingerprints, else ~/.cache/esmbatch/fingerprints;
 * lines "DEV INO SIZE MTIME_NS CTIME_NS DIGEST".  NULL when none can be named. */
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

/* the digest of every byte of w's file (safetensors_digest), from the
 * cache when its key matches, else computed and appended to the cache (a
 * cache that cannot be read or written only costs the time) */
static uint64_t weights_file_digest(weights_t *w)
{
	char key[160], line[256], *cp = weights_cache_path(0);
	unsigned long long d;
	uint64_t h;
	FILE *f;
	size_t kn;
	int hit = 0;

	if (weights_cache_key(w->path, key, sizeof key) < 0) { free(cp); return safetensors_digest(w->st, 0); }
	kn = strlen(key);
	if (cp && (f = fopen(cp, "r"))) {
		while (fgets(line, sizeof line, f))
			if (!strncmp(line, key, kn) && line[kn] == ' ' && sscanf(line + kn + 1, "%llx", &d) == 1)
				hit = 1, h = d;   /* the latest line wins */
		fclose(f);
	}
	free(cp);
	if (hit) {
		log_debug("%s: fingerprint digest from the cache", w->path);
		return h;
	}
	h = safetensors_digest(w->st, 0);
	/* one short append; a cache grown past 1 MB (some 10000 files) starts afresh */
	struct stat cs;
	if ((cp = weights_cache_path(1)) &&
	    (f = fopen(cp, stat(cp, &cs) == 0 && cs.st_size > (1 << 20) ? "w" : "a"))) {
		fprintf(f, "%s %016llx\n", key, (unsigned long long)h);
		fclose(f);
	}
	free(cp);
	return h;
}

/* the fingerprint of a file: every byte of it (header, names, shapes, all
 * tensor data), then the effective config (the parsed cfg_t, whether it
 * came from config.json or the metadata) */
static void weights_fp_file(weights_t *w)
{
	uint64_t h = weights_file_digest(w);
	h = hash_bytes(h, &w->cfg, sizeof w->cfg);   /* cfg_parse zeroes it first */
	snprintf(w->fp, sizeof w->fp, "%016llx", (unsigned long long)h);
}

static weights_t *weights_open_file(const char *path, int fingerprint)
{
	weights_t *w = calloc(1, sizeof *w);

	if (!w || !(w->path = strdup(path))) goto fail;
	if (!(w->st = safetensors_open(path))) goto fail;
	if (!(w->used = calloc(safetensors_count(w->st) + 1, 1))) goto fail;
	if (weights_load_cfg(w) < 0) goto fail;
	if (fingerprint) weights_fp_file(w);
	else strcpy(w->fp, "-");
	return w;
fail:
	weights_close(w);
	return NULL;
}

weights_t *weights_open(const char *path) { return weights_open_file(path, 1); }
weights_t *weights_open_shapes(const char *path) { return weights_open_file(path, 0); }

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
	if (!(ctext = json_dumps(cfgj, 0)) || cfg_parse(&w->cfg, ctext, path) < 0) goto fail;
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
	if (cfg_parse(&w->cfg, cfg_json, what) < 0) goto fail;
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
	if (w->ne == w->cape) {
		int cap = w->cape ? 2 * w->cape : 256;
		weights_entry_t *ne = realloc(w->e, cap * sizeof *ne);
		if (!ne) return -1;
		w->e = ne;
		w->cape = cap;
	}
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
	for (int i = 0; i < w->nbuf; i++) w->buf[i].be->free(w->buf[i].be, w->buf[i].p);
	free(w->buf);
	safetensors_close(w->st);
	json_decref(w->manifest);
	free(w->e);
	free(w->used);
	free(w->path);
	free(w);
}

const cfg_t *weights_cfg(const weights_t *w) { return &w->cfg; }
const char *weights_fingerprint(const weights_t *w) { return w->fp; }
int64_t     weights_f32_bytes(const weights_t *w) { return w->f32_bytes; }
const char *weights_path(const weights_t *w) { return w->path; }

static void weights_shape_str(char *buf, size_t n, int nd, const int64_t *shape)
{
	size_t o = 0;
	o += snprintf(buf + o, n - o, "[");
	for (int i = 0; i < nd && o < n; i++)
		o += snprintf(buf + o, n - o, i ? ", %lld" : "%lld", (long long)shape[i]);
	if (o < n) snprintf(buf + o, n - o, "]");
}

static int weights_vget(weights_t *w, be_t *be, float **dst, int optional, int nd, const int64_t *shape,
                   const char *fmt, va_list ap)
{
	char name[256], want[96], have[96];
	const int64_t *hs;
	int hnd = 0;
	const safetensors_tensor_t *t = NULL;
	weights_entry_t *m = NULL;
	float *host = NULL;
	void *p = NULL;
	int64_t numel = 1;
	int fresh = 0;   /* not asked for before */

	*dst = NULL;
	vsnprintf(name, sizeof name, fmt, ap);
	if (w->st) {
		t = safetensors_find(w->st, name);
		if (t) {
			hs = t->shape;
			hnd = t->nd;
			fresh = !w->used[t - safetensors_at(w->st, 0)];
			w->used[t - safetensors_at(w->st, 0)] = 1;
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
	if (fresh) w->f32_bytes += (int64_t)sizeof(float) * numel;
	if (!t || !be) return 0;
	if (t->dtype != SAFETENSORS_F32 && t->dtype != SAFETENSORS_F16 && t->dtype != SAFETENSORS_BF16 && t->dtype != SAFETENSORS_F64) {
		log_error("%s: tensor '%s' has dtype %s, expected a float type", w->path, name,
		          safetensors_dtype_name(t->dtype));
		return -1;
	}
	if (t->dtype == SAFETENSORS_F32 && ((uintptr_t)t->data & 3) == 0) {
		host = (float *)t->data;
	} else if (!(host = malloc(sizeof(float) * (numel ? numel : 1)))) {
		log_error("%s: out of memory converting '%s'", w->path, name);
		return -1;
	} else {
		safetensors_to_f32(t, host);
	}
	if (w->nbuf == w->capbuf) {
		int cap = w->capbuf ? 2 * w->capbuf : 256;
		void *nb = realloc(w->buf, cap * sizeof *w->buf);
		if (!nb) goto oom;
		w->buf = nb;
		w->capbuf = cap;
	}
	if (be->alloc(be, sizeof(float) * (numel ? numel : 1), &p) < 0) goto oom;
	if (be->upload(be, p, host, sizeof(float) * numel) < 0) {
		be->free(be, p);
		goto oom;
	}
	w->buf[w->nbuf].be = be;
	w->buf[w->nbuf].p = p;
	w->nbuf++;
	if (host != t->data) free(host);
	safetensors_release(w->st, t);   /* copied: its file pages leave the resident set */
	*dst = p;
	return 0;
oom:
	if (host != t->data) free(host);
	log_error("%s: cannot place tensor '%s' (%lld floats) on %s", w->path, name, (long long)numel, be->name);
	return -1;
}

int weights_get(weights_t *w, be_t *be, float **dst, int optional, int nd, const int64_t *shape,
           const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = weights_vget(w, be, dst, optional, nd, shape, fmt, ap);
	va_end(ap);
	return rc;
}

/* PREFIX.SUFFIX */
static int weights_sub(weights_t *w, be_t *be, float **dst, int nd, const int64_t *shape,
                  const char *prefix, const char *suffix)
{
	return weights_get(w, be, dst, 0, nd, shape, "%s.%s", prefix, suffix);
}

/* the Linear or LayerNorm PREFIX.weight [w0, w1?] and PREFIX.bias [b0] */
static int weights_pair(weights_t *w, be_t *be, float **wp, float **bp, int nd, const int64_t *wshape,
                   int64_t bdim, const char *fmt, va_list ap)
{
	char prefix[256];
	int rc;

	vsnprintf(prefix, sizeof prefix, fmt, ap);
	rc = weights_sub(w, be, wp, nd, wshape, prefix, "weight");
	if (bp) rc |= weights_sub(w, be, bp, 1, (int64_t[]){ bdim }, prefix, "bias");
	return rc ? -1 : 0;
}

int weights_lin(weights_t *w, be_t *be, lin_t *l, int out, int in, int bias, const char *fmt, ...)
{
	float *wp = NULL, *bp = NULL;
	va_list ap;
	int rc;

	*l = (lin_t){ NULL, NULL, out, in };
	if (!w) return 0;
	va_start(ap, fmt);
	rc = weights_pair(w, be, &wp, bias ? &bp : NULL, 2, (int64_t[]){ out, in }, out, fmt, ap);
	va_end(ap);
	*l = (lin_t){ wp, bp, out, in };
	return rc;
}

int weights_ln(weights_t *w, be_t *be, ln_t *ln, int d, float eps, const char *fmt, ...)
{
	float *wp = NULL, *bp = NULL;
	va_list ap;
	int rc;

	*ln = (ln_t){ NULL, NULL, d, eps };
	if (!w) return 0;
	va_start(ap, fmt);
	rc = weights_pair(w, be, &wp, &bp, 1, (int64_t[]){ d }, d, fmt, ap);
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
	if (w->st) {
		for (int i = 0; i < safetensors_count(w->st); i++)
			if (!w->used[i] && !weights_ignored(safetensors_at(w->st, i)->name, ignore)) {
				log_debug("%s: tensor '%s' is not used by the model", w->path, safetensors_at(w->st, i)->name);
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
