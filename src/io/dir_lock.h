/* dir_lock.h (prefix dir_lock_) - the locks of an output directory:
 * DIR/.esmbatch.lock (the directory: exclusive for a run of the whole
 * input or a merge, shared among shards) and DIR/.esmbatch.K-of-N.lock
 * (one shard, exclusive).  flock(2) locks, never waited for, held while
 * the descriptor is open and released by the kernel however the process
 * ends.
 */
#ifndef ESMBATCH_IO_DIR_LOCK_H
#define ESMBATCH_IO_DIR_LOCK_H

#define DIR_LOCK_BUSY (-2)

/* flock(op | LOCK_NB) DIR/.esmbatch{sfx}.lock (sfx "" or ".K-of-N") on
 * *fd, opened first when -1 (the caller closes it).  0 (also when the file
 * system has no locks: a warning); DIR_LOCK_BUSY when another process
 * holds it (not logged: the caller says who); -1 on another error
 * (logged). */
int dir_lock_take(const char *dir, const char *sfx, int op, int *fd);

#endif
