/* engine_build.c: a compose build through dockerd's Engine API, POST
 * /build, instead of the `docker build -` CLI.
 *
 * Why: the CLI reads the whole context from its stdin and sends it to the
 * same endpoint, so it adds a process and a second copy of the archive for
 * nothing. Here the archive goes from its file straight onto the socket,
 * and the daemon's JSON messages ({"stream"}, {"error", "errorDetail"},
 * {"aux": {"ID"}}) are read as they come, each stream line handed to the
 * caller (prepare's progress). version=1 asks for the classic builder, as
 * the CLI's DOCKER_BUILDKIT=0 does: BuildKit is not needed.
 *
 * Closing the connection cancels the build in dockerd, so a timeout is just
 * that. When the socket cannot be used (DOCKER_HOST elsewhere, no socket)
 * nothing was sent and the caller runs the CLI. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/str.h"
#include "base/sys.h"
#include "http/http.h"
#include "http/stream.h"
#include "sidecar/sidecar.h"

void engine_escape(struct buf *b, const char *s)
{
	http_pct_encode(b, s, "");
}

static void add_param(struct buf *b, const char *name, const char *value)
{
	buf_addf(b, "&%s=", name);
	engine_escape(b, value);
}

/* POST /build?...: the request head. -1 when the query passes its cap. */
static int request_head(const struct engine_build *r, struct buf *head)
{
	struct buf q = BUF_INIT;
	struct json *labels = json_new_object();
	char *text;

	buf_init(&q, SC_BUILD_URL_MAX);
	buf_adds(&q, "version=1&rm=1&forcerm=1");
	for (size_t i = 0; i < ENGINE_BUILD_TAGS && r->tags[i]; i++)
		add_param(&q, "t", r->tags[i]);
	add_param(&q, "dockerfile", r->dockerfile);
	if (r->target && *r->target)
		add_param(&q, "target", r->target);
	if (r->args && r->args->type == JSON_OBJECT && r->args->u.obj.n) {
		text = json_to_string(r->args, 0);
		add_param(&q, "buildargs", text);
		free(text);
	}
	json_object_set_str(labels, "ai.denv.build", r->label);
	if (r->data && *r->data)
		json_object_set_str(labels, "ai.denv.data", r->data);
	text = json_to_string(labels, 0);
	add_param(&q, "labels", text);
	free(text);
	json_free(labels);
	if (q.len + 64 >= SC_BUILD_URL_MAX) {
		buf_release(&q);
		return -1;
	}
	buf_addf(head, "POST /build?%s HTTP/1.1\r\nHost: docker\r\nContent-Type: application/x-tar\r\n"
		 "Content-Length: %lld\r\nConnection: close\r\n\r\n", q.data, (long long)r->size);
	buf_release(&q);
	return 0;
}

static int send_all(struct stream *s, const char *p, size_t n, int64_t deadline, struct err *e)
{
	while (n > 0) {
		ssize_t w = stream_write(s, p, n);

		if (w > 0) {
			p += w;
			n -= (size_t)w;
		} else if (errno != EAGAIN) {
			return err_errno(e, "engine API build: sending the context");
		} else if (!ev_wait_fd(stream_fd(s), EV_WRITE, deadline)) {
			return err_set(e, "engine API build: no result within %lld s",
				       (long long)(SC_BUILD_TIMEOUT_MS / 1000));
		}
	}
	return 0;
}

/* The head, then the archive from r->fd. A daemon that answers early (a
 * refused request) closes its side: the answer is still read after. */
static int send_request(const struct engine_build *r, struct stream *s, int64_t deadline, struct err *e)
{
	struct buf head = BUF_INIT;
	char chunk[SC_BUILD_IO_CHUNK];
	int64_t left = r->size;
	int rc;

	if (request_head(r, &head) < 0)
		return err_set(e, "engine API build: the build's arguments are too long for a URL");
	rc = send_all(s, head.data, head.len, deadline, e);
	buf_release(&head);
	while (rc == 0 && left > 0) {
		ssize_t n = sys_read(r->fd, chunk, sizeof(chunk));

		if (n <= 0)
			return n < 0 ? err_errno(e, "engine API build: reading the context")
				     : err_set(e, "engine API build: the context ended early");
		rc = send_all(s, chunk, (size_t)n, deadline, e);
		left -= n;
	}
	return rc;
}

struct reply {
	struct buf msg;			/* decoded body bytes not yet split into messages */
	struct http_chunked ch;
	bool chunked;
	int status;
	char error[SC_BUILD_ERROR_TAIL + 64];	/* the daemon's error message, if one came */
	int code;			/* its errorDetail.code, 0 when none */
	char id[80];			/* aux.ID: the image built */
};

/* One JSON message of the body. */
static void take_message(const struct engine_build *r, struct reply *y, const char *p, size_t n)
{
	struct json *m = NULL;
	struct err e;
	const char *s;

	if (n == 0 || json_parse(p, n, NULL, &m, &e) < 0)
		return;
	if ((s = json_get_str(m, "stream")) && r->line)
		r->line(r->arg, s, strlen(s));
	if ((s = json_get_str(m, "error"))) {
		str_copy(y->error, sizeof(y->error), s);
		y->code = (int)json_get_int(json_get(m, "errorDetail"), "code", 0);
		if (r->line) {
			r->line(r->arg, s, strlen(s));
			r->line(r->arg, "\n", 1);
		}
	}
	if ((s = json_get_str(json_get(m, "aux"), "ID")))
		str_copy(y->id, sizeof(y->id), s);
	json_free(m);
}

/* Body bytes as read: decoded, split at newlines into messages. */
static int take_body(const struct engine_build *r, struct reply *y, const char *p, size_t n, struct err *e)
{
	size_t from = 0;

	if (y->chunked) {
		if (http_chunked_decode(&y->ch, p, n, &y->msg) < 0)
			return err_set(e, "engine API build: malformed chunked answer");
	} else if (buf_add(&y->msg, p, n) < 0) {
		return err_set(e, "engine API build: a message over %zu bytes", SC_BUILD_MESSAGE_MAX);
	}
	for (size_t i = 0; i < y->msg.len; i++)
		if (y->msg.data[i] == '\n') {
			take_message(r, y, y->msg.data + from, i - from);
			from = i + 1;
		}
	buf_consume(&y->msg, from);
	return 0;
}

static int parse_head(struct reply *y, char *head, size_t len, size_t *used, struct err *e)
{
	struct http_response_head h;
	const struct http_header *te;
	int hl = http_parse_response_head(head, len, &h);

	if (hl == 0)
		return len == SC_BUILD_HEAD_MAX ? err_set(e, "engine API build: response head too large") : 0;
	if (hl < 0)
		return err_set(e, "engine API build: malformed response");
	y->status = h.status;
	te = http_header_find(h.headers, h.nheaders, "transfer-encoding");
	y->chunked = te && http_token_has(te->value, te->value_len, "chunked");
	*used = (size_t)hl;
	return 1;
}

/* Read the answer until the daemon closes the connection (or the body ends). */
static int read_reply(const struct engine_build *r, struct stream *s, struct reply *y, int64_t deadline,
		      struct err *e)
{
	char head[SC_BUILD_HEAD_MAX], chunk[SC_BUILD_IO_CHUNK];
	size_t len = 0, used = 0;
	int rc = 0;

	while (rc == 0) {
		ssize_t n = stream_read(s, head + len, sizeof(head) - len);

		if (n == 0)
			return err_set(e, "engine API build: connection closed before the response");
		if (n < 0 && errno != EAGAIN)
			return err_errno(e, "engine API build: reading the response");
		if (n < 0 && !ev_wait_fd(stream_fd(s), EV_READ, deadline))
			return err_set(e, "engine API build: no result within %lld s",
				       (long long)(SC_BUILD_TIMEOUT_MS / 1000));
		len += n > 0 ? (size_t)n : 0;
		if (n > 0 && (rc = parse_head(y, head, len, &used, e)) < 0)
			return -1;
	}
	if (take_body(r, y, head + used, len - used, e) < 0)
		return -1;
	while (!(y->chunked && y->ch.done)) {
		ssize_t n = stream_read(s, chunk, sizeof(chunk));

		if (n == 0)
			break;
		if (n > 0) {
			if (take_body(r, y, chunk, (size_t)n, e) < 0)
				return -1;
		} else if (errno != EAGAIN) {
			return err_errno(e, "engine API build: reading the output");
		} else if (!ev_wait_fd(stream_fd(s), EV_READ, deadline)) {
			return err_set(e, "engine API build: no result within %lld s",
				       (long long)(SC_BUILD_TIMEOUT_MS / 1000));
		}
	}
	take_message(r, y, y->msg.data ? y->msg.data : "", y->msg.len);	/* a last line without \n */
	return 0;
}

int engine_build(const struct engine_build *r, struct engine_build_result *out, struct err *e)
{
	int64_t deadline = ev_mono_ms() + SC_BUILD_TIMEOUT_MS;
	struct stream *s = NULL;
	struct reply y;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (!engine_socket() || stream_dial_unix(engine_socket(), (int)SC_DOCKER_QUICK_MS, &s, e) < 0)
		return 0;
	memset(&y, 0, sizeof(y));
	buf_init(&y.msg, SC_BUILD_MESSAGE_MAX);
	/* A daemon that refuses early stops reading: its answer says why. */
	if (send_request(r, s, deadline, e) < 0 && errno != EPIPE && errno != ECONNRESET)
		goto out;
	err_clear(e);
	if (read_reply(r, s, &y, deadline, e) < 0)
		goto out;
	if (y.status != 200) {
		err_set(e, "engine API build: HTTP %d: %.300s", y.status,
			y.error[0] ? y.error : y.msg.data ? y.msg.data : "");
		goto out;
	}
	out->failed = y.error[0] != '\0';
	out->code = y.code;
	str_copy(out->error, sizeof(out->error), y.error);
	str_copy(out->id, sizeof(out->id), y.id);
	rc = 1;
out:
	buf_release(&y.msg);
	stream_free(s);
	return rc;
}
