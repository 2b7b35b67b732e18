/*
 * Unit tests: engine_build.c, POST /build on the Engine API, against a fake
 * dockerd on a Unix socket in the test's temp dir (a forked child that
 * answers one connection per case). Checked: the request line carries the
 * tags, dockerfile, target, build args and labels percent-encoded, and the
 * classic builder; the body is the archive byte for byte; the chunked
 * answer's stream lines reach the sink in order (split across chunks); an
 * error message with errorDetail.code is a failed build with that code; an
 * answer that is not 200 is an error naming the status; no socket means
 * "use the CLI" (0).
 */
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/str.h"
#include "base/sys.h"
#include "sidecar/sidecar.h"
#include "tap.h"

#define FAKE_MAX (1 << 20)

struct lines {
	struct buf all;
};

static void sink(void *arg, const char *p, size_t n)
{
	buf_add(&((struct lines *)arg)->all, p, n);
}

/* Read the whole request (head + Content-Length body) into req, answer with reply. */
static void serve_one(int lfd, const char *reply, const char *reqfile)
{
	int c = accept(lfd, NULL, NULL), out;
	char *req = malloc(FAKE_MAX);
	size_t len = 0;
	long want = -1;

	while (c >= 0 && len < FAKE_MAX) {
		ssize_t n = read(c, req + len, FAKE_MAX - len);
		char *end, *cl;

		if (n <= 0)
			break;
		len += (size_t)n;
		if (want < 0 && (end = memmem(req, len, "\r\n\r\n", 4))) {
			cl = memmem(req, (size_t)(end - req), "Content-Length: ", 16);
			want = (long)(end + 4 - req) + (cl ? strtol(cl + 16, NULL, 10) : 0);
		}
		if (want >= 0 && (long)len >= want)
			break;
	}
	if ((out = open(reqfile, O_WRONLY | O_CREAT | O_TRUNC, 0600)) >= 0) {
		(void)!write(out, req, len);
		close(out);
	}
	if (c >= 0) {
		(void)!write(c, reply, strlen(reply));
		close(c);
	}
	free(req);
}

static pid_t fake(const char *sock, const char *reply, const char *reqfile)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	pid_t pid;

	unlink(sock);
	if (strlen(sock) >= sizeof(a.sun_path))
		return -1;
	memcpy(a.sun_path, sock, strlen(sock) + 1);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lfd, 4) < 0)
		return -1;
	if ((pid = fork()) == 0) {
		serve_one(lfd, reply, reqfile);
		_exit(0);
	}
	close(lfd);
	return pid;
}

/* An HTTP 200 head and a chunked body of the NULL-terminated parts (one chunk each). */
static char *chunked(const char *first, ...)
{
	struct buf b = BUF_INIT;
	va_list ap;

	buf_adds(&b, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
	va_start(ap, first);
	for (const char *p = first; p; p = va_arg(ap, const char *))
		buf_addf(&b, "%zx\r\n%s\r\n", strlen(p), p);
	va_end(ap);
	buf_adds(&b, "0\r\n\r\n");
	return buf_detach(&b, NULL);
}

static char *slurp(const char *path)
{
	struct buf b = BUF_INIT;
	char tmp[4096];
	int fd = open(path, O_RDONLY);
	ssize_t n;

	buf_init(&b, FAKE_MAX * 2);
	while (fd >= 0 && (n = read(fd, tmp, sizeof(tmp))) > 0)
		buf_add(&b, tmp, (size_t)n);
	if (fd >= 0)
		close(fd);
	buf_addch(&b, '\0');
	return buf_detach(&b, NULL);
}

/* One build against the fake answering reply; rc, out, lines, and the request seen. */
static int run(const char *dir, const char *reply, const struct json *args, struct engine_build_result *out,
	       struct lines *l, char **seen)
{
	char sock[600], reqfile[600], ctx[600], env[700];
	static const char archive[] = "ARCHIVE-BYTES\0with a NUL and more";
	struct engine_build r = { { "denv-build/app:0123456789ab", "my/app:1" }, "sub/Dockerfile", "final", args,
				  "denv-build/app:0123456789ab", "/var/lib/denv", -1, sizeof(archive), sink, l };
	struct err e;
	pid_t pid;
	int fd, rc, st;

	snprintf(sock, sizeof(sock), "%s/docker.sock", dir);
	snprintf(reqfile, sizeof(reqfile), "%s/request", dir);
	snprintf(ctx, sizeof(ctx), "%s/ctx.tar", dir);
	fd = open(ctx, O_RDWR | O_CREAT | O_TRUNC, 0600);
	(void)!write(fd, archive, sizeof(archive));
	lseek(fd, 0, SEEK_SET);
	r.fd = fd;
	snprintf(env, sizeof(env), "unix://%s", sock);
	setenv("DOCKER_HOST", env, 1);
	pid = fake(sock, reply, reqfile);
	err_clear(&e);
	rc = engine_build(&r, out, &e);
	if (rc < 0)
		tap_diag("engine_build: %s", e.msg);
	waitpid(pid, &st, 0);
	close(fd);
	*seen = slurp(reqfile);
	if (rc < 0)
		str_copy(out->error, sizeof(out->error), e.msg);
	return rc;
}

int main(void)
{
	const char *dir = tap_tmpdir();
	struct engine_build_result out;
	struct lines l;
	struct json *args = json_new_object();
	char *seen = NULL, *reply;
	int rc;

	signal(SIGPIPE, SIG_IGN);
	json_object_set_str(args, "GREETING", "hello world&x=1");

	/* ---- a build that succeeds, its output in chunks split mid-line ---- */
	buf_init(&l.all, 0);
	reply = chunked("{\"stream\":\"Step 1/3 : FR", "OM busybox\\n\"}\n{\"stream\":\" ---\\u003e abc\\n\"}\n",
			"{\"aux\":{\"ID\":\"sha256:feedface\"}}\n{\"stream\":\"ok\"}", NULL);
	rc = run(dir, reply, args, &out, &l, &seen);
	free(reply);
	is_int(rc, 1, "a build the daemon answered: 1");
	ok(!out.failed, "not failed");
	is_str(out.id, "sha256:feedface", "aux.ID is the image built");
	buf_addch(&l.all, '\0');
	is_str(l.all.data, "Step 1/3 : FROM busybox\n ---> abc\nok", "stream lines reach the sink whole, in order");
	ok(strstr(seen, "POST /build?version=1&rm=1&forcerm=1&t=denv-build%2Fapp%3A0123456789ab&t=my%2Fapp%3A1"
			"&dockerfile=sub%2FDockerfile&target=final&buildargs=") != NULL,
	   "the request line: classic builder, both tags, dockerfile, target, encoded");
	ok(strstr(seen, "GREETING") && strstr(seen, "hello%20world%26x%3D1"), "build args are JSON, percent-encoded");
	ok(strstr(seen, "ai.denv.build") && strstr(seen, "ai.denv.data") && strstr(seen, "%2Fvar%2Flib%2Fdenv"),
	   "labels: ai.denv.build and ai.denv.data");
	ok(strstr(seen, "Content-Type: application/x-tar\r\nContent-Length: 34\r\n") != NULL, "the body's type and length");
	{
		char *body = strstr(seen, "\r\n\r\n");

		ok(body && memcmp(body + 4, "ARCHIVE-BYTES\0with a NUL and more", 34) == 0, "the body is the archive");
	}
	free(seen);
	buf_release(&l.all);

	/* ---- a failing step: the error and its code ---- */
	buf_init(&l.all, 0);
	reply = chunked("{\"stream\":\"Step 2/3 : RUN false\\n\"}\n",
			"{\"errorDetail\":{\"code\":3,\"message\":\"returned 3\"},\"error\":\"returned a non-zero code: 3\"}\n",
			NULL);
	rc = run(dir, reply, NULL, &out, &l, &seen);
	free(reply);
	is_int(rc, 1, "a failed build is an answer too: 1");
	ok(out.failed && out.code == 3, "failed, with errorDetail.code 3");
	is_str(out.error, "returned a non-zero code: 3", "the daemon's error");
	buf_addch(&l.all, '\0');
	ok(strstr(l.all.data, "Step 2/3 : RUN false\nreturned a non-zero code: 3\n") != NULL,
	   "the error is the log's last line (the tail quoted to the user)");
	ok(strstr(seen, "buildargs") == NULL, "no args: no buildargs");
	free(seen);
	buf_release(&l.all);

	/* ---- refused: not 200, a body without chunks ---- */
	buf_init(&l.all, 0);
	rc = run(dir,
		 "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: 38\r\n\r\n"
		 "{\"message\":\"Cannot locate Dockerfile\"}",
		 NULL, &out, &l, &seen);
	is_int(rc, -1, "HTTP 500: -1");
	ok(strstr(out.error, "HTTP 500") && strstr(out.error, "Cannot locate Dockerfile"),
	   "the error names the status and quotes the body (%s)", out.error);
	free(seen);
	buf_release(&l.all);

	/* ---- no socket: the CLI's turn ---- */
	{
		char env[700];
		struct engine_build r = { { "t:1", NULL }, "Dockerfile", NULL, NULL, "t:1", NULL, -1, 0, NULL, NULL };
		struct err e;

		snprintf(env, sizeof(env), "unix://%s/nothing.sock", dir);
		setenv("DOCKER_HOST", env, 1);
		is_int(engine_build(&r, &out, &e), 0, "no daemon on the socket: 0 (use the CLI)");
		setenv("DOCKER_HOST", "tcp://127.0.0.1:2375", 1);
		is_int(engine_build(&r, &out, &e), 0, "DOCKER_HOST not a Unix socket: 0");
	}
	json_free(args);
	return tap_done();
}
