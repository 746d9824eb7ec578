/* tmpdir.c - the C tests' scratch names under $TMPDIR (see tmpdir.h). */
#include "tmpdir.h"

#include <stdio.h>
#include <stdlib.h>

char *tmpdir_template(char *buf, size_t n, const char *name)
{
	const char *t = getenv("TMPDIR");
	int w = snprintf(buf, n, "%s/%s.XXXXXX", t && *t ? t : "/tmp", name);

	return w >= 0 && (size_t)w < n ? buf : NULL;
}
