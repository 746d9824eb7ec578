/* atomic_file.c - files written atomically (see atomic_file.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/atomic_file.h"
#include "util/log.h"

FILE *atomic_file_open(atomic_file_t *a, const char *path)
{
	a->f = NULL;
	a->path = strdup(path);
	if (!a->path || asprintf(&a->tmp, "%s.tmp.%ld", path, (long)getpid()) < 0) {
		a->tmp = NULL;
		log_error("%s: out of memory", path);
	} else if (!(a->f = fopen(a->tmp, "w"))) {
		log_error("%s: cannot write: %s", a->tmp, strerror(errno));
	}
	if (!a->f) {
		free(a->path);
		free(a->tmp);
		a->path = a->tmp = NULL;
	}
	return a->f;
}

int atomic_file_close(atomic_file_t *a, int ok)
{
	int rc = ok ? 0 : -1;

	if (!a->f) return -1;
	if (ok && (ferror(a->f) || fflush(a->f) != 0 || fsync(fileno(a->f)) != 0)) {
		log_error("%s: write failed: %s", a->tmp, strerror(errno));
		rc = -1;
	}
	if (fclose(a->f) != 0 && rc == 0) {
		log_error("%s: write failed: %s", a->tmp, strerror(errno));
		rc = -1;
	}
	if (rc == 0 && rename(a->tmp, a->path) != 0) {
		log_error("%s: cannot rename to %s: %s", a->tmp, a->path, strerror(errno));
		rc = -1;
	}
	if (rc != 0) unlink(a->tmp);
	free(a->path);
	free(a->tmp);
	a->f = NULL;
	a->path = a->tmp = NULL;
	return rc;
}
