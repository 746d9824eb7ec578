/* log.c - levelled logging to stderr, one line per call, thread-safe. */
#include <stdarg.h>
#include <stdio.h>

#include "log.h"

static int log_level = LOG_INFO;

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
	/* one fputs per line so lines from worker threads do not interleave */
	flockfile(stderr);
	fputs(line, stderr);
	fputc('\n', stderr);
	funlockfile(stderr);
}
