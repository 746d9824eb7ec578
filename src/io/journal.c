/* journal.c - reading done.jsonl, and what its lines say of the files
 * (see journal.h). */
#include "io/journal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "util/lines.h"
#include "util/log.h"

int journal_read(FILE *f, const char *path, json_t **prev, int *last)
{
	lines_t ln;
	int rc;

	*last = '\n';
	if (!(*prev = json_object())) {
		log_error("%s: out of memory reading it", path);
		return -1;
	}
	lines_init(&ln, f, path, NULL);
	while ((rc = lines_next(&ln)) > 0) {
		json_t *e = json_loadb(ln.s, ln.n, 0, NULL);
		const char *name = json_string_value(json_object_get(e, "name"));
		if (name && json_object_set(*prev, name, e) < 0) {
			json_decref(e);
			log_error("%s: out of memory reading it", path);
			rc = -1;
			break;
		}
		json_decref(e);
		*last = ln.nl ? '\n' : ln.n ? ln.s[ln.n - 1] : 0;
	}
	lines_free(&ln);
	if (rc < 0) {
		json_decref(*prev);
		*prev = NULL;
		return -1;
	}
	return 0;
}

const char *journal_str(const json_t *e, const char *key)
{
	const char *v = json_string_value(json_object_get(e, key));
	return v ? v : "";
}

int journal_files(const char *row, int (*fn)(void *ctx, const char *file, size_t n), void *ctx)
{
	const char *tab = strchr(row, '\t');

	if (!tab) return 0;
	for (const char *f = row; f < tab;) {
		size_t n = strcspn(f, ",\t");
		if (!fn(ctx, f, n)) return 0;
		f += n + (f[n] == ',');
	}
	return 1;
}

json_t *journal_stat(const char *dir, const char *name, size_t n)
{
	char *p = NULL;
	struct stat st;
	int ok;

	if (asprintf(&p, "%s/%.*s", dir, (int)n, name) < 0) return NULL;
	ok = fstatat(AT_FDCWD, p, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
	free(p);
	if (!ok) return NULL;
	return json_pack("[I, I, I]", (json_int_t)st.st_size, (json_int_t)st.st_mtim.tv_sec,
	                 (json_int_t)st.st_mtim.tv_nsec);
}

int journal_file_is(const json_t *files, const char *dir, const char *name, size_t n)
{
	char *key = strndup(name, n);
	const json_t *want = key ? json_object_get(files, key) : NULL;
	json_t *have = want ? journal_stat(dir, name, n) : NULL;
	int same = have && json_equal(have, want);

	free(key);
	json_decref(have);
	return same;
}

/* a file of a row's file column: one name in -o itself */
static int journal_name_ok(void *ctx, const char *file, size_t n)
{
	(void)ctx;
	return n > 0 && !memchr(file, '/', n) && !(n == 1 && *file == '.') &&
	       !(n == 2 && !strncmp(file, "..", 2));
}

int journal_row_ok(const char *row, int tabs)
{
	int t = 0;

	for (const unsigned char *c = (const unsigned char *)row; *c; c++) {
		if (*c == '\t') t++;
		else if (*c < 0x20 || *c == 0x7f) return 0;
	}
	return t <= tabs && journal_files(row, journal_name_ok, NULL);
}

json_t *journal_file_index(const json_t *prev)
{
	json_t *ix = json_object(), *e, *st;
	const char *name, *file;

	json_object_foreach((json_t *)prev, name, e)
		json_object_foreach(json_object_get(e, "files"), file, st)
			if (ix && json_object_set(ix, file, st) < 0) {
				json_decref(ix);
				return NULL;
			}
	return ix;
}

/* journal_files' callback of journal_row_files_are */
typedef struct {
	const json_t *files;
	const char   *dir;
} journal_is_t;

static int journal_is(void *ctx, const char *file, size_t n)
{
	const journal_is_t *c = ctx;
	return journal_file_is(c->files, c->dir, file, n);
}

int journal_row_files_are(const json_t *files, const char *dir, const char *row)
{
	journal_is_t c = { files, dir };
	return journal_files(row, journal_is, &c);
}
