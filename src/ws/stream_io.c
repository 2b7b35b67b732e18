/* stream_io.c: src/http's struct stream as a WebSocket transport. */
#include "ws/ws.h"

#include "http/stream.h"

static ssize_t s_read(void *ctx, void *buf, size_t n)
{
	return stream_read(ctx, buf, n);
}

static ssize_t s_write(void *ctx, const void *buf, size_t n)
{
	return stream_write(ctx, buf, n);
}

static int s_wants(void *ctx)
{
	return stream_wants(ctx);
}

static int s_fd(void *ctx)
{
	return stream_fd(ctx);
}

static void s_free(void *ctx)
{
	stream_free(ctx);
}

const struct ws_transport ws_stream_transport = { s_read, s_write, s_wants, s_fd, s_free };
