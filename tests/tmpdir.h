/* tmpdir.h (prefix tmpdir_) - the C tests' scratch names: under $TMPDIR,
 * /tmp when it is unset or empty, as mkstemp(3)/mkdtemp(3) templates. */
#ifndef ESMBATCH_TEST_TMPDIR_H
#define ESMBATCH_TEST_TMPDIR_H

#include <stddef.h>

/* "$TMPDIR/NAME.XXXXXX" into buf (n bytes); buf, or NULL if it does not fit */
char *tmpdir_template(char *buf, size_t n, const char *name);

#endif
