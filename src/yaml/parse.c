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
#include "yaml/parser.h"

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

int yp_fail(struct parser *p, size_t pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int yp_fail(struct parser *p, size_t pos, const char *fmt, ...)
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
const char *yp_shown(const char *s, size_t n, char *out, size_t outsz)
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
bool yp_doc_marker(const struct parser *p, size_t pos)
{
	if (pos != line_start(p, pos) || pos + 3 > p->len)
		return false;
	if (memcmp(p->s + pos, "---", 3) != 0 && memcmp(p->s + pos, "...", 3) != 0)
		return false;
	return is_ws0(at(p, pos + 3));
}

void yp_skip_blanks(struct parser *p)
{
	while (is_blank(cur(p)))
		p->pos++;
}

/* A comment starts at '#' after white space or at the start of a line. */
bool yp_comment_here(const struct parser *p)
{
	return cur(p) == '#' && (p->pos == 0 || is_ws0(p->s[p->pos - 1]));
}

static bool at_line_end(const struct parser *p)
{
	char c = cur(p);
	return c == '\n' || c == '\0' || yp_comment_here(p);
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
		} else if (yp_comment_here(p)) {
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
				return yp_fail(p, i, "tab characters must not be used for indentation");
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
	if (p->pos >= p->len || yp_doc_marker(p, p->pos)) {
		*indent = -1;
		return 0;
	}
	if (!fresh)
		return yp_fail(p, p->pos, "unexpected text after a value");
	*indent = (int)(p->pos - line_start(p, p->pos));
	return 0;
}

/* Does the line starting at ls end a flow collection that was left open?
 * Its lines must be indented more than the block node around it; a closing
 * bracket at that indentation is tolerated, as other parsers do. */
bool yp_flow_line_outside(const struct parser *p, size_t ls)
{
	size_t q = ls;

	if (yp_doc_marker(p, ls))
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
			if (yp_flow_line_outside(p, p->pos))
				return yp_fail(p, open, "unclosed %s", what);
		} else if (yp_comment_here(p)) {
			while (cur(p) != '\n' && cur(p) != '\0')
				p->pos++;
		} else if (c == '\0') {
			return yp_fail(p, open, "unclosed %s", what);
		} else {
			return 0;
		}
	}
}

/* ---- limits ---- */

static int count_nodes(struct parser *p, size_t n, size_t pos)
{
	if (n > p->max_nodes - p->nodes)
		return yp_fail(p, pos, "document has more than %zu nodes (alias expansions included)", p->max_nodes);
	p->nodes += n;
	return 0;
}

static int enter(struct parser *p, size_t pos)
{
	if (p->depth >= p->max_depth)
		return yp_fail(p, pos, "nesting deeper than %u levels", p->max_depth);
	p->depth++;
	return 0;
}

/* A collection starts at pos: a level deeper, and one node more. */
static int enter_collection(struct parser *p, size_t pos)
{
	return enter(p, pos) < 0 || count_nodes(p, 1, pos) < 0 ? -1 : 0;
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

/* "*name" at p->pos, with properties pr (an alias may have none): the
 * anchor it names (the latest definition). */
static int alias_ref(struct parser *p, const struct props *pr, const struct anchor **out)
{
	size_t st = p->pos + 1, i = st;
	char nm[80];

	if (pr->anchor || pr->tag != TAG_NONE)
		return yp_fail(p, p->pos, "an alias cannot have an anchor or a tag");

	while (is_anchor_char(at(p, i)))
		i++;
	if (i == st)
		return yp_fail(p, p->pos, "alias name is missing after '*'");
	for (size_t k = p->anchor_tab ? p->anchor_tab[name_hash(p->s + st, i - st)] : 0; k; k = p->anchors[k - 1].prev) {
		const struct anchor *a = &p->anchors[k - 1];
		if (a->len == i - st && memcmp(a->name, p->s + st, a->len) == 0) {
			*out = a;
			p->pos = i;
			return 0;
		}
	}
	return yp_fail(p, p->pos, "undefined alias \"%s\"", yp_shown(p->s + st, i - st, nm, 64));
}

/* A copy of an alias's node, within the node and depth limits. */
static int alias_value(struct parser *p, const struct props *pr, struct json **out)
{
	size_t pos = p->pos;
	const struct anchor *a;

	if (alias_ref(p, pr, &a) < 0)
		return -1;
	if (a->height > p->max_depth - p->depth)
		return yp_fail(p, pos, "nesting deeper than %u levels (through an alias)", p->max_depth);
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
		if (yp_text_is(suffix, sn, names[i].name))
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
				return yp_fail(p, st, "a node can have only one anchor");
			while (is_anchor_char(at(p, i)))
				i++;
			if (i == st + 1)
				return yp_fail(p, st, "anchor name is missing after '&'");
			pr->anchor = p->s + st + 1;
			pr->anchor_len = i - st - 1;
			pr->anchor_pos = st;
		} else if (c == '!') {
			if (pr->tag != TAG_NONE)
				return yp_fail(p, st, "a node can have only one tag");
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
				return yp_fail(p, st, "unsupported tag \"%s\" (supported: !!str !!int !!float !!bool !!null !!map !!seq)",
					    yp_shown(p->s + st, i - st, tn, 48));
		} else {
			return 0;
		}
		p->pos = i;
		if (!is_ws0(cur(p)) && !(flow && is_flow_ind(cur(p))))
			return yp_fail(p, p->pos, "expected white space after an anchor or tag");
		yp_skip_blanks(p);
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

/* A mapping starts at pos: a level deeper (enter_collection), and its builder. */
static int mapb_begin(struct parser *p, struct mapb *mb, size_t pos)
{
	if (enter_collection(p, pos) < 0)
		return -1;
	memset(mb, 0, sizeof(*mb));
	mb->obj = json_new_object();
	return 0;
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
			yp_fail(p, kpos, "duplicate key \"<<\"");
			goto bad;
		}
		if (!okv) {
			yp_fail(p, vpos, "the value of a merge key \"<<\" must be a mapping or a list of mappings");
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
		yp_fail(p, kpos, "duplicate key \"%s\"", yp_shown(key, n, ks, 64));
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

	if (yp_scalar_value(p, st, pr, pos, &v) < 0)
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
		return yp_fail(p, pr->tag_pos, "tag %s cannot be applied to a %s", yp_tag_name(pr, tn, sizeof(tn)),
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

/* Hand the finished sequence arr to *out with pr's anchor and tag recorded,
 * closing the nesting level it opened; on failure arr is freed. */
static int seq_done(struct parser *p, struct json *arr, const struct props *pr, struct json **out)
{
	if (coll_props(p, pr, arr, false) < 0) {
		json_free(arr);
		return -1;
	}
	*out = arr;
	p->depth--;
	return 0;
}

/* A key's text, malloc'd, from p->sb. The key's tag is checked by typing it;
 * an anchored key keeps its typed node in p->keep for later aliases. */
static int key_text(struct parser *p, enum style st, const struct props *pr, size_t pos, char **key, size_t *n)
{
	if (pr->tag != TAG_NONE || pr->anchor) {
		struct json *v;
		if (yp_scalar_value(p, st, pr, pos, &v) < 0)
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

	if (alias_ref(p, pr, &a) < 0)
		return -1;
	if (!a->text)
		return yp_fail(p, pos, "complex mapping keys are not supported (this alias names a collection)");
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
			if (yp_value_colon(p, q, false)) {
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
	if (yp_value_colon(p, q, false)) {
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

	if (mapb_begin(p, &mb, start) < 0)
		return -1;
	for (;;) {
		struct props kp = { 0 };
		size_t colon, kpos, vpos;
		char *key = NULL;
		size_t klen = 0;
		bool merge = false;
		struct json *v;
		int k = key_ahead(p, p->pos, &colon);

		if (k == KEY_COMPLEX) {
			yp_fail(p, colon, "complex mapping keys (\"? \") are not supported");
			goto bad;
		}
		if (k == KEY_NO) {
			if (cur(p) == '-' && is_ws0(at(p, p->pos + 1)))
				yp_fail(p, p->pos, "block sequence entries are not allowed here");
			else
				yp_fail(p, p->pos, "could not find expected ':'");
			goto bad;
		}
		if (properties(p, false, &kp) < 0)
			goto bad;
		kpos = p->pos;
		if (cur(p) == '"' || cur(p) == '\'') {
			if (yp_quoted(p) < 0 || key_text(p, ST_QUOTED, &kp, kpos, &key, &klen) < 0)
				goto bad;
		} else if (cur(p) == '*') {
			if (alias_key(p, &kp, &key, &klen) < 0)
				goto bad;
		} else {
			enum stop why;
			size_t stop;
			if (colon == kpos) {
				yp_fail(p, kpos, "empty mapping keys are not supported");
				goto bad;
			}
			if (yp_plain_start(p, false) < 0)
				goto bad;
			buf_reset(&p->sb);
			if (yp_plain_line(p, false, &why, &stop) < 0)
				goto bad;
			merge = kp.tag == TAG_NONE && !kp.anchor && yp_text_is(p->sb.data, p->sb.len, "<<");
			if (key_text(p, ST_PLAIN, &kp, kpos, &key, &klen) < 0)
				goto bad;
		}
		yp_skip_blanks(p);
		if (!yp_value_colon(p, p->pos, false)) {
			yp_fail(p, p->pos, "could not find expected ':'");
			free(key);
			goto bad;
		}
		p->pos++;
		yp_skip_blanks(p);
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
		yp_fail(p, p->pos, "bad indentation of a mapping entry");
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

	if (enter_collection(p, start) < 0)
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
		yp_fail(p, p->pos, "bad indentation of a sequence entry");
		goto bad;
	}
	return seq_done(p, arr, pr, out);
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
		if (yp_block_scalar(p, n) < 0)
			return -1;
		return finish_scalar(p, ST_BLOCK, pr, pos, out);
	}
	if (c == '[' || c == '{') {
		int saved = p->flow_n;
		p->flow_n = n;
		if (flow_coll(p, pr, out) < 0)
			return -1;
		p->flow_n = saved;
		yp_skip_blanks(p);
		if (yp_value_colon(p, p->pos, false)) {
			json_free(*out);
			*out = NULL;
			return yp_fail(p, pos, "complex mapping keys are not supported (a collection cannot be a key)");
		}
		return 0;
	}
	if (c == '"' || c == '\'') {
		if (yp_quoted(p) < 0)
			return -1;
		return finish_scalar(p, ST_QUOTED, pr, pos, out);
	}
	if (c == '*')
		return alias_value(p, pr, out);
	if (yp_plain_start(p, false) < 0 || yp_plain(p, n, false) < 0)
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
	yp_skip_blanks(p);
	if (!at_line_end(p)) {
		start = p->pos;
		k = key_ahead(p, start, &colon);
		if (k == KEY_COMPLEX)
			return yp_fail(p, colon, "complex mapping keys (\"? \") are not supported");
		if (k == KEY_YES) {
			if (!inline_ok)
				return yp_fail(p, colon, "mapping values are not allowed here");
			return block_map(p, col_of(p, start), &pr, out);
		}
		if (properties(p, false, &pr) < 0)
			return -1;
		if (!at_line_end(p)) {
			if (cur(p) == '-' && is_ws0(at(p, p->pos + 1))) {
				if (!inline_ok || pr.anchor || pr.tag != TAG_NONE)
					return yp_fail(p, p->pos, "block sequence entries are not allowed here");
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
		if (start >= p->len || yp_doc_marker(p, start))
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
			return yp_fail(p, colon, "complex mapping keys (\"? \") are not supported");
		if (k == KEY_YES)
			return block_map(p, ind, &pr, out);
		if (properties(p, false, &pr) < 0)
			return -1;
		if (at_line_end(p))
			continue;	/* an anchor or tag alone on its line: the node follows */
		if (cur(p) == '-' && is_ws0(at(p, p->pos + 1)))
			return yp_fail(p, p->pos, "block sequence entries are not allowed here");
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
		if (yp_quoted(p) < 0)
			return -1;
		return finish_scalar(p, ST_QUOTED, &pr, pos, out);
	}
	if (c == '*')
		return alias_value(p, &pr, out);
	if (c == ',' || c == ']' || c == '}')
		return empty_node(p, &pr, pos, out);
	if (yp_plain_start(p, true) < 0 || yp_plain(p, -1, true) < 0)
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
		return yp_fail(p, kpos, "complex mapping keys are not supported (a collection cannot be a key)");
	if (c == '?' && (is_ws0(at(p, kpos + 1)) || is_flow_ind(at(p, kpos + 1))))
		return yp_fail(p, kpos, "complex mapping keys (\"? \") are not supported");
	if (c == '"' || c == '\'') {
		jsonlike = true;
		if (yp_quoted(p) < 0 || key_text(p, ST_QUOTED, &kp, kpos, &key, &klen) < 0)
			return -1;
	} else if (c == '*') {
		if (alias_key(p, &kp, &key, &klen) < 0)
			return -1;
	} else {
		if (yp_value_colon(p, kpos, true) || c == ',' || c == '}' || c == ']')
			return yp_fail(p, kpos, "empty mapping keys are not supported");
		if (yp_plain_start(p, true) < 0 || yp_plain(p, -1, true) < 0)
			return -1;
		merge = kp.tag == TAG_NONE && !kp.anchor && yp_text_is(p->sb.data, p->sb.len, "<<");
		if (key_text(p, ST_PLAIN, &kp, kpos, &key, &klen) < 0)
			return -1;
	}
	if (skip_flow(p, open, what) < 0)
		goto bad;
	if (cur(p) == ':' && (jsonlike || yp_value_colon(p, p->pos, true))) {
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

/* Where a flow collection (what, closed by close) may end or take its next
 * entry: 1 when it ends here (the close consumed), 0 when an entry starts,
 * -1 after failing (a ',' with no entry before it). */
static int flow_next(struct parser *p, size_t open, const char *what, char close)
{
	if (skip_flow(p, open, what) < 0)
		return -1;
	if (cur(p) == close) {
		p->pos++;
		return 1;
	}
	if (cur(p) == ',')
		return yp_fail(p, p->pos, "unexpected ',' in a %s", what);
	return 0;
}

/* After an entry: its ',' consumed, or the close next (0); -1 after failing. */
static int flow_sep(struct parser *p, size_t open, const char *what, char close)
{
	if (skip_flow(p, open, what) < 0)
		return -1;
	if (cur(p) == ',')
		p->pos++;
	else if (cur(p) != close)
		return yp_fail(p, p->pos, "expected ',' or '%c' in a %s", close, what);
	return 0;
}

static int flow_map(struct parser *p, const struct props *pr, struct json **out)
{
	static const char what[] = "flow mapping";
	struct mapb mb;
	size_t open = p->pos;
	int rc;

	if (mapb_begin(p, &mb, open) < 0)
		return -1;
	p->pos++;
	while ((rc = flow_next(p, open, what, '}')) == 0)
		if (flow_entry(p, open, what, &mb) < 0 || flow_sep(p, open, what, '}') < 0)
			goto bad;
	if (rc < 0)
		goto bad;
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

	if (mapb_begin(p, &mb, start) < 0)
		return -1;
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
	int rc;

	if (enter_collection(p, open) < 0)
		return -1;
	arr = json_new_array();
	p->pos++;
	while ((rc = flow_next(p, open, what, ']')) == 0) {
		size_t estart, anchors0;

		if (cur(p) == '?' && (is_ws0(at(p, p->pos + 1)) || is_flow_ind(at(p, p->pos + 1)))) {
			yp_fail(p, p->pos, "complex mapping keys (\"? \") are not supported");
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
		if (cur(p) == ':' && (jl || yp_value_colon(p, p->pos, true))) {
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
		if (flow_sep(p, open, what, ']') < 0)
			goto bad;
	}
	if (rc < 0)
		goto bad;
	return seq_done(p, arr, pr, out);
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
			return yp_fail(p, p->pos, "directives other than one %%YAML are not supported");
		directive = true;
		while (cur(p) != '\n' && cur(p) != '\0')
			p->pos++;
	}
	if (yp_doc_marker(p, p->pos) && cur(p) == '-') {
		p->pos += 3;
		if (block_node(p, -1, false, false, &root) < 0)
			return -1;
	} else if (directive) {
		return yp_fail(p, p->pos, "expected \"---\" after the %%YAML directive");
	} else if (p->pos >= p->len || yp_doc_marker(p, p->pos)) {
		if (count_nodes(p, 1, p->pos) < 0)
			return -1;
		root = json_new_null();
	} else if (block_node(p, -1, false, true, &root) < 0) {
		return -1;
	}
	if (next_line(p, &ind) < 0)
		goto bad;
	if (p->pos < p->len && cur(p) == '.' && yp_doc_marker(p, p->pos)) {
		p->pos += 3;
		if (skip_block(p, &fresh) < 0)
			goto bad;
		if (p->pos < p->len) {
			yp_fail(p, p->pos, "multiple documents are not supported");
			goto bad;
		}
	}
	if (p->pos < p->len) {
		if (yp_doc_marker(p, p->pos))
			yp_fail(p, p->pos, "multiple documents are not supported");
		else
			yp_fail(p, p->pos, "unexpected content after the document's top-level node (check the indentation)");
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
