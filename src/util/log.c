/* log.c - levelled logging to stderr, one line per call, thread-safe. */
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "util/log.h"

static int log_level = LOG_INFO;
static char log_status[256];   /* the live status line on a terminal, or "" */

void log_set_level(int level) { log_level = level; }
int  log_get_level(void) { return log_level; }

void log_msg(int level, const char *fmt, ...)
{
	static const char *tag[] = { "error", "warning", "info", "debug" };
	char line[4096];
	va_list ap;
	int n;

	if (level > log_level)
		return;
	if (level < LOG_ERROR) level = LOG_ERROR;
	if (level > LOG_DEBUG) level = LOG_DEBUG;
	n = snprintf(line, sizeof line, "esmbatch: %s: ", tag[level]);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof line - n, fmt, ap);
	va_end(ap);
	/* one fputs per line so lines from worker threads do not interleave;
	 * a status line is cleared first and drawn again below */
	flockfile(stderr);
	if (*log_status) fputs("\r\033[K", stderr);
	fputs(line, stderr);
	fputc('\n', stderr);
	if (*log_status) fputs(log_status, stderr);
	funlockfile(stderr);
}

int log_status_line(const char *text)
{
	if (!isatty(STDERR_FILENO)) return -1;
	flockfile(stderr);
	snprintf(log_status, sizeof log_status, "%s", text ? text : "");
	fputs("\r\033[K", stderr);
	fputs(log_status, stderr);
	fflush(stderr);
	funlockfile(stderr);
	return 0;
}
