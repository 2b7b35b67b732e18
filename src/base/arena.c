/* arena.c: see arena.h. */
#include "base/arena.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"

#define ARENA_BLOCK_MIN 4096
#define ARENA_ALIGN 16

struct arena_block {
	struct arena_block *next;
	size_t size, used;
	_Alignas(ARENA_ALIGN) unsigned char mem[];
};

void *arena_alloc(struct arena *a, size_t n)
{
	struct arena_block *b = a->head;
	size_t need = (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
	void *p;

	if (need < n)
		abort();
	if (!b || b->size - b->used < need) {
		size_t size = need > ARENA_BLOCK_MIN ? need : ARENA_BLOCK_MIN;
		b = xmalloc(sizeof(*b) + size);
		b->size = size;
		b->used = 0;
		b->next = a->head;
		a->head = b;
	}
	p = b->mem + b->used;
	b->used += need;
	a->used += need;
	memset(p, 0, n);
	return p;
}

char *arena_strndup(struct arena *a, const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	char *p = arena_alloc(a, len + 1);

	memcpy(p, s, len);
	return p;
}

char *arena_strdup(struct arena *a, const char *s)
{
	return arena_strndup(a, s, strlen(s));
}

char *arena_printf(struct arena *a, const char *fmt, ...)
{
	va_list ap;
	int n;
	char *p;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return arena_strdup(a, "");
	p = arena_alloc(a, (size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(p, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return p;
}

void arena_release(struct arena *a)
{
	struct arena_block *b = a->head;

	while (b) {
		struct arena_block *next = b->next;
		free(b);
		b = next;
	}
	a->head = NULL;
	a->used = 0;
}
