/* env.h (prefix env_) - settings read from the environment.
 *
 * A set variable that does not hold what it should is a warning naming it
 * and the value used instead, never silently ignored.
 */
#ifndef ESMBATCH_UTIL_ENV_H
#define ESMBATCH_UTIL_ENV_H

/* $name as seconds: a number in [0, max]; dflt when unset or empty, and,
 * after one warning, when it is anything else */
double env_seconds(const char *name, double dflt, double max);

#endif
