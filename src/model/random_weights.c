/* random_weights.c - random weights for any model config (see random_weights.h). */
#include "model/random_weights.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "model/model.h"
#include "model/weights.h"

/* splitmix64: one stream per tensor */
static uint64_t random_weights_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* uniform in (0, 1) */
static double random_weights_unit(uint64_t *s) { return ((random_weights_next(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

/* x: [n] = N(0, sd^2), Box-Muller */
static void random_weights_normal(uint64_t *s, float *x, int64_t n, double sd)
{
	for (int64_t i = 0; i < n; i += 2) {
		double r = sqrt(-2.0 * log(random_weights_unit(s))), a = 2.0 * M_PI * random_weights_unit(s);
		x[i] = (float)(sd * r * cos(a));
		if (i + 1 < n) x[i + 1] = (float)(sd * r * sin(a));
	}
}

static int random_weights_ends(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcmp(s + n - k, suffix);
}

/* x: [numel] values of tensor `name` (rules in random_weights.h) */
static void random_weights_fill(const char *name, int nd, const int64_t *shape, int64_t numel, uint64_t seed,
                    float *x)
{
	uint64_t s = seed;

	for (const char *p = name; *p; p++) s = (s ^ (unsigned char)*p) * 1099511628211ull;
	if (!strcmp(name, "esm_s_combine")) {
		memset(x, 0, sizeof *x * numel);
	} else if (nd >= 2) {
		random_weights_normal(&s, x, numel, sqrt(1.0 / (double)(numel / shape[0] ? numel / shape[0] : 1)));
	} else if (random_weights_ends(name, ".weight")) {
		for (int64_t i = 0; i < numel; i++) x[i] = 1.0f;
	} else {
		random_weights_normal(&s, x, numel, 0.02);
	}
}

int random_weights_write(const char *cfg_json, const char *what, const char *path, uint64_t seed,
             safetensors_dtype_t dtype)
{
	safetensors_writer_t *sw = NULL;
	weights_t *w = NULL;
	model_t m;
	float *x = NULL;
	uint16_t *h = NULL;
	char seedtext[32];
	int rc = -1;

	if (dtype != SAFETENSORS_F32 && dtype != SAFETENSORS_F16 && dtype != SAFETENSORS_BF16) {
		log_error("%s: random weights are written as F32, F16 or BF16", path);
		return -1;
	}
	if (!(w = weights_open_record(cfg_json, what))) return -1;
	if (model_load(&m, w, NULL, 0) < 0) goto done;
	model_free(&m);
	if (!(sw = safetensors_writer_init())) goto oom;
	for (int i = 0; i < weights_count(w); i++) {
		const int64_t *shape;
		int nd;
		const char *name = weights_entry(w, i, &nd, &shape);
		int64_t numel = 1;
		const void *data;

		for (int d = 0; d < nd; d++) numel *= shape[d];
		free(x);
		free(h);
		h = NULL;
		if (!(x = malloc(sizeof *x * (numel ? numel : 1)))) goto oom;
		random_weights_fill(name, nd, shape, numel, seed, x);
		data = x;
		if (dtype != SAFETENSORS_F32) {
			if (!(h = malloc(sizeof *h * (numel ? numel : 1)))) goto oom;
			for (int64_t k = 0; k < numel; k++)
				h[k] = dtype == SAFETENSORS_F16 ? safetensors_f32_to_f16(x[k]) : safetensors_f32_to_bf16(x[k]);
			data = h;
		}
		if (safetensors_writer_add(sw, name, dtype, nd, shape, data) < 0) goto oom;
	}
	snprintf(seedtext, sizeof seedtext, "%" PRIu64, seed);
	if (safetensors_writer_add_meta(sw, "config", cfg_json) < 0 ||
	    safetensors_writer_add_meta(sw, "esmbatch_random_seed", seedtext) < 0)
		goto oom;
	if (safetensors_writer_save(sw, path) < 0) {
		log_error("%s: cannot write the weights", path);
		goto done;
	}
	log_info("%s: %d random tensors (seed %" PRIu64 ", %s)", path, weights_count(w), seed,
	         safetensors_dtype_name(dtype));
	rc = 0;
	goto done;
oom:
	log_error("%s: out of memory writing random weights", path);
done:
	free(x);
	free(h);
	safetensors_writer_free(sw);
	weights_close(w);
	return rc;
}
