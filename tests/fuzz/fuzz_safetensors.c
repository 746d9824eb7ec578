/* fuzz_safetensors.c - libFuzzer: the safetensors reader (io/safetensors.c)
 * on any bytes: a file it accepts has every tensor's bytes inside the
 * mapping (each is read, converted to float32), its metadata readable. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "io/safetensors.h"
#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	const char *path;
	safetensors_t *st;

	log_set_level(-1);
	if (!(path = fuzz_file(data, n, ".safetensors")) || !(st = safetensors_open(path))) return 0;
	for (int i = 0; i < safetensors_count(st); i++) {
		const safetensors_tensor_t *t = safetensors_at(st, i);
		if (safetensors_find(st, t->name) != t) __builtin_trap();
		if (t->nbytes != (size_t)t->numel * safetensors_dtype_size(t->dtype)) __builtin_trap();
		if (t->numel > (1 << 20)) continue;
		float *f = malloc(sizeof *f * (t->numel ? t->numel : 1));
		if (f) safetensors_to_f32(t, f);
		free(f);
	}
	const char *cfg = safetensors_meta(st, "config");
	if (cfg) (void)strlen(cfg);
	safetensors_close(st);
	return 0;
}
