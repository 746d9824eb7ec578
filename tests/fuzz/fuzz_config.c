/* fuzz_config.c - libFuzzer: config.json (model/hparams.c) on any text:
 * accepted or refused with a logged line, never a division by zero, a
 * wrapped integer or an out-of-range value accepted. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/hparams.h"
#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	char *text = malloc(n + 1);
	hparams_t c;

	if (!text) return 0;
	memcpy(text, data, n);
	text[n] = 0;
	log_set_level(-1);
	if (hparams_parse(&c, text, "fuzz") == 0) {
		/* what the model relies on */
		if (c.lm_heads <= 0 || c.lm_dim % c.lm_heads || c.seq_head_width <= 0 ||
		    c.c_s % c.seq_head_width || c.pair_head_width <= 0 || c.c_z % c.pair_head_width ||
		    c.vocab < 1 || c.vocab > 64 || c.cls_token < 0 || c.eos_token < 0 ||
		    c.max_recycles < 1 || c.trunk_blocks < 1 || c.sm_blocks < 1 || c.lm_layers < 1)
			__builtin_trap();
	}
	free(text);
	return 0;
}
