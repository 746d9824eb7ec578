/* journal.c - reading done.jsonl (see journal.h). */
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "io/journal.h"

int journal_read(FILE *f, json_t **prev, int *last)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	*last = '\n';
	if (!(*prev = json_object())) return -1;
	while ((n = getline(&line, &cap, f)) > 0) {
		json_t *e = json_loadb(line, (size_t)n, 0, NULL);
		const char *name = json_string_value(json_object_get(e, "name"));
		if (name && json_object_set(*prev, name, e) < 0) {
			json_decref(e);
			json_decref(*prev);
			*prev = NULL;
			free(line);
			return -1;
		}
		json_decref(e);
		*last = line[n - 1];
	}
	free(line);
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
