/* Unit tests: request and response head parsers, chunked decoder, percent
 * decoding, token lists, URL splitting. Inputs are copied into exact-size
 * allocations so that ASan catches any read past the end. */
#include <stdlib.h>
#include <string.h>

#include "http/http.h"
#include "tap.h"

static int parse_req(const char *s, size_t len, struct http_request_head *h)
{
	char *copy = xmemdup(s, len ? len : 1);
	int r = http_parse_request_head(copy, len, h);

	free(copy);
	return r;
}

struct req_case {
	const char *name;
	const char *in;
	int want;	/* > 0: must consume the whole input */
};

static const struct req_case req_cases[] = {
	{ "simple GET", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", 1 },
	{ "HTTP/1.0 no headers", "GET /x HTTP/1.0\r\n\r\n", 1 },
	{ "leading empty line ignored", "\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", 1 },
	{ "value with spaces and tabs", "POST /a?b=c HTTP/1.1\r\nX-A: \t hello world \t\r\nHost: a\r\n\r\n", 1 },
	{ "empty value", "GET / HTTP/1.1\r\nX-E:\r\nHost: a\r\n\r\n", 1 },
	{ "obs-text in value", "GET / HTTP/1.1\r\nX: caf\xc3\xa9\r\n\r\n", 1 },
	{ "need more: partial line", "GET / HT", HTTP_PARSE_NEED_MORE },
	{ "need more: no final CRLF", "GET / HTTP/1.1\r\nHost: a\r\n", HTTP_PARSE_NEED_MORE },
	{ "need more: empty", "", HTTP_PARSE_NEED_MORE },
	{ "bad: garbage line", "HELLO\r\n\r\n", HTTP_PARSE_BAD },
	{ "bad: binary first byte", "\x16\x03\x01\x02", HTTP_PARSE_BAD },
	{ "bad: lowercase-free method char", "GE(T / HTTP/1.1\r\n\r\n", HTTP_PARSE_BAD },
	{ "bad: bare LF request line", "GET / HTTP/1.1\nHost: a\n\n", HTTP_PARSE_BAD },
	{ "bad: bare LF header", "GET / HTTP/1.1\r\nHost: a\n\r\n", HTTP_PARSE_BAD },
	{ "bad: HTTP/2.0", "GET / HTTP/2.0\r\n\r\n", HTTP_PARSE_BAD },
	{ "bad: missing version", "GET /\r\n\r\n", HTTP_PARSE_BAD },
	{ "bad: two spaces", "GET  / HTTP/1.1\r\n\r\n", HTTP_PARSE_BAD },
	{ "bad: space before colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n", HTTP_PARSE_BAD },
	{ "bad: no colon", "GET / HTTP/1.1\r\nHost\r\n\r\n", HTTP_PARSE_BAD },
	{ "bad: empty name", "GET / HTTP/1.1\r\n: a\r\n\r\n", HTTP_PARSE_BAD },
	{ "bad: obs-fold", "GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n", HTTP_PARSE_BAD },
	{ "bad: NUL in value", "GET / HTTP/1.1\r\nX: a\0b\r\n\r\n", HTTP_PARSE_BAD },
	{ "bad: CR in value", "GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", HTTP_PARSE_BAD },
	{ "bad: control char in target", "GET /\x01 HTTP/1.1\r\n\r\n", HTTP_PARSE_BAD },
	{ "bad: early garbage before line end", "GET /a HTTP/1.1 junk", HTTP_PARSE_NEED_MORE },
};

static void test_request_table(void)
{
	struct http_request_head h;

	for (size_t i = 0; i < sizeof(req_cases) / sizeof(req_cases[0]); i++) {
		const struct req_case *c = &req_cases[i];
		size_t len = strlen(c->in);
		if (strstr(c->name, "NUL"))
			len = 24;
		int r = parse_req(c->in, len, &h);
		if (c->want > 0)
			is_int(r, (long long)len, c->name);
		else
			is_int(r, c->want, c->name);
	}
}

static void test_request_fields(void)
{
	const char *s = "POST /v1/envs/e1/fork?x=1 HTTP/1.1\r\nHost: example\r\nContent-Length:  12 \r\n"
			"X-Empty:\r\n\r\nBODY";
	struct http_request_head h;
	size_t len = strlen(s);
	char *copy = xmemdup(s, len);
	int r = http_parse_request_head(copy, len, &h);
	const struct http_header *cl;

	is_int(r, (long long)len - 4, "request head length excludes the body");
	ok(h.method_len == 4 && memcmp(h.method, "POST", 4) == 0, "method");
	ok(h.target_len == 20 && memcmp(h.target, "/v1/envs/e1/fork?x=1", 20) == 0, "target");
	is_int(h.minor_version, 1, "minor version");
	is_int(h.nheaders, 3, "header count");
	cl = http_header_find(h.headers, h.nheaders, "content-length");
	ok(cl && cl->value_len == 2 && memcmp(cl->value, "12", 2) == 0, "value trimmed, name case-insensitive");
	ok(h.headers[2].value_len == 0, "empty value");
	ok(!http_header_find(h.headers, h.nheaders, "nope"), "absent header");
	free(copy);
}

static void test_request_limits(void)
{
	struct http_request_head h;
	struct buf b = BUF_INIT;
	int r;

	/* A request line over HTTP_MAX_REQUEST_LINE without its end. */
	buf_adds(&b, "GET /");
	while (b.len < HTTP_MAX_REQUEST_LINE + 10)
		buf_addch(&b, 'a');
	r = parse_req(b.data, b.len, &h);
	is_int(r, HTTP_PARSE_TOO_BIG, "request line too long");
	buf_adds(&b, " HTTP/1.1\r\n\r\n");
	r = parse_req(b.data, b.len, &h);
	is_int(r, HTTP_PARSE_TOO_BIG, "complete but too long request line");

	buf_reset(&b);
	buf_adds(&b, "GET / HTTP/1.1\r\n");
	for (int i = 0; i < HTTP_MAX_HEADERS; i++)
		buf_addf(&b, "X-%d: v\r\n", i);
	buf_adds(&b, "\r\n");
	r = parse_req(b.data, b.len, &h);
	is_int(r, (long long)b.len, "exactly HTTP_MAX_HEADERS headers accepted");
	buf_truncate(&b, b.len - 2);
	buf_adds(&b, "X-last: v\r\n\r\n");
	r = parse_req(b.data, b.len, &h);
	is_int(r, HTTP_PARSE_TOO_BIG, "one header too many");

	buf_reset(&b);
	buf_adds(&b, "GET / HTTP/1.1\r\nX-Big: ");
	while (b.len < HTTP_MAX_HEADER_BYTES + 10)
		buf_addch(&b, 'v');
	r = parse_req(b.data, b.len, &h);
	is_int(r, HTTP_PARSE_TOO_BIG, "header bytes over the limit without end");
	buf_adds(&b, "\r\n\r\n");
	r = parse_req(b.data, b.len, &h);
	is_int(r, HTTP_PARSE_TOO_BIG, "header bytes over the limit with end");

	buf_reset(&b);
	for (int i = 0; i < 40; i++)
		buf_addch(&b, 'G');
	r = parse_req(b.data, b.len, &h);
	is_int(r, HTTP_PARSE_BAD, "a 40-byte method without a space is refused early");
	buf_release(&b);
}

/* Every prefix of a valid request is need-more; byte at a time never crashes. */
static void test_request_prefixes(void)
{
	const char *s = "PUT /files?path=/a HTTP/1.1\r\nHost: h\r\nContent-Type: x/y\r\nTransfer-Encoding: chunked\r\n\r\n";
	size_t len = strlen(s);
	struct http_request_head h;
	int bad = 0;

	for (size_t i = 0; i < len; i++)
		if (parse_req(s, i, &h) != HTTP_PARSE_NEED_MORE)
			bad++;
	is_int(bad, 0, "every proper prefix needs more");
	is_int(parse_req(s, len, &h), (long long)len, "the whole parses");
}

struct resp_case {
	const char *name;
	const char *in;
	int want;
	int status;
};

static const struct resp_case resp_cases[] = {
	{ "200 with reason", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 1, 200 },
	{ "101 switching", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", 1, 101 },
	{ "no reason", "HTTP/1.1 204\r\n\r\n", 1, 204 },
	{ "empty reason", "HTTP/1.0 404 \r\n\r\n", 1, 404 },
	{ "bare LF", "HTTP/1.0 200 ok\nContent-type: text/html\n\n", 1, 200 },
	{ "need more", "HTTP/1.1 200 OK\r\nA: b\r\n", 0, 0 },
	{ "need more short", "HTT", 0, 0 },
	{ "bad: not http", "SSH-2.0-OpenSSH\r\n\r\n", -1, 0 },
	{ "bad: early not http", "XYZ", -1, 0 },
	{ "bad: status letters", "HTTP/1.1 2x0 OK\r\n\r\n", -1, 0 },
	{ "bad: status < 100", "HTTP/1.1 099 OK\r\n\r\n", -1, 0 },
	{ "bad: header no colon", "HTTP/1.1 200 OK\r\nBad\r\n\r\n", -1, 0 },
	{ "bad: no space after status", "HTTP/1.1 200OK\r\n\r\n", -1, 0 },
};

static void test_response_table(void)
{
	for (size_t i = 0; i < sizeof(resp_cases) / sizeof(resp_cases[0]); i++) {
		const struct resp_case *c = &resp_cases[i];
		struct http_response_head h;
		size_t len = strlen(c->in);
		char *copy = xmemdup(c->in, len + 1);
		int r = http_parse_response_head(copy, len, &h);
		if (c->want > 0) {
			is_int(r, (long long)len, c->name);
			is_int(h.status, c->status, "  status");
		} else {
			is_int(r, c->want, c->name);
		}
		free(copy);
	}
	{
		struct http_response_head h;
		const char *s = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: abc=\r\n\r\n\x81\x05hello";
		int r = http_parse_response_head(s, strlen(s), &h);
		const struct http_header *a = http_header_find(h.headers, h.nheaders, "sec-websocket-accept");
		ok(r > 0 && s[r] == '\x81', "consumed stops before frame bytes");
		ok(a && a->value_len == 4 && memcmp(a->value, "abc=", 4) == 0, "header view");
		ok(h.reason_len == 19 && memcmp(h.reason, "Switching Protocols", 19) == 0, "reason view");
	}
}

/* Decode in pieces of size step; returns decoded body or NULL on error (*rc). */
static int chunked_all(const char *in, size_t len, size_t step, size_t cap, struct buf *out, size_t *consumed)
{
	struct http_chunked c = HTTP_CHUNKED_INIT;
	size_t off = 0;

	buf_init(out, cap);
	while (off < len && !c.done) {
		size_t n = len - off < step ? len - off : step;
		char *piece = xmemdup(in + off, n);
		ssize_t r = http_chunked_decode(&c, piece, n, out);
		free(piece);
		if (r < 0)
			return (int)r;
		off += (size_t)r;
		if ((size_t)r < n && !c.done)
			return -99;	/* decoder must consume all until done */
	}
	*consumed = off;
	return c.done ? 1 : 0;
}

static void test_chunked(void)
{
	const char *body = "5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nTrailer: x\r\n\r\nNEXT";
	size_t len = strlen(body), consumed = 0;
	struct buf out;
	int fails = 0;

	for (size_t step = 1; step <= len; step++) {
		int r = chunked_all(body, len, step, 0, &out, &consumed);
		if (r != 1 || consumed != len - 4 || out.len != 12 || memcmp(out.data, "hello, world", 12) != 0)
			fails++;
		buf_release(&out);
	}
	is_int(fails, 0, "chunked decodes the same in every piece size and stops before the next message");

	ok(chunked_all("0\r\n\r\n", 5, 5, 0, &out, &consumed) == 1 && out.len == 0, "empty body");
	buf_release(&out);
	ok(chunked_all("A\r\n0123456789\r\n0\r\n\r\n", 20, 3, 0, &out, &consumed) == 1 && out.len == 10, "uppercase hex");
	buf_release(&out);
	is_int(chunked_all("10000000000000000\r\n", 19, 19, 0, &out, &consumed), HTTP_PARSE_BAD, "chunk size overflow refused");
	buf_release(&out);
	is_int(chunked_all("fffffffffffffff\r\n", 17, 17, 100, &out, &consumed), HTTP_PARSE_TOO_BIG, "huge chunk refused against the cap before data");
	buf_release(&out);
	is_int(chunked_all("5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n", 25, 4, 8, &out, &consumed), HTTP_PARSE_TOO_BIG, "body over the cap");
	buf_release(&out);
	is_int(chunked_all("x\r\n", 3, 3, 0, &out, &consumed), HTTP_PARSE_BAD, "no hex digits");
	buf_release(&out);
	is_int(chunked_all("-1\r\n", 4, 4, 0, &out, &consumed), HTTP_PARSE_BAD, "negative size");
	buf_release(&out);
	is_int(chunked_all("5\r\nhelloXX", 10, 10, 0, &out, &consumed), HTTP_PARSE_BAD, "missing CRLF after data");
	buf_release(&out);
	is_int(chunked_all("5\nhello\r\n", 9, 9, 0, &out, &consumed), HTTP_PARSE_BAD, "bare LF after size");
	buf_release(&out);
	is_int(chunked_all("0\r\nBad\n\r\n", 9, 9, 0, &out, &consumed), HTTP_PARSE_BAD, "bare LF in trailer");
	buf_release(&out);
	{
		struct buf big = BUF_INIT;
		buf_adds(&big, "1;");
		while (big.len < HTTP_MAX_CHUNK_LINE + 5)
			buf_addch(&big, 'e');
		is_int(chunked_all(big.data, big.len, 64, 0, &out, &consumed), HTTP_PARSE_BAD, "chunk extension too long");
		buf_release(&out);
		buf_reset(&big);
		buf_adds(&big, "0\r\n");
		while (big.len < 2 * HTTP_MAX_TRAILER_BYTES)
			buf_adds(&big, "X: y\r\n");
		is_int(chunked_all(big.data, big.len, 100, 0, &out, &consumed), HTTP_PARSE_TOO_BIG, "trailers too long");
		buf_release(&out);
		buf_release(&big);
	}
	ok(chunked_all("3\r\nabc\r\n", 8, 8, 0, &out, &consumed) == 0, "incomplete: not done");
	buf_release(&out);
}

static void test_misc(void)
{
	struct buf b = BUF_INIT;
	bool tls;
	char host[256];
	int port;
	const char *path;
	struct err e;

	ok(http_pct_decode("a%20b+c%2F", 10, true, &b) == 0 && strcmp(b.data, "a b c/") == 0, "pct decode with plus");
	buf_reset(&b);
	ok(http_pct_decode("a+b", 3, false, &b) == 0 && strcmp(b.data, "a+b") == 0, "plus kept in paths");
	buf_reset(&b);
	ok(http_pct_decode("%2", 2, false, &b) < 0, "truncated escape");
	buf_reset(&b);
	ok(http_pct_decode("%zz", 3, false, &b) < 0, "bad hex escape");
	buf_reset(&b);
	ok(http_pct_decode("%00", 3, false, &b) < 0, "decoded NUL refused");
	buf_reset(&b);
	http_pct_encode(&b, "a b/c~\xc3\xa9&=", "");
	ok(strcmp(b.data, "a%20b%2Fc~%C3%A9%26%3D") == 0, "pct encode: all but the unreserved");
	buf_reset(&b);
	http_pct_encode(&b, "/x y/", "/");
	ok(strcmp(b.data, "/x%20y/") == 0, "pct encode keeps what it is told to");
	buf_release(&b);

	ok(http_token_has("keep-alive, Upgrade", 19, "upgrade"), "token list case-insensitive");
	ok(!http_token_has("keep-alive-ish", 14, "keep-alive"), "no partial token match");
	ok(http_token_has(" close ", 7, "close"), "token with spaces");

	ok(http_url_split("http://127.0.0.1:8080/a?b", &tls, host, sizeof(host), &port, &path, &e) == 0 &&
	   !tls && strcmp(host, "127.0.0.1") == 0 && port == 8080 && strcmp(path, "/a?b") == 0, "url v4 with port");
	ok(http_url_split("https://[::1]/x", &tls, host, sizeof(host), &port, &path, &e) == 0 &&
	   tls && strcmp(host, "::1") == 0 && port == 443 && strcmp(path, "/x") == 0, "url v6 default port");
	ok(http_url_split("http://h", &tls, host, sizeof(host), &port, &path, &e) == 0 && strcmp(path, "/") == 0 &&
	   port == 80, "url without path");
	ok(http_url_split("ftp://h/", &tls, host, sizeof(host), &port, &path, &e) < 0, "ftp refused");
	ok(http_url_split("http://h:99999/", &tls, host, sizeof(host), &port, &path, &e) < 0, "bad port refused");
	ok(http_url_split("http://h/a b", &tls, host, sizeof(host), &port, &path, &e) < 0, "space in path refused");
	ok(http_url_split("http://user@h/", &tls, host, sizeof(host), &port, &path, &e) < 0, "userinfo refused");
	is_str(http_status_text(413), "Content Too Large", "status text");
}

int main(void)
{
	test_request_table();
	test_request_fields();
	test_request_limits();
	test_request_prefixes();
	test_response_table();
	test_chunked();
	test_misc();
	return tap_done();
}
