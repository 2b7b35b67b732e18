/*
 * xml.c: a small, bounded XML reader for the answers of the EC2 Query API
 * (cloud_aws.c): elements, their attributes skipped, their character data
 * with the five predefined entities and numeric references decoded, CDATA,
 * comments and processing instructions skipped. A DOCTYPE is refused (no
 * entity can be declared, so none can expand), and so are a document
 * deeper than XML_DEPTH_MAX, with more than XML_NODES_MAX elements, or
 * longer than XML_INPUT_MAX. Namespace prefixes are dropped from names:
 * EC2 puts everything in one default namespace.
 *
 * The tree lives in one arena, freed by xml_free.
 */
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/enc.h"
#include "base/str.h"
#include "base/utf8.h"
#include "cp/cloud.h"

struct xml_doc {
	struct arena arena;
	struct xml_node *root;
	const char *root_src;	/* the input, for offsets in errors */
};

struct reader {
	const char *p, *end;
	struct xml_doc *doc;
	size_t nodes;
	struct err *e;
};

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
	       c == '-' || c == '.' || c == ':' || (unsigned char)c >= 0x80;
}

static bool space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static void skip_space(struct reader *r)
{
	while (r->p < r->end && space(*r->p))
		r->p++;
}

static bool starts(const struct reader *r, const char *s)
{
	size_t n = strlen(s);

	return (size_t)(r->end - r->p) >= n && memcmp(r->p, s, n) == 0;
}

/* Past the next occurrence of s; -1 when there is none. */
static int skip_past(struct reader *r, const char *s, const char *what)
{
	size_t n = strlen(s);

	for (const char *q = r->p; (size_t)(r->end - q) >= n; q++)
		if (memcmp(q, s, n) == 0) {
			r->p = q + n;
			return 0;
		}
	return err_set(r->e, "xml: unterminated %s", what);
}

/* Comments, processing instructions and white space between elements;
 * -1 on a DOCTYPE or an unterminated one. */
static int skip_misc(struct reader *r)
{
	for (;;) {
		skip_space(r);
		if (starts(r, "<!--")) {
			if (skip_past(r, "-->", "comment") < 0)
				return -1;
		} else if (starts(r, "<?")) {
			if (skip_past(r, "?>", "processing instruction") < 0)
				return -1;
		} else if (starts(r, "<!DOCTYPE") || starts(r, "<!doctype")) {
			return err_set(r->e, "xml: a DOCTYPE is not accepted");
		} else {
			return 0;
		}
	}
}

/* A name, its prefix ("ns:") dropped; NULL with e when there is none. */
static const char *read_name(struct reader *r, size_t *len)
{
	const char *start = r->p, *local;

	while (r->p < r->end && name_char(*r->p))
		r->p++;
	if (r->p == start) {
		err_set(r->e, "xml: a name was expected at offset %zu", (size_t)(start - r->doc->root_src));
		return NULL;
	}
	local = start;
	for (const char *q = start; q < r->p; q++)
		if (*q == ':')
			local = q + 1;
	*len = (size_t)(r->p - local);
	if (!*len) {
		err_set(r->e, "xml: an empty local name");
		return NULL;
	}
	return local;
}

/* Attributes are not needed: checked for shape and skipped. On return r->p
 * is at '>' or "/>". */
static int skip_attributes(struct reader *r)
{
	size_t n;

	for (;;) {
		skip_space(r);
		if (r->p >= r->end)
			return err_set(r->e, "xml: unterminated start tag");
		if (*r->p == '>' || starts(r, "/>"))
			return 0;
		if (!read_name(r, &n))
			return -1;
		skip_space(r);
		if (r->p >= r->end || *r->p != '=')
			return err_set(r->e, "xml: an attribute without '='");
		r->p++;
		skip_space(r);
		if (r->p >= r->end || (*r->p != '"' && *r->p != '\''))
			return err_set(r->e, "xml: an attribute value without quotes");
		{
			char q = *r->p++;
			const char *close = memchr(r->p, q, (size_t)(r->end - r->p));

			if (!close)
				return err_set(r->e, "xml: unterminated attribute value");
			r->p = close + 1;
		}
	}
}

/* One reference after '&' ("lt;", "#38;", "#x26;") appended to out. */
static int read_reference(struct reader *r, struct buf *out)
{
	static const struct {
		const char *name;
		char c;
	} named[] = { { "lt;", '<' }, { "gt;", '>' }, { "amp;", '&' }, { "quot;", '"' }, { "apos;", '\'' } };
	unsigned long cp = 0;
	char utf8[4];
	int digits = 0, base = 10;

	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++)
		if (starts(r, named[i].name)) {
			r->p += strlen(named[i].name);
			return buf_addch(out, named[i].c);
		}
	if (r->p >= r->end || *r->p != '#')
		return err_set(r->e, "xml: unknown entity reference");
	r->p++;
	if (r->p < r->end && *r->p == 'x') {
		base = 16;
		r->p++;
	}
	for (; r->p < r->end && *r->p != ';'; r->p++, digits++) {
		int d = base == 16 ? enc_hex_digit(*r->p) : (*r->p >= '0' && *r->p <= '9') ? *r->p - '0' : -1;

		if (d < 0 || digits >= 8)
			return err_set(r->e, "xml: a bad character reference");
		cp = cp * (unsigned long)base + (unsigned long)d;
	}
	if (r->p >= r->end || !digits || cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		return err_set(r->e, "xml: a bad character reference");
	r->p++;
	return buf_add(out, utf8, utf8_encode((uint32_t)cp, utf8));
}

/* Character data up to the next '<' (CDATA sections included), decoded
 * into out. */
static int read_text(struct reader *r, struct buf *out)
{
	while (r->p < r->end) {
		if (starts(r, "<![CDATA[")) {
			const char *start = r->p + 9;

			r->p = start;
			if (skip_past(r, "]]>", "CDATA section") < 0)
				return -1;
			if (buf_add(out, start, (size_t)(r->p - 3 - start)) < 0)
				return err_set(r->e, "xml: out of memory");
			continue;
		}
		if (starts(r, "<!--")) {
			if (skip_past(r, "-->", "comment") < 0)
				return -1;
			continue;
		}
		if (*r->p == '<')
			return 0;
		if (*r->p == '&') {
			r->p++;
			if (read_reference(r, out) < 0)
				return -1;
			continue;
		}
		if (buf_addch(out, *r->p++) < 0)
			return err_set(r->e, "xml: out of memory");
	}
	return 0;
}

static struct xml_node *new_node(struct reader *r, const char *name, size_t len)
{
	struct xml_node *n;

	if (++r->nodes > XML_NODES_MAX) {
		err_set(r->e, "xml: more than %d elements", XML_NODES_MAX);
		return NULL;
	}
	n = arena_alloc(&r->doc->arena, sizeof(*n));
	n->name = arena_strndup(&r->doc->arena, name, len);
	n->text = "";
	return n;
}

/* The element at r->p ('<'), its content and its end tag. */
static struct xml_node *read_element(struct reader *r, int depth)
{
	struct xml_node *node, **tail;
	struct buf text = BUF_INIT;
	const char *name;
	size_t len, end_len;

	if (depth > XML_DEPTH_MAX) {
		err_set(r->e, "xml: nested deeper than %d", XML_DEPTH_MAX);
		return NULL;
	}
	r->p++;
	if (!(name = read_name(r, &len)) || !(node = new_node(r, name, len)) || skip_attributes(r) < 0)
		return NULL;
	if (starts(r, "/>")) {
		r->p += 2;
		return node;
	}
	r->p++;
	tail = &node->child;
	for (;;) {
		if (read_text(r, &text) < 0)
			goto fail;
		if (r->p >= r->end) {
			err_set(r->e, "xml: <%s> is not closed", node->name);
			goto fail;
		}
		if (starts(r, "</"))
			break;
		if (starts(r, "<?")) {
			if (skip_past(r, "?>", "processing instruction") < 0)
				goto fail;
			continue;
		}
		if (!(*tail = read_element(r, depth + 1)))
			goto fail;
		tail = &(*tail)->next;
	}
	r->p += 2;
	if (!(name = read_name(r, &end_len)))
		goto fail;
	if (end_len != len || memcmp(name, node->name, len) != 0) {
		err_set(r->e, "xml: <%s> closed by </%.*s>", node->name, (int)(end_len > 64 ? 64 : end_len), name);
		goto fail;
	}
	skip_space(r);
	if (r->p >= r->end || *r->p != '>') {
		err_set(r->e, "xml: unterminated end tag");
		goto fail;
	}
	r->p++;
	node->text = arena_strndup(&r->doc->arena, text.data ? text.data : "", text.len);
	buf_release(&text);
	return node;
fail:
	buf_release(&text);
	return NULL;
}

struct xml_doc *xml_parse(const char *p, size_t n, struct err *e)
{
	struct xml_doc *doc;
	struct reader r = { p, p + n, NULL, 0, e };

	if (n > XML_INPUT_MAX)
		return err_set(e, "xml: the document is %zu bytes, more than %zu", n, XML_INPUT_MAX), NULL;
	if (n >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0)
		r.p += 3;	/* a byte order mark */
	doc = xcalloc(1, sizeof(*doc));
	doc->root_src = p;
	r.doc = doc;
	if (skip_misc(&r) < 0)
		goto fail;
	if (r.p >= r.end || *r.p != '<') {
		err_set(e, "xml: no root element");
		goto fail;
	}
	if (!(doc->root = read_element(&r, 1)) || skip_misc(&r) < 0)
		goto fail;
	if (r.p != r.end) {
		err_set(e, "xml: content after the root element");
		goto fail;
	}
	return doc;
fail:
	xml_free(doc);
	return NULL;
}

void xml_free(struct xml_doc *doc)
{
	if (!doc)
		return;
	arena_release(&doc->arena);
	free(doc);
}

const struct xml_node *xml_root(const struct xml_doc *doc)
{
	return doc ? doc->root : NULL;
}

const struct xml_node *xml_child(const struct xml_node *n, const char *name)
{
	for (const struct xml_node *c = n ? n->child : NULL; c; c = c->next)
		if (str_eq(c->name, name))
			return c;
	return NULL;
}

const struct xml_node *xml_path(const struct xml_node *n, const char *path)
{
	char part[XML_NAME_MAX];

	while (n && *path) {
		size_t len = strcspn(path, "/");

		if (len >= sizeof(part))
			return NULL;
		memcpy(part, path, len);
		part[len] = '\0';
		n = xml_child(n, part);
		path += len + (path[len] == '/');
	}
	return n;
}

const char *xml_text(const struct xml_node *n, const char *path)
{
	const struct xml_node *at = xml_path(n, path);

	return at ? at->text : NULL;
}
