/* atomic_file.h (prefix atomic_file_) - how esmbatch opens the files it
 * writes, and files written atomically.
 *
 * The rule, for every file esmbatch creates or writes (in -o: run.jsonl,
 * done.jsonl, the .esmbatch*.lock files, summary.tsv, report.html, a
 * record's PDB, mmCIF and PAE and their temporaries; elsewhere
 * --dump-tensors, `convert -o`, calibrate's table) and for the files it
 * reads back from -o: atomic_file_open_fd opens the directory of PATH
 * once (its own path may pass through symlinks: the user named it) and
 * the file's name relative to that descriptor with O_NOFOLLOW.  A symlink
 * at that name is refused, never followed; a name that exists and is not
 * a regular file (a FIFO, a device, a directory) is refused without being
 * opened, and never replaced; a file written in place (not through a
 * temporary) must have no other hard link.  Temporaries are created with
 * O_EXCL, so nothing planted at their name is written through.
 *
 * Atomic files: the text goes to PATH.tmp.PID (PID: this process's, so
 * two processes writing PATH never share a temporary), which is flushed to
 * disk and renamed to PATH (in the same directory descriptor) only when
 * everything was written, so PATH is either absent (or its old version)
 * or complete.  Several files that belong together (a record's PDB and
 * mmCIF) are sealed one by one and renamed only once all are sealed, so a
 * failure leaves the old versions of all of them.
 *
 * Ownership: atomic_file_open fills a caller-owned atomic_file_t;
 * atomic_file_close releases it whatever happens.
 */
#ifndef ESMBATCH_IO_ATOMIC_FILE_H
#define ESMBATCH_IO_ATOMIC_FILE_H

#include <stdio.h>

typedef struct {
	FILE *f;      /* write here; NULL once sealed */
	char *path;   /* the final name, as given */
	char *tmp;    /* PATH.tmp.PID */
	int   dirfd;  /* PATH's directory */
	const char *base, *tbase;  /* the names of path and tmp in dirfd */
} atomic_file_t;

/* Open PATH under the rule above: open(2) flags (O_TRUNC is applied only
 * once the file passed), O_NOFOLLOW and O_CLOEXEC added.  A descriptor, or
 * -1 after one logged line naming PATH (errno set; ENOENT without O_CREAT,
 * PATH or its directory absent, is not logged: the caller decides whether
 * absent is an error). */
int   atomic_file_open_fd(const char *path, int flags);
/* The same as a stdio stream (mode as fdopen's, matching flags), or NULL. */
FILE *atomic_file_fopen(const char *path, int flags, const char *mode);

/* 1 when a and b both exist and are the same file (a hard link, a
 * symlink or another spelling of it), else 0; a NULL path is none. */
int   atomic_file_same(const char *a, const char *b);
/* 1 when the last components of paths a and b are in the same directory
 * (both directories exist), else 0. */
int   atomic_file_beside(const char *a, const char *b);

/* 0 when the atomic writer may write PATH (absent, or a regular file),
 * else -1 after one logged line: checked before a long run that writes
 * PATH at its end. */
int   atomic_file_check(const char *path);
/* mkdir -p DIR (a directory esmbatch writes in: -o, --cache); 0, or -1
 * after one logged line naming the directory that could not be made. */
int   atomic_file_mkdirs(const char *dir);

/* Create PATH.tmp.PID for writing (refused when PATH exists and is not a
 * regular file); returns a->f, or NULL after one logged line. */
FILE *atomic_file_open(atomic_file_t *a, const char *path);
/* ok != 0: flush, sync and close PATH.tmp.PID, keeping it (a->f NULL);
 * ok == 0 or any failure: remove it and release a.  0, or negative
 * (a failure is logged). */
int   atomic_file_seal(atomic_file_t *a, int ok);
/* ok != 0: seal PATH.tmp.PID (when not yet) and rename it to PATH;
 * ok == 0 (the caller gave up) or any failure: remove PATH.tmp.PID.
 * Releases a.  0 when PATH was written, negative otherwise (a failure is
 * logged). */
int   atomic_file_close(atomic_file_t *a, int ok);

#endif
