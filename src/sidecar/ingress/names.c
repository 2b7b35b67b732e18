/* names.c: "denvd __names --data DIR --domain D --listen HOST:PORT
 * [--ca-cert F --ca-key F] [--cert-days N]", the name gateway (sidecar.h,
 * "ingress names"). One process for the host, started by denvd
 * (names_ctl.c) when --ingress-domain is set.
 *
 * In the launching process: make sure the certificate is there and not due
 * (names_tls.c), load it, bind the listener (a taken address exits
 * IG_EXIT_BIND), then fork: the parent writes names.pid and exits 0; the
 * child leads its own session and logs to names.log. The child accepts;
 * each connection gets a thread that finishes the TLS handshake, reads the
 * server name the client asked for, finds its address (names_route.c),
 * connects to it on 127.0.0.1 and relays both ways until both sides are
 * done or NM_IDLE_MS pass with nothing. A name that leads nowhere gets a
 * short HTTP answer saying why. Before each accept past the certificate's
 * renewal time the certificate is issued again and new connections get it;
 * those already open keep theirs. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "base/fs.h"
#include "base/log.h"
#include "base/str.h"
#include "base/sys.h"
#include "sidecar/sidecar.h"
#include "spec/spec.h"

struct gateway {
	const char *data;
	struct nt_config tls;
	SSL_CTX *ctx;			/* what new connections get */
	int64_t renew_at;		/* epoch s: issue again from then on */
	pthread_mutex_t mu;
	pthread_cond_t room;
	int conns;			/* open now, at most NM_MAX_CONNS */
};

struct conn {
	struct gateway *g;
	SSL *ssl;
	int cfd;
};

static void set_timeouts(int fd, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* A short HTTP answer for a name that leads nowhere, then close_notify.
 * The request is read first (one record, bounded by the handshake's
 * timeout): closing on unread bytes would reset the connection under the
 * answer. */
static void answer(SSL *ssl, int status, const char *why)
{
	char msg[NM_WHY_MAX + 256], request[NM_RELAY_CHUNK];
	const char *reason = status == 404 ? "Not Found" : status == 421 ? "Misdirected Request"
			   : status == 409 ? "Conflict" : status == 503 ? "Service Unavailable" : "Bad Gateway";
	int body = (int)strlen(why) + 1;
	int n;

	(void)SSL_read(ssl, request, sizeof(request));
	n = snprintf(msg, sizeof(msg),
			 "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s\n",
			 status, reason, body, why);

	if (n > 0)
		SSL_write(ssl, msg, n < (int)sizeof(msg) ? n : (int)sizeof(msg) - 1);
	SSL_shutdown(ssl);
}

static int dial(int port)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	set_timeouts(fd, IG_CONNECT_MS);	/* bounds connect(2) too */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		sys_close(fd);
		return -1;
	}
	set_timeouts(fd, 0);
	return fd;
}

static bool write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

/* Client (TLS) <-> upstream (plain) until both have ended or NM_IDLE_MS of
 * quiet. An end on one side is passed on: the client's as shutdown(SHUT_WR)
 * upstream, the upstream's as close_notify. */
static void relay(SSL *ssl, int cfd, int ufd)
{
	char buf[NM_RELAY_CHUNK];
	bool client_done = false, up_done = false;

	set_timeouts(cfd, 0);
	while (!client_done || !up_done) {
		/* A side that is done is left out (-1): its hang-up would wake poll at once. */
		struct pollfd p[2] = { { client_done ? -1 : cfd, POLLIN, 0 }, { up_done ? -1 : ufd, POLLIN, 0 } };

		if (!(!client_done && SSL_pending(ssl) > 0)) {
			int n = poll(p, 2, NM_IDLE_MS);

			if (n == 0 || (n < 0 && errno != EINTR))
				return;
			if (n < 0)
				continue;
		} else {
			p[0].revents = POLLIN;
		}
		if (!client_done && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
			int n = SSL_read(ssl, buf, sizeof(buf));

			if (n > 0 && !write_all(ufd, buf, (size_t)n))
				return;
			if (n <= 0 && SSL_get_error(ssl, n) != SSL_ERROR_WANT_READ) {
				client_done = true;
				shutdown(ufd, SHUT_WR);
			}
		}
		if (!up_done && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
			ssize_t n = read(ufd, buf, sizeof(buf));

			if (n > 0 && SSL_write(ssl, buf, (int)n) <= 0)
				return;
			if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
				up_done = true;
				SSL_shutdown(ssl);
			}
		}
	}
}

static void *serve(void *arg)
{
	struct conn *c = arg;
	struct gateway *g = c->g;
	struct nm_route r;
	int ufd;

	set_timeouts(c->cfd, NM_HANDSHAKE_MS);
	if (SSL_accept(c->ssl) != 1) {
		log_debug("names", "TLS handshake failed");
	} else if (nm_route(g->data, g->tls.domain, SSL_get_servername(c->ssl, TLSEXT_NAMETYPE_host_name), &r) < 0) {
		log_info("names", "%s: %d %s", SSL_get_servername(c->ssl, TLSEXT_NAMETYPE_host_name) ?: "(no name)",
			 r.status, r.why);
		answer(c->ssl, r.status, r.why);
	} else if ((ufd = dial(r.port)) < 0) {
		char why[NM_WHY_MAX];

		snprintf(why, sizeof(why), "service %s of %s does not answer on 127.0.0.1:%d (%s)", r.service, r.env,
			 r.port, strerror(errno));
		answer(c->ssl, 502, why);
	} else {
		relay(c->ssl, c->cfd, ufd);
		sys_close(ufd);
	}
	SSL_free(c->ssl);
	sys_close(c->cfd);
	free(c);
	pthread_mutex_lock(&g->mu);
	g->conns--;
	pthread_cond_signal(&g->room);
	pthread_mutex_unlock(&g->mu);
	return NULL;
}

/* The certificate again when it is due; the context new connections get. */
static int refresh(struct gateway *g, bool force, struct err *e)
{
	struct nt_state st;
	SSL_CTX *ctx;

	if (!force && (int64_t)time(NULL) < g->renew_at)
		return 0;
	if (nt_ensure(&g->tls, (int64_t)time(NULL), &st, e) < 0 || !(ctx = nt_server_context(g->tls.dir, e)))
		return -1;
	/* Without auto-retry a record that carries no data returns WANT_READ,
	 * and the relay goes back to poll instead of blocking in SSL_read. */
	SSL_CTX_clear_mode(ctx, SSL_MODE_AUTO_RETRY);
	if (g->ctx)
		SSL_CTX_free(g->ctx);	/* open connections hold their own reference */
	g->ctx = ctx;
	g->renew_at = st.not_after - (int64_t)g->tls.days * 86400 / NT_RENEW_PARTS;
	if (st.issued || force)
		log_info("names", "certificate for *.%s %s, valid until %lld (renewed from %lld)", g->tls.domain,
			 st.issued ? "issued" : "loaded", (long long)st.not_after, (long long)g->renew_at);
	return 0;
}

/* Whether names.pid still names this process: a gateway started after it,
 * or a data dir removed, ends it. */
static bool still_ours(const char *pidfile)
{
	return ig_read_pid(pidfile) == (int)getpid();
}

static void accept_loop(struct gateway *g, int lfd, const char *pidfile)
{
	for (;;) {
		struct pollfd p = { lfd, POLLIN, 0 };
		struct conn *c;
		pthread_t th;
		struct err e;
		int cfd;

		if (poll(&p, 1, NM_WATCH_MS) == 0) {
			if (!still_ours(pidfile)) {
				log_info("names", "%s no longer names this gateway: stopping", pidfile);
				return;
			}
			continue;
		}
		cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

		if (cfd < 0) {
			if (errno != EINTR && errno != ECONNABORTED)
				usleep(100 * 1000);	/* EMFILE and the like: let connections end */
			continue;
		}
		if (refresh(g, false, &e) < 0)
			log_info("names", "renewing the certificate: %s (serving the one there is)", e.msg);
		pthread_mutex_lock(&g->mu);
		while (g->conns >= NM_MAX_CONNS)
			pthread_cond_wait(&g->room, &g->mu);
		g->conns++;
		pthread_mutex_unlock(&g->mu);
		c = xcalloc(1, sizeof(*c));
		c->g = g;
		c->cfd = cfd;
		c->ssl = SSL_new(g->ctx);
		if (!c->ssl || !SSL_set_fd(c->ssl, cfd) || pthread_create(&th, NULL, serve, c) != 0) {
			SSL_free(c->ssl);
			sys_close(cfd);
			free(c);
			pthread_mutex_lock(&g->mu);
			g->conns--;
			pthread_mutex_unlock(&g->mu);
			continue;
		}
		pthread_detach(th);
	}
}

struct names_args {
	const char *data, *listen;
	struct nt_config tls;
};

static int parse_args(int argc, char **argv, struct names_args *a)
{
	memset(a, 0, sizeof(*a));
	a->tls.days = NT_DAYS_DEFAULT;
	for (int i = 2; i < argc; i++) {
		const char *flag = argv[i], *v;

		if (str_eq(flag, "-v")) {
			log_set_level(LOG_DEBUG);
			continue;
		}
		if (i + 1 >= argc)
			return -1;
		v = argv[++i];
		if (str_eq(flag, "--data"))
			a->data = v;
		else if (str_eq(flag, "--domain"))
			a->tls.domain = v;
		else if (str_eq(flag, "--listen"))
			a->listen = v;
		else if (str_eq(flag, "--ca-cert"))
			a->tls.ca_cert = v;
		else if (str_eq(flag, "--ca-key"))
			a->tls.ca_key = v;
		else if (!str_eq(flag, "--cert-days") || str_to_int(v, &a->tls.days) < 0)
			return -1;
	}
	return a->data && a->listen && spec_ingress_domain_ok(a->tls.domain) && !a->tls.ca_cert == !a->tls.ca_key &&
			       a->tls.days >= 1 && a->tls.days <= NT_DAYS_MAX
		       ? 0
		       : -1;
}

/* The listener on HOST:PORT (IPv4): the fd, -IG_EXIT_BIND when the address
 * is taken, -1 otherwise (a message on stderr either way). */
static int listen_on(const char *addr)
{
	struct sockaddr_in sa;
	char host[64];
	int fd, port, one = 1;

	if (nm_listen_parse(addr, host, sizeof(host), &port) < 0) {
		fprintf(stderr, "denvd __names: --listen %s is not HOST:PORT\n", addr);
		return -1;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		fprintf(stderr, "denvd __names: --listen %s: %s is not an IPv4 address\n", addr, host);
		return -1;
	}
	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, NM_BACKLOG) < 0) {
		int taken = errno == EADDRINUSE;

		fprintf(stderr, "denvd __names: listen on %s: %s\n", addr, strerror(errno));
		sys_close(fd);
		return taken ? -IG_EXIT_BIND : -1;
	}
	return fd;
}

int names_main(int argc, char **argv)
{
	char dir[FS_PATH_MAX], pidfile[FS_PATH_MAX], logpath[FS_PATH_MAX];
	struct names_args a;
	struct gateway g;
	struct err e;
	int lfd, rc;

	signal(SIGPIPE, SIG_IGN);
	if (parse_args(argc, argv, &a) < 0) {
		fprintf(stderr, "denvd __names: bad arguments (this verb is for denvd itself)\n");
		return 2;
	}
	if (nm_files_dir(a.data, dir, &e) < 0 || fs_path(pidfile, sizeof(pidfile), &e, "%s/names.pid", dir) < 0 ||
	    fs_path(logpath, sizeof(logpath), &e, "%s/names.log", dir) < 0) {
		fprintf(stderr, "denvd __names: %s\n", e.msg);
		return 1;
	}
	memset(&g, 0, sizeof(g));
	g.data = a.data;
	g.tls = a.tls;
	g.tls.dir = dir;
	pthread_mutex_init(&g.mu, NULL);
	pthread_cond_init(&g.room, NULL);
	if (refresh(&g, true, &e) < 0) {
		fprintf(stderr, "denvd __names: certificate: %s\n", e.msg);
		return 1;
	}
	if ((lfd = listen_on(a.listen)) < 0)
		return lfd == -IG_EXIT_BIND ? IG_EXIT_BIND : 1;
	if (ig_daemonize("denvd __names", pidfile, logpath, &rc) != 0)
		return rc;
	log_info("names", "serving https://<service>--<env>.%s on %s (certificate in %s)", a.tls.domain, a.listen, dir);
	accept_loop(&g, lfd, pidfile);
	return 0;
}
