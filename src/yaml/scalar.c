/*
 * scalar.c: the text of YAML scalars (plain, single- and double-quoted,
 * literal and folded block scalars) and their typing into JSON values
 * (null, booleans, integers, floats, strings; tags). The structure around
 * them is parse.c's.
 */
#include "yaml/parser.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/utf8.h"

/* ---- scalar text ---- */

static int put(struct parser *p, const char *d, size_t n)
{
	if (buf_add(&p->sb, d, n) < 0)
		return yp_fail(p, p->pos, "scalar longer than %zu bytes", p->max_scalar);
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
		return yp_fail(p, pos, "invalid Unicode escape (U+%04X)", (unsigned)cp);
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
			return yp_fail(p, bs, "invalid escape sequence");
		return yp_fail(p, bs, "invalid escape sequence \"\\%c\"", c);
	}
	if (simple) {
		p->pos = bs + 2;
		return put(p, simple, c == '0' ? 1 : strlen(simple));
	}
	if (hex_digits(p, bs + 2, digits, &cp) < 0)
		return yp_fail(p, bs, "escape \"\\%c\" needs %d hexadecimal digits", c, digits);
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
		if (yp_doc_marker(p, p->pos))
			return yp_fail(p, open, "unterminated %s string", what);
		yp_skip_blanks(p);
	}
	if (escaped)
		return put_n(p, '\n', breaks - 1);
	if (breaks == 1)
		return put(p, " ", 1);
	return put_n(p, '\n', breaks - 1);
}

/* A single- or double-quoted scalar at p->pos, into p->sb. */
int yp_quoted(struct parser *p)
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
			return yp_fail(p, open, "unterminated %s string", what);
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

/* ':' that ends a plain scalar (a mapping value indicator). */
bool yp_value_colon(const struct parser *p, size_t i, bool flow)
{
	char n = at(p, i + 1);
	return at(p, i) == ':' && (is_ws0(n) || (flow && is_flow_ind(n)));
}

/*
 * One line of a plain scalar from p->pos; appends it without trailing blanks
 * and leaves p->pos after its last non-blank character. *stop_pos is where
 * the scan stopped (the ':' or '#', or the line end).
 */
int yp_plain_line(struct parser *p, bool flow, enum stop *why, size_t *stop_pos)
{
	size_t st = p->pos, i = p->pos, end = p->pos;

	for (;;) {
		char c = at(p, i);
		if (c == '\n' || c == '\0') {
			*why = STOP_EOL;
			break;
		}
		if (c == ':' && yp_value_colon(p, i, flow)) {
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
int yp_plain_start(struct parser *p, bool flow)
{
	char c = cur(p), n = at(p, p->pos + 1);

	if (c == ',' || c == ']' || c == '}' || c == '[' || c == '{')
		return yp_fail(p, p->pos, "unexpected '%c'", c);
	if (c == '#')
		return yp_fail(p, p->pos, "a comment must be separated from what precedes it by a space");
	if (c == '@' || c == '`')
		return yp_fail(p, p->pos, "'%c' is reserved and cannot start a plain scalar; quote the value", c);
	if (c == '%')
		return yp_fail(p, p->pos, "'%%' cannot start a plain scalar; quote the value");
	if ((c == '-' || c == '?' || c == ':') && (is_ws0(n) || (flow && is_flow_ind(n))))
		return yp_fail(p, p->pos, "'%c' followed by a space cannot start a value here; quote the value", c);
	if (c == '\0' || c == '\n')
		return yp_fail(p, p->pos, "expected a value");
	return 0;
}

/*
 * A plain scalar, possibly over several lines, into p->sb. In block context
 * continuation lines must be indented more than n; a line break folds to a
 * space, n > 1 breaks to n-1 newlines.
 */
int yp_plain(struct parser *p, int n, bool flow)
{
	enum stop why;
	size_t stop;

	buf_reset(&p->sb);
	if (yp_plain_line(p, flow, &why, &stop) < 0)
		return -1;
	if (!flow && why == STOP_COLON)
		return yp_fail(p, stop, "mapping values are not allowed here");
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
		if (at(p, content) == '\0' || at(p, content) == '#' || yp_doc_marker(p, ls))
			break;
		if (flow && yp_flow_line_outside(p, ls))
			break;
		if (!flow && (tab || (int)(content - ls) <= n))
			break;	/* not ours: the caller reports a tab or reads the next entry */
		if (flow && (is_flow_ind(at(p, content)) || yp_value_colon(p, content, true)))
			break;
		if (breaks == 1 ? put(p, " ", 1) < 0 : put_n(p, '\n', breaks - 1) < 0)
			return -1;
		p->pos = content;
		if (yp_plain_line(p, flow, &why, &stop) < 0)
			return -1;
		if (!flow && why == STOP_COLON)
			return yp_fail(p, stop, "mapping values are not allowed here");
	}
	return 0;
}

/* A literal (|) or folded (>) block scalar; p->pos at the indicator. n is
 * the indentation of the parent collection (-1 at the top). */
int yp_block_scalar(struct parser *p, int n)
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
			return yp_fail(p, p->pos, "block scalar indentation indicator must be 1 to 9");
		} else {
			break;
		}
	}
	yp_skip_blanks(p);
	if (yp_comment_here(p))
		while (cur(p) != '\n' && cur(p) != '\0')
			p->pos++;
	if (cur(p) != '\n' && cur(p) != '\0')
		return yp_fail(p, p->pos, "unexpected text after a block scalar indicator");
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

		if (ls >= p->len || yp_doc_marker(p, ls))
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

bool yp_text_is(const char *t, size_t n, const char *w)
{
	return strlen(w) == n && memcmp(t, w, n) == 0;
}

static bool is_null_text(const char *t, size_t n)
{
	return n == 0 || yp_text_is(t, n, "~") || yp_text_is(t, n, "null") || yp_text_is(t, n, "Null") ||
	       yp_text_is(t, n, "NULL");
}

static int bool_text(const char *t, size_t n)
{
	if (yp_text_is(t, n, "true") || yp_text_is(t, n, "True") || yp_text_is(t, n, "TRUE"))
		return 1;
	if (yp_text_is(t, n, "false") || yp_text_is(t, n, "False") || yp_text_is(t, n, "FALSE"))
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

const char *yp_tag_name(const struct props *pr, char *out, size_t outsz)
{
	return yp_shown(pr->tag_text, pr->tag_len, out, outsz);
}

/* The node for a scalar's text (in p->sb, NUL-terminated) under the core
 * schema and the scalar's tag. pos is the scalar's position for messages. */
int yp_scalar_value(struct parser *p, enum style st, const struct props *pr, size_t pos, struct json **out)
{
	const char *t = p->sb.data;
	size_t n = p->sb.len;
	struct json *v = NULL;
	char tn[64], sv[80];
	int b;

	switch (pr->tag) {
	case TAG_MAP:
	case TAG_SEQ:
		return yp_fail(p, pr->tag_pos, "tag %s needs a %s, not a scalar", yp_tag_name(pr, tn, sizeof(tn)),
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
		return yp_fail(p, pos, "\"%s\" is not a valid %s value", yp_shown(t, n, sv, 40),
			    yp_tag_name(pr, tn, sizeof(tn)));
	*out = v;
	return 0;
}
