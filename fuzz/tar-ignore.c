/*
 * fuzz/tar-ignore.c: the .dockerignore reader and matcher over arbitrary
 * input. The input is split at its first NUL: before it the .dockerignore
 * text, after it a list of paths (one per line) to match. Parsing must
 * accept or refuse without crashing; matching must be deterministic, and
 * a path must never be left out by a file without patterns that could
 * match it (an empty or comment-only file excludes nothing).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tar/tar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond)
{
	if (!cond)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data, *nul = memchr(data, '\0', size);
	size_t tlen = nul ? (size_t)(nul - text) : size;
	struct tar_ignore *ig = NULL, *none = NULL;
	struct err e;
	char *paths;

	if (tar_ignore_parse(text, tlen, &ig, &e) < 0) {
		must(!ig && !strncmp(e.msg, ".dockerignore: ", 15));
		return 0;
	}
	must(tar_ignore_parse("# only a comment\n", 17, &none, &e) == 0);
	paths = malloc(size - tlen + 1);
	memcpy(paths, nul ? nul + 1 : "", nul ? size - tlen - 1 : 0);
	paths[nul ? size - tlen - 1 : 0] = '\0';
	for (char *p = paths, *end; *p; p = end + (*end != '\0')) {
		end = p + strcspn(p, "\n");
		{
			char save = *end;
			bool a, b;

			*end = '\0';
			a = tar_ignore_match(ig, p);
			b = tar_ignore_match(ig, p);
			must(a == b);
			must(!tar_ignore_match(none, p));
			*end = save;
		}
	}
	free(paths);
	tar_ignore_free(none);
	tar_ignore_free(ig);
	return 0;
}
