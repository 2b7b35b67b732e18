/* spool.c: env.put archives arrive as chunk frames before their command
 * (doc/host-stream-chunks.md). Each command id gets a file under
 * <data>/spool; at most SC_SPOOLS_MAX at once and SC_ARCHIVE_MAX bytes each.
 * A chunk that breaks a bound or arrives out of order marks the spool bad:
 * later chunks are discarded and the command fails with what arrived.
 * Spools whose command never comes are deleted after SC_SPOOL_TTL_MS. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/enc.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/str.h"
#include "base/sys.h"
#include "sidecar/sidecar.h"

struct spool {
	char id[SC_ID_MAX];
	char path[FS_PATH_MAX];
	int fd;			/* -1 once closed or when refused */
	uint64_t next_seq, bytes;
	bool complete, bad;
	char why[128];
	int64_t last_ms;
	struct spool *next;
};

struct spools {
	char dir[FS_PATH_MAX];
	struct spool *head;
};

/* Files left by an earlier run belong to commands that will be re-sent whole. */
static void clear_dir(const char *dir)
{
	DIR *dp = opendir(dir);
	struct dirent *de;
	char path[FS_PATH_MAX];
	struct err e;

	if (!dp)
		return;
	while ((de = readdir(dp)))
		if (str_has_suffix(de->d_name, ".tar")) {
			if (fs_path(path, sizeof(path), &e, "%s/%s", dir, de->d_name) == 0)
				unlink(path);
		}
	closedir(dp);
}

struct spools *spools_new(const char *data)
{
	struct spools *s = xcalloc(1, sizeof(*s));
	struct err e;

	if (fs_path(s->dir, sizeof(s->dir), &e, "%s/spool", data) < 0 || fs_mkdir_p(s->dir, 0700, &e) < 0)
		log_warn("denvd", "spool dir: %s", e.msg);
	clear_dir(s->dir);
	return s;
}

static void spool_free(struct spool *sp, bool unlink_file)
{
	if (sp->fd >= 0)
		sys_close(sp->fd);
	if (unlink_file && sp->path[0])
		unlink(sp->path);
	free(sp);
}

void spools_free(struct spools *s)
{
	if (!s)
		return;
	while (s->head) {
		struct spool *sp = s->head;

		s->head = sp->next;
		spool_free(sp, true);
	}
	free(s);
}

static struct spool *find(struct spools *s, const char *id)
{
	for (struct spool *sp = s->head; sp; sp = sp->next)
		if (str_eq(sp->id, id))
			return sp;
	return NULL;
}

static size_t count(struct spools *s, bool with_file)
{
	size_t n = 0;

	for (struct spool *sp = s->head; sp; sp = sp->next)
		if (!with_file || sp->path[0])
			n++;
	return n;
}

static void mark_bad(struct spool *sp, const char *why)
{
	if (sp->bad)
		return;
	sp->bad = true;
	str_copy(sp->why, sizeof(sp->why), why);
	if (sp->fd >= 0) {
		sys_close(sp->fd);
		sp->fd = -1;
	}
	if (sp->path[0]) {	/* nothing of a refused archive is kept */
		unlink(sp->path);
		sp->path[0] = '\0';
	}
	log_warn("denvd", "put %s: %s; its chunks are discarded", sp->id, why);
}

static struct spool *open_spool(struct spools *s, const char *id, int64_t now)
{
	struct spool *sp;

	if (count(s, false) >= SC_SPOOLS_MAX + SC_SPOOL_MARKS_MAX)
		return NULL;
	sp = xcalloc(1, sizeof(*sp));
	str_copy(sp->id, sizeof(sp->id), id);
	sp->fd = -1;
	sp->last_ms = now;
	sp->next = s->head;
	s->head = sp;
	if (count(s, true) >= SC_SPOOLS_MAX) {
		mark_bad(sp, "too many archives arriving at once");
		return sp;
	}
	if (str_fmt(sp->path, sizeof(sp->path), "%s/%s.tar", s->dir, id) < 0) {
		mark_bad(sp, "the spool file's path is too long");
		return sp;
	}
	sp->fd = open(sp->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (sp->fd < 0)
		mark_bad(sp, strerror(errno));
	return sp;
}

void spools_chunk(struct spools *s, const struct json *frame, int64_t now)
{
	const char *id = json_get_str(frame, "command_id");
	const struct json *data = json_get(frame, "data");
	int64_t seq = json_get_int(frame, "seq", -1);
	struct spool *sp;
	struct buf raw = BUF_INIT;
	struct err e;

	if (!sc_safe_id(id))
		return;
	if (!(sp = find(s, id)) && !(sp = open_spool(s, id, now)))
		return;
	sp->last_ms = now;
	if (sp->bad || sp->complete)
		return;
	if (seq < 0 || (uint64_t)seq != sp->next_seq || !data || data->type != JSON_STRING) {
		mark_bad(sp, "chunk out of order or malformed");
		return;
	}
	buf_init(&raw, SC_CHUNK_BYTES);
	if (enc_base64_decode(&raw, data->u.str.s, data->u.str.len, ENC_BASE64, &e) < 0) {
		buf_release(&raw);
		mark_bad(sp, "chunk is not base64 of at most 1 MiB");
		return;
	}
	if (sp->bytes + raw.len > SC_ARCHIVE_MAX) {
		buf_release(&raw);
		mark_bad(sp, "archive larger than 32 MiB");
		return;
	}
	if (sys_write_all(sp->fd, raw.data, raw.len) < 0) {
		buf_release(&raw);
		mark_bad(sp, strerror(errno));
		return;
	}
	sp->bytes += raw.len;
	sp->next_seq++;
	buf_release(&raw);
	if (json_get_bool(frame, "last", false)) {
		sp->complete = true;
		sys_close(sp->fd);
		sp->fd = -1;
	}
}

static void unlink_spool(struct spools *s, struct spool *sp)
{
	struct spool **pp;

	for (pp = &s->head; *pp; pp = &(*pp)->next)
		if (*pp == sp) {
			*pp = sp->next;
			return;
		}
}

struct json *spools_take(struct spools *s, const char *id)
{
	struct spool *sp = find(s, id);
	struct json *j;

	if (!sp)
		return NULL;
	unlink_spool(s, sp);
	j = json_new_object();
	json_object_set_str(j, "path", sp->bad ? "" : sp->path);
	json_object_set_int(j, "bytes", (int64_t)sp->bytes);
	json_object_set_int(j, "chunks", (int64_t)sp->next_seq);
	json_object_set_bool(j, "complete", sp->complete && !sp->bad);
	json_object_set_str(j, "error", sp->bad ? sp->why : "");
	spool_free(sp, sp->bad);	/* a good file is now the worker's to remove */
	return j;
}

void spools_drop(struct spools *s, const char *id)
{
	struct spool *sp = id ? find(s, id) : NULL;

	if (sp) {
		unlink_spool(s, sp);
		spool_free(sp, true);
	}
}

void spools_sweep(struct spools *s, int64_t now)
{
	struct spool **pp = &s->head;

	while (*pp) {
		struct spool *sp = *pp;

		if (now - sp->last_ms < SC_SPOOL_TTL_MS) {
			pp = &sp->next;
			continue;
		}
		log_info("denvd", "put %s: no command came for its archive in 10 min; deleted", sp->id);
		*pp = sp->next;
		spool_free(sp, true);
	}
}
