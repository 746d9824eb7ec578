/* torch_zip.c - PyTorch zip checkpoints: libzip for the container, the
 * central directory for where stored entries lie, the state dict's tensors
 * from the pickle (read by torch_pickle.c; see torch_zip.h). */
#include "io/torch_zip.h"

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

#include "util/log.h"
#include "io/torch_pickle.h"

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
	torch_pickle_t    pk;
};

int torch_zip_pickle_check(const void *p, size_t n, const char *what)
{
	torch_pickle_t pk = { .path = what, .p = p, .len = n };
	int rc = torch_pickle_run(&pk);

	torch_pickle_free(&pk);
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
		if (torch_pickle_le(m + i, 4) == 0x06054b50) { eocd = i; break; }
	if (eocd == SIZE_MAX) goto bad;
	count = torch_pickle_le(m + eocd + 10, 2);
	cdsize = torch_pickle_le(m + eocd + 12, 4);
	cd = torch_pickle_le(m + eocd + 16, 4);
	if (count == 0xffff || cdsize == 0xffffffffu || cd == 0xffffffffu) {
		size_t z;
		if (eocd < 20 || torch_pickle_le(m + eocd - 20, 4) != 0x07064b50) goto bad;
		z = torch_pickle_le(m + eocd - 20 + 8, 8);
		if (z > size - 56 || torch_pickle_le(m + z, 4) != 0x06064b50) goto bad;
		count = torch_pickle_le(m + z + 32, 8);
		cdsize = torch_pickle_le(m + z + 40, 8);
		cd = torch_pickle_le(m + z + 48, 8);
	}
	if (cd > size || cdsize > size - cd || count > cdsize / 46) goto bad;
	if (!(tz->ent = calloc(count + 1, sizeof *tz->ent))) goto oom;
	o = cd;
	for (size_t e = 0; e < count; e++) {
		torch_zip_entry_t *x = &tz->ent[e];
		size_t nlen, xlen, clen, lho, p;
		if (o > cd + cdsize - 46 || torch_pickle_le(m + o, 4) != 0x02014b50) goto bad;
		x->method = (int)torch_pickle_le(m + o + 10, 2);
		x->csize = torch_pickle_le(m + o + 20, 4);
		x->usize = torch_pickle_le(m + o + 24, 4);
		nlen = torch_pickle_le(m + o + 28, 2);
		xlen = torch_pickle_le(m + o + 30, 2);
		clen = torch_pickle_le(m + o + 32, 2);
		lho = torch_pickle_le(m + o + 42, 4);
		if (46 + nlen + xlen + clen > cd + cdsize - o) goto bad;
		if (!(x->name = strndup((const char *)m + o + 46, nlen))) goto oom;
		tz->nent++;
		/* zip64 extended information: the fields that overflowed, in order */
		for (p = o + 46 + nlen; p + 4 <= o + 46 + nlen + xlen;) {
			size_t id = torch_pickle_le(m + p, 2), sz = torch_pickle_le(m + p + 2, 2), q = p + 4;
			if (sz > o + 46 + nlen + xlen - q) goto bad;
			if (id == 1) {
				size_t *f[3] = { &x->usize, &x->csize, &lho };
				size_t lim[3] = { 0xffffffffu, 0xffffffffu, 0xffffffffu };
				for (int k = 0; k < 3; k++) {
					if (*f[k] != lim[k]) continue;
					if (q + 8 > p + 4 + sz) goto bad;
					*f[k] = torch_pickle_le(m + q, 8);
					q += 8;
				}
			}
			p += 4 + sz;
		}
		if (lho > size - 30 || torch_pickle_le(m + lho, 4) != 0x04034b50) goto bad;
		x->data = lho + 30 + torch_pickle_le(m + lho + 26, 2) + torch_pickle_le(m + lho + 28, 2);
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
/* the state dict: the saved dict if its values are tensors, else its "model" / "state_dict" */
static const torch_pickle_val_t *torch_zip_state_dict(const torch_pickle_val_t *top)
{
	static const char *const keys[] = { "model", "state_dict" };
	int all = top->kind == TPV_DICT && top->n > 0;

	for (size_t i = 1; all && i < top->n; i += 2) all = top->item[i]->kind == TPV_TENSOR;
	if (all) return top;
	for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
		const torch_pickle_val_t *d = top->kind == TPV_DICT ? torch_pickle_dict_get(top, keys[k]) : NULL;
		if (d && d->kind == TPV_DICT) return d;
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
static int torch_zip_tensor(torch_zip_t *tz, int i, const torch_pickle_val_t *key, const torch_pickle_val_t *v,
                            torch_zip_src_t *src)
{
	safetensors_tensor_t *t = &tz->t[i];
	const torch_pickle_val_t *s;
	const torch_zip_entry_t *e;
	char ename[512], kname[128];
	size_t esize, sbytes;
	int64_t numel = 1, expect = 1;

	if (key->kind != TPV_STR || strlen(key->s) != key->slen || !key->slen) {
		log_error("%s: state dict key %d is not a name", tz->path, i);
		return -1;
	}
	if (!(tz->tname[i] = strdup(key->s))) return -1;
	t->name = tz->tname[i];
	if (v->kind != TPV_TENSOR) {
		log_error("%s: state dict entry '%s' is a %s, not a tensor", tz->path, t->name, torch_pickle_kind_name(v->kind));
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
	torch_pickle_printable(kname, sizeof kname, s->s, s->slen);
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
			torch_pickle_printable(kname, sizeof kname, tz->ent[e].name, strlen(tz->ent[e].name));
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

/* path mapped (tz->map) and opened as a zip archive (tz->za); 0, or -1
 * after logging */
static int torch_zip_map(torch_zip_t *tz, const char *path)
{
	struct stat sb;
	int fd, zerr = 0;

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
	/* zip_fdopen owns fd now */
	return 0;
fail:
	if (fd >= 0) close(fd);
	return -1;
}

/* tz->prefix: the folder of the one PREFIX/data.pkl; its byteorder, if
 * any, little-endian.  0, or -1 after logging */
static int torch_zip_find_pickle(torch_zip_t *tz, const char *path)
{
	char *name = NULL, *bo = NULL;
	size_t n;
	int rc = -1;

	for (size_t i = 0; i < tz->nent; i++) {
		const char *s = tz->ent[i].name, *sl = strchr(s, '/');
		if (!sl || strcmp(sl + 1, "data.pkl")) continue;
		if (tz->prefix) {
			log_error("%s: more than one data.pkl in the archive", path);
			goto done;
		}
		if (!(tz->prefix = strndup(s, (size_t)(sl + 1 - s)))) goto done;
	}
	if (!tz->prefix) {
		log_error("%s: a zip archive without PREFIX/data.pkl: not a PyTorch checkpoint", path);
		goto done;
	}
	if (asprintf(&name, "%sbyteorder", tz->prefix) < 0) { name = NULL; goto done; }
	if (torch_zip_entry(tz, name)) {
		if (!(bo = torch_zip_read_entry(tz, name, &n))) goto done;
		if (strcmp(bo, "little")) {
			log_error("%s: byte order '%.16s' (only little-endian checkpoints are read)", path, bo);
			goto done;
		}
	}
	rc = 0;
done:
	free(name);
	free(bo);
	return rc;
}

torch_zip_t *torch_zip_open(const char *path)
{
	torch_zip_t *tz = calloc(1, sizeof *tz);
	const torch_pickle_val_t *sd, *cfg;
	char *pkl = NULL, *name = NULL;
	torch_zip_src_t *src = NULL;
	size_t plen, n;

	if (!tz || !(tz->path = strdup(path))) {
		log_error("%s: out of memory", path);
		goto fail;
	}
	if (torch_zip_map(tz, path) < 0) goto fail;
	if (torch_zip_directory(tz) < 0) goto fail;
	if (torch_zip_find_pickle(tz, path) < 0) goto fail;
	if (asprintf(&name, "%sdata.pkl", tz->prefix) < 0) { name = NULL; goto fail; }
	if (!(pkl = torch_zip_read_entry(tz, name, &plen))) goto fail;
	tz->pk.path = tz->path;
	tz->pk.p = (const unsigned char *)pkl;
	tz->pk.len = plen;
	if (torch_pickle_run(&tz->pk) < 0) goto fail;
	if (!(sd = torch_zip_state_dict(tz->pk.result))) {
		log_error("%s: the saved object is a %s, not a state dict (nor a dict with one under \"model\")", path,
		          torch_pickle_kind_name(tz->pk.result->kind));
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
	if (tz->pk.result != sd && (cfg = torch_pickle_dict_get(tz->pk.result, "cfg"))) {
		json_t *j;
		tz->pk.budget = tz->pk.nall < 100000 ? 4 * tz->pk.nall + 16 : 400000;
		j = torch_pickle_json(&tz->pk, cfg, 0);
		if (!tz->pk.budget) log_warn("%s: its \"cfg\" is too large to read; ignored", path);
		else if (j && (json_is_object(j) || json_is_array(j))) tz->cfg_json = json_dumps(j, JSON_COMPACT);
		json_decref(j);
	}
	free(name);
	free(pkl);
	free(src);
	torch_pickle_free(&tz->pk);
	return tz;
fail:
	free(name);
	free(pkl);
	free(src);
	torch_zip_close(tz);
	return NULL;
}

void torch_zip_close(torch_zip_t *tz)
{
	if (!tz) return;
	torch_pickle_free(&tz->pk);
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
