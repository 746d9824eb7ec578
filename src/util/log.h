/* log.h (prefix log_) - the one levelled logger; everything goes to stderr.
 *
 * Library code reports through these and returns a status; it never exits.
 * Level: 0 error, 1 warning, 2 info (default), 3 debug.  -q lowers it by
 * one, -v raises it.  A line reads "esmbatch: LEVEL: message", led by the
 * local time ("2026-01-31 14:05:09 ") where stderr is not a terminal (a
 * cluster job's log); ESMBATCH_LOG_TIME=1 or 0 stamps lines or not
 * whatever stderr is.
 */
#ifndef ESMBATCH_UTIL_LOG_H
#define ESMBATCH_UTIL_LOG_H

enum { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

void log_set_level(int level);
int  log_get_level(void);
void log_msg(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Draw text as the live status line at the foot of stderr (\r-updated;
 * log lines go above it), cut to the terminal's width (its window size,
 * else $COLUMNS, else 80) so that it never wraps; NULL or "" clears it.
 * -1 (nothing drawn) when stderr is not a terminal. */
int  log_status_line(const char *text);
/* 1 when stderr is a terminal (a status line is drawn), else 0 */
int  log_on_terminal(void);

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
