/* files.c: env.put and env.get, tar archives moved with `docker cp`
 * (env.put's target and owner: files_cp.c)
 * (doc/host-stream-chunks.md for how they travel). put: the archive was
 * spooled by the agent from chunk frames; it is checked (chunks, bytes,
 * sha256) before anything touches the container. get: the archive is kept as
 * <data>/commands/<id>.tar so a re-delivered command can be answered again. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/crypto.h"
#include "base/fs.h"
#include "base/proc.h"
#include "base/str.h"
#include "base/sys.h"
#include "sidecar/sidecar.h"

int sc_file_sha256(const char *path, char hex[SHA256_HEX_LEN + 1], struct err *e)
{
	struct sha256_ctx c = SHA256_CTX_INIT;
	uint8_t d[SHA256_LEN], tmp[65536];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return err_errno(e, "open %s", path);
	sha256_init(&c);
	while ((n = sys_read(fd, tmp, sizeof(tmp))) > 0)
		sha256_update(&c, tmp, (size_t)n);
	sys_close(fd);
	if (n < 0 || sha256_final(&c, d) < 0) {
		sha256_release(&c);
		return err_set(e, "reading %s failed", path);
	}
	for (size_t i = 0; i < SHA256_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
	return 0;
}

int sc_spool_check(const char *kind, const struct json *p, const struct json *sp, struct err *e)
{
	int64_t want = json_get_int(p, "tar_bytes", -1), got = json_get_int(sp, "bytes", 0);
	int64_t chunks = json_get_int(p, "tar_chunks", -1);
	const char *sha = json_get_str(p, "tar_sha256"), *path = json_get_str(sp, "path");
	char hex[SHA256_HEX_LEN + 1];

	if (!sp || !json_get_bool(sp, "complete", false) || !path || !*path || got != want ||
	    json_get_int(sp, "chunks", 0) != chunks)
		return err_set(e, "%s: archive incomplete: got %lld of %lld bytes", kind, (long long)got,
			       (long long)want);
	if (!sha || sc_file_sha256(path, hex, e) < 0 || !str_eq(hex, sha))
		return err_set(e, "%s: archive incomplete: sha256 mismatch", kind);
	return 0;
}

/* Append the file at from to the file at to (fsynced). */
static int part_append(const char *kind, const char *from, const char *to, struct err *e)
{
	char tmp[65536];
	int in = open(from, O_RDONLY | O_CLOEXEC), out;
	ssize_t n;
	int rc = 0;

	if (in < 0)
		return err_errno(e, "%s: %s", kind, from);
	if ((out = open(to, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)) < 0) {
		sys_close(in);
		return err_errno(e, "%s: %s", kind, to);
	}
	while (rc == 0 && (n = sys_read(in, tmp, sizeof(tmp))) > 0)
		if (sys_write_all(out, tmp, (size_t)n) < 0)
			rc = err_errno(e, "%s: writing %s", kind, to);
	if (rc == 0 && n < 0)
		rc = err_errno(e, "%s: reading %s", kind, from);
	if (rc == 0 && fsync(out) < 0)
		rc = err_errno(e, "%s: fsync %s", kind, to);
	sys_close(in);
	sys_close(out);
	return rc;
}

int sc_part_take(const char *kind, struct wk *w, const struct json *p, const char *part, int64_t *have,
		 struct err *e)
{
	const struct json *sp = json_get(w->cmd, "_spool");
	const char *spool = json_get_str(sp, "path");
	int64_t bytes = json_get_int(p, "tar_bytes", 0), size = json_get_int(p, "size", 0);
	int rc = 0;

	if (!sp)
		return 0;	/* a command without data: only the question */
	if (json_get_int(p, "offset", -1) != *have) {
		wk_progress("a part for offset %lld arrived while %lld bytes are held: the control plane resends",
			    (long long)json_get_int(p, "offset", -1), (long long)*have);
	} else if (*have + bytes > size) {
		rc = err_set(e, "%s: the part ends past the stream's %lld bytes", kind, (long long)size);
	} else if ((rc = sc_spool_check(kind, p, sp, e)) == 0 && (rc = part_append(kind, spool, part, e)) == 0) {
		*have += bytes;
	}
	if (spool && *spool)
		unlink(spool);
	return rc;
}

int sc_archive_answer(const struct wk *w, const void *p, size_t n, struct json **result, struct err *e)
{
	char tarpath[4096], hex[SHA256_HEX_LEN + 1];

	if (cmdlog_path(w->data, w->id, ".tar", tarpath, sizeof(tarpath)) < 0)
		return err_set(e, "%s: bad command id", w->kind);
	if (fs_write_atomic(tarpath, p, n, 0600, e) < 0)
		return err_prefix(e, "%s", w->kind);
	if (sha256_hex(p, n, hex) < 0)
		return err_set(e, "%s: sha256 failed", w->kind);
	*result = json_new_object();
	json_object_set_int(*result, "tar_bytes", (int64_t)n);
	json_object_set_str(*result, "tar_sha256", hex);
	json_object_set_int(*result, "tar_chunks", n ? (int64_t)((n + SC_CHUNK_BYTES - 1) / SC_CHUNK_BYTES) : 1);
	return 0;
}

/* cmd run as root in cname (rt_root_exec_args: privileged under gVisor). */
static int root_exec(const struct wk *w, const char *cname, struct buf *out, int64_t ms, struct err *e,
		     const char *const *cmd)
{
	struct argv a;
	int rc;

	av_init(&a);
	rt_root_exec_args(w->ctr_gvisor, &a);
	av_add(&a, cname);
	for (size_t i = 0; cmd[i]; i++)
		av_add(&a, cmd[i]);
	rc = dk_run(&a, ms, out, e);
	av_release(&a);
	return rc;
}

/* What path is in the container (as root, symlinks followed): st->exists
 * false when it is missing. 0, or -1 e (no stat in the image, say). */
static int ctr_stat(const struct wk *w, const char *cname, const char *path, struct fc_stat *st, struct err *e)
{
	const char *cmd[] = { "stat", "-L", "-c", "%f %u %g", "--", path, NULL };
	struct buf out = BUF_INIT;
	int rc;

	memset(st, 0, sizeof(*st));
	rc = root_exec(w, cname, &out, SC_DOCKER_QUICK_MS, e, cmd);
	if (rc < 0 && (strstr(e->msg, "No such file or directory") || strstr(e->msg, "Not a directory"))) {
		err_clear(e);
		rc = 0;
	} else if (rc == 0 && fc_parse_stat(out.data, st) < 0) {
		rc = err_set(e, "stat %s: unexpected output", path);
	}
	buf_release(&out);
	return rc < 0 ? err_prefix(e, "env.put: looking at %s", path) : 0;
}

/* One of the container's /etc files, or none (NULL, 0) when it cannot be read. */
static void ctr_file(const struct wk *w, const char *cname, const char *path, struct buf *b, const char **p,
		     size_t *n)
{
	const char *cmd[] = { "cat", "--", path, NULL };
	struct err ignore;

	*p = NULL;
	*n = 0;
	if (root_exec(w, cname, b, SC_DOCKER_QUICK_MS, &ignore, cmd) == 0 &&
	    b->len <= PW_FILE_MAX) {
		*p = b->data ? b->data : "";
		*n = b->len;
	}
}

/* owner ("user[:group]", names or numbers, by Docker's rules for `user`)
 * to ids, names from the container's own /etc/passwd and /etc/group. */
static int resolve_owner(const struct wk *w, const char *cname, const char *owner, long *uid, long *gid, struct err *e)
{
	struct buf bufs[2] = { BUF_INIT, BUF_INIT };
	struct pw_files f = { 0 };
	int need = pw_needs(owner), rc;

	if (!*owner || need < 0)
		return err_set(e, "env.put: owner \"%.80s\": give user[:group], as names or numbers", owner);
	if (need & PW_NEED_PASSWD)
		ctr_file(w, cname, "/etc/passwd", &bufs[0], &f.passwd, &f.passwd_len);
	if (need & PW_NEED_GROUP)
		ctr_file(w, cname, "/etc/group", &bufs[1], &f.group, &f.group_len);
	rc = pw_resolve(owner, &f, uid, gid, e);
	buf_release(&bufs[0]);
	buf_release(&bufs[1]);
	return rc < 0 ? err_prefix(e, "env.put: owner") : 0;
}

/* target: docker cp's rules (files_cp.c) into plan; *dir_src from the archive. */
static int plan_target(const struct wk *w, const char *cname, const char *target, int fd, char *top, size_t tsize,
		       struct fc_plan *plan, struct err *e)
{
	char parent[FC_PATH_MAX + 1], base[FC_NAME_MAX + 1];
	struct fc_stat t, pst = { 0 };
	bool slash, dir_src;

	if (fc_split(target, parent, sizeof(parent), base, sizeof(base), &slash, e) < 0)
		return err_prefix(e, "env.put");
	if (fc_archive_top(fd, top, tsize, &dir_src, e) < 0 || lseek(fd, 0, SEEK_SET) < 0)
		return err_prefix(e, "env.put");
	if (ctr_stat(w, cname, target, &t, e) < 0)
		return -1;
	if (!(t.exists && t.is_dir) && ctr_stat(w, cname, parent, &pst, e) < 0)
		return -1;
	return fc_plan(target, dir_src, &t, &pst, plan, e) < 0 ? err_prefix(e, "env.put") : 0;
}

/* `docker cp -` of the archive on fd into dir. */
static int cp_into(const char *cname, const char *dir, int fd, struct err *e)
{
	char dst[SC_DOCKER_CP_MAX];
	const char *argv[] = { "docker", "cp", "-", dst, NULL };
	struct proc_spec s;
	struct proc_result r;
	int rc = 0;

	if (str_fmt(dst, sizeof(dst), "%s:%s", cname, dir) < 0)
		return err_set(e, "env.put: the target directory's path is too long");
	proc_spec_init(&s, argv);
	s.in.mode = PROC_FD;
	s.in.fd = fd;
	s.timeout_ms = SC_DOCKER_TIMEOUT_MS;
	s.out_max = s.err_max = 65536;
	if (proc_run(&s, NULL, 0, &r, e) < 0)
		return err_prefix(e, "env.put");
	if (r.exit_code != 0 || r.timed_out) {
		char line[SC_DOCKER_LINE_MAX];

		dk_first_line(r.err.data, line, sizeof(line));
		rc = err_set(e, "env.put: docker cp: %s", r.timed_out ? "timed out" : line);
	}
	proc_result_release(&r);
	return rc;
}

/* The archive rewritten (renamed top entry, owner) into an unlinked temp
 * file next to the spool; its fd, or -1 e. */
static int restamped(const char *spool, int in, const char *top, const char *rename, bool own, long uid, long gid,
		     struct err *e)
{
	char tmp[FS_PATH_MAX];
	int out;

	if (fs_path(tmp, sizeof(tmp), e, "%s.cp", spool) < 0)
		return err_prefix(e, "env.put");
	if ((out = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0)
		return err_errno(e, "env.put: %s", tmp);
	unlink(tmp);
	if (fc_restamp(in, out, top, rename, own, uid, gid, e) < 0 || lseek(out, 0, SEEK_SET) < 0) {
		sys_close(out);
		return err_prefix(e, "env.put");
	}
	return out;
}

/*
 * path: extract into that directory (created if missing), the archive's
 * owners kept. target: docker cp's rules (files_cp.c), owned by the landing
 * directory's owner. owner (either way): that user[:group] instead.
 */
int cmd_env_put(struct wk *w, const struct json *payload, struct json **result, struct err *e)
{
	const struct json *sp = json_get(w->cmd, "_spool");
	const char *path = json_get_str(payload, "path"), *target = json_get_str(payload, "target");
	const char *owner = json_get_str(payload, "owner"), *spool = json_get_str(sp, "path");
	const char *where = target ? target : path;
	char cname[SC_DOCKER_NAME_MAX], top[FC_NAME_MAX + 1] = "", landed[FC_PATH_MAX + FC_NAME_MAX + 2];
	struct fc_plan plan = { 0 };
	bool own = false;
	long uid = 0, gid = 0;
	int fd = -1, cpfd = -1, rc = -1;

	if (json_get_int(payload, "tar_bytes", 0) > (int64_t)SC_ARCHIVE_MAX) {
		err_set(e, "env.put: archive larger than 32 MiB");
		goto out;
	}
	if (sc_spool_check("env.put", payload, sp, e) < 0 ||
	    wk_container_running(w, "env.put", json_get_str(payload, "service"), cname, sizeof(cname), e) < 0)
		goto out;
	if (!path == !target || !where || where[0] != '/' || strlen(where) > FC_PATH_MAX) {
		err_set(e, "env.put: payload needs an absolute path or target (one of them)");
		goto out;
	}
	if ((fd = open(spool, O_RDONLY | O_CLOEXEC)) < 0) {
		err_errno(e, "env.put: %s", spool);
		goto out;
	}
	if (target) {
		if (plan_target(w, cname, target, fd, top, sizeof(top), &plan, e) < 0)
			goto out;
		own = true;
		uid = plan.uid;
		gid = plan.gid;
	} else if (root_exec(w, cname, NULL, SC_DOCKER_TIMEOUT_MS, e, (const char *const[]){ "mkdir", "-p", "--", path, NULL }) < 0) {
		err_prefix(e, "env.put: creating %s", path);
		goto out;
	} else {
		str_copy(plan.dir, sizeof(plan.dir), path);
	}
	if (owner && resolve_owner(w, cname, owner, &uid, &gid, e) < 0)
		goto out;
	own = own || owner;
	if ((own || plan.rename[0]) &&
	    (cpfd = restamped(spool, fd, target ? top : NULL, plan.rename, own, uid, gid, e)) < 0)
		goto out;
	if (cp_into(cname, plan.dir, cpfd >= 0 ? cpfd : fd, e) < 0)
		goto out;
	*result = json_new_object();
	if (target) {
		size_t n = strlen(plan.dir);

		while (n > 1 && plan.dir[n - 1] == '/')
			n--;
		snprintf(landed, sizeof(landed), "%.*s%s%s", (int)n, plan.dir, n > 1 ? "/" : "",
			 plan.rename[0] ? plan.rename : top);
	} else {
		str_copy(landed, sizeof(landed), path);
	}
	json_object_set_str(*result, "path", landed);
	if (own) {
		char ids[64];

		snprintf(ids, sizeof(ids), "%ld:%ld", uid, gid);
		json_object_set_str(*result, "owner", ids);
	}
	rc = 0;
out:
	if (cpfd >= 0)
		sys_close(cpfd);
	if (fd >= 0)
		sys_close(fd);
	if (spool && *spool)
		unlink(spool);
	return rc;
}

int cmd_env_get(struct wk *w, const struct json *payload, struct json **result, struct err *e)
{
	const char *path = json_get_str(payload, "path");
	char cname[SC_DOCKER_NAME_MAX], src[SC_DOCKER_CP_MAX];
	const char *argv[] = { "docker", "cp", src, "-", NULL };
	struct proc_spec s;
	struct proc_result r;
	int rc;

	if (wk_container(w, "env.get", json_get_str(payload, "service"), cname, sizeof(cname), e) < 0)
		return -1;
	if (!path || path[0] != '/' || strlen(path) > FC_PATH_MAX)
		return err_set(e, "env.get: payload.path must be an absolute path");
	if (str_fmt(src, sizeof(src), "%s:%s", cname, path) < 0)
		return err_set(e, "env.get: payload.path is too long");
	proc_spec_init(&s, argv);
	s.timeout_ms = SC_DOCKER_TIMEOUT_MS;
	s.out_max = (size_t)SC_ARCHIVE_MAX;
	s.err_max = 65536;
	if (proc_run(&s, NULL, 0, &r, e) < 0)
		return err_prefix(e, "env.get");
	if (r.out_truncated) {
		proc_result_release(&r);
		return err_set(e, "env.get: archive larger than 32 MiB");
	}
	if (r.exit_code != 0 || r.timed_out) {
		char line[SC_DOCKER_LINE_MAX];

		dk_first_line(r.err.data, line, sizeof(line));
		proc_result_release(&r);
		return err_set(e, "env.get: docker cp %s: %s", path, r.timed_out ? "timed out" : line);
	}
	rc = sc_archive_answer(w, r.out.data, r.out.len, result, e);
	proc_result_release(&r);
	return rc;
}
