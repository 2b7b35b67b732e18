/*
 * err.h: the error a fallible function hands back to its caller.
 *
 * Rule: a function that can fail returns -1 (or NULL) and fills the caller's
 * struct err with a message a user can act on. Callers add context on the way
 * up with err_prefix ("deploy: compose: service \"x\" has no image").
 * The buffer is fixed: filling it never allocates and never fails.
 */
#ifndef DENV_ERR_H
#define DENV_ERR_H

#define ERR_MSG_MAX 512

struct err {
	char msg[ERR_MSG_MAX];
	int code;	/* optional: an errno value or an HTTP status; 0 if unset */
};

/* Set the message; always returns -1 so that `return err_set(e, ...)` reads well. */
int err_set(struct err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Set the message followed by ": strerror(errno)", and e->code = errno. Returns -1. */
int err_errno(struct err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Put "context: " in front of the current message. Returns -1. */
int err_prefix(struct err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Clear to an empty message and code 0. */
void err_clear(struct err *e);

#endif
