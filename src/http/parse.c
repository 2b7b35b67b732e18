/*
 * parse.c: HTTP/1.1 message heads and chunked bodies (RFC 9112), in the style of
 * picohttpparser: the caller's bytes in, views and a count out, nothing
 * allocated. Strict where leniency lets two parsers disagree about where a
 * message ends (request smuggling): no whitespace before a colon, no line
 * folding, no bare CR, CRLF line ends in requests.
 */
#include "http/http.h"

#include <string.h>
#include <strings.h>

#include "base/enc.h"
#include "base/str.h"

/* tchar from RFC 9110 5.6.2: the bytes allowed in methods and field names. */
static bool is_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Field value bytes: visible ASCII, space, tab, and obs-text. */
static bool is_vchar_ws(unsigned char c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static bool is_ows(char c)
{
	return c == ' ' || c == '\t';
}

/* Parse "name: value" lines from buf[pos..len) into hs. Returns the offset just
 * past the empty line, 0 if more is needed, or a negative HTTP_PARSE_*. lf_ok
 * allows bare LF line ends. */
static int parse_headers(const char *buf, size_t len, size_t pos, struct http_header *hs,
			 size_t *nheaders, bool lf_ok)
{
	*nheaders = 0;
	for (;;) {
		const char *line = buf + pos;
		const char *nl = memchr(line, '\n', len - pos);
		size_t end;		/* line length without CR LF */
		size_t i = 0;

		if (!nl)
			return len >= HTTP_MAX_HEADER_BYTES ? HTTP_PARSE_TOO_BIG : HTTP_PARSE_NEED_MORE;
		end = (size_t)(nl - line);
		if (end > 0 && line[end - 1] == '\r')
			end--;
		else if (!lf_ok)
			return HTTP_PARSE_BAD;
		if ((size_t)(nl - buf) + 1 > HTTP_MAX_HEADER_BYTES)
			return HTTP_PARSE_TOO_BIG;
		if (end == 0)
			return (int)(nl - buf) + 1;
		if (*nheaders == HTTP_MAX_HEADERS)
			return HTTP_PARSE_TOO_BIG;
		while (i < end && is_tchar((unsigned char)line[i]))
			i++;
		if (i == 0 || i == end || line[i] != ':')
			return HTTP_PARSE_BAD;	/* also: obs-fold lines start with SP/HT */
		struct http_header *h = &hs[(*nheaders)++];
		h->name = line;
		h->name_len = i;
		i++;
		while (i < end && is_ows(line[i]))
			i++;
		size_t vend = end;
		while (vend > i && is_ows(line[vend - 1]))
			vend--;
		for (size_t k = i; k < vend; k++)
			if (!is_vchar_ws((unsigned char)line[k]))
				return HTTP_PARSE_BAD;
		h->value = line + i;
		h->value_len = vend - i;
		pos = (size_t)(nl - buf) + 1;
	}
}

int http_parse_request_head(const char *buf, size_t len, struct http_request_head *out)
{
	size_t pos = 0, i, lim;
	const char *nl;

	out->nheaders = 0;
	/* RFC 9112 2.2: ignore empty lines before the request line. */
	while (pos + 1 < len && buf[pos] == '\r' && buf[pos + 1] == '\n' && pos < 8)
		pos += 2;
	lim = len - pos < HTTP_MAX_REQUEST_LINE ? len - pos : HTTP_MAX_REQUEST_LINE;
	nl = memchr(buf + pos, '\n', lim);
	/* Validate what we have of the request line even before it is complete,
	 * so that garbage is refused at once, not after the header timeout. */
	i = pos;
	while (i < pos + lim && buf + i != nl && is_tchar((unsigned char)buf[i]))
		i++;
	if (i < pos + lim && buf + i != nl && buf[i] != ' ')
		return HTTP_PARSE_BAD;
	if (!nl) {
		if (i == pos + lim && lim > 32)
			return HTTP_PARSE_BAD;	/* no method is this long */
		return len - pos >= HTTP_MAX_REQUEST_LINE ? HTTP_PARSE_TOO_BIG : HTTP_PARSE_NEED_MORE;
	}
	size_t eol = (size_t)(nl - buf);
	if (eol == pos || buf[eol - 1] != '\r')
		return HTTP_PARSE_BAD;
	eol--;
	/* method SP target SP HTTP/1.x */
	if (i == pos || i >= eol || buf[i] != ' ')
		return HTTP_PARSE_BAD;
	out->method = buf + pos;
	out->method_len = i - pos;
	i++;
	size_t t = i;
	while (i < eol && (unsigned char)buf[i] > 0x20 && (unsigned char)buf[i] < 0x7f)
		i++;
	if (i == t || i >= eol || buf[i] != ' ')
		return HTTP_PARSE_BAD;
	out->target = buf + t;
	out->target_len = i - t;
	i++;
	if (eol - i != 8 || memcmp(buf + i, "HTTP/1.", 7) != 0 || buf[i + 7] < '0' || buf[i + 7] > '9')
		return HTTP_PARSE_BAD;
	out->minor_version = buf[i + 7] - '0';
	return parse_headers(buf, len, eol + 2, out->headers, &out->nheaders, false);
}

int http_parse_response_head(const char *buf, size_t len, struct http_response_head *out)
{
	const char *nl;
	size_t eol, i;
	int r;

	out->nheaders = 0;
	nl = memchr(buf, '\n', len < HTTP_MAX_HEADER_BYTES ? len : HTTP_MAX_HEADER_BYTES);
	if (!nl) {
		/* Say "bad" early when what we have cannot become a status line. */
		size_t k = len < 5 ? len : 5;
		if (memcmp(buf, "HTTP/", k) != 0)
			return -1;
		return len >= HTTP_MAX_HEADER_BYTES ? -1 : 0;
	}
	eol = (size_t)(nl - buf);
	if (eol > 0 && buf[eol - 1] == '\r')
		eol--;
	if (eol < 12 || memcmp(buf, "HTTP/1.", 7) != 0 || buf[7] < '0' || buf[7] > '9' || buf[8] != ' ')
		return -1;
	out->minor_version = buf[7] - '0';
	out->status = 0;
	for (i = 9; i < 12; i++) {
		if (buf[i] < '0' || buf[i] > '9')
			return -1;
		out->status = out->status * 10 + (buf[i] - '0');
	}
	if (out->status < 100)
		return -1;
	if (eol > 12 && buf[12] != ' ')
		return -1;
	out->reason = buf + (eol > 12 ? 13 : 12);
	out->reason_len = eol > 12 ? eol - 13 : 0;
	for (i = 0; i < out->reason_len; i++)
		if (!is_vchar_ws((unsigned char)out->reason[i]))
			return -1;
	r = parse_headers(buf, len, (size_t)(nl - buf) + 1, out->headers, &out->nheaders, true);
	if (r < 0)
		return -1;
	return r;
}

const struct http_header *http_header_find(const struct http_header *h, size_t n, const char *name)
{
	size_t nl = strlen(name);

	for (size_t i = 0; i < n; i++)
		if (h[i].name_len == nl && strncasecmp(h[i].name, name, nl) == 0)
			return &h[i];
	return NULL;
}

bool http_token_has(const char *value, size_t len, const char *token)
{
	size_t tl = strlen(token), i = 0;

	while (i < len) {
		size_t s, e;
		while (i < len && (is_ows(value[i]) || value[i] == ','))
			i++;
		s = i;
		while (i < len && value[i] != ',')
			i++;
		e = i;
		while (e > s && is_ows(value[e - 1]))
			e--;
		if (e - s == tl && tl && strncasecmp(value + s, token, tl) == 0)
			return true;
	}
	return false;
}

/* ---- chunked ---- */

enum {
	CH_SIZE, CH_EXT, CH_SIZE_LF, CH_DATA, CH_DATA_CR, CH_DATA_LF,
	CH_TRAILER, CH_TRAILER_LINE, CH_TRAILER_LINE_LF, CH_END_LF, CH_DONE
};


ssize_t http_chunked_decode(struct http_chunked *c, const char *in, size_t len, struct buf *out)
{
	size_t i = 0;

	while (i < len && c->state != CH_DONE) {
		char ch = in[i];
		int h;

		switch (c->state) {
		case CH_SIZE:
			if (++c->line > HTTP_MAX_CHUNK_LINE)
				return HTTP_PARSE_BAD;
			if ((h = enc_hex_digit(ch)) >= 0) {
				if (c->left > (UINT64_MAX >> 4))
					return HTTP_PARSE_BAD;	/* chunk size overflow */
				c->left = (c->left << 4) | (uint64_t)h;
				c->digits = true;
			} else if (!c->digits) {
				return HTTP_PARSE_BAD;
			} else if (ch == ';' || ch == ' ' || ch == '\t') {
				c->state = CH_EXT;
			} else if (ch == '\r') {
				c->state = CH_SIZE_LF;
			} else {
				return HTTP_PARSE_BAD;
			}
			i++;
			break;
		case CH_EXT:
			if (++c->line > HTTP_MAX_CHUNK_LINE)
				return HTTP_PARSE_BAD;
			if (ch == '\r')
				c->state = CH_SIZE_LF;
			else if (ch == '\n' || (!is_vchar_ws((unsigned char)ch)))
				return HTTP_PARSE_BAD;
			i++;
			break;
		case CH_SIZE_LF:
			if (ch != '\n')
				return HTTP_PARSE_BAD;
			i++;
			if (c->left == 0) {
				c->state = CH_TRAILER;
				break;
			}
			/* Refuse at once a chunk that cannot fit, before its bytes come. */
			if (c->left > out->max - out->len)
				return HTTP_PARSE_TOO_BIG;
			c->state = CH_DATA;
			break;
		case CH_DATA: {
			size_t n = len - i;
			if ((uint64_t)n > c->left)
				n = (size_t)c->left;
			if (buf_add(out, in + i, n) < 0)
				return HTTP_PARSE_TOO_BIG;
			i += n;
			c->left -= n;
			if (c->left == 0)
				c->state = CH_DATA_CR;
			break;
		}
		case CH_DATA_CR:
			if (ch != '\r')
				return HTTP_PARSE_BAD;
			c->state = CH_DATA_LF;
			i++;
			break;
		case CH_DATA_LF:
			if (ch != '\n')
				return HTTP_PARSE_BAD;
			c->state = CH_SIZE;
			c->line = 0;
			c->digits = false;
			i++;
			break;
		case CH_TRAILER:
			if (ch == '\r') {
				c->state = CH_END_LF;
				i++;
				break;
			}
			c->state = CH_TRAILER_LINE;
			/* fall through */
		case CH_TRAILER_LINE:
			if (++c->trailer > HTTP_MAX_TRAILER_BYTES)
				return HTTP_PARSE_TOO_BIG;
			if (ch == '\r')
				c->state = CH_TRAILER_LINE_LF;
			else if (ch == '\n' || !is_vchar_ws((unsigned char)ch))
				return HTTP_PARSE_BAD;
			i++;
			break;
		case CH_TRAILER_LINE_LF:
			if (ch != '\n')
				return HTTP_PARSE_BAD;
			c->state = CH_TRAILER;
			i++;
			break;
		case CH_END_LF:
			if (ch != '\n')
				return HTTP_PARSE_BAD;
			c->state = CH_DONE;
			c->done = true;
			i++;
			break;
		default:
			return HTTP_PARSE_BAD;
		}
	}
	return (ssize_t)i;
}

/* ---- percent decoding, status texts ---- */

int http_pct_decode(const char *s, size_t len, bool plus, struct buf *out)
{
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (c == '%') {
			int hi, lo;
			if (i + 2 >= len)
				return -1;
			hi = enc_hex_digit(s[i + 1]);
			lo = enc_hex_digit(s[i + 2]);
			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
				return -1;
			c = (char)(hi << 4 | lo);
			i += 2;
		} else if (c == '+' && plus) {
			c = ' ';
		}
		if (buf_addch(out, c) < 0)
			return -1;
	}
	return 0;
}

int http_pct_encode(struct buf *out, const char *s, const char *keep)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		int r;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-._~", c) ||
		    strchr(keep, c))
			r = buf_addch(out, (char)c);
		else
			r = buf_addf(out, "%%%02X", c);
		if (r < 0)
			return -1;
	}
	return 0;
}

const char *http_status_text(int status)
{
	switch (status) {
	case 100: return "Continue";
	case 101: return "Switching Protocols";
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 206: return "Partial Content";
	case 301: return "Moved Permanently";
	case 302: return "Found";
	case 303: return "See Other";
	case 304: return "Not Modified";
	case 307: return "Temporary Redirect";
	case 308: return "Permanent Redirect";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 410: return "Gone";
	case 411: return "Length Required";
	case 413: return "Content Too Large";
	case 414: return "URI Too Long";
	case 415: return "Unsupported Media Type";
	case 417: return "Expectation Failed";
	case 422: return "Unprocessable Content";
	case 426: return "Upgrade Required";
	case 428: return "Precondition Required";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 505: return "HTTP Version Not Supported";
	default: return "Status";
	}
}
