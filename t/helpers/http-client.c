/*
 * http-client: drives the HTTP clients from the integration tests.
 *
 *   http-client [-async] [-X METHOD] [-H "Name: value"]... [-d BODY] [-t TIMEOUT_MS]
 *               [-max BYTES] [-hdr NAME] URL...
 *
 * Each URL is fetched with one client (so connections are reused). For each
 * response it prints "status N" and, with -hdr, "header NAME: value", then the
 * body on its own line(s). Finally "dials N" (connections opened). On an
 * error it prints "error: message" and exits 1 after the remaining URLs.
 * With -async, all URLs run concurrently on an event loop; results are
 * printed in URL order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ev.h"
#include "base/str.h"
#include "http/http.h"

#define MAX_URLS 256
#define MAX_HDRS 16

struct result {
	int done;
	int status;
	char *hdr;
	char *body;
	size_t body_len;
	char err[ERR_MSG_MAX];
};

static const char *want_hdr;
static struct result results[MAX_URLS];
static int pending;
static struct ev *loop;

static void print_result(const struct result *r)
{
	if (r->err[0]) {
		printf("error: %s\n", r->err);
		return;
	}
	printf("status %d\n", r->status);
	if (want_hdr)
		printf("header %s: %s\n", want_hdr, r->hdr ? r->hdr : "(none)");
	fwrite(r->body, 1, r->body_len, stdout);
	if (r->body_len && r->body[r->body_len - 1] != '\n')
		printf("\n");
}

static void take(struct result *r, const struct http_client_resp *resp)
{
	const char *h = want_hdr ? http_client_resp_header(resp, want_hdr) : NULL;

	r->status = resp->status;
	r->hdr = h ? strdup(h) : NULL;
	r->body = malloc(resp->body.len + 1);
	memcpy(r->body, resp->body.data, resp->body.len);
	r->body_len = resp->body.len;
}

static void on_done(const struct http_client_resp *resp, const struct err *e, void *arg)
{
	struct result *r = arg;

	if (resp)
		take(r, resp);
	else
		str_copy(r->err, sizeof(r->err), e->msg);
	if (--pending == 0)
		ev_stop(loop);
}

int main(int argc, char **argv)
{
	struct http_client_req req = { 0 };
	const char *hdrs[MAX_HDRS + 1] = { 0 };
	size_t nh = 0, max = 0;
	const char *urls[MAX_URLS];
	int nurls = 0, async = 0, failed = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "-async") == 0) {
			async = 1;
		} else if (strcmp(a, "-X") == 0 && v) {
			req.method = v;
			i++;
		} else if (strcmp(a, "-H") == 0 && v && nh < MAX_HDRS) {
			hdrs[nh++] = v;
			i++;
		} else if (strcmp(a, "-d") == 0 && v) {
			req.body = v;
			req.body_len = strlen(v);
			i++;
		} else if (strcmp(a, "-t") == 0 && v) {
			str_to_int(v, &req.timeout_ms);
			i++;
		} else if (strcmp(a, "-max") == 0 && v) {
			uint64_t m;
			if (str_to_u64(v, &m) == 0)
				max = (size_t)m;
			i++;
		} else if (strcmp(a, "-hdr") == 0 && v) {
			want_hdr = v;
			i++;
		} else if (a[0] == '-' || nurls == MAX_URLS) {
			fprintf(stderr, "usage: http-client [-async] [-X M] [-H h] [-d body] [-t ms] [-max n] [-hdr name] URL...\n");
			return 2;
		} else {
			urls[nurls++] = a;
		}
	}
	req.headers = hdrs;
	if (!async) {
		struct http_client *c = http_client_new();
		for (int i = 0; i < nurls; i++) {
			struct http_client_resp resp = HTTP_CLIENT_RESP_INIT;
			struct err e;
			if (max)
				buf_init(&resp.body, max);
			req.url = urls[i];
			if (http_client_do(c, &req, &resp, &e) < 0)
				str_copy(results[i].err, sizeof(results[i].err), e.msg);
			else
				take(&results[i], &resp);
			http_client_resp_release(&resp);
			print_result(&results[i]);
			failed |= results[i].err[0] != 0;
		}
		printf("dials %zu\n", http_client_dials(c));
		http_client_free(c);
	} else {
		struct http_aclient *ac;
		loop = ev_new();
		ac = http_aclient_new(loop);
		for (int i = 0; i < nurls; i++) {
			struct err e;
			req.url = urls[i];
			if (!http_aclient_do(ac, &req, max, on_done, &results[i], &e))
				str_copy(results[i].err, sizeof(results[i].err), e.msg);
			else
				pending++;
		}
		if (pending)
			ev_run(loop);
		for (int i = 0; i < nurls; i++) {
			print_result(&results[i]);
			failed |= results[i].err[0] != 0;
		}
		printf("dials %zu\n", http_aclient_dials(ac));
		http_aclient_free(ac);
		ev_free(loop);
	}
	for (int i = 0; i < nurls; i++) {
		free(results[i].hdr);
		free(results[i].body);
	}
	return failed;
}
