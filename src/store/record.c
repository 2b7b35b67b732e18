/* record.c: encoding and decoding log records (store.h: the format and the rules). */
#include "store/internal.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

const char st_magic[8] = { 'd', 'e', 'n', 'v', 's', 't', 'o', 'r' };
const char st_payload_prefix[9] = "{\"ops\":[";

void st_put_u32(char *p, uint32_t v)
{
	p[0] = (char)(v & 0xff);
	p[1] = (char)((v >> 8) & 0xff);
	p[2] = (char)((v >> 16) & 0xff);
	p[3] = (char)((v >> 24) & 0xff);
}

uint32_t st_get_u32(const char *p)
{
	const unsigned char *u = (const unsigned char *)p;
	return (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
}

void st_put_u64(char *p, uint64_t v)
{
	st_put_u32(p, (uint32_t)v);
	st_put_u32(p + 4, (uint32_t)(v >> 32));
}

uint64_t st_get_u64(const char *p)
{
	return (uint64_t)st_get_u32(p) | (uint64_t)st_get_u32(p + 4) << 32;
}

uint32_t st_crc(const char *p, size_t n)
{
	uLong c = crc32(0L, Z_NULL, 0);

	/* zlib's length is a uInt; records are capped far below 4 GiB anyway */
	while (n > 0) {
		uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;
		c = crc32(c, (const Bytef *)p, chunk);
		p += chunk;
		n -= chunk;
	}
	return (uint32_t)c;
}

void st_make_header(char *h)
{
	memcpy(h, st_magic, 8);
	st_put_u32(h + 8, ST_FORMAT_VERSION);
	st_put_u32(h + 12, st_crc(h, 12));
}

/* ---- encoding records ---- */

/* Start a record in b: room for len+crc, then the payload's opening. */
void st_rec_begin(struct buf *b)
{
	buf_reset(b);
	buf_add(b, "\0\0\0\0\0\0\0\0", ST_RECORD_HEAD_BYTES);
	buf_adds(b, st_payload_prefix);
}

/*
 * Append one op to the record in b ("first" says no comma): a put of row
 * (a DOM) or of text (rtext, rlen bytes of JSON, copied as they are), or a
 * delete when both are NULL. A put's row text lands at b->data + *rpos,
 * *rlen bytes. -1 if b's cap (the record size limit) is reached; b is then
 * in an unknown state.
 */
int st_rec_add_op(struct buf *b, bool first, const char *table, const char *id, const struct json *row,
		  const char *rtext, size_t rlen, size_t *rpos, size_t *rlenp)
{
	bool put = row || rtext;

	if (!first && buf_addch(b, ',') < 0)
		return -1;
	if (buf_adds(b, put ? "{\"put\":" : "{\"del\":") < 0 ||
	    json_write_string(b, table, strlen(table)) < 0 ||
	    buf_adds(b, ",\"id\":") < 0 ||
	    json_write_string(b, id, strlen(id)) < 0)
		return -1;
	if (put) {
		if (buf_adds(b, ",\"row\":") < 0)
			return -1;
		*rpos = b->len;
		if (row ? json_write(b, row, JSON_COMPACT) < 0 : buf_add(b, rtext, rlen) < 0)
			return -1;
		*rlenp = b->len - *rpos;
	}
	return buf_addch(b, '}');
}

/* Close the payload and fill in len and crc. -1 if too large. */
int st_rec_end(struct buf *b)
{
	size_t plen;

	if (buf_adds(b, "]}") < 0)
		return -1;
	plen = b->len - ST_RECORD_HEAD_BYTES;
	if (plen > ST_RECORD_MAX)
		return -1;
	st_put_u32(b->data, (uint32_t)plen);
	st_put_u32(b->data + 4, st_crc(b->data + ST_RECORD_HEAD_BYTES, plen));
	return 0;
}

/* ---- decoding records ---- */

/*
 * Check a parsed payload and turn it into ops (pointing into doc). The
 * whole transaction is checked before any of it is applied, so that a
 * record is applied all or not at all.
 */
static int ops_check(struct st_db *db, const struct st_op *o, size_t n, struct err *e);

int st_decode_ops(struct st_db *db, struct json *doc, struct st_op **ops, size_t *nops, struct err *e)
{
	struct json *arr = json_get(doc, "ops");
	size_t n;
	struct st_op *o;

	if (!doc || doc->type != JSON_OBJECT || !arr || arr->type != JSON_ARRAY)
		return err_set(e, "not a transaction (no \"ops\" array)");
	n = arr->u.arr.n;
	if (n > ST_TXN_OPS_MAX)
		return err_set(e, "%zu operations (at most %d)", n, ST_TXN_OPS_MAX);
	o = xcalloc(n ? n : 1, sizeof(*o));
	for (size_t i = 0; i < n; i++) {
		struct json *op = arr->u.arr.items[i];
		struct json *put = json_get(op, "put"), *del = json_get(op, "del");
		struct json *id = json_get(op, "id"), *row = json_get(op, "row");
		struct json *name = put ? put : del;

		if (!op || op->type != JSON_OBJECT || (put && del) || !name || name->type != JSON_STRING) {
			err_set(e, "operation %zu: neither put nor del", i);
			goto fail;
		}
		if (name->u.str.len != strlen(name->u.str.s)) {
			err_set(e, "operation %zu: bad table name", i);
			goto fail;
		}
		if (!id || id->type != JSON_STRING) {
			err_set(e, "operation %zu: bad id", i);
			goto fail;
		}
		if (put && (!row || row->type != JSON_OBJECT)) {
			err_set(e, "operation %zu: put without an object row", i);
			goto fail;
		}
		o[i].del = !put;
		o[i].table = name->u.str.s;
		o[i].id = id->u.str.s;
		o[i].idlen = id->u.str.len;
		o[i].row = put ? row : NULL;
	}
	if (ops_check(db, o, n, e) < 0)
		goto fail;
	*ops = o;
	*nops = n;
	return 0;
fail:
	free(o);
	return -1;
}

/* The checks every decoded record passes, however it was decoded: table
 * names and ids, and no more tables than
 * ST_TABLES_MAX once its puts have created theirs. */
static int ops_check(struct st_db *db, const struct st_op *o, size_t n, struct err *e)
{
	size_t newtables = 0;

	for (size_t i = 0; i < n; i++) {
		if (!st_name_ok(o[i].table))
			return err_set(e, "operation %zu: bad table name", i);
		if (!st_id_ok(o[i].id, o[i].idlen))
			return err_set(e, "operation %zu: bad id", i);
		if (!o[i].del && !st_table_find(db, o[i].table)) {
			/* Count distinct new tables (n is small per record, tables few). */
			bool seen = false;
			for (size_t j = 0; j < i && !seen; j++)
				seen = !o[j].del && strcmp(o[j].table, o[i].table) == 0;
			if (!seen && db->ntables + ++newtables > ST_TABLES_MAX)
				return err_set(e, "more than %d tables", ST_TABLES_MAX);
		}
	}
	return 0;
}

static bool scan_lit(const char *p, size_t len, size_t *i, const char *lit)
{
	size_t n = strlen(lit);

	if (len - *i < n || memcmp(p + *i, lit, n) != 0)
		return false;
	*i += n;
	return true;
}

/* A string at *i with no escape, copied into names; *off: where. */
static bool scan_name(struct rscan *sc, const char *p, size_t len, size_t *i, size_t *off, size_t *n)
{
	size_t end;

	if (*i >= len || p[*i] != '"' || json_skip(p + *i, len - *i, 1, &end) < 0 ||
	    memchr(p + *i + 1, '\\', end - 2))
		return false;
	*off = sc->names.len;
	*n = end - 2;
	if (buf_add(&sc->names, p + *i + 1, end - 2) < 0 || buf_addch(&sc->names, '\0') < 0)
		return false;
	*i += end;
	return true;
}

static bool scan_op(struct st_db *db, struct rscan *sc, const char *p, size_t len, size_t *i)
{
	struct st_op *o;
	size_t *noff, tlen, end;
	const struct st_table *t;

	if (sc->n == ST_TXN_OPS_MAX)
		return false;
	if (sc->n == sc->cap) {
		sc->cap = sc->cap ? sc->cap * 2 : 1024;
		sc->ops = xrealloc(sc->ops, sc->cap * sizeof(*sc->ops));
		sc->noff = xrealloc(sc->noff, sc->cap * 2 * sizeof(*sc->noff));
	}
	o = &sc->ops[sc->n];
	noff = &sc->noff[2 * sc->n];
	memset(o, 0, sizeof(*o));
	if (scan_lit(p, len, i, "{\"put\":"))
		o->del = false;
	else if (scan_lit(p, len, i, "{\"del\":"))
		o->del = true;
	else
		return false;
	if (!scan_name(sc, p, len, i, &noff[0], &tlen) || !scan_lit(p, len, i, ",\"id\":") ||
	    !scan_name(sc, p, len, i, &noff[1], &o->idlen))
		return false;
	if (!o->del) {
		if (!scan_lit(p, len, i, ",\"row\":") || *i >= len || p[*i] != '{' ||
		    json_check(p + *i, len - *i, ST_JSON_DEPTH_MAX + 5, &end) < 0)
			return false;
		t = st_table_find(db, sc->names.data + noff[0]);
		if (t && t->nix > 0)
			return false;	/* st_apply_op needs the row's DOM for the index values */
		o->rpos = *i;
		o->rlen = end;
		*i += end;
	}
	if (!scan_lit(p, len, i, "}"))
		return false;
	sc->n++;
	return true;
}

/* 1: the record at p (len bytes) is in sc, checked; 0: use the DOM. */
int st_rec_scan(struct st_db *db, struct rscan *sc, const char *p, size_t len)
{
	size_t i = 0;
	struct err e;

	sc->n = 0;
	buf_reset(&sc->names);
	if (!scan_lit(p, len, &i, st_payload_prefix))
		return 0;
	if (!scan_lit(p, len, &i, "]")) {
		do {
			if (!scan_op(db, sc, p, len, &i))
				return 0;
		} while (scan_lit(p, len, &i, ","));
		if (!scan_lit(p, len, &i, "]"))
			return 0;
	}
	if (!scan_lit(p, len, &i, "}") || i != len)
		return 0;
	for (size_t k = 0; k < sc->n; k++) {
		sc->ops[k].table = sc->names.data + sc->noff[2 * k];
		sc->ops[k].id = sc->names.data + sc->noff[2 * k + 1];
	}
	return ops_check(db, sc->ops, sc->n, &e) < 0 ? 0 : 1;
}

void st_rscan_release(struct rscan *sc)
{
	free(sc->ops);
	free(sc->noff);
	buf_release(&sc->names);
}

/* ---- where each row's text lies in a record ---- */

size_t st_span_ws(const char *p, size_t len, size_t i)
{
	while (i < len && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
		i++;
	return i;
}

/* Expect byte c (after whitespace) at *i and step over it. */
int st_span_expect(const char *p, size_t len, size_t *i, char c)
{
	*i = st_span_ws(p, len, *i);
	if (*i >= len || p[*i] != c)
		return -1;
	(*i)++;
	return 0;
}

/* Step over one value (after whitespace); *start gets where it begins. */
int st_span_value(const char *p, size_t len, size_t *i, size_t *start)
{
	size_t end;

	*i = st_span_ws(p, len, *i);
	*start = *i;
	if (json_skip(p + *i, len - *i, JSON_SKIP_DEPTH_MAX, &end) < 0)
		return -1;
	*i += end;
	return 0;
}

/* Step over member m of an object (its key and value; the comma or the
 * closing brace after it is the caller's); vstart gets its value's start. */
static int span_member(const char *p, size_t len, size_t *i, size_t *vstart)
{
	size_t ks;

	if (st_span_value(p, len, i, &ks) < 0 || p[ks] != '"')
		return -1;
	if (st_span_expect(p, len, i, ':') < 0)
		return -1;
	return st_span_value(p, len, i, vstart);
}

/*
 * Find each put's row text in payload p (len bytes), which json_parse made
 * into doc and st_decode_ops into ops. The DOM keeps an object's members in
 * the order of the text (the parser appends them as it reads them, and
 * refuses duplicates), so "the k-th member" means the same in both and the
 * text is walked by counting. Every step is bounded by len; a mismatch
 * (which a parsed payload cannot have) is an error, never a guess.
 */
int st_find_row_spans(const char *p, size_t len, const struct json *doc, struct st_op *ops, size_t n)
{
	const struct json *arr = json_get(doc, "ops");
	size_t i = 0, vs, mops = 0;

	for (; mops < doc->u.obj.n; mops++)
		if (doc->u.obj.m[mops].val == arr)
			break;
	if (mops == doc->u.obj.n || st_span_expect(p, len, &i, '{') < 0)
		return -1;
	for (size_t m = 0; m < mops; m++)
		if (span_member(p, len, &i, &vs) < 0 || st_span_expect(p, len, &i, ',') < 0)
			return -1;
	if (st_span_value(p, len, &i, &vs) < 0 || p[vs] != '"' || st_span_expect(p, len, &i, ':') < 0 ||
	    st_span_expect(p, len, &i, '[') < 0)
		return -1;
	for (size_t k = 0; k < n; k++) {
		const struct json *op = doc->u.obj.m[mops].val->u.arr.items[k];
		if ((k > 0 && st_span_expect(p, len, &i, ',') < 0) || st_span_expect(p, len, &i, '{') < 0)
			return -1;
		for (size_t m = 0; m < op->u.obj.n; m++) {
			if ((m > 0 && st_span_expect(p, len, &i, ',') < 0) || span_member(p, len, &i, &vs) < 0)
				return -1;
			if (ops[k].row && op->u.obj.m[m].val == ops[k].row) {
				if (p[vs] != '{' || p[i - 1] != '}')
					return -1;
				ops[k].rpos = vs;
				ops[k].rlen = i - vs;
			}
		}
		if (st_span_expect(p, len, &i, '}') < 0)
			return -1;
		if (ops[k].row && !ops[k].rlen)
			return -1;
	}
	return st_span_expect(p, len, &i, ']');
}

/* Apply the decoded record whose payload starts at file offset poff. */
void st_apply_decoded(struct st_db *db, off_t poff, struct st_op *ops, size_t n)
{
	for (size_t i = 0; i < n; i++)
		st_apply_op(db, ops[i].table, ops[i].id, !ops[i].del, ops[i].row, poff + (off_t)ops[i].rpos,
			    ops[i].rlen);
	db->records++;
	db->log_ops += n;
}
