/* resolve.c: see resolve.h. */
#include "http/resolve.h"
#include "http/http_int.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/list.h"
#include "base/sys.h"
#include "http/stream.h"

/* The lookup function threads call: getaddrinfo, or a test's stand-in
 * (http_int_resolve_hook). Set only by tests, before any lookup starts;
 * each lookup copies it when it is started, on the loop's thread. */
static http_int_gai_fn gai_hook;

void http_int_resolve_hook(http_int_gai_fn fn)
{
	gai_hook = fn;
}

struct resolve_req {
	/* Loop side only. */
	struct resolver *r;		/* NULL once the resolver let go (orphan) */
	struct resolve_req *prev, *next;	/* in r->running or r->queue */
	resolve_fn fn;			/* NULL once cancelled */
	void *arg;
	bool started;			/* a thread was started (efd watched) */
	/* Shared: the thread and the loop each hold one reference. */
	atomic_int refs;
	atomic_bool done;		/* the fields below are written (release/acquire) */
	int efd;			/* eventfd the thread signals; closed on the last unref */
	/* Written by the thread before done; read by the loop after it. */
	int rc;				/* getaddrinfo's return */
	int sys_errno;			/* errno for EAI_SYSTEM */
	struct addrinfo *res;
	/* Read-only once started: the thread's own copies. */
	http_int_gai_fn gai;
	char host[STREAM_MAX_HOST + 1];
	char port[8];
};

struct resolver {
	struct ev *ev;
	struct resolve_req *running;	/* threads started, not yet reaped (cancelled ones too) */
	size_t nrunning;
	struct resolve_req *queue, *queue_tail;	/* FIFO waiting for a thread */
	size_t nqueued;
	size_t threads;			/* started so far */
};

static void req_destroy(struct resolve_req *q)
{
	if (q->res)
		freeaddrinfo(q->res);
	if (q->efd >= 0)
		sys_close(q->efd);
	free(q);
}

/* Drop one reference; the last frees. Called from either thread. */
static void req_unref(struct resolve_req *q)
{
	if (atomic_fetch_sub_explicit(&q->refs, 1, memory_order_acq_rel) == 1)
		req_destroy(q);
}

static int default_gai(const char *node, const char *service, const struct addrinfo *hints,
		       struct addrinfo **res)
{
	return getaddrinfo(node, service, hints, res);
}

/* The lookup thread: everything it touches is in q, which it holds a reference to. */
static void *lookup_thread(void *p)
{
	struct resolve_req *q = p;
	struct addrinfo hints;
	uint64_t one = 1;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_ADDRCONFIG;
	errno = 0;
	q->rc = q->gai(q->host, q->port, &hints, &q->res);
	q->sys_errno = errno;
	if (q->rc != 0)
		q->res = NULL;
	atomic_store_explicit(&q->done, true, memory_order_release);
	/* An eventfd write cannot block or fail short of a bad fd, and ours
	 * stays open until the last reference, which is ours until below. */
	if (write(q->efd, &one, sizeof(one)) < 0) {
		/* nothing to do: the loop also times the lookup out */
	}
	req_unref(q);
	return NULL;
}

static void on_done(struct ev *ev, int fd, int revents, void *arg);

/* Give a lookup that could not get a thread its answer the ordinary way:
 * through its eventfd, on a later turn. */
static void fail_through_efd(struct resolve_req *q, int err)
{
	uint64_t one = 1;

	q->rc = EAI_SYSTEM;
	q->sys_errno = err;
	atomic_store_explicit(&q->done, true, memory_order_release);
	if (write(q->efd, &one, sizeof(one)) < 0) {
		/* cannot happen on a fresh eventfd */
	}
}

/* Start q's thread (q is not in any list). -1 with errno if no eventfd. */
static int req_launch(struct resolver *r, struct resolve_req *q)
{
	pthread_attr_t attr;
	pthread_t tid;
	sigset_t all, old;
	int rc;

	q->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (q->efd < 0)
		return -1;
	q->started = true;
	DLIST_PUSH(r->running, q);
	r->nrunning++;
	ev_fd_add(r->ev, q->efd, EV_READ, on_done, q);
	atomic_store(&q->refs, 2);
	/* The thread inherits a mask blocking every signal, so that handlers
	 * (the loop's self-pipe) run on the loop's thread only. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_attr_init(&attr);
	if (rc == 0) {
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		rc = pthread_create(&tid, &attr, lookup_thread, q);
		pthread_attr_destroy(&attr);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		atomic_store(&q->refs, 1);	/* no thread holds one */
		fail_through_efd(q, rc);
		return 0;
	}
	r->threads++;
	return 0;
}

/* Start queued lookups while threads are free. Never calls out. A lookup
 * that cannot get an eventfd (the process is out of descriptors) stays at the
 * head of the queue until a later lookup ends or its caller's deadline
 * cancels it. */
static void start_queued(struct resolver *r)
{
	while (r->queue && r->nrunning < RESOLVE_MAX_THREADS) {
		struct resolve_req *q = r->queue;
		DLIST_UNLINK(r->queue, q);
		if (r->queue) {
			r->queue->prev = NULL;
		} else {
			r->queue_tail = NULL;
		}
		r->nqueued--;
		if (req_launch(r, q) < 0) {
			q->next = r->queue;
			if (r->queue)
				r->queue->prev = q;
			r->queue = q;
			if (!r->queue_tail)
				r->queue_tail = q;
			r->nqueued++;
			break;
		}
	}
}

static void on_done(struct ev *ev, int fd, int revents, void *arg)
{
	struct resolve_req *q = arg;
	struct resolver *r = q->r;
	uint64_t n;
	resolve_fn fn;
	void *fn_arg;
	struct addrinfo *res = NULL;
	struct err e;
	bool failed = false;

	if (read(q->efd, &n, sizeof(n)) < 0 && errno == EAGAIN)
		return;
	if (!atomic_load_explicit(&q->done, memory_order_acquire))
		return;
	ev_fd_del(ev, q->efd);
	DLIST_UNLINK(r->running, q);
	r->nrunning--;
	fn = q->fn;
	fn_arg = q->arg;
	if (fn) {
		if (q->rc == 0) {
			res = q->res;
			q->res = NULL;
			if (!res) {
				failed = true;
				err_set(&e, "resolve %s: no addresses", q->host);
			}
		} else {
			failed = true;
			err_set(&e, "resolve %s: %s", q->host,
				q->rc == EAI_SYSTEM ? strerror(q->sys_errno ? q->sys_errno : EIO) : gai_strerror(q->rc));
		}
	}
	req_unref(q);
	start_queued(r);
	/* Last: the callback may cancel other lookups or free the resolver. */
	if (fn)
		fn(failed ? NULL : res, failed ? &e : NULL, fn_arg);
}

struct resolver *resolver_new(struct ev *ev)
{
	struct resolver *r = xcalloc(1, sizeof(*r));

	r->ev = ev;
	return r;
}

size_t resolver_threads(const struct resolver *r)
{
	return r->threads;
}

struct resolve_req *resolve_start(struct resolver *r, const char *host, int port, resolve_fn fn,
				  void *arg, struct err *e)
{
	struct resolve_req *q;

	if (strlen(host) > STREAM_MAX_HOST)
		return err_set(e, "resolve: host name too long"), NULL;
	if (port <= 0 || port > 65535)
		return err_set(e, "resolve %s: invalid port %d", host, port), NULL;
	if (r->nqueued >= RESOLVE_MAX_QUEUE)
		return err_set(e, "resolve %s: %d lookups already waiting", host, RESOLVE_MAX_QUEUE), NULL;
	q = xcalloc(1, sizeof(*q));
	q->r = r;
	q->fn = fn;
	q->arg = arg;
	q->efd = -1;
	q->gai = gai_hook ? gai_hook : default_gai;
	atomic_init(&q->refs, 1);
	atomic_init(&q->done, false);
	snprintf(q->host, sizeof(q->host), "%s", host);
	snprintf(q->port, sizeof(q->port), "%d", port);
	if (!r->queue && r->nrunning < RESOLVE_MAX_THREADS) {
		if (req_launch(r, q) < 0) {
			err_errno(e, "resolve %s: eventfd", host);
			free(q);
			return NULL;
		}
		return q;
	}
	q->prev = r->queue_tail;
	if (r->queue_tail)
		r->queue_tail->next = q;
	else
		r->queue = q;
	r->queue_tail = q;
	r->nqueued++;
	start_queued(r);
	return q;
}

void resolve_cancel(struct resolve_req *q)
{
	struct resolver *r;

	if (!q)
		return;
	r = q->r;
	if (!q->started) {
		/* Still queued: nobody else knows it. */
		if (q == r->queue_tail)
			r->queue_tail = q->prev;
		DLIST_UNLINK(r->queue, q);
		r->nqueued--;
		req_destroy(q);
		return;
	}
	/* Running: keep watching its eventfd so that the thread's slot is
	 * reclaimed when it ends; the answer is dropped then. */
	q->fn = NULL;
	q->arg = NULL;
}

void resolver_free(struct resolver *r)
{
	if (!r)
		return;
	while (r->queue) {
		struct resolve_req *q = r->queue;
		DLIST_UNLINK(r->queue, q);
		req_destroy(q);
	}
	while (r->running) {
		struct resolve_req *q = r->running;
		DLIST_UNLINK(r->running, q);
		ev_fd_del(r->ev, q->efd);
		q->r = NULL;
		q->fn = NULL;
		req_unref(q);	/* the thread frees it if it is still running */
	}
	free(r);
}

int resolve_numeric(const char *host, int port, struct addrinfo **res, struct err *e)
{
	struct addrinfo hints;
	char portstr[8];
	int rc;

	*res = NULL;
	if (port <= 0 || port > 65535)
		return err_set(e, "connect %s:%d: invalid port", host, port);
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	snprintf(portstr, sizeof(portstr), "%d", port);
	rc = getaddrinfo(host, portstr, &hints, res);
	if (rc == 0)
		return 1;
	*res = NULL;
	if (rc == EAI_NONAME)
		return 0;
	return err_set(e, "connect %s:%d: %s", host, port,
		       rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
}
