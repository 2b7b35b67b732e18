/* err.c: see err.h. */
#include "base/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The message, cut to ERR_MSG_MAX on purpose: it is read by a person. */
__attribute__((format(printf, 2, 0))) static void set_msg(struct err *e, const char *fmt, va_list ap)
{
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
}

/* Append ": tail" to the message, as far as it fits. */
static void add_tail(struct err *e, const char *tail)
{
	size_t n = strlen(e->msg);

	snprintf(e->msg + n, sizeof(e->msg) - n, ": %s", tail);
}

int err_set(struct err *e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (e) {
		set_msg(e, fmt, ap);
		e->code = 0;
	}
	va_end(ap);
	return -1;
}

int err_errno(struct err *e, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	if (e) {
		set_msg(e, fmt, ap);
		add_tail(e, strerror(saved));
		e->code = saved;
	}
	va_end(ap);
	errno = saved;
	return -1;
}

int err_prefix(struct err *e, const char *fmt, ...)
{
	char old[ERR_MSG_MAX];
	va_list ap;

	if (!e)
		return -1;
	memcpy(old, e->msg, sizeof(old));
	va_start(ap, fmt);
	set_msg(e, fmt, ap);
	va_end(ap);
	add_tail(e, old);
	return -1;
}

void err_clear(struct err *e)
{
	e->msg[0] = '\0';
	e->code = 0;
}
