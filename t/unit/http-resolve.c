/*
 * Unit tests: name lookups off the event loop (http/resolve.h) and the
 * asynchronous HTTP client that uses them. A test hook stands in for
 * getaddrinfo in the lookup threads so that a lookup can be made slow (the
 * loop must keep firing a 10 ms timer meanwhile) or fail on purpose; the
 * requests go to a real server on 127.0.0.1. Cancelling a call (or freeing
 * the client) while its lookup runs must leave the thread to finish on its
 * own memory: the ASan build (t-asan) checks that.
 */
#include <errno.h>
#include <netdb.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "base/ev.h"
#include "http/http.h"
#include "http/http_int.h"
#include "http/resolve.h"
#include "tap.h"

static struct ev *loop;
static struct http_server *srv;

/* ---- the stand-in for getaddrinfo ---- */

static atomic_int hook_delay_ms;	/* sleep this long first */
static atomic_int hook_active;		/* lookups inside the hook now */
static atomic_int hook_calls;

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int slow_gai(const char *node, const char *service, const struct addrinfo *hints, struct addrinfo **res)
{
	int rc;

	atomic_fetch_add(&hook_active, 1);
	atomic_fetch_add(&hook_calls, 1);
	sleep_ms(atomic_load(&hook_delay_ms));
	if (strcmp(node, "fails.test") == 0)
		rc = EAI_NONAME;
	else
		rc = getaddrinfo(node, service, hints, res);
	atomic_fetch_sub(&hook_active, 1);
	return rc;
}

/* Wait (with the loop running, so cancelled lookups are reaped) until no
 * lookup thread is inside the hook, then a little more for the threads to
 * let go of their memory before the leak checker looks. */
static void drain_hook(void)
{
	int64_t limit = ev_mono_ms() + 10000;

	while (atomic_load(&hook_active) > 0 && ev_mono_ms() < limit)
		ev_run_once(loop, 10);
	for (int i = 0; i < 5; i++)
		ev_run_once(loop, 10);
}

/* ---- a server and a ticking timer ---- */

static void h_hi(struct http_req *req, void *arg)
{
	http_respond(req, 200, "text/plain", "hi", 2);
}

static struct ev_timer tick_timer = EV_TIMER_INIT;
static int ticks;
static int64_t last_tick, max_gap;

static void on_tick(struct ev *ev, void *arg)
{
	int64_t now = ev_mono_ms();

	if (last_tick && now - last_tick > max_gap)
		max_gap = now - last_tick;
	last_tick = now;
	ticks++;
	ev_timer_start(ev, &tick_timer, 10, on_tick, NULL);
}

static void ticking(bool on)
{
	if (on) {
		ticks = 0;
		max_gap = 0;
		last_tick = 0;
		ev_timer_start(loop, &tick_timer, 10, on_tick, NULL);
	} else {
		ev_timer_stop(loop, &tick_timer);
	}
}

struct result {
	int status;		/* 0 pending, -1 error */
	char msg[ERR_MSG_MAX];
	int calls;
};

static void on_resp(const struct http_client_resp *resp, const struct err *e, void *arg)
{
	struct result *r = arg;

	r->calls++;
	r->status = resp ? resp->status : -1;
	snprintf(r->msg, sizeof(r->msg), "%s", resp ? resp->body.data : e->msg);
}

static void run_until(struct result *r, int ms)
{
	int64_t limit = ev_mono_ms() + ms;

	while (!r->status && ev_mono_ms() < limit)
		ev_run_once(loop, 10);
}

static void url_for(char *url, size_t n, const char *host)
{
	snprintf(url, n, "http://%s:%d/hi", host, http_server_port(srv));
}

/* ---- tests ---- */

static void test_numeric(void)
{
	struct addrinfo *res;
	struct err e;

	is_int(resolve_numeric("127.0.0.1", 80, &res, &e), 1, "IPv4 literal converted");
	ok(res && res->ai_family == AF_INET, "as an IPv4 address");
	freeaddrinfo(res);
	is_int(resolve_numeric("::1", 443, &res, &e), 1, "IPv6 literal converted");
	ok(res && res->ai_family == AF_INET6, "as an IPv6 address");
	freeaddrinfo(res);
	is_int(resolve_numeric("localhost", 80, &res, &e), 0, "a name is not a literal");
	ok(res == NULL, "and gives no addresses");
	is_int(resolve_numeric("127.0.0.1", 0, &res, &e), -1, "port 0 refused");
}

static void test_literal_takes_no_thread(void)
{
	struct http_aclient *ac = http_aclient_new(loop);
	struct result r = { 0 };
	char url[64];
	struct err e;

	url_for(url, sizeof(url), "127.0.0.1");
	ok(http_aclient_do(ac, &(struct http_client_req){ .url = url }, 0, on_resp, &r, &e) != NULL,
	   "request to a literal started");
	run_until(&r, 5000);
	ok(r.status == 200 && strcmp(r.msg, "hi") == 0, "literal: answered (%d %s)", r.status, r.msg);
	is_int(http_aclient_lookups(ac), 0, "an IP literal takes no lookup thread");
	http_aclient_free(ac);
}

static void test_slow_lookup_keeps_loop_running(void)
{
	struct http_aclient *ac = http_aclient_new(loop);
	struct result r = { 0 };
	char url[64];
	struct err e;
	int64_t t0;

	atomic_store(&hook_delay_ms, 500);
	http_int_resolve_hook(slow_gai);
	url_for(url, sizeof(url), "localhost");
	ticking(true);
	t0 = ev_mono_ms();
	ok(http_aclient_do(ac, &(struct http_client_req){ .url = url }, 0, on_resp, &r, &e) != NULL,
	   "request to localhost started");
	run_until(&r, 5000);
	ticking(false);
	ok(r.status == 200 && strcmp(r.msg, "hi") == 0, "localhost: answered (%d %s)", r.status, r.msg);
	is_int(http_aclient_lookups(ac), 1, "the name took one lookup thread");
	ok(ev_mono_ms() - t0 >= 500, "the lookup took the hook's 500 ms");
	/* A blocked loop would show about one tick and a gap of 500 ms. */
	ok(ticks >= 20, "the 10 ms timer kept firing during the lookup (%d ticks, longest gap %lld ms)",
	   ticks, (long long)max_gap);
	tap_diag("slow lookup: %d ticks of a 10 ms timer in %lld ms, longest gap %lld ms", ticks,
		 (long long)(ev_mono_ms() - t0), (long long)max_gap);

	/* The connection is kept: the next request needs no lookup. */
	memset(&r, 0, sizeof(r));
	http_aclient_do(ac, &(struct http_client_req){ .url = url }, 0, on_resp, &r, &e);
	run_until(&r, 5000);
	ok(r.status == 200 && http_aclient_lookups(ac) == 1, "kept-alive connection reused, no second lookup");
	http_aclient_free(ac);
	http_int_resolve_hook(NULL);
}

static void test_cancel_during_lookup(void)
{
	struct http_aclient *ac = http_aclient_new(loop);
	struct result r = { 0 }, r2 = { 0 };
	struct http_acall *call;
	char url[64];
	struct err e;

	atomic_store(&hook_delay_ms, 300);
	atomic_store(&hook_calls, 0);
	http_int_resolve_hook(slow_gai);
	url_for(url, sizeof(url), "localhost");

	/* Cancel the call: the resolver keeps the thread's slot until it ends. */
	call = http_aclient_do(ac, &(struct http_client_req){ .url = url }, 0, on_resp, &r, &e);
	for (int i = 0; i < 5; i++)
		ev_run_once(loop, 10);
	is_int(atomic_load(&hook_active), 1, "lookup in progress");
	http_acall_cancel(call);
	drain_hook();
	is_int(r.calls, 0, "cancelled during its lookup: no callback");

	/* Free the whole client: the thread is orphaned and frees its lookup. */
	http_aclient_do(ac, &(struct http_client_req){ .url = url }, 0, on_resp, &r2, &e);
	for (int i = 0; i < 5; i++)
		ev_run_once(loop, 10);
	is_int(atomic_load(&hook_active), 1, "second lookup in progress");
	http_aclient_free(ac);
	drain_hook();
	is_int(r2.calls, 0, "client freed during a lookup: no callback");
	is_int(atomic_load(&hook_calls), 2, "both lookup threads ran to their end");
	http_int_resolve_hook(NULL);
}

static void test_timeout_covers_lookup(void)
{
	struct http_aclient *ac = http_aclient_new(loop);
	struct result r = { 0 };
	char url[64];
	struct err e;

	atomic_store(&hook_delay_ms, 600);
	http_int_resolve_hook(slow_gai);
	url_for(url, sizeof(url), "localhost");
	http_aclient_do(ac, &(struct http_client_req){ .url = url, .timeout_ms = 100 }, 0, on_resp, &r, &e);
	run_until(&r, 5000);
	is_str(r.msg, "timeout after 100 ms resolving localhost", "the request's timeout covers the lookup");
	http_aclient_free(ac);
	drain_hook();
	http_int_resolve_hook(NULL);
}

static void test_failing_lookup(void)
{
	struct http_aclient *ac = http_aclient_new(loop);
	struct result r = { 0 };
	struct err e;

	atomic_store(&hook_delay_ms, 0);
	http_int_resolve_hook(slow_gai);
	http_aclient_do(ac, &(struct http_client_req){ .url = "https://fails.test/v1/servers" }, 0, on_resp, &r, &e);
	run_until(&r, 5000);
	is_str(r.msg, "resolve fails.test: Name or service not known", "a failed lookup says which name");
	http_int_resolve_hook(NULL);

	/* The real resolver: .invalid never resolves (RFC 6761). */
	memset(&r, 0, sizeof(r));
	http_aclient_do(ac, &(struct http_client_req){ .url = "http://nosuch.invalid/", .timeout_ms = 20000 }, 0,
			on_resp, &r, &e);
	run_until(&r, 25000);
	ok(r.status == -1 && strncmp(r.msg, "resolve nosuch.invalid: ", 24) == 0, "real lookup fails: %s", r.msg);
	http_aclient_free(ac);
}

/* More lookups than threads: the rest wait their turn, and all end. */
static int many_done, many_failed;
static void on_many(struct addrinfo *res, const struct err *e, void *arg)
{
	many_done++;
	if (!res)
		many_failed++;
	else
		freeaddrinfo(res);
}

static void test_queue(void)
{
	struct resolver *rs = resolver_new(loop);
	int n = RESOLVE_MAX_THREADS + 3;
	int64_t limit;
	struct err e;

	atomic_store(&hook_delay_ms, 100);
	http_int_resolve_hook(slow_gai);
	many_done = many_failed = 0;
	for (int i = 0; i < n; i++)
		if (!resolve_start(rs, "localhost", 80, on_many, NULL, &e))
			tap_diag("resolve_start: %s", e.msg);
	is_int(resolver_threads(rs), RESOLVE_MAX_THREADS, "at most RESOLVE_MAX_THREADS threads at once");
	is_int(many_done, 0, "no callback from inside resolve_start");
	limit = ev_mono_ms() + 10000;
	while (many_done < n && ev_mono_ms() < limit)
		ev_run_once(loop, 10);
	is_int(many_done, n, "every queued lookup answered");
	is_int(many_failed, 0, "all found localhost");
	is_int(resolver_threads(rs), n, "one thread per lookup");
	ok(resolve_start(rs, "localhost", 0, on_many, NULL, &e) == NULL && strstr(e.msg, "invalid port"),
	   "bad port refused at once: %s", e.msg);
	resolver_free(rs);
	http_int_resolve_hook(NULL);
}

int main(void)
{
	struct http_server_opts o = { .listen = "127.0.0.1:0" };
	struct err e;

	loop = ev_new();
	srv = http_server_new(loop, &o, &e);
	if (!ok(srv != NULL, "server listens: %s", srv ? "ok" : e.msg))
		return tap_done();
	http_route(srv, "GET", "/hi", 0, h_hi, NULL);

	test_numeric();
	test_literal_takes_no_thread();
	test_slow_lookup_keeps_loop_running();
	test_cancel_during_lookup();
	test_timeout_covers_lookup();
	test_failing_lookup();
	test_queue();

	http_server_free(srv);
	ev_free(loop);
	return tap_done();
}
