/* convert.c - `esmbatch convert` and `esmbatch version --weights` (see convert.h). */
#include "cli/convert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "model/weights.h"

/* fingerprints (weights_fingerprint) of the published checkpoints, as read
 * by esmbatch.  Empty until someone with the files fills it in: a
 * fingerprint is printed by `esmbatch version --weights FILE`. */
static const struct { const char *fingerprint, *what; } convert_known[] = {
	{ NULL, NULL }
};

static const char *convert_match(const char *fp)
{
	for (size_t i = 0; convert_known[i].fingerprint; i++)
		if (!strcmp(convert_known[i].fingerprint, fp)) return convert_known[i].what;
	return "unknown";
}

/* config.json beside PATH (its directory) */
static char *convert_cfg_path(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *p = NULL;

	if (asprintf(&p, "%.*sconfig.json", slash ? (int)(slash - path + 1) : 0, path) < 0) return NULL;
	return p;
}

int convert_main(const opt_t *o)
{
	weights_t *w = NULL;
	safetensors_writer_t *sw = NULL;
	atomic_file_t af;
	char *cpath = NULL;
	int code = EXIT_FATAL;

	if (!o->weights || !o->outdir) {
		log_error("convert: give --weights IN and -o OUT.safetensors");
		return EXIT_USAGE;
	}
	/* OUT may not be what is read, nor anything but a regular file */
	if (atomic_file_check(o->outdir) < 0) return EXIT_USAGE;
	if (!(cpath = convert_cfg_path(o->weights))) goto done;
	if (atomic_file_same(o->outdir, o->weights) || atomic_file_same(o->outdir, cpath)) {
		log_error("%s: is the input %s: refused as the output", o->outdir,
		          atomic_file_same(o->outdir, cpath) ? cpath : o->weights);
		free(cpath);
		return EXIT_USAGE;
	}
	free(cpath);
	cpath = NULL;
	if (!(w = weights_open(o->weights))) goto done;
	if (!weights_tensor_count(w)) {
		log_error("%s: no tensors to convert", o->weights);
		goto done;
	}
	if (!(sw = safetensors_writer_init())) goto done;
	for (int i = 0; i < weights_tensor_count(w); i++) {
		const char *name;
		const safetensors_tensor_t *t = weights_tensor(w, i, &name);
		if (safetensors_writer_add(sw, name, t->dtype, t->nd, t->shape, t->data) < 0) {
			log_error("%s: cannot add tensor '%s'", o->outdir, name);
			goto done;
		}
	}
	if (safetensors_writer_add_meta(sw, "format", "pt") < 0 ||
	    safetensors_writer_add_meta(sw, "converted_from", weights_fingerprint(w)) < 0 ||
	    safetensors_writer_save(sw, o->outdir) < 0)
		goto done;
	if (!(cpath = convert_cfg_path(o->outdir))) goto done;
	if (access(cpath, F_OK) == 0) {
		log_info("%s exists: left as it is", cpath);
	} else {
		FILE *f = atomic_file_open(&af, cpath);
		if (!f) goto done;
		fputs(weights_cfg_json(w), f);
		fputc('\n', f);
		if (atomic_file_close(&af, 1) < 0) goto done;
	}
	log_info("%s: %d tensors written (weights %s)", o->outdir, weights_tensor_count(w), weights_fingerprint(w));
	code = EXIT_OK;
done:
	free(cpath);
	safetensors_writer_free(sw);
	weights_close(w);
	return code;
}

int convert_describe(const opt_t *o, FILE *out)
{
	weights_t *w = weights_open(o->weights);
	int64_t params = 0, count[SAFETENSORS_BOOL + 1] = { 0 };

	if (!w) return EXIT_FATAL;
	for (int i = 0; i < weights_tensor_count(w); i++) {
		const char *name;
		const safetensors_tensor_t *t = weights_tensor(w, i, &name);
		params += t->numel;
		count[t->dtype] += t->numel;
	}
	fprintf(out, "weights: %s\n", weights_path(w));
	fprintf(out, "fingerprint: %s\n", weights_fingerprint(w));
	fprintf(out, "matches: %s\n", convert_match(weights_fingerprint(w)));
	fprintf(out, "tensors: %d\n", weights_tensor_count(w));
	fprintf(out, "parameters: %lld\n", (long long)params);
	for (int d = 0; d <= SAFETENSORS_BOOL; d++)
		if (count[d])
			fprintf(out, "dtype %s: %lld elements\n", safetensors_dtype_name((safetensors_dtype_t)d), (long long)count[d]);
	fprintf(out, "model: %d LM layers x %d, %d trunk blocks (c_s %d, c_z %d)\n", weights_cfg(w)->lm_layers,
	        weights_cfg(w)->lm_dim, weights_cfg(w)->trunk_blocks, weights_cfg(w)->c_s, weights_cfg(w)->c_z);
	weights_close(w);
	return EXIT_OK;
}
