/* lines.c - bounded line reading (see lines.h). */
#include "util/lines.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/grow.h"
#include "util/log.h"

void lines_init(lines_t *l, FILE *f, const char *name, volatile sig_atomic_t *stop)
{
	memset(l, 0, sizeof *l);
	l->f = f;
	l->name = name;
	l->stop = stop;
}

void lines_free(lines_t *l)
{
	free(l->s);
	l->s = NULL;
	l->cap = l->n = 0;
}

/* room for one more byte and the NUL; 0 or -1 (logged) */
static int lines_grow(lines_t *l)
{
	if (grow_array(&l->s, &l->cap, l->n + 2, 1) < 0) {
		log_error("%s:%ld: out of memory reading the line", l->name, l->lineno + 1);
		return -1;
	}
	return 0;
}

int lines_next(lines_t *l)
{
	l->n = 0;
	l->nl = 0;
	if (l->stop && *l->stop) {
		log_error("%s:%ld: interrupted while reading", l->name, l->lineno + 1);
		return -1;
	}
	for (;;) {
		int c;
		errno = 0;
		c = getc_unlocked(l->f);
		if (c == EOF) {
			if (!ferror(l->f)) break;
			if (errno == EINTR && !(l->stop && *l->stop)) {
				clearerr(l->f);
				continue;
			}
			if (l->stop && *l->stop)
				log_error("%s:%ld: interrupted while reading", l->name, l->lineno + 1);
			else
				log_error("%s:%ld: read error: %s", l->name, l->lineno + 1,
				          strerror(errno ? errno : EIO));
			return -1;
		}
		if (c == '\n') {
			l->nl = 1;
			break;
		}
		if (l->n == LINES_MAX) {
			log_error("%s:%ld: line longer than %d bytes", l->name, l->lineno + 1, LINES_MAX);
			return -1;
		}
		if (lines_grow(l) < 0) return -1;
		l->s[l->n++] = (char)c;
	}
	if (l->n == 0 && !l->nl) return 0;
	if (lines_grow(l) < 0) return -1;
	l->s[l->n] = '\0';
	l->lineno++;
	return 1;
}
