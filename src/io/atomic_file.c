/* atomic_file.c - opening output files safely, and files written
 * atomically (see atomic_file.h). */
#include "io/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/log.h"

/* path's directory (malloc'ed; "." when path has no slash), *base its
 * last component; NULL after a logged line */
static char *atomic_file_dirname(const char *path, const char **base)
{
	const char *slash = strrchr(path, '/');
	char *dir;

	*base = slash ? slash + 1 : path;
	if (!**base) {
		log_error("%s: names a directory, not a file", path);
		errno = EISDIR;
		return NULL;
	}
	if (!slash) dir = strdup(".");
	else if (slash == path) dir = strdup("/");
	else dir = strndup(path, (size_t)(slash - path));
	if (!dir) log_error("%s: out of memory", path);
	return dir;
}

/* The directory of path, opened; *base: path's last component.  -1 after
 * a logged line (not logged when absent and quiet: errno ENOENT). */
static int atomic_file_dir(const char *path, const char **base, int quiet)
{
	char *dir = atomic_file_dirname(path, base);
	int fd, err;

	if (!dir) return -1;
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		err = errno;
		if (!quiet || err != ENOENT)
			log_error("%s: cannot open its directory %s: %s", path, dir, strerror(err));
		errno = err;
	}
	free(dir);
	return fd;
}

/* the same file or directory (both exist) */
static int atomic_file_same_st(const char *a, const char *b)
{
	struct stat sa, sb;

	return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

int atomic_file_same(const char *a, const char *b)
{
	return a && b && atomic_file_same_st(a, b);
}

int atomic_file_beside(const char *a, const char *b)
{
	const char *ba, *bb;
	char *da = a ? atomic_file_dirname(a, &ba) : NULL;
	char *db = b ? atomic_file_dirname(b, &bb) : NULL;
	int same = da && db && atomic_file_same_st(da, db);

	free(da);
	free(db);
	return same;
}

/* what is at name in dirfd, when it is not a regular file; NULL when it
 * is one or absent */
static const char *atomic_file_odd(int dirfd, const char *name)
{
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISREG(st.st_mode)) return NULL;
	return S_ISLNK(st.st_mode) ? "a symbolic link" : S_ISDIR(st.st_mode) ? "a directory"
	       : S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISSOCK(st.st_mode) ? "a socket"
	       : "a device";
}

/* name in dirfd under the rule (atomic_file.h); shown: its path in
 * messages.  A descriptor or -1 (logged, but ENOENT without O_CREAT). */
static int atomic_file_openat(int dirfd, const char *name, const char *shown, int flags)
{
	const char *odd = atomic_file_odd(dirfd, name);
	int trunc = flags & O_TRUNC, fd, err;
	struct stat st;

	if (odd) {
		log_error("%s: exists and is %s, not a regular file: refused", shown, odd);
		errno = EEXIST;
		return -1;
	}
	/* O_NONBLOCK: a FIFO put there since is not waited on */
	fd = openat(dirfd, name, (flags & ~O_TRUNC) | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0666);
	if (fd < 0) {
		err = errno;
		if (err == ELOOP)
			log_error("%s: is a symbolic link: refused (esmbatch never writes or reads "
			          "through one there)", shown);
		else if (err == ENXIO)
			log_error("%s: is a FIFO or a device, not a regular file: refused", shown);
		else if (err != ENOENT || (flags & O_CREAT))
			log_error("%s: cannot open: %s", shown, strerror(err));
		errno = err;
		return -1;
	}
	err = 0;
	if (fstat(fd, &st) < 0) {
		err = errno;
		log_error("%s: cannot stat: %s", shown, strerror(err));
	} else if (!S_ISREG(st.st_mode)) {
		err = EEXIST;
		log_error("%s: is not a regular file: refused", shown);
	} else if ((flags & O_ACCMODE) != O_RDONLY && st.st_nlink > 1) {
		err = EMLINK;
		log_error("%s: has %lu hard links: refused (it may be a file elsewhere)", shown,
		          (unsigned long)st.st_nlink);
	} else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0 ||
	           (trunc && ftruncate(fd, 0) < 0)) {
		err = errno;
		log_error("%s: cannot open: %s", shown, strerror(err));
	}
	if (err) {
		close(fd);
		errno = err;
		return -1;
	}
	return fd;
}

int atomic_file_open_fd(const char *path, int flags)
{
	const char *base;
	int dirfd = atomic_file_dir(path, &base, !(flags & O_CREAT)), fd, err;

	if (dirfd < 0) return -1;
	fd = atomic_file_openat(dirfd, base, path, flags);
	err = errno;
	close(dirfd);
	errno = err;
	return fd;
}

FILE *atomic_file_fopen(const char *path, int flags, const char *mode)
{
	int fd = atomic_file_open_fd(path, flags);
	FILE *f;

	if (fd < 0) return NULL;
	if (!(f = fdopen(fd, mode))) {
		log_error("%s: cannot open: %s", path, strerror(errno));
		close(fd);
	}
	return f;
}

int atomic_file_check(const char *path)
{
	const char *base, *odd;
	int dirfd = atomic_file_dir(path, &base, 0);

	if (dirfd < 0) return -1;
	if ((odd = atomic_file_odd(dirfd, base)))
		log_error("%s: exists and is %s, not a regular file: refused", path, odd);
	close(dirfd);
	return odd ? -1 : 0;
}

/* release a (its temporary already gone or kept) */
static void atomic_file_release(atomic_file_t *a)
{
	if (a->dirfd >= 0) close(a->dirfd);
	free(a->path);
	free(a->tmp);
	a->f = NULL;
	a->path = a->tmp = NULL;
	a->dirfd = -1;
}

FILE *atomic_file_open(atomic_file_t *a, const char *path)
{
	const char *odd;
	int fd = -1;

	a->f = NULL;
	a->tmp = NULL;
	a->dirfd = -1;
	if (!(a->path = strdup(path)) || asprintf(&a->tmp, "%s.tmp.%ld", path, (long)getpid()) < 0) {
		a->tmp = NULL;
		log_error("%s: out of memory", path);
	} else if ((a->dirfd = atomic_file_dir(a->path, &a->base, 0)) >= 0) {
		a->tbase = a->tmp + (a->base - a->path);
		if ((odd = atomic_file_odd(a->dirfd, a->base))) {
			log_error("%s: exists and is %s, not a regular file: refused", path, odd);
		} else {
			/* a temporary of a killed process that had this PID goes
			 * first (unlinking a symlink removes the link only) */
			unlinkat(a->dirfd, a->tbase, 0);
			fd = atomic_file_openat(a->dirfd, a->tbase, a->tmp, O_WRONLY | O_CREAT | O_EXCL);
		}
	}
	if (fd >= 0 && !(a->f = fdopen(fd, "w"))) {
		log_error("%s: cannot write: %s", a->tmp, strerror(errno));
		unlinkat(a->dirfd, a->tbase, 0);
		close(fd);
	}
	if (!a->f) atomic_file_release(a);
	return a->f;
}

int atomic_file_seal(atomic_file_t *a, int ok)
{
	int rc = ok ? 0 : -1;

	if (!a->tmp) return -1;
	if (!a->f) return 0;   /* sealed before */
	if (ok && (ferror(a->f) || fflush(a->f) != 0 || fsync(fileno(a->f)) != 0)) {
		log_error("%s: write failed: %s", a->tmp, strerror(errno));
		rc = -1;
	}
	if (fclose(a->f) != 0 && rc == 0) {
		log_error("%s: write failed: %s", a->tmp, strerror(errno));
		rc = -1;
	}
	a->f = NULL;
	if (rc != 0) {
		unlinkat(a->dirfd, a->tbase, 0);
		atomic_file_release(a);
	}
	return rc;
}

int atomic_file_close(atomic_file_t *a, int ok)
{
	const char *odd;
	int rc;

	if (!a->tmp) return -1;
	if ((rc = atomic_file_seal(a, ok)) < 0) return rc;
	if (!ok) rc = -1;   /* given up after it was sealed */
	else if ((odd = atomic_file_odd(a->dirfd, a->base))) {
		log_error("%s: exists and is %s, not a regular file: refused", a->path, odd);
		rc = -1;
	} else if (renameat(a->dirfd, a->tbase, a->dirfd, a->base) != 0) {
		log_error("%s: cannot rename to %s: %s", a->tmp, a->path, strerror(errno));
		rc = -1;
	}
	if (rc != 0) unlinkat(a->dirfd, a->tbase, 0);
	atomic_file_release(a);
	return rc;
}

int atomic_file_mkdirs(const char *dir)
{
	char *p = strdup(dir);
	int rc = 0;

	if (!p) return -1;
	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s) continue;
		char c = *s;
		*s = 0;
		if (mkdir(p, 0777) < 0 && errno != EEXIST) {
			log_error("%s: cannot create directory: %s", p, strerror(errno));
			rc = -1;
			break;
		}
		*s = c;
		if (!c) break;
	}
	free(p);
	return rc;
}
