/* fuzz_journal.c - libFuzzer: the resume journal reader (io/journal.c) on
 * any bytes: entries or skipped lines, every entry's file list walked,
 * never a crash or a leak. */
#include <stdint.h>
#include <stdio.h>

#include "io/journal.h"

/* reads the last byte of each file name, so that ASan sees a name reaching
 * past its row */
static int fuzz_file_seen(void *ctx, const char *file, size_t n)
{
	size_t *total = ctx;
	*total += n + (n ? (unsigned char)file[n - 1] : 0);
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	FILE *f;
	json_t *prev, *e;
	const char *name;
	size_t total = 0;
	int last;

	if (!n || !(f = fmemopen((void *)data, n, "r"))) return 0;
	if (journal_read(f, "journal", &prev, &last) == 0) {
		json_object_foreach(prev, name, e) {
			(void)journal_str(e, "sequence");
			(void)journal_files(journal_str(e, "row"), fuzz_file_seen, &total);
		}
		json_decref(prev);
	}
	fclose(f);
	return 0;
}
