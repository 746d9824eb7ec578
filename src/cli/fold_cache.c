/* fold_cache.c - fold --cache (fold_run.h): before a record is queued,
 * its structure taken from the store (io/struct_cache.h) and written as
 * a fold's would be; after a whole record is folded and written, its
 * structure added to the store.
 *
 * The key is everything that decides the model's output bits: the
 * sequence as the model folds it (the encoding's residue letters, X for
 * any other, ':' between chains: case and the X rule applied, the linker
 * implied), the weights' fingerprint and their config, the trunk passes,
 * the chunk size the fold ran at, and the device's precision and numerics
 * (be->numerics: the kernels, the BLAS and its core, the card).  The
 * record's name, --format, --pae and the multimer numbering are not in it:
 * the entry holds the model's outputs (atom positions, masks, pLDDT, PAE,
 * pTM), not files, and a hit is written through fold_write_outputs under
 * the record's own name and options.  A lookup tries each kind of device
 * of the run (any of them could have folded the record) at the chunk the
 * scheduler plans the record at first (sched_first_chunk; chunking changes
 * the sums); a fold that had to run at a smaller chunk is stored under
 * that one.  The entry also holds the fold's seconds and memory figures,
 * which the summary row of a hit repeats (its source column says cache).
 * Fragments of a split record are not stored.  --force and --dump-tensors
 * fold every record (they still add to the store).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/hash.h"
#include "util/log.h"
#include "io/struct_cache.h"
#include "protein/residue.h"
#include "cli/fold_run.h"

/* an entry's blob: this, then atom37 [L, 37, 3], atom37_mask [L, 37],
 * plddt [L, 37], pae [L, L] as float32 */
typedef struct {
	int32_t  L, passes, chunk, version;
	float    ptm, max_pae, mean_plddt, unused;
	double   secs;
	uint64_t predicted, allocated, reserved;
	int64_t  device_used, growth;
} fold_cache_head_t;

#define FOLD_CACHE_VERSION 1

/* the device that writes a hit: named for the log */
static be_t fold_cache_be = { .name = "the cache" };

/* the sequence of encoding t as the model folds it: its residues' letters
 * (X for any other), ':' between chains, linkers left out; NULL (no memory) */
static char *fold_cache_seq(const tok_t *t)
{
	char *s = malloc((size_t)t->L + t->nchains + 1);
	int n = 0, last = -1;

	if (!s) return NULL;
	for (int i = 0; i < t->L; i++) {
		if (t->linker_mask[i] == 0) continue;
		if (last >= 0 && t->chain[i] != last) s[n++] = ':';
		last = t->chain[i];
		s[n++] = residue_restypes[t->aatype[i] >= 0 && t->aatype[i] < 20 ? t->aatype[i] : 20];
	}
	s[n] = 0;
	return s;
}

/* the key of encoding t folded on be in passes trunk passes at chunk, or
 * NULL (no memory) */
static char *fold_cache_key(const fold_run_t *r, const tok_t *t, const be_t *be, int passes,
                            int chunk)
{
	const char *cfg = weights_cfg_json(r->wt);
	char *seq = fold_cache_seq(t), *key = NULL;
	unsigned long long ch = hash_bytes(0, cfg ? cfg : "", cfg ? strlen(cfg) : 0);

	if (seq && asprintf(&key, "esmbatch structure %d\nsequence %s\nweights %s\nconfig %016llx\n"
	                    "passes %d\nchunk %d\nprecision %s\nnumerics %s\n", FOLD_CACHE_VERSION,
	                    seq, weights_fingerprint(r->wt), ch, passes, chunk, be->precision,
	                    be->numerics ? be->numerics : be->name) < 0)
		key = NULL;
	free(seq);
	return key;
}

int fold_cache_open(fold_run_t *r)
{
	const opt_t *o = r->o;

	if (!o->cache) return 0;
	if (!(r->cache = cache_open(o->cache, o->cache_max))) return -1;
	log_info("cache: %s%s", o->cache, o->dump_tensors || o->force ? " (written, not read: "
	         "--force and --dump-tensors fold every record)" : "");
	return 0;
}

void fold_cache_close(fold_run_t *r)
{
	cache_close(r->cache);
	r->cache = NULL;
}

/* out and the figures from blob b[0..n) for an encoding of L residues;
 * 0, or -1 when it is not one (another version, another length) */
static int fold_cache_unpack(const unsigned char *b, size_t n, int L, model_out_t *out,
                             fold_cache_head_t *h)
{
	size_t L37 = (size_t)L * 37;

	if (n < sizeof *h) return -1;
	memcpy(h, b, sizeof *h);
	if (h->version != FOLD_CACHE_VERSION || h->L != L ||
	    n != sizeof *h + sizeof(float) * (L37 * 3 + L37 * 2 + (size_t)L * L))
		return -1;
	float *f = (float *)(b + sizeof *h);   /* sizeof *h is a multiple of 8 */
	*out = (model_out_t){ .L = L, .atom37 = f, .atom37_mask = f + L37 * 3, .plddt = f + L37 * 4,
	                      .pae = f + L37 * 5, .mean_plddt = h->mean_plddt, .ptm = h->ptm,
	                      .max_pae = h->max_pae, .passes = h->passes, .device_used = h->device_used };
	return 0;
}

/* record i written from blob b[0..n) of encoding t: its files, its row;
 * 1 (an output error failed it, logged), or 0 when the blob is not for it */
static int fold_cache_write(fold_run_t *r, int i, const tok_t *t, const unsigned char *b, size_t n)
{
	fold_rec_t *x = &r->rec[i];
	fold_cache_head_t h;
	model_out_t out;
	char reason[256] = "";

	if (fold_cache_unpack(b, n, t->L, &out, &h) < 0) {
		log_warn("%s: its cache entry is of another version or length: folded", x->job.name);
		return 0;
	}
	sched_item_t it = { .rec = i, .start = 0, .len = (int)strlen(x->job.seq), .chunk = h.chunk,
	                    .state = SCHED_FOLDED };
	sched_dev_t d = { .be = &fold_cache_be };
	mem_fig_t fig = { h.predicted, h.allocated, h.reserved, h.device_used, h.growth };
	x->cached = 1;
	r->todo++;
	r->res_todo += x->job.len;
	if (fold_write_outputs(r, &it, &d, t, &out, &fig, h.secs, reason, sizeof reason) < 0) {
		it.state = SCHED_FAILED;
		snprintf(it.reason, sizeof it.reason, "%s", reason);
	}
	if (r->jsonl) fprintf(r->jsonl, "{\"event\":\"cache\",\"record\":%d}\n", i);
	fold_finish(r, i, &it, 1);   /* an output error fails the record, as a fold's */
	r->ncached++;
	return 1;
}

int fold_cache_take(fold_run_t *r, int i)
{
	fold_rec_t *x = &r->rec[i];
	const opt_t *o = r->o;
	int passes = o->num_recycles >= 0 ? o->num_recycles + 1 : weights_cfg(r->wt)->max_recycles;
	int chunk = r->sched ? sched_first_chunk(r->sched, (int)strlen(x->job.seq)) : o->chunk_size;
	tok_t t = { 0 };
	int rc = 0;

	if (!r->cache || o->force || o->dump_tensors) return 0;
	if (tok_encode(&t, x->job.seq, weights_cfg(r->wt)) < 0) return 0;   /* the fold says why */
	for (int d = 0; d < r->ndev && rc == 0; d++) {
		const be_t *be = r->dev[d].be;
		void *b = NULL;
		size_t n = 0;
		char *key;
		int seen = 0;
		/* each kind of device once */
		for (int e = 0; e < d && !seen; e++)
			seen = !strcmp(r->dev[e].be->precision, be->precision) &&
			       !strcmp(r->dev[e].be->numerics ? r->dev[e].be->numerics : r->dev[e].be->name,
			               be->numerics ? be->numerics : be->name);
		if (seen) continue;
		if (!(key = fold_cache_key(r, &t, be, passes, chunk))) {
			rc = -1;
			break;
		}
		if ((rc = cache_get(r->cache, key, &b, &n)) > 0) rc = fold_cache_write(r, i, &t, b, n);
		free(b);
		free(key);
	}
	tok_free(&t);
	return rc;
}

void fold_cache_add(fold_run_t *r, const sched_item_t *it, const sched_dev_t *d, const tok_t *t,
                    const model_out_t *out, const mem_fig_t *fig, double secs)
{
	size_t L = (size_t)out->L, L37 = L * 37;
	size_t n = sizeof(fold_cache_head_t) + sizeof(float) * (L37 * 5 + L * L);
	unsigned char *b;
	char *key;

	if (!r->cache || d->be == &fold_cache_be) return;
	if (!(key = fold_cache_key(r, t, d->be, out->passes, it->chunk)) || !(b = malloc(n))) {
		log_warn("%s: not stored in the cache (out of memory)", r->rec[it->rec].job.name);
		free(key);
		return;
	}
	fold_cache_head_t h = { .L = out->L, .passes = out->passes, .chunk = it->chunk,
	                        .version = FOLD_CACHE_VERSION, .ptm = out->ptm, .max_pae = out->max_pae,
	                        .mean_plddt = out->mean_plddt, .secs = secs,
	                        .predicted = fig->predicted, .allocated = fig->allocated,
	                        .reserved = fig->reserved, .device_used = fig->device_used,
	                        .growth = fig->growth };
	float *f = (float *)(b + sizeof h);
	memcpy(b, &h, sizeof h);
	memcpy(f, out->atom37, sizeof(float) * L37 * 3);
	memcpy(f + L37 * 3, out->atom37_mask, sizeof(float) * L37);
	memcpy(f + L37 * 4, out->plddt, sizeof(float) * L37);
	memcpy(f + L37 * 5, out->pae, sizeof(float) * L * L);
	cache_put(r->cache, key, b, n);
	free(b);
	free(key);
}
