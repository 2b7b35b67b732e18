/* mux.c: splitting dockerd's multiplexed attach stream (the body of an exec
 * started without a TTY) into stdout and stderr. Each frame is an 8-byte
 * header, [stream, 0, 0, 0, size as big-endian u32], then size bytes of
 * that stream (0 stdin, 1 stdout, 2 stderr). Bytes arrive in any split;
 * the state carries a partial header and what is left of the frame. Each
 * stream is kept up to its cap; what is beyond is counted as dropped and
 * the stream marked truncated, and reading goes on so the process is never
 * blocked on a full pipe. */
#include <string.h>

#include "sidecar/sidecar.h"

void mux_init(struct mux *m, size_t cap)
{
	memset(m, 0, sizeof(*m));
	m->cap = cap;
	buf_init(&m->out[0], cap + 1);
	buf_init(&m->out[1], cap + 1);
}

void mux_release(struct mux *m)
{
	buf_release(&m->out[0]);
	buf_release(&m->out[1]);
}

static void keep(struct mux *m, int which, const char *p, size_t n)
{
	struct buf *b = &m->out[which];
	size_t room = b->len < m->cap ? m->cap - b->len : 0;

	if (m->sink) {
		if (n)
			m->sink(m->sink_arg, which, p, n);
		return;
	}
	if (n > room) {
		m->truncated[which] = true;
		n = room;
	}
	if (n)
		buf_add(b, p, n);
}

int mux_feed(struct mux *m, const char *p, size_t n, struct err *e)
{
	/* A TTY's output is one stream without frame headers. */
	if (m->raw) {
		keep(m, 0, p, n);
		return 0;
	}
	while (n > 0) {
		if (m->left == 0) {
			size_t take = sizeof(m->head) - m->hlen;

			if (take > n)
				take = n;
			memcpy(m->head + m->hlen, p, take);
			m->hlen += take;
			p += take;
			n -= take;
			if (m->hlen < sizeof(m->head))
				return 0;
			m->hlen = 0;
			if (m->head[0] > 2 || m->head[1] || m->head[2] || m->head[3])
				return err_set(e, "exec output: bad frame header %02x %02x %02x %02x", m->head[0],
					       m->head[1], m->head[2], m->head[3]);
			m->stream = m->head[0];
			m->left = (uint32_t)m->head[4] << 24 | (uint32_t)m->head[5] << 16 |
				  (uint32_t)m->head[6] << 8 | (uint32_t)m->head[7];
			continue;
		}
		{
			size_t take = m->left < n ? m->left : n;

			/* stdin frames never come back; treat one as stdout rather than fail. */
			keep(m, m->stream == 2 ? 1 : 0, p, take);
			m->left -= (uint32_t)take;
			p += take;
			n -= take;
		}
	}
	return 0;
}

bool mux_complete(const struct mux *m)
{
	return m->left == 0 && m->hlen == 0;
}
