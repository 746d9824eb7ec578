/* journal.c - reading done.jsonl (see journal.h). */
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "io/journal.h"
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
