/* struct_cache.c - the content-addressed store of fold --cache: entries
 * named by their key's hash, written by rename, checked by CRC-32, least
 * recently used evicted (struct_cache.h).
 */
#include "io/struct_cache.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zlib.h>

#include "util/grow.h"
#include "util/hash.h"
#include "util/log.h"
#include "io/atomic_file.h"

#define CACHE_MAGIC "ESMBC1\n"   /* 8 bytes with its NUL */
#define CACHE_ORDER 0x01020304u
#define CACHE_HEAD  (8 + 4 + 4 + 8)   /* magic, byte order, key length, blob length */
#define CACHE_EXT   ".esmc"

struct cache {
	char           *dir;
	int64_t         max;       /* 0: no limit */
	int64_t         bytes;     /* the store's size as last walked, plus this process's writes */
	long            pause_ms;  /* ESMBATCH_FAULT=cacheput:MS */
	unsigned long   seq;       /* temporaries made by this process */
	char            host[40];  /* this host's name (letters, digits, '-'):
	                              processes of two hosts may share a PID */
	pthread_mutex_t lock;      /* bytes, seq */
};

void cache_name(const char *key, char name[33])
{
	size_t n = strlen(key);
	uint64_t a = hash_bytes(0, key, n), b = hash_bytes(0x9e3779b97f4a7c15ull, key, n);

	snprintf(name, 33, "%016llx%016llx", (unsigned long long)a, (unsigned long long)b);
}

/* DIR/HH/NAME.esmc, or NULL */
static char *cache_path(const char *dir, const char *name)
{
	char *p = NULL;

	if (asprintf(&p, "%s/%.2s/%s" CACHE_EXT, dir, name, name) < 0) return NULL;
	return p;
}

cache_t *cache_open(const char *dir, int64_t max_bytes)
{
	cache_t *c = calloc(1, sizeof *c);
	const char *e = getenv("ESMBATCH_FAULT");

	if (!c || !(c->dir = strdup(dir))) {
		log_error("%s: out of memory", dir);
		free(c);
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	if (gethostname(c->host, sizeof c->host - 1) < 0 || !*c->host) snprintf(c->host, sizeof c->host, "host");
	for (char *h = c->host; *h; h++)
		if (!isalnum((unsigned char)*h) && *h != '-') *h = '-';
	if (e && sscanf(e, "cacheput:%ld", &c->pause_ms) != 1) c->pause_ms = 0;
	c->max = max_bytes;
	if (atomic_file_mkdirs(dir) < 0) {
		cache_close(c);
		return NULL;
	}
	if (access(dir, R_OK | W_OK | X_OK) < 0) {
		log_error("%s: cannot use it as the cache: %s", dir, strerror(errno));
		cache_close(c);
		return NULL;
	}
	if (c->max > 0 && (c->bytes = cache_evict(dir, c->max / 10 * 9)) < 0) c->bytes = 0;
	return c;
}

void cache_close(cache_t *c)
{
	if (!c) return;
	pthread_mutex_destroy(&c->lock);
	free(c->dir);
	free(c);
}

/* the whole of file fd, of size n, into a new buffer, or NULL */
static unsigned char *cache_slurp(int fd, size_t n)
{
	unsigned char *b = malloc(n ? n : 1);
	size_t got = 0;

	while (b && got < n) {
		ssize_t k = read(fd, b + got, n - got);
		if (k < 0 && errno == EINTR) continue;
		if (k <= 0) break;
		got += (size_t)k;
	}
	if (b && got < n) {
		free(b);
		return NULL;
	}
	return b;
}

/* why entry b[0..n) is not a whole entry for key (key NULL: any key), or
 * NULL when it is; *at and *len: its blob */
static const char *cache_check(const unsigned char *b, size_t n, const char *key, size_t *at,
                               size_t *len)
{
	uint32_t order, klen, crc;
	uint64_t blen;

	if (n < CACHE_HEAD + 4) return "truncated";
	if (memcmp(b, CACHE_MAGIC, 8)) return "not a cache entry";
	memcpy(&order, b + 8, 4);
	memcpy(&klen, b + 12, 4);
	memcpy(&blen, b + 16, 8);
	if (order != CACHE_ORDER) return "written with another byte order";
	if (blen > n || klen > n || (uint64_t)CACHE_HEAD + klen + blen + 4 != n)
		return n < (uint64_t)CACHE_HEAD + klen + blen + 4 ? "truncated" : "wrong size";
	memcpy(&crc, b + n - 4, 4);
	if (crc != (uint32_t)crc32(crc32(0L, Z_NULL, 0), b, (uInt)(n - 4))) return "checksum mismatch";
	if (key && (strlen(key) != klen || memcmp(b + CACHE_HEAD, key, klen))) return "another key";
	*at = CACHE_HEAD + klen;
	*len = (size_t)blen;
	return NULL;
}

/* read the entry at path: its bytes (*n) or NULL (absent: *why NULL;
 * unreadable: *why says so) */
static unsigned char *cache_read(const char *path, size_t *n, const char **why)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	unsigned char *b = NULL;

	*why = NULL;
	if (fd < 0) {
		if (errno != ENOENT) *why = strerror(errno);
		return NULL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) *why = "not a regular file";
	else if (!(b = cache_slurp(fd, (size_t)st.st_size))) *why = "cannot be read (or truncated)";
	*n = (size_t)st.st_size;
	close(fd);
	return b;
}

int cache_get(cache_t *c, const char *key, void **data, size_t *n)
{
	char name[33];
	char *path;
	const char *why;
	unsigned char *b;
	size_t len = 0, at = 0, blen = 0;

	cache_name(key, name);
	if (!(path = cache_path(c->dir, name))) return -1;
	b = cache_read(path, &len, &why);
	if (b && (why = cache_check(b, len, key, &at, &blen))) {
		free(b);
		b = NULL;
	}
	if (!b) {
		/* another key under the name (a hash collision) is a miss too */
		if (why && strcmp(why, "another key"))
			log_warn("cache entry %s: %s: ignored (the record is folded again)", path, why);
		free(path);
		return 0;
	}
	memmove(b, b + at, blen);
	*data = b;
	*n = blen;
	utimensat(AT_FDCWD, path, NULL, 0);   /* used now: the last to be evicted */
	free(path);
	return 1;
}

/* write all of b[0..n) to fd; 0 or -1 */
static int cache_write_all(int fd, const void *b, size_t n)
{
	const char *p = b;

	while (n) {
		ssize_t k = write(fd, p, n);
		if (k < 0 && errno == EINTR) continue;
		if (k <= 0) return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* the entry for key and data[0..n) into fd: header, key, blob, CRC-32;
 * the test hook's pause half-way.  0 or -1 */
static int cache_write_entry(const cache_t *c, int fd, const char *key, const void *data, size_t n)
{
	unsigned char head[CACHE_HEAD];
	uint32_t order = CACHE_ORDER, klen = (uint32_t)strlen(key);
	uint64_t blen = n;
	uLong crc = crc32(0L, Z_NULL, 0);

	memcpy(head, CACHE_MAGIC, 8);
	memcpy(head + 8, &order, 4);
	memcpy(head + 12, &klen, 4);
	memcpy(head + 16, &blen, 8);
	crc = crc32(crc, head, sizeof head);
	crc = crc32(crc, (const Bytef *)key, klen);
	for (size_t off = 0; off < n; off += 1u << 30)
		crc = crc32(crc, (const Bytef *)data + off, (uInt)(n - off < 1u << 30 ? n - off : 1u << 30));
	uint32_t c32 = (uint32_t)crc;
	if (cache_write_all(fd, head, sizeof head) < 0 || cache_write_all(fd, key, klen) < 0 ||
	    cache_write_all(fd, data, n / 2) < 0)
		return -1;
	if (c->pause_ms > 0) {
		struct timespec ts = { c->pause_ms / 1000, c->pause_ms % 1000 * 1000000L };
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR) continue;
	}
	if (cache_write_all(fd, (const char *)data + n / 2, n - n / 2) < 0 ||
	    cache_write_all(fd, &c32, 4) < 0)
		return -1;
	return fsync(fd);
}

int cache_put(cache_t *c, const char *key, const void *data, size_t n)
{
	char name[33], sub[4];
	char *path = NULL, *tmp = NULL, *subdir = NULL;
	unsigned long seq;
	int fd = -1, rc = -1;
	int64_t size = (int64_t)(CACHE_HEAD + strlen(key) + n + 4), over = 0;

	cache_name(key, name);
	snprintf(sub, sizeof sub, "%.2s", name);
	pthread_mutex_lock(&c->lock);
	seq = c->seq++;
	pthread_mutex_unlock(&c->lock);
	if (asprintf(&subdir, "%s/%s", c->dir, sub) < 0) subdir = NULL;
	if (!subdir || !(path = cache_path(c->dir, name)) ||
	    asprintf(&tmp, "%s/.%s.%s.%ld.%lu.tmp", subdir, name, c->host, (long)getpid(), seq) < 0) {
		tmp = NULL;
		log_error("%s: out of memory", c->dir);
		goto done;
	}
	if (mkdir(subdir, 0777) < 0 && errno != EEXIST) {
		log_warn("%s: cannot create it: %s (the entry is not stored)", subdir, strerror(errno));
		goto done;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
	if (fd < 0 || cache_write_entry(c, fd, key, data, n) < 0 || close(fd) < 0 ||
	    rename(tmp, path) < 0) {
		log_warn("%s: cannot store the entry: %s", path, strerror(errno));
		if (fd >= 0) unlink(tmp);
		fd = -1;
		goto done;
	}
	fd = -1;
	rc = 0;
	pthread_mutex_lock(&c->lock);
	c->bytes += size;
	if (c->max > 0 && c->bytes > c->max) over = 1;
	pthread_mutex_unlock(&c->lock);
	if (over) {
		int64_t left = cache_evict(c->dir, c->max / 10 * 9);
		pthread_mutex_lock(&c->lock);
		if (left >= 0) c->bytes = left;
		pthread_mutex_unlock(&c->lock);
	}
done:
	if (fd >= 0) close(fd);
	free(subdir);
	free(path);
	free(tmp);
	return rc;
}

/* one file of the store */
typedef struct {
	char   *path;
	int64_t size;
	time_t  mtime;
	long    mtime_ns;
	int     tmp;   /* a temporary */
} cache_file_t;

/* every entry and temporary under dir into *f (*n of them); 0 or -1 */
static int cache_list(const char *dir, cache_file_t **f, size_t *n)
{
	DIR *top = opendir(dir), *d;
	struct dirent *e, *g;
	size_t cap = 0;
	int rc = 0;

	*f = NULL;
	*n = 0;
	if (!top) {
		log_error("%s: cannot read the cache: %s", dir, strerror(errno));
		return -1;
	}
	while (rc == 0 && (e = readdir(top))) {
		char *sub = NULL;
		if (strlen(e->d_name) != 2 || !strchr("0123456789abcdef", e->d_name[0]) ||
		    asprintf(&sub, "%s/%s", dir, e->d_name) < 0 || !(d = opendir(sub))) {
			free(sub);
			continue;
		}
		while (rc == 0 && (g = readdir(d))) {
			size_t len = strlen(g->d_name);
			int tmp = g->d_name[0] == '.' && len > 4 && !strcmp(g->d_name + len - 4, ".tmp");
			int ent = len == 32 + strlen(CACHE_EXT) && !strcmp(g->d_name + 32, CACHE_EXT);
			struct stat st;
			char *p = NULL;
			if (!tmp && !ent) continue;
			if (asprintf(&p, "%s/%s", sub, g->d_name) < 0) { rc = -1; break; }
			if (lstat(p, &st) < 0 || !S_ISREG(st.st_mode)) { free(p); continue; }
			if (grow_array(f, &cap, *n + 1, sizeof **f) < 0) { free(p); rc = -1; break; }
			(*f)[(*n)++] = (cache_file_t){ p, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec, tmp };
		}
		closedir(d);
		free(sub);
	}
	closedir(top);
	if (rc < 0) log_error("%s: out of memory listing the cache", dir);
	return rc;
}

static void cache_list_free(cache_file_t *f, size_t n)
{
	for (size_t i = 0; i < n; i++) free(f[i].path);
	free(f);
}

/* by mtime, oldest first */
static int cache_by_age(const void *a, const void *b)
{
	const cache_file_t *x = a, *y = b;

	if (x->mtime != y->mtime) return x->mtime < y->mtime ? -1 : 1;
	return (x->mtime_ns > y->mtime_ns) - (x->mtime_ns < y->mtime_ns);
}

/* a temporary a writer left CACHE_TMP_AGE ago or more */
static int cache_stale(const cache_file_t *f, time_t now)
{
	return f->tmp && now - f->mtime >= CACHE_TMP_AGE;
}

int64_t cache_evict(const char *dir, int64_t target)
{
	cache_file_t *f;
	size_t n;
	int64_t total = 0;
	long gone = 0;
	time_t now = time(NULL);

	if (cache_list(dir, &f, &n) < 0) return -1;
	qsort(f, n, sizeof *f, cache_by_age);
	for (size_t i = 0; i < n; i++) {
		if (cache_stale(&f[i], now) && unlink(f[i].path) == 0) continue;
		total += f[i].size;
	}
	for (size_t i = 0; i < n && total > target; i++) {
		if (f[i].tmp) continue;
		if (unlink(f[i].path) == 0 || errno == ENOENT) {
			total -= f[i].size;
			gone++;
		}
	}
	if (gone) log_info("cache %s: %ld least recently used entr%s evicted, %lld bytes left", dir, gone,
	                   gone == 1 ? "y" : "ies", (long long)total);
	cache_list_free(f, n);
	return total;
}

/* why the entry at path is corrupt (its name must be its key's), or
 * NULL when it is whole (or gone since it was listed) */
static const char *cache_verify_file(const char *path)
{
	size_t len = 0, at = 0, blen;
	const char *why, *base = strrchr(path, '/') + 1;
	unsigned char *b = cache_read(path, &len, &why);
	char name[33], *key;

	if (b && !(why = cache_check(b, len, NULL, &at, &blen))) {
		if (!(key = strndup((const char *)b + CACHE_HEAD, at - CACHE_HEAD))) why = "out of memory";
		else cache_name(key, name);
		if (key && strncmp(base, name, 32)) why = "named for another key";
		free(key);
	}
	free(b);
	return why;
}

int cache_scan(const char *dir, int verify, int remove, cache_stats_t *st)
{
	cache_file_t *f;
	size_t n;
	time_t now = time(NULL);

	memset(st, 0, sizeof *st);
	if (cache_list(dir, &f, &n) < 0) return -1;
	for (size_t i = 0; i < n; i++) {
		const char *why = NULL;
		if (f[i].tmp) {
			st->tmp++;
			st->tmp_bytes += f[i].size;
			if (remove && cache_stale(&f[i], now) && unlink(f[i].path) == 0) st->removed++;
			continue;
		}
		st->entries++;
		st->bytes += f[i].size;
		if (!st->oldest || f[i].mtime < st->oldest) st->oldest = f[i].mtime;
		if (f[i].mtime > st->newest) st->newest = f[i].mtime;
		if (!verify || !(why = cache_verify_file(f[i].path))) continue;
		st->bad++;
		log_warn("cache entry %s: %s%s", f[i].path, why, remove ? ": removed" : "");
		if (remove && unlink(f[i].path) == 0) st->removed++;
	}
	cache_list_free(f, n);
	return 0;
}
