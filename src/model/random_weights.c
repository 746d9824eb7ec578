/* wr.c - random weights for any model config (see wr.h). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "model/model.h"
#include "model/random_weights.h"
#include "model/weights.h"

/* splitmix64: one stream per tensor */
static uint64_t wr_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* uniform in (0, 1) */
static double wr_unit(uint64_t *s) { return ((wr_next(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

/* x: [n] = N(0, sd^2), Box-Muller */
static void wr_normal(uint64_t *s, float *x, int64_t n, double sd)
{
	for (int64_t i = 0; i < n; i += 2) {
		double r = sqrt(-2.0 * log(wr_unit(s))), a = 2.0 * M_PI * wr_unit(s);
		x[i] = (float)(sd * r * cos(a));
		if (i + 1 < n) x[i + 1] = (float)(sd * r * sin(a));
	}
}

static int wr_ends(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcmp(s + n - k, suffix);
}

/* x: [numel] values of tensor `name` (rules in wr.h) */
static void wr_fill(const char *name, int nd, const int64_t *shape, int64_t numel, uint64_t seed,
                    float *x)
{
	uint64_t s = seed;

	for (const char *p = name; *p; p++) s = (s ^ (unsigned char)*p) * 1099511628211ull;
	if (!strcmp(name, "esm_s_combine")) {
		memset(x, 0, sizeof *x * numel);
	} else if (nd >= 2) {
		wr_normal(&s, x, numel, sqrt(1.0 / (double)(numel / shape[0] ? numel / shape[0] : 1)));
	} else if (wr_ends(name, ".weight")) {
		for (int64_t i = 0; i < numel; i++) x[i] = 1.0f;
	} else {
		wr_normal(&s, x, numel, 0.02);
	}
}

int wr_write(const char *cfg_json, const char *what, const char *path, uint64_t seed,
             st_dtype_t dtype)
{
	st_writer_t *sw = NULL;
	wt_t *w = NULL;
	model_t m;
	float *x = NULL;
	uint16_t *h = NULL;
	char seedtext[32];
	int rc = -1;

	if (dtype != ST_F32 && dtype != ST_F16 && dtype != ST_BF16) {
		log_error("%s: random weights are written as F32, F16 or BF16", path);
		return -1;
	}
	if (!(w = wt_open_record(cfg_json, what))) return -1;
	if (model_load(&m, w, NULL) < 0) goto done;
	model_free(&m);
	if (!(sw = st_writer_init())) goto oom;
	for (int i = 0; i < wt_count(w); i++) {
		const int64_t *shape;
		int nd;
		const char *name = wt_entry(w, i, &nd, &shape);
		int64_t numel = 1;
		const void *data;

		for (int d = 0; d < nd; d++) numel *= shape[d];
		free(x);
		free(h);
		h = NULL;
		if (!(x = malloc(sizeof *x * (numel ? numel : 1)))) goto oom;
		wr_fill(name, nd, shape, numel, seed, x);
		data = x;
		if (dtype != ST_F32) {
			if (!(h = malloc(sizeof *h * (numel ? numel : 1)))) goto oom;
			for (int64_t k = 0; k < numel; k++)
				h[k] = dtype == ST_F16 ? st_f32_to_f16(x[k]) : st_f32_to_bf16(x[k]);
			data = h;
		}
		if (st_writer_add(sw, name, dtype, nd, shape, data) < 0) goto oom;
	}
	snprintf(seedtext, sizeof seedtext, "%" PRIu64, seed);
	if (st_writer_add_meta(sw, "config", cfg_json) < 0 ||
	    st_writer_add_meta(sw, "esmbatch_random_seed", seedtext) < 0)
		goto oom;
	if (st_writer_save(sw, path) < 0) {
		log_error("%s: cannot write the weights", path);
		goto done;
	}
	log_info("%s: %d random tensors (seed %" PRIu64 ", %s)", path, wt_count(w), seed,
	         st_dtype_name(dtype));
	rc = 0;
	goto done;
oom:
	log_error("%s: out of memory writing random weights", path);
done:
	free(x);
	free(h);
	st_writer_free(sw);
	wt_close(w);
	return rc;
}
