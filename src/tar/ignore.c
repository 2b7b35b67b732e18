/*
 * ignore.c: .dockerignore, the rules Docker applies when it packs a build
 * context (moby/patternmatcher), so a context packed here holds what
 * `docker build` would have sent:
 *  - one pattern per line; surrounding whitespace trimmed; a line starting
 *    with '#' is a comment; blank lines are skipped;
 *  - a leading '!' makes an exception (the path is included again);
 *  - the pattern is cleaned like a path ("./a/" is "a", "/a" is "a",
 *    "a/../b" is "b") and always matches from the context's root: "*.md"
 *    is README.md, not docs/x.md;
 *  - '*' is any run of characters but '/', '?' one character but '/',
 *    "[...]" a class ("[^...]" or "[!...]" negated, ranges a-z), '\' makes
 *    the next character literal; "**" followed by the pattern's end is
 *    anything, otherwise "**" (and the '/' after it) is any number of whole
 *    directories, none included ("**" "/" "*.go" is every .go file);
 *  - a path matches a pattern when it, or one of its parent directories,
 *    does; the last pattern that matches decides.
 * Matching is a dynamic program over (pattern token, path byte): time
 * tokens * bytes, memory one row, so no pattern backtracks exponentially.
 */
#include <stdlib.h>
#include <string.h>

#include "tar/tar.h"

enum tok_kind { T_LIT, T_ONE, T_CLASS, T_STAR, T_ANY, T_DIRS };

struct tok {
	enum tok_kind kind;
	unsigned char c;	/* T_LIT */
	bool neg;		/* T_CLASS */
	uint8_t set[32];	/* T_CLASS: a bit per byte */
};

struct pattern {
	bool exception;
	struct tok *toks;
	size_t n;
};

struct tar_ignore {
	struct pattern *p;
	size_t n;
	bool exceptions;
};

static void set_bit(uint8_t *set, unsigned char c)
{
	set[c >> 3] |= (uint8_t)(1u << (c & 7));
}

static bool has_bit(const uint8_t *set, unsigned char c)
{
	return set[c >> 3] & (1u << (c & 7));
}

/* "[...]" at s (s[0] == '['): the class into t; bytes used, or 0 when the
 * class never closes (then '[' is taken literally, as Go's regexp would refuse it). */
static size_t parse_class(const char *s, size_t len, struct tok *t)
{
	size_t i = 1;
	bool any = false;

	memset(t->set, 0, sizeof(t->set));
	t->kind = T_CLASS;
	t->neg = i < len && (s[i] == '^' || s[i] == '!');
	i += t->neg;
	while (i < len && (s[i] != ']' || !any)) {
		unsigned char lo = (unsigned char)s[i], hi;

		if (lo == '\\' && i + 1 < len)
			lo = (unsigned char)s[++i];
		i++;
		hi = lo;
		if (i + 1 < len && s[i] == '-' && s[i + 1] != ']') {
			hi = (unsigned char)s[i + 1];
			if (hi == '\\' && i + 2 < len)
				hi = (unsigned char)s[++i + 1];
			i += 2;
		}
		for (unsigned c = lo; c <= hi; c++)
			set_bit(t->set, (unsigned char)c);
		any = true;
	}
	return i < len ? i + 1 : 0;
}

/* The cleaned pattern (see the top) into out; its length. */
static bool ends_in_dotdot(const char *out, size_t n)
{
	return n >= 2 && out[n - 1] == '.' && out[n - 2] == '.' && (n == 2 || out[n - 3] == '/');
}

static size_t clean(const char *s, size_t len, char *out)
{
	size_t n = 0, i = 0;
	bool rooted = len > 0 && s[0] == '/';

	while (i < len) {
		size_t seg = i;

		while (i < len && s[i] != '/')
			i++;
		if (i - seg == 0 || (i - seg == 1 && s[seg] == '.')) {
			/* empty or "." */
		} else if (i - seg == 2 && s[seg] == '.' && s[seg + 1] == '.' && n > 0 && !ends_in_dotdot(out, n)) {
			while (n > 0 && out[n - 1] != '/')
				n--;
			n -= n > 0;
		} else if (i - seg == 2 && s[seg] == '.' && s[seg + 1] == '.' && n == 0 && rooted) {
			/* "/.." is "/" */
		} else {
			if (n)
				out[n++] = '/';
			memcpy(out + n, s + seg, i - seg);
			n += i - seg;
		}
		i++;
	}
	out[n] = '\0';
	return n;
}

static void compile(const char *s, size_t len, struct pattern *p)
{
	p->toks = xcalloc(len ? len : 1, sizeof(struct tok));
	p->n = 0;
	for (size_t i = 0; i < len;) {
		struct tok *t = &p->toks[p->n++];
		size_t used;

		if (s[i] == '*' && i + 1 < len && s[i + 1] == '*') {
			i += 2;
			i += i < len && s[i] == '/';
			t->kind = i >= len ? T_ANY : T_DIRS;
		} else if (s[i] == '*') {
			t->kind = T_STAR;
			i++;
		} else if (s[i] == '?') {
			t->kind = T_ONE;
			i++;
		} else if (s[i] == '[' && (used = parse_class(s + i, len - i, t)) > 0) {
			i += used;
		} else {
			if (s[i] == '\\' && i + 1 < len)
				i++;
			t->kind = T_LIT;
			t->c = (unsigned char)s[i++];
		}
	}
}

int tar_ignore_parse(const char *text, size_t len, struct tar_ignore **out, struct err *e)
{
	struct tar_ignore *ig;
	char *cleaned;
	size_t i = 0;

	*out = NULL;
	if (len > TAR_IGNORE_MAX_BYTES)
		return err_set(e, ".dockerignore: larger than %zu bytes", (size_t)TAR_IGNORE_MAX_BYTES);
	ig = xcalloc(1, sizeof(*ig));
	cleaned = xmalloc(len + 1);
	while (i < len) {
		size_t start = i, end;
		bool exc = false;

		while (i < len && text[i] != '\n')
			i++;
		end = i++;
		while (start < end && strchr(" \t\r\f\v", text[start]))
			start++;
		while (end > start && strchr(" \t\r\f\v", text[end - 1]))
			end--;
		if (start == end || text[start] == '#')
			continue;
		if (text[start] == '!') {
			exc = true;
			start++;
		}
		if (ig->n >= TAR_IGNORE_MAX_PATTERNS) {
			free(cleaned);
			tar_ignore_free(ig);
			return err_set(e, ".dockerignore: more than %d patterns", TAR_IGNORE_MAX_PATTERNS);
		}
		ig->p = xrealloc(ig->p, (ig->n + 1) * sizeof(*ig->p));
		ig->p[ig->n].exception = exc;
		compile(cleaned, clean(text + start, end - start, cleaned), &ig->p[ig->n]);
		ig->exceptions |= exc;
		ig->n++;
	}
	free(cleaned);
	*out = ig;
	return 0;
}

/* Whether tokens match all of s[0..len). row and next: len + 1 bools each. */
static bool match(const struct pattern *p, const char *s, size_t len, bool *row, bool *next)
{
	for (size_t j = 0; j <= len; j++)
		next[j] = j == len;
	for (size_t i = p->n; i-- > 0;) {
		const struct tok *t = &p->toks[i];
		bool dirs = false, *tmp;

		for (size_t j = len + 1; j-- > 0;) {
			unsigned char c = j < len ? (unsigned char)s[j] : 0;
			bool here = j < len, m;

			switch (t->kind) {
			case T_LIT:
				m = here && c == t->c && next[j + 1];
				break;
			case T_ONE:
				m = here && c != '/' && next[j + 1];
				break;
			case T_CLASS:
				m = here && c != '/' && has_bit(t->set, c) != t->neg && next[j + 1];
				break;
			case T_STAR:
				m = next[j] || (here && c != '/' && row[j + 1]);
				break;
			case T_ANY:
				m = next[j] || (here && row[j + 1]);
				break;
			default:	/* T_DIRS: nothing, or anything that ends in '/' */
				dirs = dirs || (here && c == '/' && next[j + 1]);
				m = next[j] || dirs;
				break;
			}
			row[j] = m;
		}
		tmp = next;
		next = row;
		row = tmp;
	}
	return next[0];
}

bool tar_ignore_match(const struct tar_ignore *ig, const char *path)
{
	size_t len = strlen(path);
	bool *row, *next, excluded = false;

	if (!ig || !ig->n)
		return false;
	row = xmalloc(len + 2);
	next = xmalloc(len + 2);
	for (size_t k = 0; k < ig->n; k++) {
		const struct pattern *p = &ig->p[k];
		bool m = false;

		/* Only a pattern that would change the answer is worth matching. */
		if (p->exception != excluded)
			continue;
		/* The path itself, then each parent directory, shortest first. */
		for (size_t cut = 0; cut <= len && !m; cut++)
			if (cut == len || path[cut] == '/')
				m = match(p, path, cut, row, next);
		if (m)
			excluded = !p->exception;
	}
	free(row);
	free(next);
	return excluded;
}

bool tar_ignore_has_exceptions(const struct tar_ignore *ig)
{
	return ig && ig->exceptions;
}

void tar_ignore_free(struct tar_ignore *ig)
{
	if (!ig)
		return;
	for (size_t i = 0; i < ig->n; i++)
		free(ig->p[i].toks);
	free(ig->p);
	free(ig);
}
