/*
 * Unit tests: the server on a real loopback socket, driven turn by turn.
 * A raw client socket sends exact bytes; the loop runs until the expected
 * response is complete, so every refusal and framing rule is checked on the
 * wire: router (params, query, 404, 405 + Allow), limits (413 before the body,
 * 431, 400 + close), Content-Length rules, chunked bodies, Expect, HTTP/1.0
 * keep-alive, pipelining, parked requests and gone clients, streaming,
 * detach (leftover bytes), graceful shutdown, and the async client.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/ev.h"
#include "base/sys.h"
#include "http/http.h"
#include "json/json.h"
#include "tap.h"

static struct ev *loop;
static struct http_server *srv;
static struct http_req *parked_req;
static bool gone_called;
static struct stream *detached;
static struct buf leftover = BUF_INIT;

static void h_echo(struct http_req *req, void *arg)
{
	size_t len;
	const char *b = http_req_body(req, &len);

	http_respond(req, 200, "text/plain", b, len);
}

static void h_fork(struct http_req *req, void *arg)
{
	struct buf b = BUF_INIT;
	const char *q = http_req_query(req, "q");

	buf_addf(&b, "env=%s q=%s", http_req_param(req, "env"), q ? q : "(null)");
	http_resp_header(req, "X-Route", "fork");
	http_respond(req, 202, "text/plain", b.data, b.len);
	buf_release(&b);
}

static void on_gone(struct http_req *req, void *arg)
{
	gone_called = true;
}

static void h_park(struct http_req *req, void *arg)
{
	parked_req = req;
	http_req_on_gone(req, on_gone, NULL);
}

/* Held requests: answered (or freed, if gone) by release_held(). */
static struct http_req *held[8];
static size_t nheld;

static void h_hold(struct http_req *req, void *arg)
{
	if (nheld < sizeof(held) / sizeof(held[0]))
		held[nheld++] = req;
	else
		http_respond(req, 500, "text/plain", "full", 4);
}

static void release_held(void)
{
	while (nheld)
		http_respond(held[--nheld], 200, "text/plain", "held", 4);
}

static void h_upgrade(struct http_req *req, void *arg)
{
	struct err e;

	if (http_req_detach(req, &detached, &leftover, &e) < 0)
		http_respond_error(req, 500, e.msg);
}

static void h_stream(struct http_req *req, void *arg)
{
	http_stream_begin(req, 200, "text/plain");
	http_stream_write(req, "ab", 2);
	http_stream_write(req, "cde", 3);
	http_stream_end(req);
}

static void h_json(struct http_req *req, void *arg)
{
	struct json *o = json_new_object();

	json_object_set_str(o, "a", "b\"c");
	http_respond_json(req, 200, o);
	json_free(o);
}

static int dial(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)http_server_port(srv)) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Run the loop until fd has bytes matching "until" (or EOF, or 2 s). Returns
 * what was read; *eof tells whether the server closed. */
static char *pump(int fd, const char *until, bool *eof, int max_ms)
{
	struct buf got = BUF_INIT;
	int64_t end = ev_mono_ms() + max_ms;

	*eof = false;
	while (ev_mono_ms() < end) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ev_run_once(loop, 5);
		while (poll(&p, 1, 0) > 0) {
			char tmp[4096];
			ssize_t n = recv(fd, tmp, sizeof(tmp), MSG_DONTWAIT);
			if (n > 0) {
				buf_add(&got, tmp, (size_t)n);
				continue;
			}
			if (n == 0 || (errno != EAGAIN && errno != EINTR))
				*eof = true;
			break;
		}
		if (*eof || (until && strstr(got.data, until)))
			break;
	}
	return buf_detach(&got, NULL);
}

static char *exchange(const char *req, size_t len, const char *until, bool *eof)
{
	int fd = dial();
	char *r;

	sys_write_all(fd, req, len ? len : strlen(req));
	r = pump(fd, until, eof, 2000);
	close(fd);
	return r;
}

static int count(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static void test_router(void)
{
	bool eof;
	char *r;

	r = exchange("POST /envs/my%20env/fork?q=a+b%26&x=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 0, "q=", &eof);
	ok(strstr(r, "HTTP/1.1 202 Accepted") && strstr(r, "env=my env q=a b&"), "path param and query decoded");
	ok(strstr(r, "X-Route: fork\r\n") != NULL, "extra response header");
	free(r);
	r = exchange("GET /envs/e/fork HTTP/1.1\r\nHost: x\r\n\r\n", 0, "}", &eof);
	ok(strstr(r, "HTTP/1.1 405 ") && strstr(r, "Allow: POST\r\n") && strstr(r, "{\"error\":"), "405 with Allow and JSON");
	free(r);
	r = exchange("GET /nope HTTP/1.1\r\nHost: x\r\n\r\n", 0, "}", &eof);
	ok(strstr(r, "HTTP/1.1 404 ") && strstr(r, "{\"error\":\"not found\"}"), "404 JSON");
	free(r);
	r = exchange("POST /envs//fork HTTP/1.1\r\nHost: x\r\n\r\n", 0, "}", &eof);
	ok(strstr(r, "HTTP/1.1 404 ") != NULL, "empty param segment does not match");
	free(r);
	r = exchange("POST /envs/%zz/fork HTTP/1.1\r\nHost: x\r\n\r\n", 0, "}", &eof);
	ok(strstr(r, "HTTP/1.1 400 ") != NULL, "bad escape in path param: 400");
	free(r);
	r = exchange("HEAD /json HTTP/1.1\r\nHost: x\r\n\r\n", 0, "\r\n\r\n", &eof);
	ok(strstr(r, "HTTP/1.1 200 ") && strstr(r, "Content-Length: 13") && !strstr(r, "{"), "HEAD via GET route, no body");
	free(r);
	r = exchange("GET /json HTTP/1.1\r\nHost: x\r\n\r\n", 0, "}", &eof);
	ok(strstr(r, "{\"a\":\"b\\\"c\"}") != NULL, "respond_json");
	free(r);
	r = exchange("GET /dir/ HTTP/1.1\r\nHost: x\r\n\r\n", 0, "}", &eof);
	ok(strstr(r, "HTTP/1.1 200 ") != NULL, "a pattern ending in / matches the path with the slash");
	free(r);
	r = exchange("GET /dir HTTP/1.1\r\nHost: x\r\n\r\n", 0, "}", &eof);
	ok(strstr(r, "HTTP/1.1 404 ") != NULL, "... and not the path without it");
	free(r);
	r = exchange("GET /json/ HTTP/1.1\r\nHost: x\r\n\r\n", 0, "}", &eof);
	ok(strstr(r, "HTTP/1.1 404 ") != NULL, "a pattern without the slash does not match a path with one");
	free(r);
}

static void test_framing(void)
{
	bool eof;
	char *r;

	r = exchange("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", 0, "hello", &eof);
	ok(strstr(r, "Content-Length: 5\r\n\r\nhello") != NULL, "content-length body");
	free(r);
	r = exchange("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nT: v\r\n\r\n", 0, "abcde", &eof);
	ok(strstr(r, "Content-Length: 5\r\n\r\nabcde") != NULL, "chunked body with extension and trailer");
	free(r);
	r = exchange("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 0, "}", &eof);
	ok(strstr(r, "HTTP/1.1 400 ") != NULL, "differing duplicate Content-Length: 400");
	free(r);
	r = exchange("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nhi", 0, "hi", &eof);
	ok(strstr(r, "HTTP/1.1 200 ") != NULL, "equal duplicate Content-Length accepted");
	free(r);
	r = exchange("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 0, "}", &eof);
	ok(strstr(r, "HTTP/1.1 400 ") != NULL, "negative Content-Length: 400");
	free(r);
	r = exchange("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n", 0, "}", &eof);
	ok(strstr(r, "HTTP/1.1 400 ") != NULL, "overflowing Content-Length: 400");
	free(r);
	r = exchange("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 0, "}", &eof);
	ok(strstr(r, "HTTP/1.1 400 ") && strstr(r, "Connection: close"), "CL and TE: 400 and close");
	free(r);
	r = exchange("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 0, "}", &eof);
	ok(strstr(r, "HTTP/1.1 501 ") != NULL, "unknown transfer coding: 501");
	free(r);
	r = exchange("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n", 0, "}", &eof);
	ok(strstr(r, "HTTP/1.1 400 ") != NULL, "chunk size overflow: 400");
	free(r);
	r = exchange("POST /small HTTP/1.1\r\nHost: x\r\nContent-Length: 17\r\n\r\n", 0, "}", &eof);
	ok(strstr(r, "HTTP/1.1 413 ") && strstr(r, "request body too large"), "413 from Content-Length alone, body never sent");
	ok(eof, "  and the connection is closed");
	free(r);
	r = exchange("POST /small HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n20\r\n", 0, "}", &eof);
	ok(strstr(r, "HTTP/1.1 413 ") != NULL, "413 for an oversize chunk before its data");
	free(r);
	r = exchange("GET / HTTP/1.1\r\n\r\n", 0, "}", &eof);
	ok(strstr(r, "HTTP/1.1 400 ") && strstr(r, "Host"), "HTTP/1.1 without Host: 400");
	free(r);
	r = exchange("GARBAGE\r\n\r\n", 0, "}", &eof);
	ok(strstr(r, "HTTP/1.1 400 ") && eof, "garbage: 400 then close");
	free(r);
	r = exchange("\x16\x03\x01\x00", 4, "}", &eof);
	ok(strstr(r, "HTTP/1.1 400 ") && eof, "TLS hello on plain port: 400 at once, not after a timeout");
	free(r);
	{
		struct buf big = BUF_INIT;
		buf_adds(&big, "GET /json HTTP/1.1\r\nHost: x\r\n");
		while (big.len < HTTP_MAX_HEADER_BYTES + 100)
			buf_adds(&big, "X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
		r = exchange(big.data, big.len, "}", &eof);
		ok(strstr(r, "HTTP/1.1 431 ") && eof, "header too large: 431 and close");
		free(r);
		buf_reset(&big);
		buf_adds(&big, "GET /");
		while (big.len < HTTP_MAX_REQUEST_LINE + 100)
			buf_addch(&big, 'a');
		r = exchange(big.data, big.len, "}", &eof);
		ok(strstr(r, "HTTP/1.1 414 ") != NULL, "request line too long: 414");
		free(r);
		buf_release(&big);
	}
}

static void test_connection_rules(void)
{
	bool eof;
	char *r;
	int fd;

	r = exchange("GET /json HTTP/1.1\r\nHost: x\r\n\r\nGET /json HTTP/1.1\r\nHost: x\r\n\r\nPOST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nxyz",
		     0, "xyz", &eof);
	is_int(count(r, "HTTP/1.1 200 OK"), 3, "three pipelined requests answered");
	ok(strstr(r, "}") < strstr(r, "xyz"), "  in order");
	free(r);
	r = exchange("GET /json HTTP/1.0\r\n\r\n", 0, "}", &eof);
	ok(strstr(r, "Connection: close") && eof, "HTTP/1.0 default: close");
	free(r);
	fd = dial();
	sys_write_all(fd, "GET /json HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", strlen("GET /json HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
	r = pump(fd, "}", &eof, 2000);
	ok(strstr(r, "Connection: keep-alive") && !eof, "HTTP/1.0 keep-alive honoured");
	free(r);
	sys_write_all(fd, "GET /json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", strlen("GET /json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
	r = pump(fd, "}", &eof, 2000);
	ok(strstr(r, "Connection: close") && strstr(r, "}"), "Connection: close honoured");
	free(r);
	r = pump(fd, NULL, &eof, 500);
	ok(eof, "  and closed");
	free(r);
	close(fd);

	fd = dial();
	sys_write_all(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n", strlen("POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n"));
	r = pump(fd, "100 Continue\r\n\r\n", &eof, 2000);
	ok(strstr(r, "HTTP/1.1 100 Continue\r\n\r\n") != NULL, "Expect: 100-continue answered");
	free(r);
	sys_write_all(fd, "ping", strlen("ping"));
	r = pump(fd, "ping", &eof, 2000);
	ok(strstr(r, "HTTP/1.1 200 OK") && strstr(r, "ping"), "  then the body is read");
	free(r);
	close(fd);

	r = exchange("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n", 0, "0\r\n\r\n", &eof);
	ok(strstr(r, "Transfer-Encoding: chunked") && strstr(r, "2\r\nab\r\n3\r\ncde\r\n0\r\n\r\n"), "streamed chunked response");
	free(r);
	r = exchange("GET /stream HTTP/1.0\r\n\r\n", 0, "cde", &eof);
	ok(!strstr(r, "chunked") && strstr(r, "\r\n\r\nabcde") && eof, "streamed to HTTP/1.0: until close");
	free(r);
}

static void test_parked(void)
{
	bool eof;
	char *r;
	int fd = dial();

	sys_write_all(fd, "GET /park HTTP/1.1\r\nHost: x\r\n\r\nGET /json HTTP/1.1\r\nHost: x\r\n\r\n", strlen("GET /park HTTP/1.1\r\nHost: x\r\n\r\nGET /json HTTP/1.1\r\nHost: x\r\n\r\n"));
	r = pump(fd, "HTTP", &eof, 300);
	ok(parked_req && r[0] == '\0', "parked request: nothing sent, pipelined one waits");
	free(r);
	ok(parked_req && !http_req_gone(parked_req), "  not gone");
	http_respond(parked_req, 200, "text/plain", "late", 4);
	parked_req = NULL;
	r = pump(fd, "}", &eof, 2000);
	ok(strstr(r, "late") && strstr(r, "}") && strstr(r, "late") < strstr(r, "}"), "answered later, then the next one, in order");
	free(r);
	close(fd);

	fd = dial();
	gone_called = false;
	sys_write_all(fd, "GET /park HTTP/1.1\r\nHost: x\r\n\r\n", strlen("GET /park HTTP/1.1\r\nHost: x\r\n\r\n"));
	r = pump(fd, "HTTP", &eof, 200);
	free(r);
	close(fd);
	for (int i = 0; i < 50 && !gone_called; i++)
		ev_run_once(loop, 10);
	ok(gone_called && parked_req && http_req_gone(parked_req), "client left: on_gone called, req gone but valid");
	ok(parked_req && http_respond(parked_req, 200, "text/plain", "x", 1) == 0, "answering a gone req frees it");
	parked_req = NULL;
}

static void test_detach(void)
{
	bool eof;
	char *r;
	int fd = dial();
	char tmp[16];
	ssize_t n = -1;

	buf_reset(&leftover);
	sys_write_all(fd, "GET /upgrade HTTP/1.1\r\nHost: x\r\n\r\nEXTRA", strlen("GET /upgrade HTTP/1.1\r\nHost: x\r\n\r\nEXTRA"));
	for (int i = 0; i < 100 && !detached; i++)
		ev_run_once(loop, 10);
	ok(detached != NULL, "detach gave the stream");
	ok(leftover.len == 5 && memcmp(leftover.data, "EXTRA", 5) == 0, "bytes past the request handed over");
	if (detached) {
		stream_write(detached, "raw", 3);
		r = pump(fd, "raw", &eof, 1000);
		ok(strcmp(r, "raw") == 0, "the new owner writes on the socket; the server sent nothing");
		free(r);
		sys_write_all(fd, "more", strlen("more"));
		for (int i = 0; i < 100; i++) {
			n = stream_read(detached, tmp, sizeof(tmp));
			if (n > 0 || (n < 0 && errno != EAGAIN))
				break;
			usleep(5000);
		}
		ok(n == 4 && memcmp(tmp, "more", 4) == 0, "and reads from it");
		stream_free(detached);
		detached = NULL;
	}
	close(fd);
}

static int async_status;
static char async_body[ERR_MSG_MAX + 8];
static void on_async(const struct http_client_resp *resp, const struct err *e, void *arg)
{
	async_status = resp ? resp->status : -1;
	if (resp)
		snprintf(async_body, sizeof(async_body), "%s", resp->body.data);
	else
		snprintf(async_body, sizeof(async_body), "%s", e->msg);
}

static void test_async_client(void)
{
	struct http_aclient *ac = http_aclient_new(loop);
	struct http_client_req req = { .method = "POST", .body = "hey", .body_len = 3 };
	char url[64];
	struct err e;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/echo", http_server_port(srv));
	req.url = url;
	for (int round = 0; round < 2; round++) {
		async_status = 0;
		ok(http_aclient_do(ac, &req, 0, on_async, NULL, &e) != NULL, "async request started");
		for (int i = 0; i < 200 && !async_status; i++)
			ev_run_once(loop, 10);
		ok(async_status == 200 && strcmp(async_body, "hey") == 0, "async response %d", round);
	}
	is_int(http_aclient_dials(ac), 1, "async client reused its connection");
	req.url = "http://127.0.0.1:1/";
	async_status = 0;
	http_aclient_do(ac, &req, 0, on_async, NULL, &e);
	for (int i = 0; i < 200 && !async_status; i++)
		ev_run_once(loop, 10);
	ok(async_status == -1 && strstr(async_body, "connect 127.0.0.1:1: Connection refused"), "async connect error: %s", async_body);
	ok(http_aclient_do(ac, &(struct http_client_req){ .url = "gopher://x" }, 0, on_async, NULL, &e) == NULL, "bad url refused at once");
	http_aclient_free(ac);
}

static bool shut_done;
static void on_shut(struct http_server *s, void *arg)
{
	shut_done = true;
}

static void test_shutdown(void)
{
	bool eof;
	char *r;
	int idle = dial(), busy = dial();

	sys_write_all(busy, "GET /park HTTP/1.1\r\nHost: x\r\n\r\n", strlen("GET /park HTTP/1.1\r\nHost: x\r\n\r\n"));
	for (int i = 0; i < 20; i++)
		ev_run_once(loop, 5);
	ok(parked_req != NULL, "a request in flight");
	http_server_shutdown(srv, 5000, on_shut, NULL);
	r = pump(idle, NULL, &eof, 300);
	ok(eof, "idle connection closed at shutdown");
	free(r);
	ok(!shut_done, "not done while a request is in flight");
	http_respond(parked_req, 200, "text/plain", "fin", 3);
	parked_req = NULL;
	r = pump(busy, "fin", &eof, 2000);
	ok(strstr(r, "Connection: close") && strstr(r, "fin"), "in-flight request finished with Connection: close");
	free(r);
	for (int i = 0; i < 50 && !shut_done; i++)
		ev_run_once(loop, 10);
	ok(shut_done, "done callback after the last connection");
	ok(dial() < 0, "no longer accepting");
	close(idle);
	close(busy);
}

/* Short timeouts and a connection cap on a second server. */
static void test_timeouts(void)
{
	struct http_server_opts o = { .listen = "127.0.0.1:0", .header_timeout_ms = 300, .idle_timeout_ms = 300,
				      .body_timeout_ms = 300, .first_byte_timeout_ms = 300, .max_conns = 2,
				      .reserve_conns = -1 };
	struct err e;
	bool eof;
	char *r;
	int a, b, c;
	int64_t t0;

	srv = http_server_new(loop, &o, &e);
	http_route(srv, "POST", "/echo", 0, h_echo, NULL);
	http_route(srv, "GET", "/json", 0, h_json, NULL);
	http_route(srv, "GET", "/park", 0, h_park, NULL);
	http_route(srv, "POST", "/park", 0, h_park, NULL);
	http_route(srv, "GET", "/hold", 0, h_hold, NULL);

	/* A parked request outlives the header and body timeouts: those bound
	 * reading the request, not how long the handler takes to answer. */
	for (int with_body = 0; with_body < 2; with_body++) {
		const char *req = with_body ? "POST /park HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"
					    : "GET /park HTTP/1.1\r\nHost: x\r\n\r\n";
		parked_req = NULL;
		a = dial();
		sys_write_all(a, req, strlen(req));
		t0 = ev_mono_ms();
		while (ev_mono_ms() - t0 < 1000)	/* three header/body timeouts */
			ev_run_once(loop, 50);
		ok(parked_req && !http_req_gone(parked_req), "parked %s request still there after 1 s (timeouts 300 ms)",
		   with_body ? "POST" : "GET");
		if (parked_req)	/* answered either way: a gone req is freed by its answer */
			http_respond(parked_req, 200, "text/plain", "late", 4);
		parked_req = NULL;
		r = pump(a, "late", &eof, 1000);
		ok(r && strstr(r, "late"), "  and its late answer reaches the client");
		free(r);
		close(a);
	}

	a = dial();
	sys_write_all(a, "GET /json HTTP/1.1\r\nHost: x\r\n\r\n", strlen("GET /json HTTP/1.1\r\nHost: x\r\n\r\n"));
	r = pump(a, "}", &eof, 1000);
	free(r);
	t0 = ev_mono_ms();
	r = pump(a, NULL, &eof, 2000);
	ok(eof && ev_mono_ms() - t0 >= 200, "idle keep-alive connection closed after the idle timeout (%lld ms)",
	   (long long)(ev_mono_ms() - t0));
	free(r);
	close(a);

	a = dial();
	t0 = ev_mono_ms();
	r = pump(a, NULL, &eof, 2000);
	ok(eof && ev_mono_ms() - t0 >= 200, "silent new connection closed after the first-byte timeout");
	free(r);
	close(a);

	a = dial();
	sys_write_all(a, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab",
		      strlen("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab"));
	t0 = ev_mono_ms();
	r = pump(a, NULL, &eof, 2000);
	ok(eof && ev_mono_ms() - t0 >= 200, "stalled body dropped after the body timeout");
	free(r);
	close(a);

	/* Two busy connections (parked requests) fill the pool; with no reserve
	 * and nothing waiting to evict, that is the real limit. */
	a = dial();
	b = dial();
	sys_write_all(a, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n", strlen("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n"));
	sys_write_all(b, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n", strlen("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n"));
	for (int i = 0; i < 10; i++)
		ev_run_once(loop, 5);
	c = dial();
	r = pump(c, NULL, &eof, 1000);
	ok(strstr(r, "503") && strstr(r, "Retry-After: ") && eof, "over max connections, all busy: 503 with Retry-After");
	free(r);
	is_int(http_server_conns(srv), 2, "two connections kept");
	close(a);
	close(b);
	close(c);
	for (int i = 0; i < 20; i++)
		ev_run_once(loop, 5);	/* the held requests become gone */
	release_held();
	http_server_free(srv);
	srv = NULL;
}

int main(void)
{
	struct http_server_opts o = { .listen = "127.0.0.1:0" };
	struct err e;

	loop = ev_new();
	srv = http_server_new(loop, &o, &e);
	if (!ok(srv != NULL, "server listens on an ephemeral port"))
		return tap_done();
	ok(http_server_port(srv) > 0, "bound port known");
	ok(http_route(srv, "GET", "/bad/{x", 0, h_echo, NULL) == 0, "odd literal segment allowed");
	ok(http_route(srv, "GET", "/a/{rest...}/b", 0, h_echo, NULL) < 0, "rest param must be last");
	http_route(srv, "POST", "/echo", 0, h_echo, NULL);
	http_route(srv, "POST", "/small", 16, h_echo, NULL);
	http_route(srv, "POST", "/envs/{env}/fork", 0, h_fork, NULL);
	http_route(srv, "GET", "/park", 0, h_park, NULL);
	http_route(srv, "GET", "/upgrade", 0, h_upgrade, NULL);
	http_route(srv, "GET", "/stream", 0, h_stream, NULL);
	http_route(srv, "GET", "/json", 0, h_json, NULL);
	http_route(srv, "GET", "/dir/", 0, h_json, NULL);
	test_router();
	test_framing();
	test_connection_rules();
	test_parked();
	test_detach();
	test_async_client();
	test_shutdown();
	http_server_free(srv);
	test_timeouts();
	buf_release(&leftover);
	ev_free(loop);
	{
		struct http_server_opts v6 = { .listen = "[::1]:0" };
		struct ev *l2 = ev_new();
		struct http_server *s6 = http_server_new(l2, &v6, &e);
		ok(s6 && http_server_port(s6) > 0, "IPv6 literal listen: %s", s6 ? "ok" : e.msg);
		http_server_free(s6);
		ev_free(l2);
	}
	return tap_done();
}
