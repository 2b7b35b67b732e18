/*
 * Unit tests: the server's connection limits on real loopback sockets, with
 * clients bound to chosen addresses of 127.0.0.0/8 to play several hosts:
 * the per-address cap (429 when the address's connections are all busy,
 * else its longest-waiting connection is evicted, a never-used one before
 * an idle keep-alive one), the main pool (a waiting connection evicted for
 * a new one; 503 with Retry-After only when every slot is busy), the
 * reserve (reserved routes only, eviction inside it), the first-byte,
 * header and idle deadlines (short ones from the options; no long sleeps),
 * and running out of file descriptors (accepting pauses, then resumes).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/ev.h"
#include "base/sys.h"
#include "http/http.h"
#include "tap.h"

#define MAX_HELD 32

static struct ev *loop;
static struct http_server *srv;
static struct http_req *held[MAX_HELD];
static size_t nheld;

static void h_hello(struct http_req *req, void *arg)
{
	http_respond(req, 200, "text/plain", "hello", 5);
}

/* Holds the request (a busy connection) until release_held(). */
static void h_hold(struct http_req *req, void *arg)
{
	if (nheld < MAX_HELD)
		held[nheld++] = req;
	else
		http_respond(req, 500, "text/plain", "full", 4);
}

static void release_held(void)
{
	while (nheld)
		http_respond(held[--nheld], 200, "text/plain", "held", 4);
}

static void turns(int n)
{
	for (int i = 0; i < n; i++)
		ev_run_once(loop, 2);
}

/* Connect from 127.0.0.<last> and let the server take the connection in. */
static int dial_from(int last)
{
	struct sockaddr_in me = { .sin_family = AF_INET };
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((uint16_t)http_server_port(srv)) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	me.sin_addr.s_addr = htonl(0x7f000000u | (uint32_t)last);
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&me, sizeof(me)) < 0 ||
	    connect(fd, (struct sockaddr *)&to, sizeof(to)) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	turns(5);
	return fd;
}

static void say(int fd, const char *s)
{
	sys_write_all(fd, s, strlen(s));
	turns(5);
}

/* Run the loop until fd has "until" (or EOF, or max_ms). *eof: the server closed. */
static char *pump(int fd, const char *until, bool *eof, int max_ms)
{
	struct buf got = BUF_INIT;
	int64_t end = ev_mono_ms() + max_ms;

	*eof = false;
	buf_adds(&got, "");
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

/* Whether the server has closed fd (EOF or reset), without waiting. */
static bool closed(int fd)
{
	bool eof;
	char *r;

	turns(3);
	r = pump(fd, "", &eof, 0);
	free(r);
	{
		struct pollfd p = { .fd = fd, .events = POLLIN };
		char c;
		if (poll(&p, 1, 0) > 0) {
			ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK);
			eof = eof || n == 0 || (n < 0 && errno != EAGAIN);
		}
	}
	return eof;
}

/* A request on fd answered 200 "hello"? */
static bool served(int fd)
{
	bool eof;
	char *r;
	bool good;

	say(fd, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
	r = pump(fd, "hello", &eof, 1000);
	good = strstr(r, "HTTP/1.1 200 ") && strstr(r, "hello");
	free(r);
	return good;
}

static void new_server(struct http_server_opts *o)
{
	struct err e;

	o->listen = "127.0.0.1:0";
	srv = http_server_new(loop, o, &e);
	if (!srv) {
		ok(0, "server: %s", e.msg);
		exit(tap_done());
	}
	http_route(srv, "GET", "/hello", 0, h_hello, NULL);
	http_route(srv, "GET", "/hold", 0, h_hold, NULL);
	http_route_flags(srv, "GET", "/stream", 0, HTTP_ROUTE_RESERVED, h_hello, NULL);
	http_route_flags(srv, "GET", "/stream-hold", 0, HTTP_ROUTE_RESERVED, h_hold, NULL);
}

static void end_server(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	turns(20);
	release_held();
	http_server_free(srv);
	srv = NULL;
}

static void test_per_address(void)
{
	struct http_server_opts o = { .max_conns_per_addr = 3 };
	struct http_server_stats st;
	int f[8];
	bool eof;
	char *r;

	new_server(&o);
	/* Three busy connections from .2: a fourth from .2 has nothing to evict. */
	for (int i = 0; i < 3; i++) {
		f[i] = dial_from(2);
		say(f[i], "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n");
	}
	is_int(nheld, 3, "three requests held from 127.0.0.2");
	f[3] = dial_from(2);
	r = pump(f[3], NULL, &eof, 1000);
	ok(strstr(r, "HTTP/1.1 429 ") && strstr(r, "Retry-After: 2\r\n") && strstr(r, "from this address") && eof,
	   "a fourth from the same address, all its connections busy: 429 with Retry-After, closed");
	free(r);
	f[4] = dial_from(3);
	ok(served(f[4]), "another address is served meanwhile");
	http_server_stats(srv, &st);
	is_int(st.refused_addr, 1, "one refusal counted per address");
	is_int(st.refused_full, 0, "none at the global limit");
	end_server(f, 5);

	/* Three silent connections from .4: a fourth evicts the oldest of them. */
	new_server(&o);
	for (int i = 0; i < 3; i++)
		f[i] = dial_from(4);
	f[3] = dial_from(4);
	ok(closed(f[0]), "address at its cap: its longest-waiting connection evicted");
	ok(!closed(f[1]) && !closed(f[2]), "  the others stay");
	ok(served(f[3]), "  and the new one is served");
	http_server_stats(srv, &st);
	is_int(st.evicted, 1, "one eviction counted");
	end_server(f, 4);

	/* A connection that was served (idle keep-alive, older) outlives a
	 * never-used one (newer) when the address must give one up. */
	new_server(&o);
	f[0] = dial_from(5);
	ok(served(f[0]), "keep-alive connection served");
	f[1] = dial_from(5);
	f[2] = dial_from(5);
	f[3] = dial_from(5);
	ok(!closed(f[0]), "the idle keep-alive connection is kept");
	ok(closed(f[1]), "the oldest never-used one is evicted instead");
	ok(!closed(f[2]) && !closed(f[3]), "  the rest stay");
	end_server(f, 4);

	/* -1: no per-address cap. */
	o.max_conns_per_addr = -1;
	new_server(&o);
	for (int i = 0; i < 8; i++)
		f[i] = dial_from(6);
	http_server_stats(srv, &st);
	ok(st.evicted == 0 && http_server_conns(srv) == 8, "no per-address cap: 8 connections from one address");
	end_server(f, 8);
}

static void test_pool(void)
{
	struct http_server_opts o = { .max_conns = 4, .reserve_conns = 2 };
	struct http_server_stats st;
	int f[12];
	bool eof;
	char *r;

	/* Silent connections from four addresses fill the pool: a newcomer
	 * evicts the longest-waiting one and is served. */
	new_server(&o);
	for (int i = 0; i < 4; i++)
		f[i] = dial_from(10 + i);
	f[4] = dial_from(20);
	ok(closed(f[0]), "pool full of waiting connections: the oldest is evicted");
	ok(!closed(f[1]) && !closed(f[2]) && !closed(f[3]), "  the others stay");
	ok(served(f[4]), "  the newcomer is served, no 503");
	http_server_stats(srv, &st);
	ok(st.evicted == 1 && st.refused_full == 0 && st.reserve == 0, "one eviction, nothing refused, reserve unused");
	end_server(f, 5);

	/* Every main slot busy: newcomers go to the reserve, where only the
	 * reserved routes are served. */
	new_server(&o);
	for (int i = 0; i < 4; i++) {
		f[i] = dial_from(10 + i);
		say(f[i], "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n");
	}
	is_int(nheld, 4, "four busy connections fill the main pool");
	f[4] = dial_from(20);
	http_server_stats(srv, &st);
	is_int(st.reserve, 1, "a newcomer is placed in the reserve");
	r = (say(f[4], "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"), pump(f[4], NULL, &eof, 1000));
	ok(strstr(r, "HTTP/1.1 503 ") && strstr(r, "Retry-After: 2\r\n") && eof,
	   "a reserve connection asking for another route: 503 with Retry-After, closed");
	free(r);
	f[5] = dial_from(21);
	say(f[5], "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
	r = pump(f[5], NULL, &eof, 1000);
	ok(strstr(r, "HTTP/1.1 200 ") && strstr(r, "Connection: close") && eof,
	   "a reserve connection to a reserved route is served (one request, then closed)");
	free(r);
	/* The reserve fills with silent ones: the oldest makes room. */
	f[6] = dial_from(22);
	f[7] = dial_from(23);
	f[8] = dial_from(24);
	ok(closed(f[6]) && !closed(f[7]), "reserve full of waiting connections: its oldest is evicted");
	say(f[8], "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
	r = pump(f[8], NULL, &eof, 1000);
	ok(strstr(r, "HTTP/1.1 200 ") != NULL, "  and the newcomer reaches the reserved route");
	free(r);
	/* Reserve busy too (two held on a reserved route): the real limit. */
	f[9] = dial_from(25);
	say(f[9], "GET /stream-hold HTTP/1.1\r\nHost: x\r\n\r\n");
	f[10] = dial_from(26);
	say(f[10], "GET /stream-hold HTTP/1.1\r\nHost: x\r\n\r\n");
	f[11] = dial_from(27);
	r = pump(f[11], NULL, &eof, 1000);
	ok(strstr(r, "HTTP/1.1 503 ") && strstr(r, "Retry-After: 2\r\n") && strstr(r, "too many connections") && eof,
	   "every slot busy, main and reserve: 503 with Retry-After at accept");
	free(r);
	http_server_stats(srv, &st);
	ok(st.refused_full == 1 && st.refused_reserve == 1, "counted: one at the limit, one in the reserve");
	end_server(f, 12);
}

static void test_deadlines(void)
{
	struct http_server_opts o = { .first_byte_timeout_ms = 300, .header_timeout_ms = 600,
				      .idle_timeout_ms = 300 };
	int64_t t0;
	bool eof;
	char *r;
	int f[3];

	new_server(&o);
	f[0] = dial_from(30);
	t0 = ev_mono_ms();
	r = pump(f[0], NULL, &eof, 2000);
	ok(eof && ev_mono_ms() - t0 >= 250 && ev_mono_ms() - t0 < 2000,
	   "silent connection closed at the first-byte deadline (%lld ms)", (long long)(ev_mono_ms() - t0));
	free(r);

	/* A first byte in time: the header deadline (counted from it) takes over. */
	f[1] = dial_from(31);
	t0 = ev_mono_ms();
	while (ev_mono_ms() - t0 < 100)
		ev_run_once(loop, 10);
	say(f[1], "G");
	t0 = ev_mono_ms();
	r = pump(f[1], NULL, &eof, 300);
	ok(!eof, "a first byte in time: still open past the first-byte deadline");
	free(r);
	r = pump(f[1], NULL, &eof, 2000);
	ok(eof && ev_mono_ms() - t0 >= 500, "head not finished: closed at the header deadline (%lld ms after its first byte)",
	   (long long)(ev_mono_ms() - t0));
	free(r);

	f[2] = dial_from(32);
	ok(served(f[2]), "a request served");
	t0 = ev_mono_ms();
	r = pump(f[2], NULL, &eof, 2000);
	ok(eof && ev_mono_ms() - t0 >= 250, "idle keep-alive connection closed at the idle deadline (%lld ms)",
	   (long long)(ev_mono_ms() - t0));
	free(r);
	end_server(f, 3);
}

/* CPU time this process has used, in ms. */
static int64_t cpu_ms(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
}

/* Out of descriptors, accept fails with EMFILE while the listener stays
 * readable: the server must pause rather than spin, and take the waiting
 * connection once a descriptor is free. The clients' sockets are made
 * before the limit is lowered, so only the server's accepts hit it. */
static void test_emfile(void)
{
	struct http_server_opts o = { 0 };
	struct sockaddr_in to = { .sin_family = AF_INET };
	struct rlimit was, low;
	int cl[3], next, nturns;
	int64_t t0, c0, used;
	bool eof;
	char *r;

	new_server(&o);
	to.sin_port = htons((uint16_t)http_server_port(srv));
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (int i = 0; i < 3; i++)
		cl[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	next = open("/dev/null", O_RDONLY | O_CLOEXEC);	/* the lowest free descriptor */
	close(next);
	getrlimit(RLIMIT_NOFILE, &was);
	low = was;
	low.rlim_cur = (rlim_t)next + 1;	/* room for one accepted connection */
	if (!ok(setrlimit(RLIMIT_NOFILE, &low) == 0, "open-file limit lowered to %d", next + 1)) {
		end_server(cl, 3);
		return;
	}
	for (int i = 0; i < 3; i++)
		connect(cl[i], (struct sockaddr *)&to, sizeof(to));
	turns(5);
	is_int(http_server_conns(srv), 1, "one connection taken in, then accept runs out of descriptors");
	/* Turns of at most 10 ms each: about 40 when the loop waits, thousands
	 * when poll keeps returning at once for the listener. */
	c0 = cpu_ms();
	t0 = ev_mono_ms();
	for (nturns = 0; ev_mono_ms() - t0 < 400; nturns++)
		ev_run_once(loop, 10);
	used = cpu_ms() - c0;
	ok(nturns < 200, "the loop does not spin on the readable listener (%d turns, %lld ms of CPU in 400 ms)",
	   nturns, (long long)used);
	close(cl[0]);	/* frees the server's descriptor once it sees the close */
	cl[0] = -1;
	say(cl[1], "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
	r = pump(cl[1], "hello", &eof, 2000);
	ok(strstr(r, "HTTP/1.1 200 ") != NULL, "a descriptor free again: the waiting connection is taken in and served");
	free(r);
	setrlimit(RLIMIT_NOFILE, &was);
	end_server(cl, 3);
}

int main(void)
{
	int probe;

	loop = ev_new();
	{
		struct http_server_opts o = { 0 };
		new_server(&o);
		probe = dial_from(2);
		if (probe < 0) {
			http_server_free(srv);
			ev_free(loop);
			return tap_skip_all("cannot bind 127.0.0.2 (no 127.0.0.0/8 on loopback)");
		}
		close(probe);
		turns(5);
		http_server_free(srv);
		srv = NULL;
	}
	test_per_address();
	test_pool();
	test_deadlines();
	test_emfile();
	ev_free(loop);
	return tap_done();
}
