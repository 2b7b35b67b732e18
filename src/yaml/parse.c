/*
 * parse.c: YAML text to the JSON DOM (what is supported: see yaml.h).
 *
 * A recursive-descent parser straight over the text, without a separate
 * token stream: block structure is decided by the column of each line's first
 * character, the way a reader sees it. The text is first checked (UTF-8,
 * control characters, BOM) and copied with line breaks normalised to "\n", so
 * that the copy is NUL-terminated and every lookahead can stop at '\0'.
 *
 * Each node parser leaves p->pos just after the node it read (a block scalar:
 * at the start of the first line after it). Every node created is counted
 * against max_nodes, alias copies by their full size, so that a document that
 * expands aliases exponentially fails as soon as it passes the limit.
 */
#include "yaml/yaml.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/utf8.h"

enum style { ST_PLAIN, ST_QUOTED, ST_BLOCK };
enum tag { TAG_NONE, TAG_BANG, TAG_STR, TAG_INT, TAG_FLOAT, TAG_BOOL, TAG_NULL, TAG_MAP, TAG_SEQ };

/* Anchor and tag written before a node. */
struct props {
	const char *anchor;
	size_t anchor_len, anchor_pos;
	enum tag tag;
	const char *tag_text;
	size_t tag_len, tag_pos;
};

struct anchor {
	const char *name;	/* points into the text */
	size_t len;
	size_t prev;		/* index + 1 of the previous anchor in the same hash chain, 0 = none */
	struct json *node;	/* in the result, or in p->keep */
	char *text;		/* a scalar's text, so that an alias can serve as a key; else NULL */
	size_t text_len;
	size_t size;		/* nodes in node */
	unsigned height;	/* collection levels in node (a scalar: 0) */
};

struct parser {
	const char *s;		/* normalised text, NUL-terminated */
	size_t len, pos;
	size_t max_nodes, max_scalar;
	unsigned max_depth;
	size_t nodes;		/* nodes created so far, alias copies included */
	unsigned depth;		/* collections open around pos */
	int flow_n;		/* indentation of the block node around the current flow collection */
	struct anchor *anchors;
	size_t nanchors, anchors_cap;
	size_t *anchor_tab;	/* hash of names: index + 1 of the latest anchor in each chain */
	struct json *keep;	/* anchored nodes that are not part of the result (keys, merge values) */
	struct buf sb;		/* the scalar being read */
	locale_t cloc;		/* "C" numeric locale for strtod, made on first use */
	struct err *e;
};

/* ---- errors and positions ---- */

/* 1-based line and column (in characters) of byte pos; "\r\n" and a lone
 * "\r" count as one line break, as they do after normalisation. */
static void linecol(const char *s, size_t start, size_t pos, size_t *line, size_t *col)
{
	*line = 1;
	*col = 1;
	for (size_t i = start; i < pos; i++) {
		unsigned char c = (unsigned char)s[i];
		/* i + 1 <= pos here, and pos is within the text */
		if (c == '\n' || (c == '\r' && (i + 1 == pos || s[i + 1] != '\n'))) {
			(*line)++;
			*col = 1;
		} else if (c != '\r' && (c & 0xC0) != 0x80) {
			(*col)++;
		}
	}
}

static int fail(struct parser *p, size_t pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct parser *p, size_t pos, const char *fmt, ...)
{
	char msg[ERR_MSG_MAX];
	size_t line, col;
	va_list ap;

	if (pos > p->len)
		pos = p->len;
	linecol(p->s, 0, pos, &line, &col);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return err_set(p->e, "%zu:%zu: %s", line, col, msg);
}

/* A short, printable rendering of a key or name for messages. */
static const char *shown(const char *s, size_t n, char *out, size_t outsz)
{
	size_t o = 0, i;

	for (i = 0; i < n && o + 5 < outsz; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\') {
			out[o++] = '\\';
			out[o++] = (char)c;
		} else if (c < 0x20 || c == 0x7f) {
			o += (size_t)snprintf(out + o, outsz - o, "\\x%02x", c);
		} else {
			out[o++] = (char)c;
		}
	}
	if (i < n && o + 4 < outsz) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
	return out;
}

/* ---- characters ---- */

static char at(const struct parser *p, size_t i) { return i < p->len ? p->s[i] : '\0'; }
static char cur(const struct parser *p) { return at(p, p->pos); }
static bool is_blank(char c) { return c == ' ' || c == '\t'; }
/* White space, line break or the end of the text. */
static bool is_ws0(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\0'; }
static bool is_flow_ind(char c) { return c == ',' || c == '[' || c == ']' || c == '{' || c == '}'; }
/* Anchor names: YAML allows more, but ':' is left out so that "*a: x" reads
 * as an alias key, as libyaml-based parsers read it. */
static bool is_anchor_char(char c) { return !is_ws0(c) && !is_flow_ind(c) && c != ':'; }

static size_t line_start(const struct parser *p, size_t pos)
{
	while (pos > 0 && p->s[pos - 1] != '\n')
		pos--;
	return pos;
}

/* Column in characters (0-based) of pos within its line. */
static int col_of(const struct parser *p, size_t pos)
{
	int c = 0;
	for (size_t i = line_start(p, pos); i < pos; i++)
		if (((unsigned char)p->s[i] & 0xC0) != 0x80)
			c++;
	return c;
}

/* "---" or "..." at the start of a line, followed by white space. */
static bool doc_marker(const struct parser *p, size_t pos)
{
	if (pos != line_start(p, pos) || pos + 3 > p->len)
		return false;
	if (memcmp(p->s + pos, "---", 3) != 0 && memcmp(p->s + pos, "...", 3) != 0)
		return false;
	return is_ws0(at(p, pos + 3));
}

static void skip_blanks(struct parser *p)
{
	while (is_blank(cur(p)))
		p->pos++;
}

/* A comment starts at '#' after white space or at the start of a line. */
static bool comment_here(const struct parser *p)
{
	return cur(p) == '#' && (p->pos == 0 || is_ws0(p->s[p->pos - 1]));
}

static bool at_line_end(const struct parser *p)
{
	char c = cur(p);
	return c == '\n' || c == '\0' || comment_here(p);
}

/*
 * Block context: skip blanks, comments and line breaks up to the next
 * content. *fresh tells whether that content is the first thing on its line
 * (or the end of the text). Indentation must be spaces: a tab before the
 * first character of a line is refused (blank and comment lines may hold tabs).
 */
static int skip_block(struct parser *p, bool *fresh)
{
	size_t ls;
	bool only_blanks = true;

	for (;;) {
		char c = cur(p);
		if (is_blank(c)) {
			p->pos++;
		} else if (comment_here(p)) {
			while (cur(p) != '\n' && cur(p) != '\0')
				p->pos++;
		} else if (c == '\n') {
			p->pos++;
		} else {
			break;
		}
	}
	if (p->pos >= p->len) {
		*fresh = true;
		return 0;
	}
	ls = line_start(p, p->pos);
	for (size_t i = ls; i < p->pos; i++)
		if (!is_blank(p->s[i]))
			only_blanks = false;
	*fresh = only_blanks;
	if (only_blanks)
		for (size_t i = ls; i < p->pos; i++)
			if (p->s[i] == '\t')
				return fail(p, i, "tab characters must not be used for indentation");
	return 0;
}

/*
 * After a block node: the rest of its line must be blank or a comment. Moves
 * to the next content and sets *indent to its column, or to -1 at the end of
 * the text or at a document marker.
 */
static int next_line(struct parser *p, int *indent)
{
	bool fresh;

	if (skip_block(p, &fresh) < 0)
		return -1;
	if (p->pos >= p->len || doc_marker(p, p->pos)) {
		*indent = -1;
		return 0;
	}
	if (!fresh)
		return fail(p, p->pos, "unexpected text after a value");
	*indent = (int)(p->pos - line_start(p, p->pos));
	return 0;
}

/* Does the line starting at ls end a flow collection that was left open?
 * Its lines must be indented more than the block node around it; a closing
 * bracket at that indentation is tolerated, as other parsers do. */
static bool flow_line_outside(const struct parser *p, size_t ls)
{
	size_t q = ls;

	if (doc_marker(p, ls))
		return true;
	while (is_blank(at(p, q)))
		q++;
	if (at(p, q) == '\n' || at(p, q) == '\0' || at(p, q) == '#' || at(p, q) == ']' || at(p, q) == '}')
		return false;
	return (int)(q - ls) <= p->flow_n;
}

/* Flow context: white space, line breaks and comments are all separators. */
static int skip_flow(struct parser *p, size_t open, const char *what)
{
	for (;;) {
		char c = cur(p);
		if (is_blank(c)) {
			p->pos++;
		} else if (c == '\n') {
			p->pos++;
			if (flow_line_outside(p, p->pos))
				return fail(p, open, "unclosed %s", what);
		} else if (comment_here(p)) {
			while (cur(p) != '\n' && cur(p) != '\0')
				p->pos++;
		} else if (c == '\0') {
			return fail(p, open, "unclosed %s", what);
		} else {
			return 0;
		}
	}
}

/* ---- limits ---- */

static int count_nodes(struct parser *p, size_t n, size_t pos)
{
	if (n > p->max_nodes - p->nodes)
		return fail(p, pos, "document has more than %zu nodes (alias expansions included)", p->max_nodes);
	p->nodes += n;
	return 0;
}

static int enter(struct parser *p, size_t pos)
{
	if (p->depth >= p->max_depth)
		return fail(p, pos, "nesting deeper than %u levels", p->max_depth);
	p->depth++;
	return 0;
}

/* ---- scalar text ---- */

static int put(struct parser *p, const char *d, size_t n)
{
	if (buf_add(&p->sb, d, n) < 0)
		return fail(p, p->pos, "scalar longer than %zu bytes", p->max_scalar);
	return 0;
}

static int put_n(struct parser *p, char c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (put(p, &c, 1) < 0)
			return -1;
	return 0;
}

static int put_cp(struct parser *p, uint32_t cp, size_t pos)
{
	char u[4];
	size_t n = utf8_encode(cp, u);

	if (!n)
		return fail(p, pos, "invalid Unicode escape (U+%04X)", (unsigned)cp);
	return put(p, u, n);
}

static int hex_digits(struct parser *p, size_t at_pos, int n, uint32_t *out)
{
	uint32_t v = 0;

	for (int i = 0; i < n; i++) {
		char c = at(p, at_pos + (size_t)i);
		int d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return -1;
		v = v * 16 + (uint32_t)d;
	}
	*out = v;
	return 0;
}

/* A backslash escape in a double-quoted scalar; p->pos is at the backslash. */
static int escape(struct parser *p)
{
	size_t bs = p->pos;
	char c = at(p, bs + 1);
	const char *simple = NULL;
	int digits = 0;
	uint32_t cp;

	switch (c) {
	case '0': simple = "\0"; break;
	case 'a': simple = "\a"; break;
	case 'b': simple = "\b"; break;
	case 't': case '\t': simple = "\t"; break;
	case 'n': simple = "\n"; break;
	case 'v': simple = "\v"; break;
	case 'f': simple = "\f"; break;
	case 'r': simple = "\r"; break;
	case 'e': simple = "\x1b"; break;
	case ' ': simple = " "; break;
	case '"': simple = "\""; break;
	case '/': simple = "/"; break;
	case '\\': simple = "\\"; break;
	case 'N': simple = "\xc2\x85"; break;
	case '_': simple = "\xc2\xa0"; break;
	case 'L': simple = "\xe2\x80\xa8"; break;
	case 'P': simple = "\xe2\x80\xa9"; break;
	case 'x': digits = 2; break;
	case 'u': digits = 4; break;
	case 'U': digits = 8; break;
	default:
		if (c == '\0' || c == '\n')
			return fail(p, bs, "invalid escape sequence");
		return fail(p, bs, "invalid escape sequence \"\\%c\"", c);
	}
	if (simple) {
		p->pos = bs + 2;
		return put(p, simple, c == '0' ? 1 : strlen(simple));
	}
	if (hex_digits(p, bs + 2, digits, &cp) < 0)
		return fail(p, bs, "escape \"\\%c\" needs %d hexadecimal digits", c, digits);
	p->pos = bs + 2 + (size_t)digits;
	/* JSON text escapes astral characters as surrogate pairs, and YAML is
	 * meant to read JSON, so a \u pair is combined. */
	if (digits == 4 && cp >= 0xD800 && cp <= 0xDBFF) {
		uint32_t lo;
		if (at(p, p->pos) == '\\' && at(p, p->pos + 1) == 'u' &&
		    hex_digits(p, p->pos + 2, 4, &lo) == 0 && lo >= 0xDC00 && lo <= 0xDFFF) {
			cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
			p->pos += 6;
		}
	}
	return put_cp(p, cp, bs);
}

/*
 * Line folding inside a quoted scalar; p->pos is at a line break. One break
 * becomes a space, n > 1 breaks become n-1 newlines; leading white space of
 * the continuation lines is dropped. After an escaped line break (escaped),
 * the first break produces nothing.
 */
static int fold_quoted(struct parser *p, size_t open, bool escaped, const char *what)
{
	size_t breaks = 0;

	while (cur(p) == '\n') {
		breaks++;
		p->pos++;
		if (doc_marker(p, p->pos))
			return fail(p, open, "unterminated %s string", what);
		skip_blanks(p);
	}
	if (escaped)
		return put_n(p, '\n', breaks - 1);
	if (breaks == 1)
		return put(p, " ", 1);
	return put_n(p, '\n', breaks - 1);
}

/* A single- or double-quoted scalar at p->pos, into p->sb. */
static int quoted(struct parser *p)
{
	size_t open = p->pos;
	char q = cur(p);
	const char *what = q == '"' ? "double-quoted" : "single-quoted";

	buf_reset(&p->sb);
	p->pos++;
	for (;;) {
		char c = cur(p);
		size_t run;

		if (c == '\0')
			return fail(p, open, "unterminated %s string", what);
		if (c == q) {
			if (q == '\'' && at(p, p->pos + 1) == '\'') {
				if (put(p, "'", 1) < 0)
					return -1;
				p->pos += 2;
				continue;
			}
			p->pos++;
			return 0;
		}
		if (q == '"' && c == '\\') {
			if (at(p, p->pos + 1) == '\n') {
				p->pos++;
				if (fold_quoted(p, open, true, what) < 0)
					return -1;
				continue;
			}
			if (escape(p) < 0)
				return -1;
			continue;
		}
		if (is_blank(c)) {
			/* White space before a line break is not content. */
			run = p->pos;
			while (is_blank(at(p, run)))
				run++;
			if (at(p, run) == '\n') {
				p->pos = run;
				continue;
			}
			if (put(p, p->s + p->pos, run - p->pos) < 0)
				return -1;
			p->pos = run;
			continue;
		}
		if (c == '\n') {
			if (fold_quoted(p, open, false, what) < 0)
				return -1;
			continue;
		}
		/* A run of ordinary characters; c itself is one (a backslash only
		 * escapes in double quotes), so the run is never empty. */
		run = p->pos + 1;
		while (at(p, run) != '\0' && at(p, run) != q && !(q == '"' && at(p, run) == '\\') &&
		       !is_ws0(at(p, run)))
			run++;
		if (put(p, p->s + p->pos, run - p->pos) < 0)
			return -1;
		p->pos = run;
	}
}

enum stop { STOP_EOL, STOP_COLON, STOP_COMMENT, STOP_FLOW };

/* ':' that ends a plain scalar (a mapping value indicator). */
static bool value_colon(const struct parser *p, size_t i, bool flow)
{
	char n = at(p, i + 1);
	return at(p, i) == ':' && (is_ws0(n) || (flow && is_flow_ind(n)));
}

/*
 * One line of a plain scalar from p->pos; appends it without trailing blanks
 * and leaves p->pos after its last non-blank character. *stop_pos is where
 * the scan stopped (the ':' or '#', or the line end).
 */
static int plain_line(struct parser *p, bool flow, enum stop *why, size_t *stop_pos)
{
	size_t st = p->pos, i = p->pos, end = p->pos;

	for (;;) {
		char c = at(p, i);
		if (c == '\n' || c == '\0') {
			*why = STOP_EOL;
			break;
		}
		if (c == ':' && value_colon(p, i, flow)) {
			*why = STOP_COLON;
			break;
		}
		if (c == '#' && i > st && is_blank(p->s[i - 1])) {
			*why = STOP_COMMENT;
			break;
		}
		if (flow && is_flow_ind(c)) {
			*why = STOP_FLOW;
			break;
		}
		i++;
		if (!is_blank(c))
			end = i;
	}
	*stop_pos = i;
	p->pos = end;
	return put(p, p->s + st, end - st);
}

/* Whether a plain scalar may start at p->pos; if not, says why. */
static int plain_start(struct parser *p, bool flow)
{
	char c = cur(p), n = at(p, p->pos + 1);

	if (c == ',' || c == ']' || c == '}' || c == '[' || c == '{')
		return fail(p, p->pos, "unexpected '%c'", c);
	if (c == '#')
		return fail(p, p->pos, "a comment must be separated from what precedes it by a space");
	if (c == '@' || c == '`')
		return fail(p, p->pos, "'%c' is reserved and cannot start a plain scalar; quote the value", c);
	if (c == '%')
		return fail(p, p->pos, "'%%' cannot start a plain scalar; quote the value");
	if ((c == '-' || c == '?' || c == ':') && (is_ws0(n) || (flow && is_flow_ind(n))))
		return fail(p, p->pos, "'%c' followed by a space cannot start a value here; quote the value", c);
	if (c == '\0' || c == '\n')
		return fail(p, p->pos, "expected a value");
	return 0;
}

/*
 * A plain scalar, possibly over several lines, into p->sb. In block context
 * continuation lines must be indented more than n; a line break folds to a
 * space, n > 1 breaks to n-1 newlines.
 */
static int plain(struct parser *p, int n, bool flow)
{
	enum stop why;
	size_t stop;

	buf_reset(&p->sb);
	if (plain_line(p, flow, &why, &stop) < 0)
		return -1;
	if (!flow && why == STOP_COLON)
		return fail(p, stop, "mapping values are not allowed here");
	while (why == STOP_EOL) {
		size_t q = p->pos, ls, content, breaks = 0;
		bool tab = false;

		while (is_blank(at(p, q)))
			q++;
		if (at(p, q) != '\n')
			break;
		/* Find the next non-blank line, counting breaks. */
		for (;;) {
			breaks++;
			q++;
			ls = q;
			while (at(p, q) == ' ')
				q++;
			content = q;
			while (is_blank(at(p, content))) {
				tab = true;
				content++;
			}
			if (at(p, content) != '\n')
				break;
			tab = false;
			q = content;
		}
		if (at(p, content) == '\0' || at(p, content) == '#' || doc_marker(p, ls))
			break;
		if (flow && flow_line_outside(p, ls))
			break;
		if (!flow && (tab || (int)(content - ls) <= n))
			break;	/* not ours: the caller reports a tab or reads the next entry */
		if (flow && (is_flow_ind(at(p, content)) || value_colon(p, content, true)))
			break;
		if (breaks == 1 ? put(p, " ", 1) < 0 : put_n(p, '\n', breaks - 1) < 0)
			return -1;
		p->pos = content;
		if (plain_line(p, flow, &why, &stop) < 0)
			return -1;
		if (!flow && why == STOP_COLON)
			return fail(p, stop, "mapping values are not allowed here");
	}
	return 0;
}

/* A literal (|) or folded (>) block scalar; p->pos at the indicator. n is
 * the indentation of the parent collection (-1 at the top). */
static int block_scalar(struct parser *p, int n)
{
	char style = cur(p);
	int chomp = 0, ind = 0, k;
	size_t breaks = 0;
	bool chomp_set = false, seen = false, prev_spaced = false;

	p->pos++;
	for (int i = 0; i < 2; i++) {
		char c = cur(p);
		if ((c == '-' || c == '+') && !chomp_set) {
			chomp = c == '-' ? -1 : 1;
			chomp_set = true;
			p->pos++;
		} else if (c >= '1' && c <= '9' && !ind) {
			ind = c - '0';
			p->pos++;
		} else if (c == '0') {
			return fail(p, p->pos, "block scalar indentation indicator must be 1 to 9");
		} else {
			break;
		}
	}
	skip_blanks(p);
	if (comment_here(p))
		while (cur(p) != '\n' && cur(p) != '\0')
			p->pos++;
	if (cur(p) != '\n' && cur(p) != '\0')
		return fail(p, p->pos, "unexpected text after a block scalar indicator");
	if (cur(p) == '\n')
		p->pos++;

	if (ind) {
		k = (n < 0 ? 0 : n) + ind;
	} else {
		/* The first non-blank line sets the indentation; leading
		 * space-only lines count too (as in libyaml), so that they are
		 * empty lines rather than content. */
		size_t q = p->pos;
		k = n + 1;
		for (;;) {
			size_t ls = q;
			while (at(p, q) == ' ')
				q++;
			if ((int)(q - ls) > k && (at(p, q) == '\n' || (int)(q - ls) > n))
				k = (int)(q - ls);
			if (at(p, q) != '\n')
				break;
			q++;
		}
		if (k < 0)
			k = 0;
	}

	buf_reset(&p->sb);
	for (;;) {
		size_t ls = p->pos, q = ls, eol;
		bool spaced;

		if (ls >= p->len || doc_marker(p, ls))
			break;
		while ((int)(q - ls) < k && at(p, q) == ' ')
			q++;
		if ((int)(q - ls) < k) {
			size_t r = q;
			while (is_blank(at(p, r)))
				r++;
			if (at(p, r) == '\n') {	/* an empty line */
				breaks++;
				p->pos = r + 1;
				continue;
			}
			if (at(p, r) == '\0')
				p->pos = r;
			break;	/* less indented: the scalar ends before this line */
		}
		if (at(p, q) == '\n') {
			breaks++;
			p->pos = q + 1;
			continue;
		}
		if (at(p, q) == '\0') {
			p->pos = q;
			break;
		}
		eol = q;
		while (at(p, eol) != '\n' && at(p, eol) != '\0')
			eol++;
		spaced = is_blank(at(p, q));
		if (seen && style == '>' && !prev_spaced && !spaced) {
			if (breaks == 1 ? put(p, " ", 1) < 0 : put_n(p, '\n', breaks - 1) < 0)
				return -1;
		} else if (put_n(p, '\n', breaks) < 0) {
			return -1;
		}
		p->pos = q;
		if (put(p, p->s + q, eol - q) < 0)
			return -1;
		seen = true;
		prev_spaced = spaced;
		breaks = 0;
		if (at(p, eol) == '\n') {
			breaks = 1;
			p->pos = eol + 1;
		} else {
			p->pos = eol;
			break;
		}
	}
	if (chomp > 0)
		return put_n(p, '\n', breaks);
	if (chomp == 0 && seen && breaks > 0)
		return put(p, "\n", 1);
	return 0;
}

/* ---- typing ---- */

static bool text_is(const char *t, size_t n, const char *w)
{
	return strlen(w) == n && memcmp(t, w, n) == 0;
}

static bool is_null_text(const char *t, size_t n)
{
	return n == 0 || text_is(t, n, "~") || text_is(t, n, "null") || text_is(t, n, "Null") ||
	       text_is(t, n, "NULL");
}

static int bool_text(const char *t, size_t n)
{
	if (text_is(t, n, "true") || text_is(t, n, "True") || text_is(t, n, "TRUE"))
		return 1;
	if (text_is(t, n, "false") || text_is(t, n, "False") || text_is(t, n, "FALSE"))
		return 0;
	return -1;
}

/* strtod in the "C" locale whatever the program's locale is. t is NUL-terminated. */
static double c_strtod(struct parser *p, const char *t)
{
	locale_t old = (locale_t)0;
	double d;

	if (!p->cloc)
		p->cloc = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
	if (p->cloc)
		old = uselocale(p->cloc);
	d = strtod(t, NULL);
	if (p->cloc)
		uselocale(old);
	return d;
}

/* Core-schema integer. Returns a node, or NULL if t is not an integer (or is
 * one too large even for a double). t is NUL-terminated. */
static struct json *int_node(struct parser *p, const char *t, size_t n)
{
	size_t i = 0;
	unsigned base = 10;
	bool neg = false, over = false;
	uint64_t u = 0;
	double d = 0;

	if (n > 2 && t[0] == '0' && (t[1] == 'o' || t[1] == 'x')) {
		base = t[1] == 'o' ? 8 : 16;
		i = 2;
	} else if (n > 0 && (t[0] == '-' || t[0] == '+')) {
		neg = t[0] == '-';
		i = 1;
	}
	if (i == n)
		return NULL;
	for (; i < n; i++) {
		char c = t[i];
		unsigned v;
		if (c >= '0' && c <= '9')
			v = (unsigned)(c - '0');
		else if (base == 16 && c >= 'a' && c <= 'f')
			v = (unsigned)(c - 'a' + 10);
		else if (base == 16 && c >= 'A' && c <= 'F')
			v = (unsigned)(c - 'A' + 10);
		else
			return NULL;
		if (v >= base)
			return NULL;
		if (!over && u > (UINT64_MAX - v) / base)
			over = true;
		if (!over)
			u = u * base + v;
		d = d * base + v;
	}
	if (!over && !neg && u <= INT64_MAX)
		return json_new_int((int64_t)u);
	if (!over && neg && u <= (uint64_t)INT64_MAX + 1)
		return json_new_int(u == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u);
	/* Past int64: a double; decimal text goes through strtod for the nearest value. */
	if (base == 10)
		d = c_strtod(p, t);
	else if (neg)
		d = -d;
	if (!isfinite(d))
		return NULL;
	return json_new_double(d);
}

static struct json *float_node(struct parser *p, const char *t, size_t n)
{
	size_t i = 0, d1 = 0, d2 = 0;
	double d;

	if (i < n && (t[i] == '-' || t[i] == '+'))
		i++;
	while (i < n && t[i] >= '0' && t[i] <= '9')
		i++, d1++;
	if (i < n && t[i] == '.') {
		i++;
		while (i < n && t[i] >= '0' && t[i] <= '9')
			i++, d2++;
	}
	if (d1 == 0 && d2 == 0)
		return NULL;
	if (i < n && (t[i] == 'e' || t[i] == 'E')) {
		size_t de = 0;
		i++;
		if (i < n && (t[i] == '-' || t[i] == '+'))
			i++;
		while (i < n && t[i] >= '0' && t[i] <= '9')
			i++, de++;
		if (de == 0)
			return NULL;
	}
	if (i != n)
		return NULL;
	d = c_strtod(p, t);
	if (!isfinite(d))
		return NULL;
	return json_new_double(d);
}

static const char *tag_name(const struct props *pr, char *out, size_t outsz)
{
	return shown(pr->tag_text, pr->tag_len, out, outsz);
}

/* The node for a scalar's text (in p->sb, NUL-terminated) under the core
 * schema and the scalar's tag. pos is the scalar's position for messages. */
static int scalar_value(struct parser *p, enum style st, const struct props *pr, size_t pos, struct json **out)
{
	const char *t = p->sb.data;
	size_t n = p->sb.len;
	struct json *v = NULL;
	char tn[64], sv[80];
	int b;

	switch (pr->tag) {
	case TAG_MAP:
	case TAG_SEQ:
		return fail(p, pr->tag_pos, "tag %s needs a %s, not a scalar", tag_name(pr, tn, sizeof(tn)),
			    pr->tag == TAG_MAP ? "mapping" : "sequence");
	case TAG_STR:
	case TAG_BANG:
		v = json_new_strn(t, n);
		break;
	case TAG_NULL:
		if (is_null_text(t, n))
			v = json_new_null();
		break;
	case TAG_BOOL:
		if ((b = bool_text(t, n)) >= 0)
			v = json_new_bool(b);
		break;
	case TAG_INT:
		v = int_node(p, t, n);
		break;
	case TAG_FLOAT:
		v = int_node(p, t, n);
		if (v && v->type == JSON_INT) {
			double d = (double)v->u.i;
			json_free(v);
			v = json_new_double(d);
		}
		if (!v)
			v = float_node(p, t, n);
		break;
	case TAG_NONE:
		if (st != ST_PLAIN)
			v = json_new_strn(t, n);
		else if (is_null_text(t, n))
			v = json_new_null();
		else if ((b = bool_text(t, n)) >= 0)
			v = json_new_bool(b);
		else if (!(v = int_node(p, t, n)) && !(v = float_node(p, t, n)))
			v = json_new_strn(t, n);
		break;
	}
	if (!v)
		return fail(p, pos, "\"%s\" is not a valid %s value", shown(t, n, sv, 40),
			    tag_name(pr, tn, sizeof(tn)));
	*out = v;
	return 0;
}

/* ---- anchors ---- */

static size_t measure(const struct json *v, unsigned *height)
{
	size_t n = 1;
	unsigned h = 0, ch;

	*height = 0;
	if (v->type == JSON_ARRAY) {
		for (size_t i = 0; i < v->u.arr.n; i++) {
			n += measure(v->u.arr.items[i], &ch);
			if (ch > h)
				h = ch;
		}
		*height = h + 1;
	} else if (v->type == JSON_OBJECT) {
		for (size_t i = 0; i < v->u.obj.n; i++) {
			n += measure(v->u.obj.m[i].val, &ch);
			if (ch > h)
				h = ch;
		}
		*height = h + 1;
	}
	return n;
}

#define ANCHOR_BUCKETS 1024	/* chains of the anchor-name hash */

static size_t name_hash(const char *k, size_t n)
{
	uint64_t h = 14695981039346656037ULL;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)k[i]) * 1099511628211ULL;
	return (size_t)(h % ANCHOR_BUCKETS);
}

/* Remember pr's anchor (if any) for node; text is the scalar's text or NULL. */
static void add_anchor(struct parser *p, const struct props *pr, struct json *node, const char *text, size_t tlen)
{
	struct anchor *a;
	size_t h;

	if (!pr->anchor)
		return;
	if (p->nanchors == p->anchors_cap) {
		p->anchors_cap = p->anchors_cap ? p->anchors_cap * 2 : 16;
		p->anchors = xrealloc(p->anchors, p->anchors_cap * sizeof(*p->anchors));
	}
	if (!p->anchor_tab)
		p->anchor_tab = xcalloc(ANCHOR_BUCKETS, sizeof(*p->anchor_tab));
	h = name_hash(pr->anchor, pr->anchor_len);
	a = &p->anchors[p->nanchors++];
	a->prev = p->anchor_tab[h];
	p->anchor_tab[h] = p->nanchors;
	a->name = pr->anchor;
	a->len = pr->anchor_len;
	a->node = node;
	a->text = text ? xmemdup(text, tlen + 1) : NULL;
	a->text_len = tlen;
	a->size = measure(node, &a->height);
}

/* Forget the anchors defined after the first keep_n (latest first, so that
 * each chain head goes back to what it was). */
static void drop_anchors(struct parser *p, size_t keep_n)
{
	while (p->nanchors > keep_n) {
		struct anchor *a = &p->anchors[--p->nanchors];
		p->anchor_tab[name_hash(a->name, a->len)] = a->prev;
		free(a->text);
	}
}

/* "*name" at p->pos: the anchor it names (the latest definition). */
static int alias_ref(struct parser *p, const struct anchor **out)
{
	size_t st = p->pos + 1, i = st;
	char nm[80];

	while (is_anchor_char(at(p, i)))
		i++;
	if (i == st)
		return fail(p, p->pos, "alias name is missing after '*'");
	for (size_t k = p->anchor_tab ? p->anchor_tab[name_hash(p->s + st, i - st)] : 0; k; k = p->anchors[k - 1].prev) {
		const struct anchor *a = &p->anchors[k - 1];
		if (a->len == i - st && memcmp(a->name, p->s + st, a->len) == 0) {
			*out = a;
			p->pos = i;
			return 0;
		}
	}
	return fail(p, p->pos, "undefined alias \"%s\"", shown(p->s + st, i - st, nm, 64));
}

/* A copy of an alias's node, within the node and depth limits. */
static int alias_value(struct parser *p, const struct props *pr, struct json **out)
{
	size_t pos = p->pos;
	const struct anchor *a;

	if (pr->anchor || pr->tag != TAG_NONE)
		return fail(p, pos, "an alias cannot have an anchor or a tag");
	if (alias_ref(p, &a) < 0)
		return -1;
	if (a->height > p->max_depth - p->depth)
		return fail(p, pos, "nesting deeper than %u levels (through an alias)", p->max_depth);
	if (count_nodes(p, a->size, pos) < 0)
		return -1;
	*out = json_dup(a->node);
	return 0;
}

/* ---- properties ---- */

struct tag_name_map {
	const char *name;
	enum tag tag;
};

static enum tag lookup_tag(const char *t, size_t n)
{
	static const struct tag_name_map names[] = {
		{ "str", TAG_STR }, { "int", TAG_INT }, { "float", TAG_FLOAT }, { "bool", TAG_BOOL },
		{ "null", TAG_NULL }, { "map", TAG_MAP }, { "seq", TAG_SEQ },
	};
	const char *suffix = NULL;
	size_t sn = 0;
	static const char verbatim[] = "!<tag:yaml.org,2002:";

	if (n == 1)
		return TAG_BANG;
	if (n > 2 && t[1] == '!') {
		suffix = t + 2;
		sn = n - 2;
	} else if (n > sizeof(verbatim) && memcmp(t, verbatim, sizeof(verbatim) - 1) == 0 && t[n - 1] == '>') {
		suffix = t + sizeof(verbatim) - 1;
		sn = n - sizeof(verbatim);
	}
	for (size_t i = 0; suffix && i < sizeof(names) / sizeof(names[0]); i++)
		if (text_is(suffix, sn, names[i].name))
			return names[i].tag;
	return TAG_NONE;
}

/* Anchor and tag before a node, in either order, each at most once. */
static int properties(struct parser *p, bool flow, struct props *pr)
{
	for (;;) {
		char c = cur(p);
		size_t st = p->pos, i = st + 1;
		char tn[64];

		if (c == '&') {
			if (pr->anchor)
				return fail(p, st, "a node can have only one anchor");
			while (is_anchor_char(at(p, i)))
				i++;
			if (i == st + 1)
				return fail(p, st, "anchor name is missing after '&'");
			pr->anchor = p->s + st + 1;
			pr->anchor_len = i - st - 1;
			pr->anchor_pos = st;
		} else if (c == '!') {
			if (pr->tag != TAG_NONE)
				return fail(p, st, "a node can have only one tag");
			if (at(p, i) == '<') {
				while (at(p, i) != '>' && !is_ws0(at(p, i)))
					i++;
				if (at(p, i) == '>')
					i++;
			} else {
				while (!is_ws0(at(p, i)) && !is_flow_ind(at(p, i)))
					i++;
			}
			pr->tag = lookup_tag(p->s + st, i - st);
			pr->tag_text = p->s + st;
			pr->tag_len = i - st;
			pr->tag_pos = st;
			if (pr->tag == TAG_NONE)
				return fail(p, st, "unsupported tag \"%s\" (supported: !!str !!int !!float !!bool !!null !!map !!seq)",
					    shown(p->s + st, i - st, tn, 48));
		} else {
			return 0;
		}
		p->pos = i;
		if (!is_ws0(cur(p)) && !(flow && is_flow_ind(cur(p))))
			return fail(p, p->pos, "expected white space after an anchor or tag");
		skip_blanks(p);
	}
}

/* ---- mappings under construction ---- */

struct mapb {
	struct json *obj;
	size_t *tab;		/* open addressing: member index + 1, 0 = empty; built past MAPB_LINEAR members */
	size_t tabcap;
	const struct json *merge;	/* the value of "<<" (it lives in p->keep), applied at the end */
	size_t merge_pos;
};

#define MAPB_LINEAR 16

static size_t key_hash(const char *k, size_t n)
{
	uint64_t h = 14695981039346656037ULL;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)k[i]) * 1099511628211ULL;
	return (size_t)h;
}

static bool member_is(const struct json_member *m, const char *k, size_t n)
{
	return m->key_len == n && memcmp(m->key, k, n) == 0;
}

static void mapb_index(struct mapb *mb, size_t idx)
{
	const struct json_member *m = &mb->obj->u.obj.m[idx];
	size_t h = key_hash(m->key, m->key_len) & (mb->tabcap - 1);

	while (mb->tab[h])
		h = (h + 1) & (mb->tabcap - 1);
	mb->tab[h] = idx + 1;
}

static bool mapb_has(const struct mapb *mb, const char *k, size_t n)
{
	const struct json *o = mb->obj;

	if (!mb->tab) {
		for (size_t i = 0; i < o->u.obj.n; i++)
			if (member_is(&o->u.obj.m[i], k, n))
				return true;
		return false;
	}
	for (size_t h = key_hash(k, n) & (mb->tabcap - 1); mb->tab[h]; h = (h + 1) & (mb->tabcap - 1))
		if (member_is(&o->u.obj.m[mb->tab[h] - 1], k, n))
			return true;
	return false;
}

/*
 * Append a member whose key is known to be new; key (malloc'd, NUL-terminated)
 * and v become the object's. Members are appended directly rather than
 * through json_object_setn, whose duplicate search is linear, so that a large
 * mapping stays linear to build; the layout is the DOM's (json.h).
 */
static void mapb_append(struct mapb *mb, char *key, size_t n, struct json *v)
{
	struct json *o = mb->obj;
	struct json_member *m;

	if (o->u.obj.n == o->u.obj.cap) {
		o->u.obj.cap = o->u.obj.cap ? o->u.obj.cap * 2 : 4;
		o->u.obj.m = xrealloc(o->u.obj.m, o->u.obj.cap * sizeof(*o->u.obj.m));
	}
	m = &o->u.obj.m[o->u.obj.n++];
	m->key = key;
	m->key_len = n;
	m->val = v;
	if (o->u.obj.n > MAPB_LINEAR && o->u.obj.n * 2 > mb->tabcap) {
		free(mb->tab);
		mb->tabcap = mb->tabcap ? mb->tabcap * 2 : 64;
		while (o->u.obj.n * 2 > mb->tabcap)
			mb->tabcap *= 2;
		mb->tab = xcalloc(mb->tabcap, sizeof(*mb->tab));
		for (size_t i = 0; i < o->u.obj.n; i++)
			mapb_index(mb, i);
	} else if (mb->tab) {
		mapb_index(mb, o->u.obj.n - 1);
	}
}

static void mapb_init(struct mapb *mb)
{
	memset(mb, 0, sizeof(*mb));
	mb->obj = json_new_object();
}

static void mapb_release(struct mapb *mb)
{
	json_free(mb->obj);
	free(mb->tab);
	memset(mb, 0, sizeof(*mb));
}

/*
 * Add key: v to the mapping. key is malloc'd; key and v are taken either way.
 * A plain "<<" is a merge key: its value is checked and kept for mapb_finish.
 */
static int mapb_add(struct parser *p, struct mapb *mb, char *key, size_t n, bool merge, size_t kpos,
		    size_t vpos, struct json *v)
{
	char ks[80];

	if (merge) {
		bool okv = v->type == JSON_OBJECT;
		if (v->type == JSON_ARRAY) {
			okv = true;
			for (size_t i = 0; i < v->u.arr.n; i++)
				if (v->u.arr.items[i]->type != JSON_OBJECT)
					okv = false;
		}
		if (mb->merge) {
			fail(p, kpos, "duplicate key \"<<\"");
			goto bad;
		}
		if (!okv) {
			fail(p, vpos, "the value of a merge key \"<<\" must be a mapping or a list of mappings");
			goto bad;
		}
		free(key);
		/* Kept, not freed: anchors defined inside it may be used later. */
		json_array_push(p->keep, v);
		mb->merge = v;
		mb->merge_pos = vpos;
		return 0;
	}
	if (mapb_has(mb, key, n)) {
		fail(p, kpos, "duplicate key \"%s\"", shown(key, n, ks, 64));
		goto bad;
	}
	mapb_append(mb, key, n, v);
	return 0;
bad:
	free(key);
	json_free(v);
	return -1;
}

static int merge_one(struct parser *p, struct mapb *mb, const struct json *src)
{
	for (size_t i = 0; i < src->u.obj.n; i++) {
		const struct json_member *m = &src->u.obj.m[i];
		unsigned h;
		char *k;

		if (mapb_has(mb, m->key, m->key_len))
			continue;
		if (count_nodes(p, measure(m->val, &h), mb->merge_pos) < 0)
			return -1;
		k = xmalloc(m->key_len + 1);
		memcpy(k, m->key, m->key_len + 1);
		mapb_append(mb, k, m->key_len, json_dup(m->val));
	}
	return 0;
}

/* Apply "<<": keys written in the mapping win, then earlier maps over later. */
static int mapb_finish(struct parser *p, struct mapb *mb)
{
	const struct json *m = mb->merge;

	if (!m)
		return 0;
	if (m->type == JSON_OBJECT)
		return merge_one(p, mb, m);
	for (size_t i = 0; i < m->u.arr.n; i++)
		if (merge_one(p, mb, m->u.arr.items[i]) < 0)
			return -1;
	return 0;
}

/* ---- nodes ---- */

static int block_node(struct parser *p, int n, bool map_value, bool inline_ok, struct json **out);
static int flow_coll(struct parser *p, const struct props *pr, struct json **out);

/* A scalar node from p->sb; counts it and records its anchor. */
static int finish_scalar(struct parser *p, enum style st, const struct props *pr, size_t pos, struct json **out)
{
	struct json *v;

	if (scalar_value(p, st, pr, pos, &v) < 0)
		return -1;
	if (count_nodes(p, 1, pos) < 0) {
		json_free(v);
		return -1;
	}
	add_anchor(p, pr, v, p->sb.data, p->sb.len);
	*out = v;
	return 0;
}

/* A node with no content ("key:" with nothing after it): null, or what its tag makes of "". */
static int empty_node(struct parser *p, const struct props *pr, size_t pos, struct json **out)
{
	struct json *v;

	if (pr->tag == TAG_MAP || pr->tag == TAG_SEQ) {
		if (count_nodes(p, 1, pos) < 0)
			return -1;
		v = pr->tag == TAG_MAP ? json_new_object() : json_new_array();
		add_anchor(p, pr, v, NULL, 0);
		*out = v;
		return 0;
	}
	buf_reset(&p->sb);
	return finish_scalar(p, ST_PLAIN, pr, pos, out);
}

/* A collection's tag must fit it; then its anchor is recorded. */
static int coll_props(struct parser *p, const struct props *pr, struct json *v, bool is_map)
{
	char tn[64];

	if (pr->tag != TAG_NONE && pr->tag != TAG_BANG && pr->tag != (is_map ? TAG_MAP : TAG_SEQ))
		return fail(p, pr->tag_pos, "tag %s cannot be applied to a %s", tag_name(pr, tn, sizeof(tn)),
			    is_map ? "mapping" : "sequence");
	add_anchor(p, pr, v, NULL, 0);
	return 0;
}

/* Hand the finished mapping to *out: merge keys applied, pr's anchor and tag
 * recorded; mb is released either way. Closes the nesting level (p->depth)
 * the mapping opened, on success. */
static int mapb_done(struct parser *p, struct mapb *mb, const struct props *pr, struct json **out)
{
	if (mapb_finish(p, mb) < 0 || coll_props(p, pr, mb->obj, true) < 0) {
		mapb_release(mb);
		return -1;
	}
	*out = mb->obj;
	mb->obj = NULL;
	mapb_release(mb);
	p->depth--;
	return 0;
}

/* A key's text, malloc'd, from p->sb. The key's tag is checked by typing it;
 * an anchored key keeps its typed node in p->keep for later aliases. */
static int key_text(struct parser *p, enum style st, const struct props *pr, size_t pos, char **key, size_t *n)
{
	if (pr->tag != TAG_NONE || pr->anchor) {
		struct json *v;
		if (scalar_value(p, st, pr, pos, &v) < 0)
			return -1;
		if (pr->anchor) {
			json_array_push(p->keep, v);
			add_anchor(p, pr, v, p->sb.data, p->sb.len);
		} else {
			json_free(v);
		}
	}
	*n = p->sb.len;
	*key = xmalloc(*n + 1);
	memcpy(*key, p->sb.data, *n + 1);
	return 0;
}

/* An alias used as a key: the text of the scalar it names. */
static int alias_key(struct parser *p, const struct props *pr, char **key, size_t *n)
{
	size_t pos = p->pos;
	const struct anchor *a;

	if (pr->anchor || pr->tag != TAG_NONE)
		return fail(p, pos, "an alias cannot have an anchor or a tag");
	if (alias_ref(p, &a) < 0)
		return -1;
	if (!a->text)
		return fail(p, pos, "complex mapping keys are not supported (this alias names a collection)");
	*n = a->text_len;
	*key = xmalloc(*n + 1);
	memcpy(*key, a->text, *n + 1);
	return 0;
}

enum { KEY_NO, KEY_YES, KEY_COMPLEX };

/*
 * Does an implicit key ("key:" followed by white space) start at q, on this
 * line? Looks past an anchor and tag, a quoted or plain scalar or an alias.
 * *colon is where the ':' is (for KEY_COMPLEX: the '?').
 */
static int key_ahead(const struct parser *p, size_t q, size_t *colon)
{
	char c;

	while ((c = at(p, q)) == '&' || c == '!') {
		while (!is_ws0(at(p, q)))
			q++;
		while (is_blank(at(p, q)))
			q++;
	}
	*colon = q;
	if (c == '?' && is_ws0(at(p, q + 1)))
		return KEY_COMPLEX;
	if (c == '"' || c == '\'') {
		q++;
		for (;;) {
			char d = at(p, q);
			if (d == '\0' || d == '\n')
				return KEY_NO;
			if (c == '"' && d == '\\') {
				if (at(p, q + 1) == '\n' || at(p, q + 1) == '\0')
					return KEY_NO;
				q += 2;
				continue;
			}
			if (d == c) {
				if (c == '\'' && at(p, q + 1) == '\'') {
					q += 2;
					continue;
				}
				q++;
				break;
			}
			q++;
		}
	} else if (c == '*') {
		q++;
		while (is_anchor_char(at(p, q)))
			q++;
	} else if ((c == '-' && is_ws0(at(p, q + 1))) || c == '\0' || c == '\n' || c == '#' || c == '|' ||
		   c == '>' || is_flow_ind(c)) {
		return KEY_NO;
	} else {
		size_t st = q;
		for (;;) {
			char d = at(p, q);
			if (d == '\0' || d == '\n')
				return KEY_NO;
			if (value_colon(p, q, false)) {
				*colon = q;
				return KEY_YES;
			}
			if (d == '#' && q > st && is_blank(at(p, q - 1)))
				return KEY_NO;
			q++;
		}
	}
	while (is_blank(at(p, q)))
		q++;
	if (value_colon(p, q, false)) {
		*colon = q;
		return KEY_YES;
	}
	return KEY_NO;
}

/* A block mapping whose entries sit at column m; p->pos at the first key. */
static int block_map(struct parser *p, int m, const struct props *node_pr, struct json **out)
{
	struct mapb mb;
	size_t start = p->pos;
	int ind;

	if (enter(p, start) < 0 || count_nodes(p, 1, start) < 0)
		return -1;
	mapb_init(&mb);
	for (;;) {
		struct props kp = { 0 };
		size_t colon, kpos, vpos;
		char *key = NULL;
		size_t klen = 0;
		bool merge = false;
		struct json *v;
		int k = key_ahead(p, p->pos, &colon);

		if (k == KEY_COMPLEX) {
			fail(p, colon, "complex mapping keys (\"? \") are not supported");
			goto bad;
		}
		if (k == KEY_NO) {
			if (cur(p) == '-' && is_ws0(at(p, p->pos + 1)))
				fail(p, p->pos, "block sequence entries are not allowed here");
			else
				fail(p, p->pos, "could not find expected ':'");
			goto bad;
		}
		if (properties(p, false, &kp) < 0)
			goto bad;
		kpos = p->pos;
		if (cur(p) == '"' || cur(p) == '\'') {
			if (quoted(p) < 0 || key_text(p, ST_QUOTED, &kp, kpos, &key, &klen) < 0)
				goto bad;
		} else if (cur(p) == '*') {
			if (alias_key(p, &kp, &key, &klen) < 0)
				goto bad;
		} else {
			enum stop why;
			size_t stop;
			if (colon == kpos) {
				fail(p, kpos, "empty mapping keys are not supported");
				goto bad;
			}
			if (plain_start(p, false) < 0)
				goto bad;
			buf_reset(&p->sb);
			if (plain_line(p, false, &why, &stop) < 0)
				goto bad;
			merge = kp.tag == TAG_NONE && !kp.anchor && text_is(p->sb.data, p->sb.len, "<<");
			if (key_text(p, ST_PLAIN, &kp, kpos, &key, &klen) < 0)
				goto bad;
		}
		skip_blanks(p);
		if (!value_colon(p, p->pos, false)) {
			fail(p, p->pos, "could not find expected ':'");
			free(key);
			goto bad;
		}
		p->pos++;
		skip_blanks(p);
		vpos = p->pos;
		if (block_node(p, m, true, false, &v) < 0) {
			free(key);
			goto bad;
		}
		if (mapb_add(p, &mb, key, klen, merge, kpos, vpos, v) < 0)
			goto bad;
		if (next_line(p, &ind) < 0)
			goto bad;
		if (ind == m)
			continue;
		if (ind < m)
			break;
		fail(p, p->pos, "bad indentation of a mapping entry");
		goto bad;
	}
	return mapb_done(p, &mb, node_pr, out);
bad:
	mapb_release(&mb);
	return -1;
}

/* A block sequence whose "-" sit at column m; p->pos at the first "-". */
static int block_seq(struct parser *p, int m, const struct props *pr, struct json **out)
{
	struct json *arr, *v;
	size_t start = p->pos;
	int ind;

	if (enter(p, start) < 0 || count_nodes(p, 1, start) < 0)
		return -1;
	arr = json_new_array();
	for (;;) {
		p->pos++;
		if (block_node(p, m, false, true, &v) < 0)
			goto bad;
		json_array_push(arr, v);
		if (next_line(p, &ind) < 0)
			goto bad;
		if (ind == m && cur(p) == '-' && is_ws0(at(p, p->pos + 1)))
			continue;
		if (ind <= m)
			break;
		fail(p, p->pos, "bad indentation of a sequence entry");
		goto bad;
	}
	if (coll_props(p, pr, arr, false) < 0)
		goto bad;
	*out = arr;
	p->depth--;
	return 0;
bad:
	json_free(arr);
	return -1;
}

/* A node that starts on the current line and is not a block collection. */
static int inline_node(struct parser *p, int n, const struct props *pr, struct json **out)
{
	size_t pos = p->pos;
	char c = cur(p);

	if (c == '|' || c == '>') {
		if (block_scalar(p, n) < 0)
			return -1;
		return finish_scalar(p, ST_BLOCK, pr, pos, out);
	}
	if (c == '[' || c == '{') {
		int saved = p->flow_n;
		p->flow_n = n;
		if (flow_coll(p, pr, out) < 0)
			return -1;
		p->flow_n = saved;
		skip_blanks(p);
		if (value_colon(p, p->pos, false)) {
			json_free(*out);
			*out = NULL;
			return fail(p, pos, "complex mapping keys are not supported (a collection cannot be a key)");
		}
		return 0;
	}
	if (c == '"' || c == '\'') {
		if (quoted(p) < 0)
			return -1;
		return finish_scalar(p, ST_QUOTED, pr, pos, out);
	}
	if (c == '*')
		return alias_value(p, pr, out);
	if (plain_start(p, false) < 0 || plain(p, n, false) < 0)
		return -1;
	return finish_scalar(p, ST_PLAIN, pr, pos, out);
}

/*
 * A node in block context. n is the indentation of the parent collection
 * (-1 at the top): the node must be indented more, except that a mapping's
 * value (map_value) may be a sequence at the mapping's own indentation.
 * inline_ok: a mapping may start on the current line ("- key: v", or the
 * first line of the document), which it may not after "key: ".
 */
static int block_node(struct parser *p, int n, bool map_value, bool inline_ok, struct json **out)
{
	struct props pr = { 0 };
	bool fresh;
	size_t start, colon;
	int ind, k;

	*out = NULL;
	skip_blanks(p);
	if (!at_line_end(p)) {
		start = p->pos;
		k = key_ahead(p, start, &colon);
		if (k == KEY_COMPLEX)
			return fail(p, colon, "complex mapping keys (\"? \") are not supported");
		if (k == KEY_YES) {
			if (!inline_ok)
				return fail(p, colon, "mapping values are not allowed here");
			return block_map(p, col_of(p, start), &pr, out);
		}
		if (properties(p, false, &pr) < 0)
			return -1;
		if (!at_line_end(p)) {
			if (cur(p) == '-' && is_ws0(at(p, p->pos + 1))) {
				if (!inline_ok || pr.anchor || pr.tag != TAG_NONE)
					return fail(p, p->pos, "block sequence entries are not allowed here");
				return block_seq(p, col_of(p, p->pos), &pr, out);
			}
			return inline_node(p, n, &pr, out);
		}
	}
	/* The node starts on a later line, or is empty. */
	for (;;) {
		if (skip_block(p, &fresh) < 0)
			return -1;
		start = p->pos;
		if (start >= p->len || doc_marker(p, start))
			return empty_node(p, &pr, start, out);
		ind = (int)(start - line_start(p, start));
		if (cur(p) == '-' && is_ws0(at(p, start + 1))) {
			if (ind > n || (map_value && ind == n))
				return block_seq(p, ind, &pr, out);
			return empty_node(p, &pr, start, out);
		}
		if (ind <= n)
			return empty_node(p, &pr, start, out);
		k = key_ahead(p, start, &colon);
		if (k == KEY_COMPLEX)
			return fail(p, colon, "complex mapping keys (\"? \") are not supported");
		if (k == KEY_YES)
			return block_map(p, ind, &pr, out);
		if (properties(p, false, &pr) < 0)
			return -1;
		if (at_line_end(p))
			continue;	/* an anchor or tag alone on its line: the node follows */
		if (cur(p) == '-' && is_ws0(at(p, p->pos + 1)))
			return fail(p, p->pos, "block sequence entries are not allowed here");
		return inline_node(p, n, &pr, out);
	}
}

/* ---- flow collections ---- */

static int flow_node(struct parser *p, size_t open, const char *what, struct json **out, bool *jsonlike)
{
	struct props pr = { 0 };
	size_t pos;
	char c;

	*jsonlike = false;
	if (properties(p, true, &pr) < 0 || skip_flow(p, open, what) < 0)
		return -1;
	pos = p->pos;
	c = cur(p);
	if (c == '[' || c == '{') {
		*jsonlike = true;
		return flow_coll(p, &pr, out);
	}
	if (c == '"' || c == '\'') {
		*jsonlike = true;
		if (quoted(p) < 0)
			return -1;
		return finish_scalar(p, ST_QUOTED, &pr, pos, out);
	}
	if (c == '*')
		return alias_value(p, &pr, out);
	if (c == ',' || c == ']' || c == '}')
		return empty_node(p, &pr, pos, out);
	if (plain_start(p, true) < 0 || plain(p, -1, true) < 0)
		return -1;
	return finish_scalar(p, ST_PLAIN, &pr, pos, out);
}

/* "key", "key: value" or "key:" in a flow collection, added to mb. */
static int flow_entry(struct parser *p, size_t open, const char *what, struct mapb *mb)
{
	struct props kp = { 0 };
	char *key = NULL;
	size_t klen = 0, kpos, vpos;
	bool merge = false, jsonlike = false, jl;
	struct json *v;
	char c;

	if (properties(p, true, &kp) < 0 || skip_flow(p, open, what) < 0)
		return -1;
	kpos = p->pos;
	c = cur(p);
	if (c == '[' || c == '{')
		return fail(p, kpos, "complex mapping keys are not supported (a collection cannot be a key)");
	if (c == '?' && (is_ws0(at(p, kpos + 1)) || is_flow_ind(at(p, kpos + 1))))
		return fail(p, kpos, "complex mapping keys (\"? \") are not supported");
	if (c == '"' || c == '\'') {
		jsonlike = true;
		if (quoted(p) < 0 || key_text(p, ST_QUOTED, &kp, kpos, &key, &klen) < 0)
			return -1;
	} else if (c == '*') {
		if (alias_key(p, &kp, &key, &klen) < 0)
			return -1;
	} else {
		if (value_colon(p, kpos, true) || c == ',' || c == '}' || c == ']')
			return fail(p, kpos, "empty mapping keys are not supported");
		if (plain_start(p, true) < 0 || plain(p, -1, true) < 0)
			return -1;
		merge = kp.tag == TAG_NONE && !kp.anchor && text_is(p->sb.data, p->sb.len, "<<");
		if (key_text(p, ST_PLAIN, &kp, kpos, &key, &klen) < 0)
			return -1;
	}
	if (skip_flow(p, open, what) < 0)
		goto bad;
	if (cur(p) == ':' && (jsonlike || value_colon(p, p->pos, true))) {
		p->pos++;
		if (skip_flow(p, open, what) < 0)
			goto bad;
		vpos = p->pos;
		if (flow_node(p, open, what, &v, &jl) < 0)
			goto bad;
	} else {
		/* "{ a, b }": keys without values are null. */
		vpos = p->pos;
		if (count_nodes(p, 1, vpos) < 0)
			goto bad;
		v = json_new_null();
	}
	return mapb_add(p, mb, key, klen, merge, kpos, vpos, v);
bad:
	free(key);
	return -1;
}

static int flow_map(struct parser *p, const struct props *pr, struct json **out)
{
	static const char what[] = "flow mapping";
	struct mapb mb;
	size_t open = p->pos;

	if (enter(p, open) < 0 || count_nodes(p, 1, open) < 0)
		return -1;
	mapb_init(&mb);
	p->pos++;
	for (;;) {
		if (skip_flow(p, open, what) < 0)
			goto bad;
		if (cur(p) == '}') {
			p->pos++;
			break;
		}
		if (cur(p) == ',') {
			fail(p, p->pos, "unexpected ',' in a flow mapping");
			goto bad;
		}
		if (flow_entry(p, open, what, &mb) < 0 || skip_flow(p, open, what) < 0)
			goto bad;
		if (cur(p) == ',') {
			p->pos++;
		} else if (cur(p) != '}') {
			fail(p, p->pos, "expected ',' or '}' in a flow mapping");
			goto bad;
		}
	}
	return mapb_done(p, &mb, pr, out);
bad:
	mapb_release(&mb);
	return -1;
}

/* "[ key: value ]": a single-pair mapping inside a flow sequence. */
static int flow_pair(struct parser *p, size_t open, struct json **out)
{
	struct mapb mb;
	size_t start = p->pos;

	if (enter(p, start) < 0 || count_nodes(p, 1, start) < 0)
		return -1;
	mapb_init(&mb);
	if (flow_entry(p, open, "flow sequence", &mb) < 0 || mapb_finish(p, &mb) < 0) {
		mapb_release(&mb);
		return -1;
	}
	*out = mb.obj;
	mb.obj = NULL;
	mapb_release(&mb);
	p->depth--;
	return 0;
}

static int flow_seq(struct parser *p, const struct props *pr, struct json **out)
{
	static const char what[] = "flow sequence";
	struct json *arr, *v;
	size_t open = p->pos;
	bool jl;

	if (enter(p, open) < 0 || count_nodes(p, 1, open) < 0)
		return -1;
	arr = json_new_array();
	p->pos++;
	for (;;) {
		size_t estart, anchors0;

		if (skip_flow(p, open, what) < 0)
			goto bad;
		if (cur(p) == ']') {
			p->pos++;
			break;
		}
		if (cur(p) == ',') {
			fail(p, p->pos, "unexpected ',' in a flow sequence");
			goto bad;
		}
		if (cur(p) == '?' && (is_ws0(at(p, p->pos + 1)) || is_flow_ind(at(p, p->pos + 1)))) {
			fail(p, p->pos, "complex mapping keys (\"? \") are not supported");
			goto bad;
		}
		estart = p->pos;
		anchors0 = p->nanchors;
		if (flow_node(p, open, what, &v, &jl) < 0)
			goto bad;
		if (skip_flow(p, open, what) < 0) {
			json_free(v);
			goto bad;
		}
		if (cur(p) == ':' && (jl || value_colon(p, p->pos, true))) {
			/* The entry was a key: read it again as one. The nodes of the
			 * first reading stay counted, so that re-reading cannot be
			 * used to copy aliases without limit. */
			json_free(v);
			drop_anchors(p, anchors0);
			p->pos = estart;
			if (flow_pair(p, open, &v) < 0)
				goto bad;
		}
		json_array_push(arr, v);
		if (skip_flow(p, open, what) < 0)
			goto bad;
		if (cur(p) == ',') {
			p->pos++;
		} else if (cur(p) != ']') {
			fail(p, p->pos, "expected ',' or ']' in a flow sequence");
			goto bad;
		}
	}
	if (coll_props(p, pr, arr, false) < 0)
		goto bad;
	*out = arr;
	p->depth--;
	return 0;
bad:
	json_free(arr);
	return -1;
}

static int flow_coll(struct parser *p, const struct props *pr, struct json **out)
{
	return cur(p) == '[' ? flow_seq(p, pr, out) : flow_map(p, pr, out);
}

/* ---- documents ---- */

static int document(struct parser *p, struct json **out)
{
	struct json *root = NULL;
	bool fresh, directive = false;
	int ind;

	for (;;) {
		if (skip_block(p, &fresh) < 0)
			return -1;
		if (cur(p) != '%' || p->pos != line_start(p, p->pos))
			break;
		if (directive || p->pos + 5 > p->len || memcmp(p->s + p->pos, "%YAML", 5) != 0 ||
		    !is_blank(at(p, p->pos + 5)))
			return fail(p, p->pos, "directives other than one %%YAML are not supported");
		directive = true;
		while (cur(p) != '\n' && cur(p) != '\0')
			p->pos++;
	}
	if (doc_marker(p, p->pos) && cur(p) == '-') {
		p->pos += 3;
		if (block_node(p, -1, false, false, &root) < 0)
			return -1;
	} else if (directive) {
		return fail(p, p->pos, "expected \"---\" after the %%YAML directive");
	} else if (p->pos >= p->len || doc_marker(p, p->pos)) {
		if (count_nodes(p, 1, p->pos) < 0)
			return -1;
		root = json_new_null();
	} else if (block_node(p, -1, false, true, &root) < 0) {
		return -1;
	}
	if (next_line(p, &ind) < 0)
		goto bad;
	if (p->pos < p->len && cur(p) == '.' && doc_marker(p, p->pos)) {
		p->pos += 3;
		if (skip_block(p, &fresh) < 0)
			goto bad;
		if (p->pos < p->len) {
			fail(p, p->pos, "multiple documents are not supported");
			goto bad;
		}
	}
	if (p->pos < p->len) {
		if (doc_marker(p, p->pos))
			fail(p, p->pos, "multiple documents are not supported");
		else
			fail(p, p->pos, "unexpected content after the document's top-level node (check the indentation)");
		goto bad;
	}
	*out = root;
	return 0;
bad:
	json_free(root);
	return -1;
}

/* Refuse invalid UTF-8, control characters and a BOM past the start. */
static int check_text(const char *t, size_t len, size_t start, struct err *e)
{
	for (size_t i = start; i < len;) {
		unsigned char c = (unsigned char)t[i];
		const char *why = NULL;
		unsigned cp = c;
		size_t n = 1, line, col;

		if (c < 0x80) {
			if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f)
				why = "control character";
		} else if (!(n = utf8_seq_len((const unsigned char *)t + i, len - i))) {
			why = "invalid UTF-8";
		} else if (n == 3 && memcmp(t + i, "\xef\xbb\xbf", 3) == 0) {
			why = "a byte-order mark is only allowed at the start of the text";
		} else if (n == 2 && c == 0xC2 && (unsigned char)t[i + 1] <= 0x9F && (unsigned char)t[i + 1] != 0x85) {
			why = "control character";
			cp = (unsigned char)t[i + 1];
		}
		if (why) {
			linecol(t, start, i, &line, &col);
			if (why[0] == 'c')
				return err_set(e, "%zu:%zu: control character U+%04X is not allowed (write it as an escape in a double-quoted string)",
					       line, col, cp);
			return err_set(e, "%zu:%zu: %s", line, col, why);
		}
		i += n;
	}
	return 0;
}

int yaml_parse(const char *text, size_t len, const struct yaml_limits *lim, struct json **out, struct err *e)
{
	struct parser p;
	struct buf norm;
	size_t max_size = lim && lim->max_size ? lim->max_size : YAML_MAX_SIZE_DEFAULT;
	size_t start = 0;
	int rc;

	*out = NULL;
	if (len > max_size)
		return err_set(e, "YAML document larger than %zu bytes", max_size);
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
		start = 3;
	if (check_text(text, len, start, e) < 0)
		return -1;

	/* Line breaks become "\n" (YAML normalises them in content too). */
	buf_init(&norm, len + 1);
	for (size_t i = start; i < len; i++) {
		if (text[i] == '\r') {
			if (i + 1 < len && text[i + 1] == '\n')
				continue;
			buf_addch(&norm, '\n');
		} else {
			buf_addch(&norm, text[i]);
		}
	}

	memset(&p, 0, sizeof(p));
	p.s = norm.data;
	p.len = norm.len;
	p.e = e;
	p.flow_n = -1;
	p.max_depth = lim && lim->max_depth ? lim->max_depth : YAML_MAX_DEPTH_DEFAULT;
	if (p.max_depth > YAML_MAX_DEPTH_CAP)
		p.max_depth = YAML_MAX_DEPTH_CAP;
	p.max_nodes = lim && lim->max_nodes ? lim->max_nodes : YAML_MAX_NODES_DEFAULT;
	p.max_scalar = lim && lim->max_scalar ? lim->max_scalar : YAML_MAX_SCALAR_DEFAULT;
	p.keep = json_new_array();
	buf_init(&p.sb, p.max_scalar);

	rc = document(&p, out);

	drop_anchors(&p, 0);
	free(p.anchors);
	free(p.anchor_tab);
	json_free(p.keep);
	buf_release(&p.sb);
	buf_release(&norm);
	if (p.cloc)
		freelocale(p.cloc);
	return rc;
}
