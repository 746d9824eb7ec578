/* fuzz_file.h - for the libFuzzer harnesses whose reader takes a path:
 * one temporary file per process, rewritten with each input. */
#ifndef ESMBATCH_FUZZ_FILE_H
#define ESMBATCH_FUZZ_FILE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fuzz_path[64];

static void fuzz_file_remove(void) { unlink(fuzz_path); }

/* the input as the process's temporary file (made on first use, removed
 * at exit); its path, or NULL */
static inline const char *fuzz_file(const uint8_t *data, size_t n, const char *suffix)
{
	char *path = fuzz_path;
	static int made;
	FILE *f;

	if (!made) {
		int fd;
		snprintf(path, sizeof fuzz_path, "/tmp/esmbatch-fuzz-XXXXXX%s", suffix);
		if ((fd = mkstemps(path, (int)strlen(suffix))) < 0) return NULL;
		close(fd);
		made = 1;
		atexit(fuzz_file_remove);
	}
	if (!(f = fopen(path, "wb"))) return NULL;
	if (n && fwrite(data, 1, n, f) != n) { fclose(f); return NULL; }
	return fclose(f) == 0 ? path : NULL;
}

#endif
