/*
 * resolve.h: host name lookups that never block the event loop.
 *
 * getaddrinfo(3) blocks for as long as the DNS server takes to answer or time
 * out (5 s per attempt by default), and a denv program is one thread running
 * one loop. A resolver runs each lookup in a short-lived detached thread of
 * its own and hands the answer back on the loop:
 *
 *  - IP literals never need a thread: resolve_numeric converts them on the
 *    spot (getaddrinfo with AI_NUMERICHOST, which does no I/O).
 *  - At most RESOLVE_MAX_THREADS lookups of one resolver run at once; more
 *    wait in a FIFO of at most RESOLVE_MAX_QUEUE (over it: an error at once).
 *  - The thread owns a copy of the name and writes its result into the
 *    lookup's own struct, then wakes the loop through the lookup's eventfd.
 *    The struct is reference-counted (the thread and the loop hold one each),
 *    so cancelling a lookup (resolve_cancel) or freeing the resolver while
 *    the thread still waits on DNS is safe: the loop side forgets the lookup
 *    and whichever side lets go last frees it, the answer unread. There is no
 *    way to interrupt getaddrinfo itself; an abandoned thread ends when its
 *    lookup does.
 *  - Threads block every signal, so signals keep reaching the loop's thread.
 *  - The callback runs on the loop, never from inside resolve_start.
 *
 * The lookup deadline is the caller's: it cancels the lookup when its own
 * timer fires (the async HTTP client does this with its request timeout).
 */
#ifndef DENV_HTTP_RESOLVE_H
#define DENV_HTTP_RESOLVE_H

#include <stddef.h>

#include "base/err.h"
#include "base/ev.h"

#define RESOLVE_MAX_THREADS 8	/* lookups of one resolver running at once */
#define RESOLVE_MAX_QUEUE 1024	/* lookups waiting for a thread */

struct addrinfo;
struct resolver;
struct resolve_req;

/* res: the addresses (TCP), which the callee now owns and frees with
 * freeaddrinfo; or NULL with e: "resolve nosuch.invalid: Name or service not
 * known". */
typedef void (*resolve_fn)(struct addrinfo *res, const struct err *e, void *arg);

struct resolver *resolver_new(struct ev *ev);
/* Forget every lookup (callbacks are not called); threads still waiting on
 * DNS free their lookup when it ends. NULL is fine. */
void resolver_free(struct resolver *r);

/* Look host up (a name; port 1..65535 fills the addresses' port). Returns a
 * handle valid until fn is called or the lookup is cancelled, or NULL with e
 * (name too long, bad port, queue full). */
struct resolve_req *resolve_start(struct resolver *r, const char *host, int port, resolve_fn fn,
				  void *arg, struct err *e);
/* Abandon a lookup: fn will not be called. Not from inside its own fn. */
void resolve_cancel(struct resolve_req *q);

/* Lookup threads this resolver has started (tests: literals take none). */
size_t resolver_threads(const struct resolver *r);

/* host as an IPv4 or IPv6 literal (no brackets): 1 with *res filled (free
 * with freeaddrinfo), 0 if host is not a literal (a name: look it up with
 * resolve_start), -1 with e on a bad port. Never blocks. */
int resolve_numeric(const char *host, int port, struct addrinfo **res, struct err *e);

#endif
