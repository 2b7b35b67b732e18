/*
 * buf.h: the one growable byte buffer.
 *
 * Rules (after git's strbuf and curl's dynbuf):
 *  - data is never NULL and is always NUL-terminated, so a buf can be read as
 *    a C string when it holds text (len does not count the NUL);
 *  - every buffer has a cap (max): growing past it fails with -1 and errno
 *    EMSGSIZE and leaves the contents as they were, so a peer cannot make us
 *    allocate without bound;
 *  - buf_detach hands the allocation to the caller, who frees it with free().
 * Out-of-memory aborts the process (see xmalloc): there is nothing sensible
 * left to do, and pretending otherwise spreads untested paths everywhere.
 */
#ifndef DENV_BUF_H
#define DENV_BUF_H

#include <stdarg.h>
#include <stddef.h>

/* Default cap when none is given: large enough for any single document we hold. */
#define BUF_MAX_DEFAULT ((size_t)256 << 20)

struct buf {
	char *data;
	size_t len;
	size_t cap;	/* bytes allocated (0 while data points at the shared empty string) */
	size_t max;	/* most bytes the buffer may hold */
};

extern char buf_empty[1];
#define BUF_INIT { buf_empty, 0, 0, BUF_MAX_DEFAULT }

void buf_init(struct buf *b, size_t max);	/* max 0 means BUF_MAX_DEFAULT */
void buf_release(struct buf *b);		/* free contents; the buf is empty again */
void buf_reset(struct buf *b);			/* len = 0, keep the allocation */

/* Make room for n more bytes. -1 (EMSGSIZE) if len + n would pass max. */
int buf_grow(struct buf *b, size_t n);

int buf_add(struct buf *b, const void *p, size_t n);
int buf_adds(struct buf *b, const char *s);
int buf_addch(struct buf *b, char c);
int buf_addf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int buf_vaddf(struct buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* s as one single-quoted word for a POSIX shell (a quote inside as '\''). */
int buf_add_shell_word(struct buf *b, const char *s);

/* Shorten to n bytes (n <= len). */
void buf_truncate(struct buf *b, size_t n);
/* Remove the first n bytes (n <= len), moving the rest down. */
void buf_consume(struct buf *b, size_t n);
/* Set len after writing directly into data + len (after buf_grow). */
void buf_setlen(struct buf *b, size_t len);

/* Take the allocation: returns a malloc'd NUL-terminated string; b is empty after. */
char *buf_detach(struct buf *b, size_t *len);

/* Allocation that never returns NULL: aborts with a message when memory is gone. */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
void *xmemdup(const void *p, size_t n);

#endif
