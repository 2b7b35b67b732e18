/*
 * parser.h: the YAML parser's own state, shared by its two files and nothing
 * else: parse.c (structure: blocks, flows, anchors, documents) and scalar.c
 * (scalar text: plain, quoted and block scalars, and their typing).
 */
#ifndef DENV_YAML_PARSER_H
#define DENV_YAML_PARSER_H

#include <locale.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"
#include "yaml/yaml.h"

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

static inline char at(const struct parser *p, size_t i) { return i < p->len ? p->s[i] : '\0'; }
static inline char cur(const struct parser *p) { return at(p, p->pos); }
static inline bool is_blank(char c) { return c == ' ' || c == '\t'; }
/* White space, line break or the end of the text. */
static inline bool is_ws0(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\0'; }
static inline bool is_flow_ind(char c) { return c == ',' || c == '[' || c == ']' || c == '{' || c == '}'; }
/* Anchor names: YAML allows more, but ':' is left out so that "*a: x" reads
 * as an alias key, as libyaml-based parsers read it. */
static inline bool is_anchor_char(char c) { return !is_ws0(c) && !is_flow_ind(c) && c != ':'; }

/* Why a plain scalar's line ended. */
enum stop { STOP_EOL, STOP_COLON, STOP_COMMENT, STOP_FLOW };

/* parse.c: messages and the layout of lines. */
int yp_fail(struct parser *p, size_t pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
const char *yp_shown(const char *s, size_t n, char *out, size_t outsz);
bool yp_doc_marker(const struct parser *p, size_t pos);
void yp_skip_blanks(struct parser *p);
bool yp_comment_here(const struct parser *p);
bool yp_flow_line_outside(const struct parser *p, size_t ls);

/* scalar.c: scalar text, tags and the typed value of a scalar. */
int yp_quoted(struct parser *p);
bool yp_value_colon(const struct parser *p, size_t i, bool flow);
int yp_plain_line(struct parser *p, bool flow, enum stop *why, size_t *stop_pos);
int yp_plain_start(struct parser *p, bool flow);
int yp_plain(struct parser *p, int n, bool flow);
int yp_block_scalar(struct parser *p, int n);
bool yp_text_is(const char *t, size_t n, const char *w);
const char *yp_tag_name(const struct props *pr, char *out, size_t outsz);
int yp_scalar_value(struct parser *p, enum style st, const struct props *pr, size_t pos, struct json **out);

#endif
