/*
 * stream.h: a connected non-blocking socket, plain or TLS, behind one small
 * read/write API. The HTTP server and client and the WebSocket code use it so
 * that none of them has to know whether TLS is in the way.
 *
 * Return rules (like read(2)/write(2)):
 *  - stream_read returns bytes read (> 0), 0 on end of stream (a TLS
 *    close_notify, or the peer closing without one), or -1 with errno:
 *    EAGAIN when it would block; anything else is a broken stream.
 *  - stream_write returns bytes written (> 0; may be short) or -1 with errno
 *    EAGAIN when it would block.
 *  - after EAGAIN, wait for stream_wants(s) on stream_fd(s): TLS may need the
 *    socket writable to complete a read (renegotiation, key update) and
 *    readable to complete a write.
 *  - TLS decrypts whole records: after a read, more plaintext may sit inside
 *    the library while the socket shows nothing (stream_pending). Read until
 *    EAGAIN, or check stream_pending before going back to poll().
 *  - a write that returned EAGAIN may be retried with a different buffer
 *    address holding the same bytes (the buffer may have been reallocated).
 *
 * The fd is close-on-exec and non-blocking; stream_free closes it.
 */
#ifndef DENV_HTTP_STREAM_H
#define DENV_HTTP_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/err.h"

/* Longest host name stream_dial accepts (DNS names are at most 253). */
#define STREAM_MAX_HOST 255

struct stream;

ssize_t stream_read(struct stream *s, void *buf, size_t n);
ssize_t stream_write(struct stream *s, const void *buf, size_t n);
/* EV_READ or EV_WRITE (from base/ev.h): what the last EAGAIN waits for. */
int stream_wants(const struct stream *s);
int stream_fd(const struct stream *s);
bool stream_is_tls(const struct stream *s);
/* Plaintext bytes already decrypted and waiting inside TLS (0 for plain). */
size_t stream_pending(const struct stream *s);
/* Close (sending a TLS close_notify, best effort, never blocking) and free. NULL is fine. */
void stream_free(struct stream *s);

/*
 * Blocking connect to host:port (a name, an IPv4 literal, or an IPv6 literal
 * with or without brackets) within timeout_ms (<= 0: 30 s), then, if tls, a TLS
 * handshake verifying the peer's certificate chain against the system CA store
 * plus the PEM file named by $DENV_CA_FILE (when set), and the host name (or IP
 * address) against the certificate. The stream returned is non-blocking.
 * Errors read like "connect 127.0.0.1:1: Connection refused" or
 * "tls handshake with example.org:443: certificate verify failed (...)".
 */
int stream_dial(const char *host, int port, bool tls, int timeout_ms, struct stream **out, struct err *e);

/* Connect to the Unix-domain stream socket at path (plain, no TLS) within
 * timeout_ms (<= 0: 30 s). Errors read like "connect unix:/run/x.sock: No
 * such file or directory". The stream returned is non-blocking. */
int stream_dial_unix(const char *path, int timeout_ms, struct stream **out, struct err *e);

/* ---- building blocks for event-loop users (the HTTP server and async client) ---- */

/* Wrap an already-connected fd (made non-blocking and close-on-exec here). */
struct stream *stream_new_plain(int fd);

/* A TLS server context: certificate chain and key from PEM files. */
struct stream_tls_server;
int stream_tls_server_new(const char *cert_file, const char *key_file,
			  struct stream_tls_server **out, struct err *e);
void stream_tls_server_free(struct stream_tls_server *t);
/* Wrap an accepted fd for a TLS server handshake (drive it with stream_handshake). */
struct stream *stream_new_tls_accept(int fd, struct stream_tls_server *t, struct err *e);

/* Wrap a connected fd for a TLS client handshake verifying host (see stream_dial). */
struct stream *stream_new_tls_connect(int fd, const char *host, struct err *e);

/* Advance the TLS handshake: 1 done (always 1 for plain streams), 0 in progress
 * (wait for stream_wants), -1 failed with e filled. */
int stream_handshake(struct stream *s, struct err *e);

/* Non-blocking connect to a numeric or named address: returns the fd with
 * the connect in progress (wait for EV_WRITE, then stream_connect_finish), or
 * -1. The name is resolved with getaddrinfo, which blocks: on a loop, look
 * names up with a resolver (resolve.h) and use stream_connect_addr. */
int stream_connect_start(const char *host, int port, struct err *e);
/* Non-blocking connect to one resolved address (host and port name it in
 * messages): the fd with the connect in progress, or -1 with e
 * ("connect 127.0.0.1:1: Connection refused"). */
struct addrinfo;
int stream_connect_addr(const struct addrinfo *ai, const char *host, int port, struct err *e);
/* 0 if the connect on fd succeeded, -1 with e ("connect h:p: reason"). */
int stream_connect_finish(int fd, const char *host, int port, struct err *e);

#endif
