/*
 * Unit tests: the response hook (http_req_on_respond), which the control
 * plane's Idempotency-Key uses to keep an answer before it goes out. On a
 * real loopback socket: the hook sees the answer; one that lets it pass
 * changes nothing; one that takes it over delays it until its owner
 * answers; streamed and detached requests and a gone client's answer reach
 * it too; a quiet request's handler is not told its client left.
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
#include "tap.h"

static struct ev *loop;
static struct http_server *srv;

/* What the hook saw. */
static int seen_calls, seen_status;
static char seen_body[64], seen_ctype[64];
static bool take_over;
static struct http_req *taken, *parked;
static struct stream *detached;

static bool hook(struct http_req *req, int status, const char *ctype, const void *body, size_t len, void *arg)
{
	seen_calls++;
	seen_status = status;
	snprintf(seen_ctype, sizeof(seen_ctype), "%s", ctype ? ctype : "(null)");
	snprintf(seen_body, sizeof(seen_body), "%.*s", body ? (int)len : 6, body ? (const char *)body : "(null)");
	if (status && take_over) {
		taken = req;
		return true;
	}
	return false;
}

static void reset(bool take)
{
	seen_calls = seen_status = 0;
	seen_body[0] = seen_ctype[0] = '\0';
	take_over = take;
	taken = NULL;
}

static void h_plain(struct http_req *req, void *arg)
{
	http_req_on_respond(req, hook, NULL);
	http_respond(req, 201, "text/plain", "made", 4);
}

static void h_stream(struct http_req *req, void *arg)
{
	http_req_on_respond(req, hook, NULL);
	http_stream_begin(req, 200, "text/plain");
	http_stream_write(req, "ab", 2);
	http_stream_end(req);
}

static void h_upgrade(struct http_req *req, void *arg)
{
	struct err e;

	http_req_on_respond(req, hook, NULL);
	if (http_req_detach(req, &detached, NULL, &e) < 0)
		http_respond_error(req, 500, e.msg);
}

static bool gone_told;

static void on_gone(struct http_req *req, void *arg)
{
	gone_told = true;
}

static void h_park(struct http_req *req, void *arg)
{
	http_req_on_respond(req, hook, NULL);
	http_req_on_gone(req, on_gone, NULL);
	if (arg)
		http_req_quiet_gone(req);
	parked = req;
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

/* Run the loop until fd has bytes holding until (or EOF, or max_ms). */
static char *pump(int fd, const char *until, int max_ms)
{
	struct buf got = BUF_INIT;
	int64_t end = ev_mono_ms() + max_ms;

	buf_adds(&got, "");
	while (ev_mono_ms() < end) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		bool eof = false;

		ev_run_once(loop, 5);
		while (poll(&p, 1, 0) > 0) {
			char tmp[4096];
			ssize_t n = recv(fd, tmp, sizeof(tmp), MSG_DONTWAIT);

			if (n > 0) {
				buf_add(&got, tmp, (size_t)n);
				continue;
			}
			eof = n == 0 || (errno != EAGAIN && errno != EINTR);
			break;
		}
		if (eof || (until && strstr(got.data, until)))
			break;
	}
	return buf_detach(&got, NULL);
}

static int send_req(const char *line)
{
	int fd = dial();
	char head[256];

	snprintf(head, sizeof(head), "%s HTTP/1.1\r\nHost: x\r\n\r\n", line);
	sys_write_all(fd, head, strlen(head));
	return fd;
}

static void test_pass(void)
{
	int fd;
	char *r;

	reset(false);
	fd = send_req("GET /plain");
	r = pump(fd, "made", 2000);
	ok(seen_calls == 1 && seen_status == 201 && strcmp(seen_ctype, "text/plain") == 0 &&
	   strcmp(seen_body, "made") == 0, "the hook sees status, type and body");
	ok(strstr(r, "HTTP/1.1 201") && strstr(r, "made"), "and, letting it pass, the answer goes out as it was");
	free(r);
	close(fd);
}

static void test_take_over(void)
{
	int fd;
	char *r;

	reset(true);
	fd = send_req("GET /plain");
	r = pump(fd, "HTTP", 300);
	ok(taken && r[0] == '\0', "taken over: nothing is written");
	free(r);
	ok(taken && http_respond(taken, 202, "text/plain", "later", 5) == 0, "its owner answers later");
	r = pump(fd, "later", 2000);
	ok(strstr(r, "HTTP/1.1 202") && strstr(r, "later") && seen_calls == 1,
	   "that answer goes out, and the hook (one-shot) is not called again");
	free(r);
	close(fd);
}

static void test_no_answer(void)
{
	int fd;
	char *r;

	reset(true);
	fd = send_req("GET /stream");
	r = pump(fd, "0\r\n\r\n", 2000);
	ok(strstr(r, "ab") && seen_calls == 1 && seen_status == 0 && strcmp(seen_body, "(null)") == 0,
	   "a streamed answer: the hook hears status 0 and no body, and cannot take it");
	free(r);
	close(fd);

	reset(true);
	fd = send_req("GET /upgrade");
	for (int i = 0; i < 100 && !detached; i++)
		ev_run_once(loop, 10);
	ok(detached && seen_calls == 1 && seen_status == 0, "a detached request: status 0 too");
	if (detached)
		stream_free(detached);
	detached = NULL;
	close(fd);
}

static void test_gone(bool quiet)
{
	int fd;

	reset(false);
	parked = NULL;
	gone_told = false;
	fd = send_req(quiet ? "GET /park-quiet" : "GET /park");
	for (int i = 0; i < 100 && !parked; i++)
		ev_run_once(loop, 10);
	close(fd);
	for (int i = 0; i < 50 && parked && !http_req_gone(parked); i++)
		ev_run_once(loop, 10);
	ok(parked && http_req_gone(parked), "a parked request whose client left%s", quiet ? " (quiet)" : "");
	ok(gone_told == !quiet, quiet ? "  a quiet one's handler is not told" : "  its handler is told");
	if (parked)
		http_respond(parked, 201, "application/json", "{}", 2);
	ok(seen_calls == 1 && seen_status == 201 && strcmp(seen_body, "{}") == 0,
	   "its answer still reaches the hook (a retry should get it)");
}

int main(void)
{
	struct http_server_opts o = { .listen = "127.0.0.1:0" };
	struct err e;

	loop = ev_new();
	srv = http_server_new(loop, &o, &e);
	if (!ok(srv != NULL, "server listens"))
		return tap_done();
	http_route(srv, "GET", "/plain", 0, h_plain, NULL);
	http_route(srv, "GET", "/stream", 0, h_stream, NULL);
	http_route(srv, "GET", "/upgrade", 0, h_upgrade, NULL);
	http_route(srv, "GET", "/park", 0, h_park, NULL);
	http_route(srv, "GET", "/park-quiet", 0, h_park, "quiet");
	test_pass();
	test_take_over();
	test_no_answer();
	test_gone(false);
	test_gone(true);
	http_server_free(srv);
	ev_free(loop);
	return tap_done();
}
