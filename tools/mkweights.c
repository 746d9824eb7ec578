/* mkweights.c - write random ESMFold weights for any config (see src/model/random_weights.h).
 *
 *   mkweights --config FILE -o OUT.safetensors [--seed N] [--dtype f32|f16|bf16]
 *
 * FILE is a config.json, or a manifest ({"config": ..., "tensors": ...})
 * whose config is used.  Exit 0, 1 on an error, 2 on a usage error.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "util/log.h"
#include "model/random_weights.h"

static void mk_usage(FILE *fp)
{
	fputs("Usage: mkweights --config FILE -o OUT.safetensors [--seed N] [--dtype f32|f16|bf16]\n"
	      "Random weights (fixed seed, default 1) for the model of a config.json or of a\n"
	      "manifest's config; the config is stored in the file's metadata.\n", fp);
}

/* the config text of a config.json or manifest; malloc'ed, NULL logged */
static char *mk_config(const char *path)
{
	json_error_t err;
	json_t *j = json_load_file(path, 0, &err), *c;
	char *text;

	if (!j) {
		log_error("%s:%d: %s", path, err.line, err.text);
		return NULL;
	}
	c = json_object_get(j, "config");
	text = json_dumps(json_is_object(c) && json_object_get(j, "tensors") ? c : j,
	                  JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(j);
	return text;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "config", required_argument, NULL, 'c' }, { "output", required_argument, NULL, 'o' },
		{ "seed", required_argument, NULL, 's' },   { "dtype", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 }
	};
	const char *cfg = NULL, *out = NULL;
	unsigned long long seed = 1;
	safetensors_dtype_t dt = SAFETENSORS_F32;
	char *text, *end;
	int c, rc;

	while ((c = getopt_long(argc, argv, "c:o:s:d:h", lo, NULL)) != -1) {
		switch (c) {
		case 'c': cfg = optarg; break;
		case 'o': out = optarg; break;
		case 's':
			seed = strtoull(optarg, &end, 10);
			if (!*optarg || *end) { mk_usage(stderr); return 2; }
			break;
		case 'd':
			if (!strcmp(optarg, "f32")) dt = SAFETENSORS_F32;
			else if (!strcmp(optarg, "f16")) dt = SAFETENSORS_F16;
			else if (!strcmp(optarg, "bf16")) dt = SAFETENSORS_BF16;
			else { mk_usage(stderr); return 2; }
			break;
		case 'h': mk_usage(stdout); return 0;
		default: mk_usage(stderr); return 2;
		}
	}
	if (!cfg || !out || optind < argc) {
		mk_usage(stderr);
		return 2;
	}
	if (!(text = mk_config(cfg))) return 1;
	rc = random_weights_write(text, cfg, out, seed, dt);
	free(text);
	return rc < 0 ? 1 : 0;
}
