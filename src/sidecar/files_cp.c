/* files_cp.c: the parts of env.put's `target` (docker cp's rules for where
 * an upload lands) and `owner` that need no container, so the unit tests
 * run them: the plan from what the target and its parent are, the archive's
 * one top-level entry, and the archive copied with that entry renamed and
 * every entry's owner set. files.c asks the container (stat) and runs
 * `docker cp -` with the result.
 *
 * docker cp's rules, for a source S (the archive's top entry) and target T:
 *   T is a directory             S goes inside it, as T/<S's name>
 *   T is missing, its parent a   S becomes T (renamed); a file cannot
 *   directory                    become "T/" (a name ending in '/')
 *   T is a file                  a file replaces it; a directory is refused
 *   T's parent is missing        refused (docker cp creates no parents)
 * The directory the archive is extracted into is the landing directory;
 * its owner is the default owner of everything extracted. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/str.h"
#include "sidecar/sidecar.h"
#include "tar/tar.h"

int fc_split(const char *target, char *parent, size_t psize, char *base, size_t bsize, bool *slash,
	     struct err *e)
{
	size_t n = strlen(target);
	const char *p, *last;

	if (target[0] != '/' || n > FC_PATH_MAX)
		return err_set(e, "target must be an absolute path of at most %d bytes", FC_PATH_MAX);
	if (strchr(target, '\n'))
		return err_set(e, "target holds a newline");
	for (p = target; *p;) {
		const char *end;
		size_t len;

		while (*p == '/')
			p++;
		end = strchr(p, '/') ? strchr(p, '/') : p + strlen(p);
		len = (size_t)(end - p);
		if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
			return err_set(e, "target %s: \".\" and \"..\" are not allowed", target);
		p = end;
	}
	*slash = n > 1 && target[n - 1] == '/';
	while (n > 1 && target[n - 1] == '/')
		n--;
	if (n == 1) {	/* "/" itself */
		str_copy(parent, psize, "/");
		base[0] = '\0';
		return 0;
	}
	for (last = target + n; last > target && last[-1] != '/'; last--)
		;
	if ((size_t)(target + n - last) >= bsize || (size_t)(last - target) >= psize)
		return err_set(e, "target %s: name too long", target);
	memcpy(base, last, (size_t)(target + n - last));
	base[target + n - last] = '\0';
	n = (size_t)(last - target);
	while (n > 1 && target[n - 1] == '/')
		n--;
	memcpy(parent, target, n);
	parent[n] = '\0';
	return 0;
}

int fc_parse_stat(const char *out, struct fc_stat *st)
{
	unsigned long mode;
	long uid, gid;
	char tail;

	if (!out || sscanf(out, "%lx %ld %ld%c", &mode, &uid, &gid, &tail) < 3 || uid < 0 || gid < 0 ||
	    uid > PW_ID_MAX || gid > PW_ID_MAX)
		return -1;
	st->exists = true;
	st->is_dir = (mode & 0170000UL) == 0040000UL;
	st->uid = uid;
	st->gid = gid;
	return 0;
}

int fc_plan(const char *target, bool src_dir, const struct fc_stat *t, const struct fc_stat *parent,
	    struct fc_plan *p, struct err *e)
{
	char dir[FC_PATH_MAX + 1], base[FC_NAME_MAX + 1];
	bool slash;

	memset(p, 0, sizeof(*p));
	if (fc_split(target, dir, sizeof(dir), base, sizeof(base), &slash, e) < 0)
		return -1;
	if (t->exists && t->is_dir) {
		str_copy(p->dir, sizeof(p->dir), target);
		p->uid = t->uid;
		p->gid = t->gid;
		return 0;
	}
	if (t->exists && src_dir)
		return err_set(e, "%s is a file: a directory cannot replace it", target);
	if (t->exists && slash)
		return err_set(e, "%s is not a directory", target);
	if (!t->exists && slash && !src_dir)
		return err_set(e, "%s does not exist: a file cannot become a directory (drop the trailing /)",
			       target);
	if (!parent->exists)
		return err_set(e, "%s does not exist (the target's parent directory must; none is created)", dir);
	if (!parent->is_dir)
		return err_set(e, "%s is not a directory", dir);
	str_copy(p->dir, sizeof(p->dir), dir);
	str_copy(p->rename, sizeof(p->rename), base);
	p->uid = parent->uid;
	p->gid = parent->gid;
	return 0;
}

/* path without leading "./" (and "/" runs after it) and trailing '/'. */
static size_t norm(const char *path, const char **start)
{
	size_t n;

	while (path[0] == '.' && path[1] == '/') {
		path += 2;
		while (*path == '/')
			path++;
	}
	n = strlen(path);
	while (n > 0 && path[n - 1] == '/')
		n--;
	if (n == 1 && path[0] == '.')
		n = 0;
	*start = path;
	return n;
}

int fc_archive_top(int fd, char *top, size_t size, bool *is_dir, struct err *e)
{
	struct tar_reader *r = tar_reader_new();
	const struct tar_entry *ent;
	size_t tlen = 0;
	int rc, seen = 0;

	*is_dir = false;
	top[0] = '\0';
	while ((rc = tar_reader_next_fd(r, fd, &ent, e)) == 1) {
		const char *p;
		size_t n = norm(ent->path, &p), first = strcspn(p, "/");

		if (first > n)
			first = n;
		if (n == 0)
			continue;	/* "." or "./": the archive's own root */
		if (!seen) {
			if (first >= size) {
				rc = err_set(e, "archive entry \"%.80s\": name too long", ent->path);
				break;
			}
			memcpy(top, p, first);
			top[first] = '\0';
			tlen = first;
			seen = 1;
		} else if (first != tlen || memcmp(p, top, tlen) != 0) {
			rc = err_set(e, "the archive holds more than one file or directory (\"%s\" and \"%.80s\")", top,
				     ent->path);
			break;
		}
		if (n > first || ent->type == TAR_DIR)
			*is_dir = true;
	}
	tar_reader_free(r);
	if (rc < 0)
		return -1;
	if (!seen)
		return err_set(e, "the archive is empty");
	return 0;
}

/* The entry's path with the top name from replaced by to, into out. */
static int renamed(const char *path, const char *from, const char *to, char *out, size_t size, struct err *e)
{
	const char *p;
	size_t n = norm(path, &p), flen = strlen(from);

	if (n < flen || memcmp(p, from, flen) != 0 || (n > flen && p[flen] != '/'))
		return err_set(e, "archive entry \"%.80s\" is outside \"%s\"", path, from);
	if ((size_t)snprintf(out, size, "%s%.*s%s", to, (int)(n - flen), p + flen,
			     path[strlen(path) - 1] == '/' ? "/" : "") >= size)
		return err_set(e, "archive entry \"%.80s\": name too long", path);
	return 0;
}

int fc_restamp(int in, int out, const char *from, const char *to, bool own, long uid, long gid, struct err *e)
{
	struct tar_reader *r = tar_reader_new();
	struct tar_writer *w = tar_writer_new_fd(out);
	char path[TAR_MAX_PATH + FC_NAME_MAX + 2], link[TAR_MAX_PATH + FC_NAME_MAX + 2];
	char *chunk = xmalloc(SC_FILES_CP_CHUNK);
	const struct tar_entry *ent;
	int rc;

	while ((rc = tar_reader_next_fd(r, in, &ent, e)) == 1) {
		struct tar_entry copy = *ent;
		ssize_t n;

		const char *p;

		/* With a top entry, the archive's own "./" would be the landing
		 * directory itself: its mode and owner are not the upload's to set. */
		if (from && from[0] && norm(ent->path, &p) == 0)
			continue;
		if (to && to[0]) {
			if (renamed(ent->path, from, to, path, sizeof(path), e) < 0) {
				rc = -1;
				break;
			}
			copy.path = path;
			/* A hard link names another entry of the archive: renamed too. */
			if (ent->type == TAR_HARDLINK) {
				if (renamed(ent->linkpath, from, to, link, sizeof(link), e) < 0) {
					rc = -1;
					break;
				}
				copy.linkpath = link;
			}
		}
		if (own) {
			copy.uid = (uint64_t)uid;
			copy.gid = (uint64_t)gid;
		}
		if (tar_write_header(w, &copy, e) < 0) {
			rc = -1;
			break;
		}
		while ((n = tar_reader_data_fd(r, in, chunk, SC_FILES_CP_CHUNK, e)) > 0)
			if (tar_write_data(w, chunk, (size_t)n, e) < 0) {
				n = -1;
				break;
			}
		if (n < 0) {
			rc = -1;
			break;
		}
	}
	if (rc == 0)
		rc = tar_writer_finish(w, e);
	free(chunk);
	tar_writer_free(w);
	tar_reader_free(r);
	return rc;
}
