/* fuzz_torch_zip.c - libFuzzer harness for the pickle reader of src/io/torch_zip.c: any bytes as a
 * data.pkl must give 0 or one error, never a crash, a leak or undefined
 * behaviour.  Built by `make fuzz` when clang is present (see Makefile.am). */
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
