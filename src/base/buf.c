/* buf.c: see buf.h. */
#include "base/buf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char buf_empty[1];

static void oom(size_t n)
{
	fprintf(stderr, "fatal: out of memory allocating %zu bytes\n", n);
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom(n);
	return p;
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		oom(n * size);
	return p;
}

void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		oom(n);
	return q;
}

char *xstrndup(const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	char *p = xmalloc(len + 1);

	memcpy(p, s, len);
	p[len] = '\0';
	return p;
}

char *xstrdup(const char *s)
{
	return xstrndup(s, strlen(s));
}

void *xmemdup(const void *p, size_t n)
{
	void *q = xmalloc(n);
	if (n)
		memcpy(q, p, n);
	return q;
}

void buf_init(struct buf *b, size_t max)
{
	b->data = buf_empty;
	b->len = 0;
	b->cap = 0;
	b->max = max ? max : BUF_MAX_DEFAULT;
}

void buf_release(struct buf *b)
{
	if (b->cap)
		free(b->data);
	buf_init(b, b->max);
}

void buf_reset(struct buf *b)
{
	b->len = 0;
	b->data[0] = '\0';
}

int buf_grow(struct buf *b, size_t n)
{
	size_t want, cap;

	if (n > b->max || b->len > b->max - n) {
		errno = EMSGSIZE;
		return -1;
	}
	want = b->len + n + 1;
	if (want <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 64;
	while (cap < want)
		cap = cap > ((size_t)-1) / 2 ? want : cap * 2;
	if (b->cap) {
		b->data = xrealloc(b->data, cap);
	} else {
		b->data = xmalloc(cap);
		b->data[0] = '\0';
	}
	b->cap = cap;
	return 0;
}

int buf_add(struct buf *b, const void *p, size_t n)
{
	if (buf_grow(b, n) < 0)
		return -1;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int buf_adds(struct buf *b, const char *s)
{
	return buf_add(b, s, strlen(s));
}

int buf_addch(struct buf *b, char c)
{
	return buf_add(b, &c, 1);
}

int buf_vaddf(struct buf *b, const char *fmt, va_list ap)
{
	va_list cp;
	int n;

	va_copy(cp, ap);
	n = vsnprintf(b->data + b->len, b->cap ? b->cap - b->len : 0, fmt, cp);
	va_end(cp);
	if (n < 0)
		return -1;
	if (b->cap && (size_t)n < b->cap - b->len) {
		if ((size_t)n > b->max - b->len) {
			b->data[b->len] = '\0';
			errno = EMSGSIZE;
			return -1;
		}
		b->len += (size_t)n;
		return 0;
	}
	if (buf_grow(b, (size_t)n) < 0) {
		if (b->cap)
			b->data[b->len] = '\0';
		return -1;
	}
	vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
	b->len += (size_t)n;
	return 0;
}

int buf_add_shell_word(struct buf *b, const char *s)
{
	int r = buf_addch(b, '\'');

	for (; *s && r == 0; s++)
		r = *s == '\'' ? buf_adds(b, "'\\''") : buf_addch(b, *s);
	return r < 0 ? -1 : buf_addch(b, '\'');
}

int buf_addf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = buf_vaddf(b, fmt, ap);
	va_end(ap);
	return r;
}

void buf_truncate(struct buf *b, size_t n)
{
	if (n >= b->len)
		return;
	b->len = n;
	b->data[n] = '\0';
}

void buf_consume(struct buf *b, size_t n)
{
	if (n >= b->len) {
		buf_reset(b);
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
	b->data[b->len] = '\0';
}

void buf_setlen(struct buf *b, size_t len)
{
	if (!b->cap)
		return;
	b->len = len < b->cap ? len : b->cap - 1;
	b->data[b->len] = '\0';
}

char *buf_detach(struct buf *b, size_t *len)
{
	char *p;

	if (len)
		*len = b->len;
	p = b->cap ? b->data : xstrdup("");
	buf_init(b, b->max);
	return p;
}
