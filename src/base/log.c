/* log.c: see log.h. */
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static enum log_level log_level = LOG_INFO;

void log_set_level(enum log_level level)
{
	log_level = level;
}

enum log_level log_get_level(void)
{
	return log_level;
}

void log_msg(enum log_level level, const char *module, const char *fmt, ...)
{
	static const char *names[] = { "debug", "info", "warn", "error" };
	char line[2048];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	size_t n;

	if (level < log_level)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
	n += (size_t)snprintf(line + n, sizeof(line) - n, ".%03ldZ %s %s: ",
			      ts.tv_nsec / 1000000, names[level], module);
	va_start(ap, fmt);
	if (n < sizeof(line))
		vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	va_end(ap);
	/* One write per line so concurrent writers do not interleave mid-line. */
	n = strnlen(line, sizeof(line) - 2);
	line[n++] = '\n';
	fwrite(line, 1, n, stderr);
	fflush(stderr);
}
