/*
 * gh_tarball.c: one file out of a repository tarball as GitHub serves it
 * (GET /repos/{owner}/{repo}/tarball/{ref}: gzip over a pax archive whose
 * entries all sit under "{owner}-{repo}-{short sha}/", after a pax global
 * header carrying the commit). Pure: the archive is read in memory, nothing
 * is written to disk. Still every entry is held to extraction's rules
 * (tar_path_check: no absolute path, no ".."), because the path we look for
 * must mean the same file it would mean in a checkout: a link on the way to
 * it (a symlinked directory or the file itself a link) is refused, not
 * followed. Inflating stops at CP_GH_UNPACKED_MAX, the file at
 * CP_GH_COMPOSE_MAX.
 */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/str.h"
#include "cp/cp.h"
#include "tar/tar.h"

#define INFLATE_CHUNK 65536

struct find {
	const char *want;	/* the path asked for, without "./" */
	struct buf *out;
	bool found;		/* the entry is the one; its data is being copied */
	bool done;
	char top[TAR_MAX_PATH];	/* the archive's top directory, with '/' */
	struct err *e;
};

/* The entry's path below the top directory, or NULL (the top itself). */
static const char *below_top(struct find *f, const char *path)
{
	size_t n;

	if (!*f->top) {
		n = strcspn(path, "/");
		if (n == 0 || n + 1 >= sizeof(f->top))
			return NULL;
		memcpy(f->top, path, n + 1);	/* with the '/' when there is one */
		f->top[path[n] ? n + 1 : n] = '\0';
	}
	n = strlen(f->top);
	if (f->top[n - 1] != '/' || strncmp(path, f->top, n) != 0)
		return NULL;
	return path + n;
}

/* Does link entry rel lie on the way to want (want itself, or a parent)? */
static bool on_the_way(const char *rel, const char *want)
{
	size_t n = strlen(rel);

	while (n > 0 && rel[n - 1] == '/')
		n--;
	return n > 0 && strncmp(rel, want, n) == 0 && (want[n] == '\0' || want[n] == '/');
}

static int on_entry(struct find *f, const struct tar_entry *ent)
{
	const char *rel;

	if (tar_path_check(ent->path, NULL, f->e) < 0)
		return -1;
	if (ent->type == TAR_DIR && !*f->top && !strchr(ent->path, '/'))
		str_copy(f->top, sizeof(f->top), ent->path);
	rel = below_top(f, ent->path);
	if (!rel) {
		if (ent->type == TAR_DIR && str_eq(ent->path, f->top))
			return 0;
		return err_set(f->e, "tar: entry \"%.200s\": not under the archive's top directory", ent->path);
	}
	if ((ent->type == TAR_SYMLINK || ent->type == TAR_HARDLINK) && on_the_way(rel, f->want))
		return err_set(f->e, "%.300s is a link in the repository (%.200s): links are not followed", f->want,
			       rel);
	if (!str_eq(rel, f->want))
		return 0;
	if (ent->type != TAR_REG && ent->type != TAR_CONTIG)
		return err_set(f->e, "%.300s in the repository is a %s, not a file", f->want, tar_type_name(ent->type));
	if (ent->size > CP_GH_COMPOSE_MAX)
		return err_set(f->e, "%.300s is larger than %zu bytes", f->want, CP_GH_COMPOSE_MAX);
	buf_reset(f->out);
	f->found = true;
	f->done = ent->size == 0;
	return 0;
}

/* Feed inflated bytes to the tar reader. */
static int feed(struct tar_reader *r, struct find *f, const unsigned char *p, size_t len)
{
	struct tar_event ev;
	size_t used;
	int kind;

	while (len > 0) {
		kind = tar_reader_feed(r, p, len, &used, &ev, f->e);
		if (kind < 0)
			return -1;
		p += used;
		len -= used;
		if (kind == TAR_EV_ENTRY) {
			if (f->found)
				f->done = true;
			else if (on_entry(f, ev.entry) < 0)
				return -1;
		} else if (kind == TAR_EV_DATA && f->found && !f->done) {
			buf_add(f->out, ev.data, ev.len);
			f->done = ev.remain == 0;
		} else if (kind == TAR_EV_END || kind == TAR_EV_MORE) {
			break;
		}
	}
	return 0;
}

int cp_gh_tarball_file(const void *gz, size_t len, const char *path, struct buf *out, struct err *e)
{
	struct find f = { .out = out, .e = e };
	struct tar_reader *r;
	unsigned char *chunk;
	uint64_t total = 0;
	z_stream z;
	int zrc = Z_OK, rc = -1;

	while (str_has_prefix(path, "./"))
		path += 2;
	if (!*path || tar_path_check(path, NULL, e) < 0)
		return err_set(e, "the compose path \"%.300s\" must be a relative path without \"..\"", path);
	f.want = path;
	memset(&z, 0, sizeof(z));
	/* 16 + MAX_WBITS: a gzip wrapper, as GitHub sends. */
	if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
		return err_set(e, "cannot start inflating the tarball");
	r = tar_reader_new();
	chunk = xmalloc(INFLATE_CHUNK);
	z.next_in = (unsigned char *)gz;
	z.avail_in = (uInt)len;
	while (zrc != Z_STREAM_END && !(f.found && f.done)) {
		z.next_out = chunk;
		z.avail_out = INFLATE_CHUNK;
		zrc = inflate(&z, Z_NO_FLUSH);
		if (zrc != Z_OK && zrc != Z_STREAM_END) {
			err_set(e, "the tarball is not valid gzip (%s)", z.msg ? z.msg : "truncated");
			goto out;
		}
		total += INFLATE_CHUNK - z.avail_out;
		if (total > CP_GH_UNPACKED_MAX) {
			err_set(e, "the tarball inflates to more than %llu bytes", (unsigned long long)CP_GH_UNPACKED_MAX);
			goto out;
		}
		if (feed(r, &f, chunk, INFLATE_CHUNK - z.avail_out) < 0)
			goto out;
		if (zrc == Z_OK && z.avail_in == 0 && z.avail_out != 0) {
			err_set(e, "the tarball is truncated");
			goto out;
		}
	}
	if (f.found && f.done) {
		rc = 0;
	} else if (f.found) {
		err_set(e, "%.300s: the tarball is truncated in its data", path);
	} else if (tar_reader_finish(r, e) == 0) {
		err_set(e, "%.300s was not found in the repository", path);
	}
out:
	inflateEnd(&z);
	tar_reader_free(r);
	free(chunk);
	return rc;
}

void cp_gh_branch_env(const char *branch, char out[CP_NAME_MAX + 1])
{
	size_t i;

	for (i = 0; branch[i] && i < CP_NAME_MAX; i++) {
		char c = branch[i];

		out[i] = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ? c : '-';
	}
	out[i] = '\0';
}
