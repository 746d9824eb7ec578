/* log.c - levelled logging to stderr, one line per call, thread-safe;
 * each line stamped with the local time where stderr is not a terminal
 * (a cluster job's log), and the live status line where it is. */
#include "util/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

static int log_level = LOG_INFO;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;   /* stderr, log_status */
static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static int log_tty;            /* stderr is a terminal */
static int log_stamped;        /* lines carry the time */
static char log_status[256];   /* the live status line on a terminal, or "" */

/* what stderr is, and ESMBATCH_LOG_TIME (0 or 1) over the default */
static void log_setup(void)
{
	const char *e = getenv("ESMBATCH_LOG_TIME");

	log_tty = isatty(STDERR_FILENO);
	log_stamped = e && (!strcmp(e, "0") || !strcmp(e, "1")) ? *e == '1' : !log_tty;
}

void log_set_level(int level) { log_level = level; }
int  log_get_level(void) { return log_level; }

void log_msg(int level, const char *fmt, ...)
{
	static const char *tag[] = { "error", "warning", "info", "debug" };
	char line[4096];
	va_list ap;
	int n = 0;

	if (level > log_level)
		return;
	if (level < LOG_ERROR) level = LOG_ERROR;
	if (level > LOG_DEBUG) level = LOG_DEBUG;
	pthread_once(&log_once, log_setup);
	if (log_stamped) {
		time_t t = time(NULL);
		struct tm tm;
		if (localtime_r(&t, &tm)) n = (int)strftime(line, sizeof line, "%Y-%m-%d %H:%M:%S ", &tm);
	}
	n += snprintf(line + n, sizeof line - n, "esmbatch: %s: ", tag[level]);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof line - n, fmt, ap);
	va_end(ap);
	/* one fputs per line so lines from worker threads do not interleave;
	 * a status line is cleared first and drawn again below */
	pthread_mutex_lock(&log_lock);
	if (*log_status) fputs("\r\033[K", stderr);
	fputs(line, stderr);
	fputc('\n', stderr);
	if (*log_status) fputs(log_status, stderr);
	fflush(stderr);
	pthread_mutex_unlock(&log_lock);
}

/* the terminal's columns: its window size, else $COLUMNS, else 80 */
static int log_columns(void)
{
	struct winsize ws;
	const char *e = getenv("COLUMNS");
	int c;

	if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
	if (e && (c = atoi(e)) > 0) return c;
	return 80;
}

/* text cut to cols - 1 characters (UTF-8 sequences kept whole), so that
 * the cursor never wraps onto a new row */
static void log_cut(char *text, int cols)
{
	int n = 0;

	for (char *p = text; *p; p++)
		if (((unsigned char)*p & 0xc0) != 0x80 && ++n >= cols) {
			*p = 0;
			return;
		}
}

int log_on_terminal(void)
{
	pthread_once(&log_once, log_setup);
	return log_tty;
}

int log_status_line(const char *text)
{
	if (!log_on_terminal()) return -1;
	pthread_mutex_lock(&log_lock);
	snprintf(log_status, sizeof log_status, "%s", text ? text : "");
	log_cut(log_status, log_columns());
	fputs("\r\033[K", stderr);
	fputs(log_status, stderr);
	fflush(stderr);
	pthread_mutex_unlock(&log_lock);
	return 0;
}
