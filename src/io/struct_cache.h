/* struct_cache.h (prefix cache_) - a content-addressed store of blobs in
 * a directory shared by many processes and machines (fold --cache: the
 * finished structures; what a blob holds is the caller's).
 *
 * An entry is named by a 128-bit hash of its key text: DIR/HH/NAME.esmc,
 * HH the name's first two hex digits.  Its file holds a header (magic,
 * byte order, lengths), the key text itself, the blob and a CRC-32 of
 * everything before it; an entry whose size, magic, key or checksum is
 * not right is corrupt: warned of in one line naming it and never served.
 * An entry is written to a temporary (DIR/HH/.NAME.HOST.PID.N.tmp,
 * created O_EXCL) that is flushed to disk and renamed over NAME.esmc, so readers
 * see a whole entry or none, whoever writes at once; no lock is taken.
 * A hit sets the entry's mtime to now (atime is often not kept), so the
 * least recently used entries are the oldest by mtime; with a size limit
 * the oldest are removed until the store fits in 90% of it, when it is
 * opened and whenever this process's writes take it over the limit.
 * Temporaries older than CACHE_TMP_AGE (a killed writer's) are removed by
 * the eviction and by cache_scan with remove set.
 *
 * A test hook: ESMBATCH_FAULT=cacheput:MS makes every write sleep MS
 * milliseconds half-way through its temporary (a writer to kill).
 */
#ifndef ESMBATCH_IO_STRUCT_CACHE_H
#define ESMBATCH_IO_STRUCT_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* seconds after which a temporary is a dead writer's */
#define CACHE_TMP_AGE 3600

typedef struct cache cache_t;

/* What a walk of the store found (cache_scan). */
typedef struct {
	long    entries, bad, tmp;   /* entries (bad ones included), corrupt, temporaries */
	int64_t bytes, tmp_bytes;    /* their sizes */
	time_t  oldest, newest;      /* entries' mtimes (0: none) */
	long    removed;             /* files removed (remove set) */
} cache_stats_t;

/* The store in dir (made when absent, parents too); max_bytes > 0: its
 * size limit (then the store is walked once here).  NULL after one logged
 * line. */
cache_t *cache_open(const char *dir, int64_t max_bytes);
void     cache_close(cache_t *c);
/* The entry's name for key: 32 hex digits and a NUL. */
void     cache_name(const char *key, char name[33]);
/* The blob stored under key: 1 and *data (malloc'ed, the caller frees it)
 * and *n; 0 when there is none or it is corrupt (warned: one line naming
 * the entry); -1 when out of memory. */
int      cache_get(cache_t *c, const char *key, void **data, size_t *n);
/* Store data[0..n) under key (replacing an entry there).  0, or -1 after
 * one logged line (the run goes on: a cache is an optimisation). */
int      cache_put(cache_t *c, const char *key, const void *data, size_t n);
/* Remove the least recently used entries until the store holds at most
 * target bytes, and temporaries older than CACHE_TMP_AGE.  The bytes
 * left, or -1 (logged). */
int64_t  cache_evict(const char *dir, int64_t target);
/* Walk the store in dir into *st; verify: read every entry and check it
 * (each corrupt one: one warning naming it); remove: remove corrupt
 * entries and old temporaries.  0, or -1 (dir unreadable, logged). */
int      cache_scan(const char *dir, int verify, int remove, cache_stats_t *st);

#endif
