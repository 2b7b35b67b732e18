/* tx.c: an env.get archive goes out as chunk frames, then its result
 * (doc/host-stream-chunks.md). Chunks are sent only while the socket's queue
 * is below SC_TX_HIGH_WATER and resume on drain, so a 32 MiB archive never
 * sits in memory twice. A dropped connection drops the transfer: the control
 * plane re-delivers the command and it is sent again from <id>.tar. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/enc.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/str.h"
#include "base/sys.h"
#include "sidecar/agent/dispatch.h"

struct tx {
	char id[SC_ID_MAX];
	int fd;
	uint64_t seq, nchunks;
	struct json *result;
	struct tx *next;
};

static void tx_free(struct tx *t)
{
	if (t->fd >= 0)
		sys_close(t->fd);
	json_free(t->result);
	free(t);
}

int tx_start(struct dispatch *d, const char *id, struct json *result)
{
	char path[FS_PATH_MAX];
	struct stat st;
	struct tx *t, **pp;
	int fd;

	if (cmdlog_path(d->data, id, ".tar", path, sizeof(path)) < 0 ||
	    (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		log_warn("denvd", "command %s: archive %s is gone; sending the result alone", id, path);
		agent_send(d->a, result);
		return 0;
	}
	if (fstat(fd, &st) < 0) {
		sys_close(fd);
		agent_send(d->a, result);
		return 0;
	}
	t = xcalloc(1, sizeof(*t));
	str_copy(t->id, sizeof(t->id), id);
	t->fd = fd;
	t->nchunks = ((uint64_t)st.st_size + SC_CHUNK_BYTES - 1) / SC_CHUNK_BYTES;
	if (t->nchunks == 0)
		t->nchunks = 1;	/* an empty archive is one empty chunk */
	t->result = result;
	for (pp = &d->tx; *pp; pp = &(*pp)->next)
		;
	*pp = t;
	tx_pump(d);
	return 0;
}

/* One chunk frame; -1 if the file could not be read. */
static int send_chunk(struct dispatch *d, struct tx *t)
{
	char *raw = xmalloc(SC_CHUNK_BYTES);
	ssize_t n = sys_read_full(t->fd, raw, SC_CHUNK_BYTES);
	struct json *f;

	if (n < 0) {
		free(raw);
		return -1;
	}
	f = json_new_object();
	json_object_set_str(f, "type", "chunk");
	json_object_set_str(f, "command_id", t->id);
	json_object_set_int(f, "seq", (int64_t)t->seq);
	json_object_set_bool(f, "last", t->seq + 1 == t->nchunks);
	{
		struct buf b = BUF_INIT;

		enc_base64_encode(&b, raw, (size_t)n, ENC_BASE64);
		json_object_set(f, "data", json_new_strn(b.data, b.len));
		buf_release(&b);
	}
	free(raw);
	t->seq++;
	return agent_send(d->a, f);
}

void tx_pump(struct dispatch *d)
{
	while (d->tx && agent_online(d->a) && agent_queued(d->a) < SC_TX_HIGH_WATER) {
		struct tx *t = d->tx;

		if (t->seq < t->nchunks) {
			if (send_chunk(d, t) == 0)
				continue;
			log_warn("denvd", "command %s: streaming the archive failed at chunk %llu", t->id,
				 (unsigned long long)t->seq);
		} else {
			agent_send(d->a, t->result);
			t->result = NULL;
		}
		d->tx = t->next;
		tx_free(t);
	}
}

void tx_drop_all(struct dispatch *d)
{
	while (d->tx) {
		struct tx *t = d->tx;

		d->tx = t->next;
		tx_free(t);
	}
}
