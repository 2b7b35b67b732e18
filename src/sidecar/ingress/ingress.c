/* ingress.c: "denvd __ingress --data DIR --env ENV --service SVC", the
 * proxy that publishes an egress-denied environment's ports (sidecar.h).
 *
 * In order, in the launching process: read <svc>.json; find the container's
 * main pid (engine.c) and open its network namespace; bind every
 * 127.0.0.1:<host> listener in the host's namespace (a taken port exits
 * IG_EXIT_BIND, so that the launcher can choose another); setns(2) into the
 * container's namespace. From then on every socket() this process creates
 * lives inside the container, while the listeners stay on the host. Then it
 * forks: the parent writes <svc>.pid and exits 0; the child leads its own
 * session, logs to <svc>.log and runs the loop: accept on the host side,
 * connect to 127.0.0.1:<container port> inside (non-blocking, bounded),
 * copy both ways through two bounded buffers (a full buffer stops reading
 * its source), pass a half-close on once the bytes before it are out, and
 * pause accepting at IG_MAX_CONNS. Nothing ever accepts on the container
 * side: a process in the container cannot reach the host through this.
 * Every IG_WATCH_MS it checks that the container's namespace is still the
 * one it entered: a restarted container is followed into its new
 * namespace, a stopped one waited for, a removed one ends the process. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/list.h"
#include "base/log.h"
#include "base/str.h"
#include "base/sys.h"
#include "sidecar/sidecar.h"

struct ing;

struct conn {
	struct ing *g;
	struct conn *next, *prev;
	int cfd, ufd;			/* client (host side), upstream (container side) */
	int cport;
	bool connecting;
	struct ev_timer timer;
	struct ig_dir up, down;		/* client -> upstream, upstream -> client */
	char ubuf[IG_BUF_BYTES], dbuf[IG_BUF_BYTES];
};

struct ing {
	struct ev *ev;
	struct ig_config cfg;
	int lfd[IG_MAX_PORTS];
	size_t nconns;
	bool paused;
	struct conn *conns;
	int ctr_pid;
	dev_t ns_dev;
	ino_t ns_ino;
	struct ev_timer watch;
	uint64_t accepted, refused;
};

static void conn_close(struct conn *c, const char *why)
{
	struct ing *g = c->g;

	if (why)
		log_debug("ingress", "port %d: connection closed: %s", c->cport, why);
	ev_timer_stop(g->ev, &c->timer);
	ev_fd_del(g->ev, c->cfd);
	sys_close(c->cfd);
	if (c->ufd >= 0) {
		ev_fd_del(g->ev, c->ufd);
		sys_close(c->ufd);
	}
	DLIST_UNLINK(g->conns, c);
	free(c);
	g->nconns--;
	if (g->paused && g->nconns < IG_MAX_CONNS) {
		for (size_t i = 0; i < g->cfg.nports; i++)
			ev_fd_set(g->ev, g->lfd[i], EV_READ);
		g->paused = false;
	}
}

/* Watch exactly what the two buffers allow. */
static void conn_arm(struct conn *c)
{
	struct ing *g = c->g;
	int ce = 0, ue = 0;

	if (ig_dir_want_read(&c->up))
		ce |= EV_READ;
	if (ig_dir_want_write(&c->down))
		ce |= EV_WRITE;
	if (c->connecting) {
		ue = EV_WRITE;
	} else {
		if (ig_dir_want_read(&c->down))
			ue |= EV_READ;
		if (ig_dir_want_write(&c->up))
			ue |= EV_WRITE;
	}
	ev_fd_set(g->ev, c->cfd, ce);
	ev_fd_set(g->ev, c->ufd, ue);
}

/* Read from fd into d. 0 fine (data, EOF or nothing yet), -1 broken. */
static int pump_in(int fd, struct ig_dir *d)
{
	size_t room;
	char *p = ig_dir_space(d, &room);
	ssize_t n;

	if (room == 0)
		return 0;
	n = read(fd, p, room);
	if (n > 0)
		ig_dir_filled(d, (size_t)n);
	else if (n == 0)
		d->eof = true;
	else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
		return -1;
	return 0;
}

static int pump_out(int fd, struct ig_dir *d)
{
	size_t len;
	const char *p = ig_dir_pending(d, &len);
	ssize_t n;

	if (len == 0)
		return 0;
	n = send(fd, p, len, MSG_NOSIGNAL);
	if (n > 0)
		ig_dir_drained(d, (size_t)n);
	else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
		return -1;
	return 0;
}

/* After any I/O: pass half-closes on, close when both ways are done. */
static void conn_settle(struct conn *c)
{
	if (!c->connecting && ig_dir_need_shut(&c->up)) {
		shutdown(c->ufd, SHUT_WR);
		c->up.shut = true;
	}
	if (ig_dir_need_shut(&c->down)) {
		shutdown(c->cfd, SHUT_WR);
		c->down.shut = true;
	}
	/* The container's end finished before the client did: nothing can come back. */
	if (c->down.shut && c->up.shut) {
		conn_close(c, "both directions done");
		return;
	}
	conn_arm(c);
}

static void on_client(struct ev *ev, int fd, int revents, void *arg)
{
	struct conn *c = arg;

	(void)ev;
	(void)fd;
	if ((revents & EV_READ) && pump_in(c->cfd, &c->up) < 0) {
		conn_close(c, "client read error");
		return;
	}
	if ((revents & EV_WRITE) && pump_out(c->cfd, &c->down) < 0) {
		conn_close(c, "client write error");
		return;
	}
	conn_settle(c);
}

static void on_upstream(struct ev *ev, int fd, int revents, void *arg)
{
	struct conn *c = arg;

	(void)ev;
	(void)fd;
	if (c->connecting) {
		int soerr = 0;
		socklen_t sl = sizeof(soerr);

		if (!(revents & (EV_WRITE | EV_READ)))
			return;
		if (getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
			soerr = errno;
		if (soerr) {
			log_info("ingress", "port %d: connect 127.0.0.1:%d in the container: %s", c->cport, c->cport,
				 strerror(soerr));
			conn_close(c, NULL);
			return;
		}
		c->connecting = false;
		ev_timer_stop(c->g->ev, &c->timer);
		conn_settle(c);
		return;
	}
	if ((revents & EV_READ) && pump_in(c->ufd, &c->down) < 0) {
		conn_close(c, "container read error");
		return;
	}
	if ((revents & EV_WRITE) && pump_out(c->ufd, &c->up) < 0) {
		conn_close(c, "container write error");
		return;
	}
	conn_settle(c);
}

static void on_connect_timeout(struct ev *ev, void *arg)
{
	struct conn *c = arg;

	(void)ev;
	log_info("ingress", "port %d: connect 127.0.0.1:%d in the container: no answer within %d s", c->cport,
		 c->cport, IG_CONNECT_MS / 1000);
	conn_close(c, NULL);
}

static void conn_open(struct ing *g, int cfd, int cport)
{
	struct conn *c = calloc(1, sizeof(*c));
	struct sockaddr_in sa;
	int rc;

	if (!c) {
		sys_close(cfd);
		return;
	}
	c->g = g;
	c->cfd = cfd;
	c->cport = cport;
	ig_dir_init(&c->up, c->ubuf, sizeof(c->ubuf));
	ig_dir_init(&c->down, c->dbuf, sizeof(c->dbuf));
	/* In the container's namespace: this process entered it after binding. */
	c->ufd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->ufd < 0) {
		log_warn("ingress", "socket: %s", strerror(errno));
		sys_close(cfd);
		free(c);
		return;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)cport);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	rc = connect(c->ufd, (struct sockaddr *)&sa, sizeof(sa));
	if (rc < 0 && errno != EINPROGRESS) {
		log_info("ingress", "port %d: connect 127.0.0.1:%d in the container: %s", cport, cport, strerror(errno));
		sys_close(c->ufd);
		sys_close(cfd);
		free(c);
		return;
	}
	c->connecting = rc < 0;
	DLIST_PUSH(g->conns, c);
	g->nconns++;
	ev_fd_add(g->ev, c->cfd, 0, on_client, c);
	ev_fd_add(g->ev, c->ufd, 0, on_upstream, c);
	if (c->connecting)
		ev_timer_start(g->ev, &c->timer, IG_CONNECT_MS, on_connect_timeout, c);
	conn_arm(c);
}

static void on_accept(struct ev *ev, int fd, int revents, void *arg)
{
	struct ing *g = arg;
	size_t i;

	(void)revents;
	for (i = 0; i < g->cfg.nports && g->lfd[i] != fd; i++)
		;
	if (i == g->cfg.nports)
		return;
	while (g->nconns < IG_MAX_CONNS) {
		int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (cfd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
				log_warn("ingress", "accept on 127.0.0.1:%d: %s", g->cfg.ports[i].host, strerror(errno));
			return;
		}
		g->accepted++;
		conn_open(g, cfd, g->cfg.ports[i].container);
	}
	/* At the cap: leave further clients in the backlog until one closes. */
	for (size_t k = 0; k < g->cfg.nports; k++)
		ev_fd_set(ev, g->lfd[k], 0);
	g->paused = true;
}

/* The netns of pid, as (dev, ino); -1 when pid is gone. */
static int netns_id(int pid, dev_t *dev, ino_t *ino)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/ns/net", pid);
	if (stat(path, &st) < 0)
		return -1;
	*dev = st.st_dev;
	*ino = st.st_ino;
	return 0;
}

/* Enter the network namespace of the container's main process: 0 entered,
 * 1 the container exists but does not run (stopped, restarting), -1 e
 * (gone, someone else's, or the engine did not answer: *gone says which). */
static int enter_container(struct ing *g, bool *gone, struct err *e)
{
	struct engine_ctr ctr;
	char path[64];
	int fd, rc;

	*gone = false;
	if ((rc = engine_container(g->cfg.container, &ctr, e)) < 0)
		return -1;
	*gone = true;
	if (rc == 0)
		return err_set(e, "container %s is gone", g->cfg.container);
	if (!str_eq(ctr.env, g->cfg.env))
		return err_set(e, "container %s is not environment %s's", g->cfg.container, g->cfg.env);
	*gone = false;
	if (ctr.pid <= 0)
		return 1;
	snprintf(path, sizeof(path), "/proc/%d/ns/net", ctr.pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return err_errno(e, "open %s", path);
	if (setns(fd, CLONE_NEWNET) < 0) {
		sys_close(fd);
		return err_errno(e, "setns into %s", path);
	}
	sys_close(fd);
	g->ctr_pid = ctr.pid;
	if (netns_id(ctr.pid, &g->ns_dev, &g->ns_ino) < 0)
		return 1;
	return 0;
}

/* The namespace entered is no longer the container's: follow a restarted
 * container, wait for a stopped one, end with a removed one. Until then
 * connections go to the old namespace, which refuses them. */
static void on_watch(struct ev *ev, void *arg)
{
	struct ing *g = arg;
	dev_t dev;
	ino_t ino;
	struct err e;
	bool gone;
	int rc;

	if (netns_id(g->ctr_pid, &dev, &ino) == 0 && dev == g->ns_dev && ino == g->ns_ino) {
		ev_timer_start(ev, &g->watch, IG_WATCH_MS, on_watch, g);
		return;
	}
	err_clear(&e);
	rc = enter_container(g, &gone, &e);
	if (rc < 0 && gone) {
		log_info("ingress", "%s: %s: exiting", g->cfg.service, e.msg);
		ev_stop(ev);
		return;
	}
	if (rc < 0)
		log_warn("ingress", "%s: %s", g->cfg.service, e.msg);
	else if (rc == 0)
		log_info("ingress", "%s: container restarted: following it into its new network namespace (pid %d)",
			 g->cfg.service, g->ctr_pid);
	ev_timer_start(ev, &g->watch, IG_WATCH_MS, on_watch, g);
}

static void on_term(struct ev *ev, int signo, void *arg)
{
	(void)arg;
	log_info("ingress", "signal %d: stopping", signo);
	ev_stop(ev);
}

static int bind_listener(int port, int *out, struct err *e)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return err_errno(e, "socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 128) < 0) {
		int saved = errno;

		sys_close(fd);
		errno = saved;
		return err_errno(e, "127.0.0.1:%d", port);
	}
	*out = fd;
	return 0;
}

static void loop(struct ing *g, const char *pidfile)
{
	char mine[32];
	struct buf b = BUF_INIT;
	struct err e;

	g->ev = ev_new();
	if (!g->ev) {
		log_error("ingress", "cannot create the event loop");
		return;
	}
	for (size_t i = 0; i < g->cfg.nports; i++)
		ev_fd_add(g->ev, g->lfd[i], EV_READ, on_accept, g);
	ev_signal_add(g->ev, SIGTERM, on_term, g);
	ev_signal_add(g->ev, SIGINT, on_term, g);
	ev_timer_start(g->ev, &g->watch, IG_WATCH_MS, on_watch, g);
	ev_run(g->ev);
	while (g->conns)
		conn_close(g->conns, NULL);
	log_info("ingress", "%s: stopped after %llu connection(s)", g->cfg.service, (unsigned long long)g->accepted);
	/* The pidfile goes only if it is still ours (a newer proxy may have replaced it). */
	snprintf(mine, sizeof(mine), "%d\n", (int)getpid());
	if (fs_read_file(pidfile, &b, 64, &e) == 0 && b.data && str_eq(b.data, mine))
		unlink(pidfile);
	buf_release(&b);
	ev_free(g->ev);
}

/* The verb's own arguments: --data DIR --env ENV --service SVC [-v]. */
static int parse_args(int argc, char **argv, const char **data, const char **env, const char **svc)
{
	for (int i = 2; i < argc; i++) {
		if (str_eq(argv[i], "-v")) {
			log_set_level(LOG_DEBUG);
			continue;
		}
		if (i + 1 >= argc)
			return -1;
		if (str_eq(argv[i], "--data"))
			*data = argv[++i];
		else if (str_eq(argv[i], "--env"))
			*env = argv[++i];
		else if (str_eq(argv[i], "--service"))
			*svc = argv[++i];
		else
			return -1;
	}
	return *data && sc_safe_id(*env) && sc_safe_id(*svc) ? 0 : -1;
}

/* Reads the proxy's config written by denvd, and checks it is this proxy's. */
static int load_config(struct ing *g, const char *cfgpath, const char *env, const char *svc)
{
	struct buf b = BUF_INIT;
	struct err e;

	err_clear(&e);
	if (fs_read_file(cfgpath, &b, IG_CONFIG_MAX, &e) < 0 ||
	    ig_config_parse(b.data ? b.data : "", b.len, &g->cfg, &e) < 0) {
		buf_release(&b);
		fprintf(stderr, "denvd __ingress: %s\n", e.msg);
		return -1;
	}
	buf_release(&b);
	if (!str_eq(g->cfg.env, env) || !str_eq(g->cfg.service, svc)) {
		fprintf(stderr, "denvd __ingress: %s is for %s/%s\n", cfgpath, g->cfg.env, g->cfg.service);
		return -1;
	}
	return 0;
}

/* Binds every listener in the host's namespace, then moves this process into
 * the container's; everything after runs there. Returns the verb's exit code. */
static int bind_and_enter(struct ing *g)
{
	struct err e;
	bool gone;
	int rc;

	err_clear(&e);
	for (size_t i = 0; i < g->cfg.nports; i++)
		if (bind_listener(g->cfg.ports[i].host, &g->lfd[i], &e) < 0) {
			int taken = strstr(e.msg, "in use") != NULL;

			fprintf(stderr, "denvd __ingress: %s\n", e.msg);
			return taken ? IG_EXIT_BIND : 1;
		}
	rc = enter_container(g, &gone, &e);
	if (rc != 0) {
		fprintf(stderr, "denvd __ingress: %s\n", rc > 0 ? "the container is not running" : e.msg);
		return 1;
	}
	return 0;
}

int ig_daemonize(const char *who, const char *pidfile, const char *logpath, int *exit_code)
{
	char pidtext[32];
	struct err e;
	pid_t child;
	int logfd, nullfd;

	*exit_code = 1;
	if ((logfd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)) < 0 ||
	    (nullfd = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0) {
		fprintf(stderr, "%s: open %s: %s\n", who, logpath, strerror(errno));
		return 1;
	}
	fflush(NULL);
	if ((child = fork()) < 0) {
		fprintf(stderr, "%s: fork: %s\n", who, strerror(errno));
		return 1;
	}
	if (child > 0) {
		snprintf(pidtext, sizeof(pidtext), "%d\n", (int)child);
		if (fs_write_atomic(pidfile, pidtext, strlen(pidtext), 0600, &e) < 0) {
			kill(child, SIGKILL);
			fprintf(stderr, "%s: %s\n", who, e.msg);
			return 1;
		}
		printf("%d\n", (int)child);
		*exit_code = 0;
		return 1;
	}
	setsid();
	if (chdir("/") < 0)
		log_warn("ingress", "chdir /: %s", strerror(errno));
	dup2(nullfd, 0);
	dup2(nullfd, 1);
	dup2(logfd, 2);
	sys_close(nullfd);
	sys_close(logfd);
	return 0;
}

int ingress_main(int argc, char **argv)
{
	const char *data = NULL, *env = NULL, *svc = NULL;
	char dir[FS_PATH_MAX], cfgpath[FS_PATH_MAX], pidfile[FS_PATH_MAX], logpath[FS_PATH_MAX];
	struct err e;
	struct ing g;
	int rc;

	signal(SIGPIPE, SIG_IGN);
	memset(&g, 0, sizeof(g));
	if (parse_args(argc, argv, &data, &env, &svc) < 0) {
		fprintf(stderr, "denvd __ingress: bad arguments (this verb is for denvd itself)\n");
		return 2;
	}
	if (ig_files_dir(data, env, dir, &e) < 0 || fs_path(cfgpath, sizeof(cfgpath), &e, "%s/%s.json", dir, svc) < 0 ||
	    fs_path(pidfile, sizeof(pidfile), &e, "%s/%s.pid", dir, svc) < 0 ||
	    fs_path(logpath, sizeof(logpath), &e, "%s/%s.log", dir, svc) < 0) {
		fprintf(stderr, "denvd __ingress: %s\n", e.msg);
		return 1;
	}
	if (load_config(&g, cfgpath, env, svc) < 0)
		return 1;
	if ((rc = bind_and_enter(&g)) != 0)
		return rc;
	if (ig_daemonize("denvd __ingress", pidfile, logpath, &rc) != 0)
		return rc;
	for (size_t i = 0; i < g.cfg.nports; i++)
		log_info("ingress", "%s: 127.0.0.1:%d (host) -> 127.0.0.1:%d in container %s (pid %d)", svc,
			 g.cfg.ports[i].host, g.cfg.ports[i].container, g.cfg.container, g.ctr_pid);
	loop(&g, pidfile);
	return 0;
}
