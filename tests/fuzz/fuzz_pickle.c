/* fuzz_pickle.c - libFuzzer: the checkpoint pickle reader (io/torch_zip.c)
 * on any bytes as a data.pkl: 0 or one error, never a crash, a leak or
 * undefined behaviour.  Seeds: the data.pkl of the checkpoint fixtures. */
#include <stddef.h>
#include <stdint.h>

#include "util/log.h"
#include "io/torch_zip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int quiet;

	if (!quiet) {
		log_set_level(LOG_ERROR - 1);   /* no error lines: millions of inputs */
		quiet = 1;
	}
	torch_zip_pickle_check(data, size, "fuzz");
	return 0;
}
