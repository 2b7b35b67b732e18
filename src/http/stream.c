/* stream.c: see stream.h. */
#include "http/stream.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "base/buf.h"
#include "base/ev.h"
#include "base/str.h"
#include "base/sys.h"

/* Default when a caller passes no dial timeout. */
#define STREAM_DIAL_TIMEOUT_DEFAULT_MS 30000

struct stream {
	int fd;
	SSL *ssl;		/* NULL: plain */
	int want;		/* EV_READ / EV_WRITE after the last EAGAIN */
	bool handshaken;
	char peer[STREAM_MAX_HOST + 8];	/* "host:port" or host, for messages */
};

struct stream_tls_server {
	SSL_CTX *ctx;
};

/* The most specific message OpenSSL has queued, then clear its queue (it is
 * per thread, and a stale entry would confuse the next caller). */
static void tls_reason(char *out, size_t n, SSL *ssl)
{
	unsigned long code = ERR_peek_last_error();
	long vr = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;

	if (vr != X509_V_OK)
		snprintf(out, n, "certificate verify failed (%s)", X509_verify_cert_error_string(vr));
	else if (code)
		snprintf(out, n, "%s", ERR_reason_error_string(code) ? ERR_reason_error_string(code) : "TLS error");
	else
		snprintf(out, n, "%s", errno ? strerror(errno) : "connection closed during TLS");
	ERR_clear_error();
}

static struct stream *stream_alloc(int fd)
{
	struct stream *s = xcalloc(1, sizeof(*s));

	s->fd = fd;
	s->want = EV_READ;
	sys_set_nonblock(fd, 1);
	sys_set_cloexec(fd);
	return s;
}

struct stream *stream_new_plain(int fd)
{
	struct stream *s = stream_alloc(fd);

	s->handshaken = true;
	return s;
}

int stream_fd(const struct stream *s)
{
	return s->fd;
}

bool stream_is_tls(const struct stream *s)
{
	return s->ssl != NULL;
}

int stream_wants(const struct stream *s)
{
	return s->want;
}

size_t stream_pending(const struct stream *s)
{
	int n = s->ssl ? SSL_pending(s->ssl) : 0;

	return n > 0 ? (size_t)n : 0;
}

/* Map an SSL_ERROR_* after a failed call to our errno rule; returns -1 or 0 (EOF). */
static ssize_t tls_fail(struct stream *s, int ret)
{
	int err = SSL_get_error(s->ssl, ret);

	switch (err) {
	case SSL_ERROR_WANT_READ:
		s->want = EV_READ;
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_WANT_WRITE:
		s->want = EV_WRITE;
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	case SSL_ERROR_SYSCALL:
		ERR_clear_error();
		if (errno == 0)
			return 0;
		return -1;
	default:
		ERR_clear_error();
		errno = EPROTO;
		return -1;
	}
}

/* One SSL_read (into rbuf) or SSL_write (from wbuf) of at most INT32_MAX
 * bytes: how many moved, or tls_fail's verdict. */
static ssize_t tls_io(struct stream *s, void *rbuf, const void *wbuf, size_t n)
{
	int r;

	if (n == 0)
		return 0;
	if (n > INT32_MAX)
		n = INT32_MAX;
	errno = 0;
	r = rbuf ? SSL_read(s->ssl, rbuf, (int)n) : SSL_write(s->ssl, wbuf, (int)n);
	return r > 0 ? r : tls_fail(s, r);
}

ssize_t stream_read(struct stream *s, void *buf, size_t n)
{
	if (!s->ssl) {
		ssize_t r = sys_read(s->fd, buf, n);
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			errno = EAGAIN;
			s->want = EV_READ;
		}
		return r;
	}
	return tls_io(s, buf, NULL, n);
}

ssize_t stream_write(struct stream *s, const void *buf, size_t n)
{
	if (!s->ssl) {
		ssize_t w;
		do
			w = send(s->fd, buf, n, MSG_NOSIGNAL);
		while (w < 0 && errno == EINTR);
		if (w < 0 && errno == ENOTSOCK)
			do
				w = write(s->fd, buf, n);
			while (w < 0 && errno == EINTR);
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			errno = EAGAIN;
			s->want = EV_WRITE;
		}
		return w;
	}
	ssize_t f = tls_io(s, NULL, buf, n);
	if (f == 0 && n > 0) {		/* peer closed while we write: that is a broken pipe */
		errno = EPIPE;
		return -1;
	}
	return f;
}

void stream_free(struct stream *s)
{
	if (!s)
		return;
	if (s->ssl) {
		/* One non-blocking attempt at close_notify; the peer may be gone. */
		if (s->handshaken)
			SSL_shutdown(s->ssl);
		SSL_free(s->ssl);
		ERR_clear_error();
	}
	sys_close(s->fd);
	free(s);
}

/* ---- TLS contexts ---- */

static void tls_ctx_common(SSL_CTX *ctx)
{
	/* OpenSSL writes to the socket with write(2), not send(MSG_NOSIGNAL):
	 * a peer that closed would kill a CLI with SIGPIPE. The event loop
	 * ignores it already (ev_new); do the same for blocking users. */
	signal(SIGPIPE, SIG_IGN);
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	/* Partial writes and a moving write buffer: our output buffers grow
	 * and compact between retries of the same bytes. */
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
			      SSL_MODE_RELEASE_BUFFERS);
	/* Many peers (python's http.server, curl after a response) close
	 * without close_notify; HTTP frames its messages itself, so treat a bare
	 * TCP close as end of stream rather than an error. */
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
	SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
}

int stream_tls_server_new(const char *cert_file, const char *key_file,
			  struct stream_tls_server **out, struct err *e)
{
	char why[256];
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

	if (!ctx) {
		tls_reason(why, sizeof(why), NULL);
		return err_set(e, "tls: cannot create context: %s", why);
	}
	tls_ctx_common(ctx);
	if (SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1) {
		tls_reason(why, sizeof(why), NULL);
		SSL_CTX_free(ctx);
		return err_set(e, "tls: certificate %s: %s", cert_file, why);
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, key_file, SSL_FILETYPE_PEM) != 1) {
		tls_reason(why, sizeof(why), NULL);
		SSL_CTX_free(ctx);
		return err_set(e, "tls: key %s: %s", key_file, why);
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		ERR_clear_error();
		SSL_CTX_free(ctx);
		return err_set(e, "tls: key %s does not match certificate %s", key_file, cert_file);
	}
	*out = xcalloc(1, sizeof(**out));
	(*out)->ctx = ctx;
	return 0;
}

void stream_tls_server_free(struct stream_tls_server *t)
{
	if (!t)
		return;
	SSL_CTX_free(t->ctx);
	free(t);
}

struct stream *stream_new_tls_accept(int fd, struct stream_tls_server *t, struct err *e)
{
	struct stream *s;
	SSL *ssl = SSL_new(t->ctx);

	if (!ssl || SSL_set_fd(ssl, fd) != 1) {
		ERR_clear_error();
		SSL_free(ssl);
		err_set(e, "tls: cannot create session");
		return NULL;
	}
	SSL_set_accept_state(ssl);
	s = stream_alloc(fd);
	s->ssl = ssl;
	return s;
}

static bool is_ip_literal(const char *host)
{
	unsigned char tmp[sizeof(struct in6_addr)];

	return inet_pton(AF_INET, host, tmp) == 1 || inet_pton(AF_INET6, host, tmp) == 1;
}

struct stream *stream_new_tls_connect(int fd, const char *host, struct err *e)
{
	char why[256];
	const char *ca = getenv("DENV_CA_FILE");
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL *ssl = NULL;
	struct stream *s;

	if (!ctx) {
		tls_reason(why, sizeof(why), NULL);
		err_set(e, "tls: cannot create context: %s", why);
		return NULL;
	}
	tls_ctx_common(ctx);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (SSL_CTX_set_default_verify_paths(ctx) != 1)
		ERR_clear_error();	/* no system store: only DENV_CA_FILE can vouch */
	if (ca && *ca && SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1) {
		tls_reason(why, sizeof(why), NULL);
		SSL_CTX_free(ctx);
		err_set(e, "tls: DENV_CA_FILE %s: %s", ca, why);
		return NULL;
	}
	ssl = SSL_new(ctx);
	SSL_CTX_free(ctx);	/* the session holds its own reference */
	if (!ssl || SSL_set_fd(ssl, fd) != 1)
		goto fail;
	if (is_ip_literal(host)) {
		if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) != 1)
			goto fail;
	} else {
		if (SSL_set_tlsext_host_name(ssl, host) != 1 || SSL_set1_host(ssl, host) != 1)
			goto fail;
	}
	SSL_set_connect_state(ssl);
	s = stream_alloc(fd);
	s->ssl = ssl;
	str_copy(s->peer, sizeof(s->peer), host);
	return s;
fail:
	ERR_clear_error();
	SSL_free(ssl);
	err_set(e, "tls: cannot set up a session for %s", host);
	return NULL;
}

int stream_handshake(struct stream *s, struct err *e)
{
	char why[256];
	int r;

	if (s->handshaken)
		return 1;
	errno = 0;
	r = SSL_do_handshake(s->ssl);
	if (r == 1) {
		s->handshaken = true;
		return 1;
	}
	switch (SSL_get_error(s->ssl, r)) {
	case SSL_ERROR_WANT_READ:
		s->want = EV_READ;
		return 0;
	case SSL_ERROR_WANT_WRITE:
		s->want = EV_WRITE;
		return 0;
	default:
		tls_reason(why, sizeof(why), s->ssl);
		return err_set(e, "tls handshake: %s", why);
	}
}

/* ---- connecting ---- */

/* Strip [] from an IPv6 literal into buf. */
static const char *bare_host(const char *host, char *buf, size_t n)
{
	size_t len = strlen(host);

	if (len >= 2 && host[0] == '[' && host[len - 1] == ']' && len - 2 < n) {
		memcpy(buf, host + 1, len - 2);
		buf[len - 2] = '\0';
		return buf;
	}
	return host;
}

static int resolve(const char *host, int port, struct addrinfo **res, struct err *e)
{
	struct addrinfo hints;
	char portstr[16];
	int r;

	if (strlen(host) > STREAM_MAX_HOST)
		return err_set(e, "connect: host name too long");
	if (port <= 0 || port > 65535)
		return err_set(e, "connect %s:%d: invalid port", host, port);
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_ADDRCONFIG;
	if (is_ip_literal(host))
		hints.ai_flags = AI_NUMERICHOST;
	snprintf(portstr, sizeof(portstr), "%d", port);
	r = getaddrinfo(host, portstr, &hints, res);
	if (r != 0)
		return err_set(e, "connect %s:%d: cannot resolve host: %s", host, port,
			       r == EAI_SYSTEM ? strerror(errno) : gai_strerror(r));
	return 0;
}

static int open_socket(const struct addrinfo *ai)
{
	int one = 1;
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);

	if (fd >= 0)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

int stream_connect_addr(const struct addrinfo *ai, const char *host, int port, struct err *e)
{
	int fd = open_socket(ai);

	if (fd < 0)
		return err_errno(e, "connect %s:%d: socket", host, port);
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
		err_errno(e, "connect %s:%d", host, port);
		sys_close(fd);
		return -1;
	}
	return fd;
}

int stream_connect_start(const char *host, int port, struct err *e)
{
	char hb[STREAM_MAX_HOST + 1];
	struct addrinfo *res;
	int fd;

	host = bare_host(host, hb, sizeof(hb));
	if (resolve(host, port, &res, e) < 0)
		return -1;
	fd = stream_connect_addr(res, host, port, e);
	freeaddrinfo(res);
	return fd;
}

int stream_connect_finish(int fd, const char *host, int port, struct err *e)
{
	int soerr = 0;
	socklen_t len = sizeof(soerr);

	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
		return err_errno(e, "connect %s:%d", host, port);
	if (soerr) {
		errno = soerr;
		return err_errno(e, "connect %s:%d", host, port);
	}
	return 0;
}


int stream_dial_unix(const char *path, int timeout_ms, struct stream **out, struct err *e)
{
	struct sockaddr_un sa;
	int fd;

	*out = NULL;
	if (timeout_ms <= 0)
		timeout_ms = STREAM_DIAL_TIMEOUT_DEFAULT_MS;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if (!path || !*path || strlen(path) >= sizeof(sa.sun_path))
		return err_set(e, "connect unix:%s: bad socket path", path ? path : "");
	memcpy(sa.sun_path, path, strlen(path));
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0)
		return err_errno(e, "connect unix:%s: socket", path);
	/* A Unix socket connects at once or fails at once, except when the
	 * listener's backlog is full (EAGAIN): then retry until the deadline. */
	{
		int64_t deadline = ev_mono_ms() + timeout_ms;
		int rc;

		while ((rc = connect(fd, (const struct sockaddr *)&sa, sizeof(sa))) < 0 && errno == EAGAIN &&
		       ev_mono_ms() < deadline)
			ev_wait_fd(-1, 0, ev_mono_ms() + 1);
		if (rc < 0) {
			if (errno == EAGAIN)
				err_set(e, "connect unix:%s: timeout after %d ms", path, timeout_ms);
			else
				err_errno(e, "connect unix:%s", path);
			sys_close(fd);
			return -1;
		}
	}
	*out = stream_new_plain(fd);
	return 0;
}

int stream_dial(const char *host, int port, bool tls, int timeout_ms, struct stream **out, struct err *e)
{
	char hb[STREAM_MAX_HOST + 1];
	struct addrinfo *res, *ai;
	int64_t deadline;
	int fd = -1;
	struct stream *s;

	*out = NULL;
	if (timeout_ms <= 0)
		timeout_ms = STREAM_DIAL_TIMEOUT_DEFAULT_MS;
	deadline = ev_mono_ms() + timeout_ms;
	host = bare_host(host, hb, sizeof(hb));
	if (resolve(host, port, &res, e) < 0)
		return -1;
	/* Try each address in turn (localhost may be ::1 then 127.0.0.1). */
	for (ai = res; ai; ai = ai->ai_next) {
		fd = open_socket(ai);
		if (fd < 0) {
			err_errno(e, "connect %s:%d: socket", host, port);
			continue;
		}
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		if (errno != EINPROGRESS) {
			err_errno(e, "connect %s:%d", host, port);
			sys_close(fd);
			fd = -1;
			continue;
		}
		if (!ev_wait_fd(fd, EV_WRITE, deadline)) {
			err_set(e, "connect %s:%d: timeout after %d ms", host, port, timeout_ms);
			sys_close(fd);
			fd = -1;
			break;
		}
		if (stream_connect_finish(fd, host, port, e) == 0)
			break;
		sys_close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return -1;
	if (!tls) {
		*out = stream_new_plain(fd);
		return 0;
	}
	s = stream_new_tls_connect(fd, host, e);
	if (!s) {
		sys_close(fd);
		return -1;
	}
	for (;;) {
		int r = stream_handshake(s, e);
		if (r == 1)
			break;
		if (r < 0) {
			char why[ERR_MSG_MAX];
			const char *m = e->msg;
			if (str_has_prefix(m, "tls handshake: "))
				m += strlen("tls handshake: ");
			str_copy(why, sizeof(why), m);
			stream_free(s);
			return err_set(e, "tls handshake with %s:%d: %s", host, port, why);
		}
		if (!ev_wait_fd(s->fd, s->want, deadline)) {
			stream_free(s);
			return err_set(e, "tls handshake with %s:%d: timeout after %d ms", host, port, timeout_ms);
		}
	}
	*out = s;
	return 0;
}
