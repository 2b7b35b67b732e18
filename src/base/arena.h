/*
 * arena.h: bump allocation for data that lives exactly as long as one request
 * or one command. Everything is freed at once by arena_release.
 */
#ifndef DENV_ARENA_H
#define DENV_ARENA_H

#include <stddef.h>

struct arena_block;

struct arena {
	struct arena_block *head;
	size_t used;	/* total bytes handed out, for limits and tests */
};

#define ARENA_INIT { NULL, 0 }

void *arena_alloc(struct arena *a, size_t n);	/* zeroed, aligned for any type */
char *arena_strdup(struct arena *a, const char *s);
char *arena_strndup(struct arena *a, const char *s, size_t n);
char *arena_printf(struct arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void arena_release(struct arena *a);

#endif
