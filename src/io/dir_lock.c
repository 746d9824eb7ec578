/* dir_lock.c - output directory locks (dir_lock.h). */
#include "io/dir_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "util/log.h"
#include "io/atomic_file.h"

int dir_lock_take(const char *dir, const char *sfx, int op, int *fd)
{
	char *path = NULL;
	int rc = -1;

	if (asprintf(&path, "%s/.esmbatch%s.lock", dir, sfx) < 0) {
		path = NULL;
		log_error("%s: out of memory", dir);
		goto done;
	}
	/* the rule of atomic_file.h: never through a symlink planted there */
	if (*fd < 0 && (*fd = atomic_file_open_fd(path, O_RDWR | O_CREAT)) < 0) goto done;
	if (flock(*fd, op | LOCK_NB) < 0) {
		if (errno == EWOULDBLOCK) {
			rc = DIR_LOCK_BUSY;
			goto done;
		}
		log_warn("%s: cannot lock: %s; a second run into %s would not be stopped", path,
		         strerror(errno), dir);
	}
	rc = 0;
done:
	free(path);
	return rc;
}
