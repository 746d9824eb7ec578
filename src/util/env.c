/* env.c - settings read from the environment (see env.h). */
#include "util/env.h"

#include <stdlib.h>

#include "util/log.h"

double env_seconds(const char *name, double dflt, double max)
{
	const char *e = getenv(name);
	char *end;
	double v;

	if (!e || !*e) return dflt;
	v = strtod(e, &end);
	if (*end || !(v >= 0) || v > max) {
		log_warn("%s=%s: not a number of seconds in [0, %g]; %g used", name, e, max, dflt);
		return dflt;
	}
	return v;
}
