/*
 * Unit tests: the blocking client over a Unix-domain socket (how denvd talks
 * to dockerd's Engine API). A forked child listens on a socket in a temp
 * directory and answers each request with a canned response; the parent
 * checks status, body, keep-alive reuse, a response read to EOF, and the
 * errors for a missing socket, a path too long and https.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/sys.h"
#include "http/http.h"
#include "tap.h"

/* Serve one connection: answer each request head (up to "\r\n\r\n") with
 * "HTTP/1.1 200" keep-alive responses naming the request line; a request for
 * /close gets an HTTP/1.0 answer whose body runs to EOF. */
static void serve_conn(int c)
{
	char in[8192];
	size_t len = 0;

	for (;;) {
		char *end;
		ssize_t n = read(c, in + len, sizeof(in) - 1 - len);

		if (n <= 0)
			return;
		len += (size_t)n;
		in[len] = '\0';
		while ((end = strstr(in, "\r\n\r\n"))) {
			char line[200], out[512];
			size_t head = (size_t)(end - in) + 4;
			int m;

			snprintf(line, sizeof(line), "%.*s", (int)strcspn(in, "\r"), in);
			if (strstr(line, " /close ")) {
				m = snprintf(out, sizeof(out), "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n"
					     "to-eof:%s", line);
				(void)sys_write_all(c, out, (size_t)m);
				return;
			}
			m = snprintf(out, sizeof(out), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n%s",
				     strlen(line), line);
			(void)sys_write_all(c, out, (size_t)m);
			memmove(in, in + head, len - head + 1);
			len -= head;
		}
	}
}

static pid_t serve(const char *path)
{
	struct sockaddr_un sa;
	int l = socket(AF_UNIX, SOCK_STREAM, 0);
	pid_t pid;

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa.sun_path))
		fprintf(stderr, "socket path too long: %s\n", path), exit(1);
	memcpy(sa.sun_path, path, strlen(path));
	if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(l, 8) < 0)
		fprintf(stderr, "cannot listen on %s: %s\n", path, strerror(errno)), exit(1);
	if ((pid = fork()) == 0) {
		for (;;) {
			int c = accept(l, NULL, NULL);

			if (c < 0)
				_exit(0);
			serve_conn(c);
			close(c);
		}
	}
	close(l);
	return pid;
}

static int get(struct http_client *c, const char *sock, const char *url, struct http_client_resp *r,
	       struct err *e)
{
	struct http_client_req req = { .url = url, .unix_socket = sock, .timeout_ms = 5000 };

	http_client_resp_release(r);
	*r = (struct http_client_resp)HTTP_CLIENT_RESP_INIT;
	return http_client_do(c, &req, r, e);
}

int main(void)
{
	const char *dir = tap_tmpdir();
	char sock[200], missing[200], longp[200];
	struct http_client *c = http_client_new();
	struct http_client_resp r = HTTP_CLIENT_RESP_INIT;
	struct err e;
	pid_t pid;
	int st;

	snprintf(sock, sizeof(sock), "%s/s.sock", dir);
	snprintf(missing, sizeof(missing), "%s/none.sock", dir);
	pid = serve(sock);

	ok(get(c, sock, "http://docker/v1.41/containers/x/json", &r, &e) == 0 && r.status == 200,
	   "GET over the Unix socket answers 200");
	is_str(r.body.data, "GET /v1.41/containers/x/json HTTP/1.1", "the body is the request line we sent");
	ok(get(c, sock, "http://docker/_ping", &r, &e) == 0 && r.status == 200 &&
	   strcmp(r.body.data, "GET /_ping HTTP/1.1") == 0, "a second request");
	is_int((long long)http_client_dials(c), 1, "the kept-alive connection was reused");
	ok(get(c, sock, "http://docker/close", &r, &e) == 0 && r.status == 200 &&
	   strcmp(r.body.data, "to-eof:GET /close HTTP/1.1") == 0, "a response whose body runs to EOF");
	ok(get(c, sock, "http://docker/again", &r, &e) == 0 && r.status == 200 &&
	   http_client_dials(c) == 2, "after the server closed, a new connection");

	ok(get(c, missing, "http://docker/_ping", &r, &e) < 0 && strstr(e.msg, "connect unix:") &&
	   strstr(e.msg, "No such file"), "a missing socket: %s", e.msg);
	memset(longp, 'a', sizeof(longp) - 1);
	longp[sizeof(longp) - 1] = '\0';
	ok(get(c, longp, "http://docker/_ping", &r, &e) < 0 && strstr(e.msg, "bad socket path"),
	   "a path too long for sun_path is refused: %s", e.msg);
	ok(get(c, sock, "https://docker/_ping", &r, &e) < 0 && strstr(e.msg, "https over a Unix socket"),
	   "https over a Unix socket is refused");
	{
		struct http_aclient *ac = http_aclient_new(NULL);
		struct http_client_req req = { .url = "http://docker/_ping", .unix_socket = sock };

		ok(http_aclient_do(ac, &req, 0, NULL, NULL, &e) == NULL && strstr(e.msg, "Unix sockets"),
		   "the async client refuses a Unix socket");
		http_aclient_free(ac);
	}

	http_client_resp_release(&r);
	http_client_free(c);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return tap_done();
}
