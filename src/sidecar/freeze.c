/* freeze.c: the snapshot's own brief freeze, through the kernel's cgroup
 * freezer, the way runc implements `docker pause`.
 *
 * Why not `docker pause`: each docker CLI call costs ~13 ms and a pause or
 * unpause ~20 ms (CLI, dockerd, containerd, runc, then the same write to the
 * freezer we do here). Inside the snapshot's frozen window that is most of
 * the window. Writing the cgroup file ourselves freezes every container of
 * an environment in well under a millisecond each, and thaws them as fast.
 *
 * Where: a container's cgroup comes from its main pid (/proc/<pid>/cgroup,
 * as seen from our own cgroup namespace), placed under the hierarchy's
 * mount point from /proc/self/mountinfo (minus the mount's own root):
 *  - cgroup v1, the `freezer` controller: <dir>/freezer.state, write FROZEN
 *    and read until it says FROZEN (it says FREEZING meanwhile), THAWED to
 *    thaw;
 *  - cgroup v2: <dir>/cgroup.freeze, write 1 and wait for "frozen 1" in
 *    <dir>/cgroup.events, 0 to thaw.
 * A host with both (hybrid) uses the v1 freezer when the process has one.
 * The roots of /proc and of the mount points are in struct fz_sys so that
 * the unit tests run this over a fake tree in a temp dir.
 *
 * Docker does not know about a freeze done this way: `docker inspect` still
 * says "running". So a worker killed inside the window must not leave the
 * containers frozen for good. Before the freeze the worker writes the record
 * <data>/envs/<env>/frozen ("v1 <dir>" lines), created under a temp name,
 * flock()ed, then renamed into place: whoever sees the record under its name
 * sees it locked while its worker lives. After the thaw the record goes.
 * fz_recover, run before every command for the env (worker.c) and for every
 * env at denvd's start (agent.c), takes the lock without waiting: busy means
 * a live worker is inside its window (an orphan of an earlier agent), left
 * alone; free means that worker died, and every cgroup listed is thawed.
 * Only directories below a freezer (v1) or cgroup2 mount are ever written. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/log.h"
#include "base/str.h"
#include "base/sys.h"
#include "sidecar/sidecar.h"

struct fz_mount {
	int version;
	char root[FZ_PATH_MAX];		/* the cgroup the mount shows, "/" for the whole hierarchy */
	char point[FZ_PATH_MAX];	/* where it is mounted */
};

void fz_sys_default(struct fz_sys *s)
{
	s->proc = "/proc";
	s->root = "";
}

/* ---- small file helpers ---- */

static int read_small(const char *path, char *out, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t r;

	if (fd < 0)
		return -1;
	r = sys_read_full(fd, out, n - 1);
	sys_close(fd);
	if (r < 0)
		return -1;
	out[r] = '\0';
	return 0;
}

static int write_small(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	int rc;

	if (fd < 0)
		return -1;
	rc = sys_write_all(fd, s, strlen(s));
	if (close(fd) < 0 && rc == 0)
		rc = -1;
	return rc;
}

static int read_text(const char *path, size_t max, struct buf *out, struct err *e)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char tmp[4096];
	ssize_t r;

	if (fd < 0)
		return err_errno(e, "%s", path);
	while ((r = sys_read(fd, tmp, sizeof(tmp))) > 0) {
		if (out->len + (size_t)r > max || buf_add(out, tmp, (size_t)r) < 0) {
			sys_close(fd);
			return err_set(e, "%s: larger than %zu bytes", path, max);
		}
	}
	sys_close(fd);
	return r < 0 ? err_errno(e, "read %s", path) : 0;
}

static void nap_ns(long ns)
{
	struct timespec ts = { 0, ns };

	nanosleep(&ts, NULL);
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(const char *s, char *out, size_t n)
{
	size_t k = 0;

	while (*s && k + 1 < n) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' && s[3] >= '0' &&
		    s[3] <= '7') {
			out[k++] = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 4;
		} else {
			out[k++] = *s++;
		}
	}
	out[k] = '\0';
}

static bool has_token(const char *list, const char *tok)
{
	size_t tl = strlen(tok);

	for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (strncmp(p, tok, tl) == 0 && (p[tl] == ',' || p[tl] == '\0'))
			return true;
	return false;
}

/* No "." or ".." component: a path from a file we read is never let out of its mount. */
static bool plain_path(const char *p)
{
	for (const char *c = p; c && *c; c = strchr(c, '/')) {
		while (*c == '/')
			c++;
		if ((c[0] == '.' && (c[1] == '/' || c[1] == '\0')) ||
		    (c[0] == '.' && c[1] == '.' && (c[2] == '/' || c[2] == '\0')))
			return false;
	}
	return true;
}

/* The lines of the file at <base><rest> (mountinfo, cgroup.procs: at most
 * FZ_MOUNTINFO_MAX bytes), as str_split gives them; NULL with e. */
static char **read_lines(const char *base, const char *rest, size_t *n, struct err *e)
{
	char path[FS_PATH_MAX];
	struct buf b = BUF_INIT;
	char **lines = NULL;

	*n = 0;
	if (fs_path(path, sizeof(path), e, "%s%s", base, rest) == 0 && read_text(path, FZ_MOUNTINFO_MAX, &b, e) == 0)
		lines = str_split(b.data, "\n", n);
	buf_release(&b);
	return lines;
}

/* The v1 mounts of controller and the cgroup2 mounts of <proc>/self/mountinfo. */
static int mounts_load(const struct fz_sys *s, const char *controller, struct fz_mount *m, size_t *n,
		       struct err *e)
{
	char **lines;
	size_t nl;

	*n = 0;
	if (!(lines = read_lines(s->proc, "/self/mountinfo", &nl, e)))
		return -1;
	for (size_t i = 0; i < nl && *n < SC_FREEZE_MOUNTS_MAX; i++) {
		char **f;
		size_t nf = 0, dash;
		int version = 0;

		f = str_split(lines[i], " ", &nf);
		for (dash = 6; dash < nf && !str_eq(f[dash], "-"); dash++)
			;
		/* id parent dev root point options [optional...] - fstype source superoptions */
		if (dash + 3 < nf) {
			if (str_eq(f[dash + 1], "cgroup") && has_token(f[dash + 3], controller))
				version = 1;
			else if (str_eq(f[dash + 1], "cgroup2"))
				version = 2;
		}
		if (version) {
			m[*n].version = version;
			unescape(f[3], m[*n].root, sizeof(m[*n].root));
			unescape(f[4], m[*n].point, sizeof(m[*n].point));
			if (plain_path(m[*n].root) && plain_path(m[*n].point))
				(*n)++;
		}
		str_list_free(f);
	}
	str_list_free(lines);
	return 0;
}

/* dir for cgroup path cg under mount m, or -1 when the mount does not show it. */
static int place(const struct fz_sys *s, const struct fz_mount *m, const char *cg, char *out, size_t n)
{
	const char *rel = cg;
	size_t rl = strlen(m->root);
	int w;

	if (!str_eq(m->root, "/")) {
		if (strncmp(cg, m->root, rl) != 0 || (cg[rl] != '/' && cg[rl] != '\0'))
			return -1;
		rel = cg + rl;
	}
	if (str_eq(rel, "/"))
		rel = "";
	w = snprintf(out, n, "%s%s%s", s->root, str_eq(m->point, "/") && *rel ? "" : m->point, rel);
	return w < 0 || (size_t)w >= n ? -1 : 0;
}

int fz_cgroup_of(const struct fz_sys *s, long pid, const char *must_contain, struct fz_cg *out, struct err *e)
{
	const struct fz_want freezer = { "freezer", "freezer.state", "cgroup.freeze", W_OK };

	return fz_cgroup_dir(s, pid, &freezer, must_contain, out, e);
}

int fz_cgroup_dir(const struct fz_sys *s, long pid, const struct fz_want *want, const char *must_contain,
		  struct fz_cg *out, struct err *e)
{
	struct fz_mount *m = xcalloc(SC_FREEZE_MOUNTS_MAX, sizeof(*m));
	char path[FZ_PATH_MAX], v1[FZ_PATH_MAX] = "", v2[FZ_PATH_MAX] = "", file[FZ_PATH_MAX + 32];
	struct buf b = BUF_INIT;
	char **lines = NULL;
	size_t nm = 0, nl = 0;
	int rc = -1;
	bool have_v1 = false, have_v2 = false;

	memset(out, 0, sizeof(*out));
	if (pid <= 0) {
		err_set(e, "no main process (pid %ld)", pid);
		goto out;
	}
	if (mounts_load(s, want->controller, m, &nm, e) < 0)
		goto out;
	snprintf(path, sizeof(path), "%s/%ld/cgroup", s->proc, pid);
	if (read_text(path, FZ_MOUNTINFO_MAX, &b, e) < 0)
		goto out;
	lines = str_split(b.data, "\n", &nl);
	for (size_t i = 0; i < nl; i++) {
		char *c1 = strchr(lines[i], ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;

		if (!c2)
			continue;
		*c1 = '\0';
		*c2 = '\0';
		if (str_eq(lines[i], "0") && c1[1] == '\0') {
			str_copy(v2, sizeof(v2), c2 + 1);
			have_v2 = true;
		} else if (has_token(c1 + 1, want->controller)) {
			str_copy(v1, sizeof(v1), c2 + 1);
			have_v1 = true;
		}
	}
	for (int version = 1; version <= 2 && !out->version; version++) {
		const char *cg = version == 1 ? v1 : v2;

		if (!(version == 1 ? have_v1 : have_v2) || !plain_path(cg) || *cg != '/')
			continue;
		if (must_contain && *must_contain && !strstr(cg, must_contain))
			continue;
		for (size_t i = 0; i < nm; i++) {
			if (m[i].version != version || place(s, &m[i], cg, out->dir, sizeof(out->dir)) < 0)
				continue;
			if (str_fmt(file, sizeof(file), "%s/%s", out->dir, version == 1 ? want->file_v1 : want->file_v2) == 0 &&
			    access(file, want->mode) == 0) {
				out->version = version;
				break;
			}
		}
	}
	if (!out->version) {
		if (must_contain && *must_contain && !strstr(v1, must_contain) && !strstr(v2, must_contain))
			err_set(e, "process %ld is not in the container's cgroup (%s)", pid,
				have_v1 ? v1 : have_v2 ? v2 : "none");
		else
			err_set(e, "no usable cgroup %s for process %ld (v1 %s: %s, v2: %s)", want->controller, pid,
				want->controller, have_v1 ? v1 : "none", have_v2 ? v2 : "none");
		out->dir[0] = '\0';
		goto out;
	}
	rc = 0;
out:
	str_list_free(lines);
	buf_release(&b);
	free(m);
	return rc;
}

int fz_comms(const struct fz_sys *s, const struct fz_cg *cg, struct buf *out, struct err *e)
{
	char path[FS_PATH_MAX], comm[64];
	char **pids;
	size_t n, found = 0;

	if (!(pids = read_lines(cg->dir, "/cgroup.procs", &n, e)))
		return -1;
	for (size_t i = 0; i < n; i++) {
		int64_t pid;

		if (str_to_i64(pids[i], &pid) < 0 || pid <= 0)
			continue;
		snprintf(path, sizeof(path), "%s/%lld/comm", s->proc, (long long)pid);
		if (read_small(path, comm, sizeof(comm)) < 0)
			continue;	/* gone meanwhile */
		comm[strcspn(comm, "\n")] = '\0';
		buf_addf(out, "%s\n", comm);
		found++;
	}
	str_list_free(pids);
	if (!found)
		return err_set(e, "no process of %s is visible in %s", cg->dir, s->proc);
	return 0;
}

/* ---- freeze and thaw ---- */

/* The control file name of the cgroup into out (FS_PATH_MAX bytes). 0 / -1. */
static int file_of(const struct fz_cg *cg, const char *name, char *out)
{
	if (str_fmt(out, FS_PATH_MAX, "%s/%s", cg->dir, name) < 0) {
		errno = ENAMETOOLONG;	/* what the callers report, as open would */
		return -1;
	}
	return 0;
}

static int set_state(const struct fz_cg *cg, bool frozen)
{
	char path[FS_PATH_MAX];

	if (file_of(cg, cg->version == 1 ? "freezer.state" : "cgroup.freeze", path) < 0)
		return -1;
	return write_small(path, cg->version == 1 ? (frozen ? "FROZEN" : "THAWED") : (frozen ? "1" : "0"));
}

/* 1 frozen, 0 not yet, -1 unreadable. */
static int is_frozen(const struct fz_cg *cg)
{
	char path[FS_PATH_MAX], st[SC_FREEZE_STATE_MAX];

	if (file_of(cg, cg->version == 1 ? "freezer.state" : "cgroup.events", path) < 0 ||
	    read_small(path, st, sizeof(st)) < 0)
		return -1;
	if (cg->version == 1)
		return strncmp(st, "FROZEN", 6) == 0;
	for (const char *p = st; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, "frozen ", 7) == 0)
			return p[7] == '1';
	return -1;
}

int fz_thaw(const struct fz_cg *cgs, size_t n, struct err *e)
{
	int rc = 0;

	for (size_t i = 0; i < n; i++)
		if (set_state(&cgs[i], false) < 0 && errno != ENOENT && rc == 0)
			rc = err_errno(e, "thawing %s", cgs[i].dir);
	return rc;
}

int fz_freeze(const struct fz_cg *cgs, size_t n, int64_t timeout_ms, struct err *e)
{
	bool *done;
	int64_t start = ev_mono_ms(), last_write = start;
	long wait = SC_FREEZE_POLL_FIRST_NS;
	struct err e2;

	if (!n)
		return 0;
	done = xcalloc(n, sizeof(bool));
	/* Ask every cgroup first, then wait: they freeze side by side. */
	for (size_t i = 0; i < n; i++)
		if (set_state(&cgs[i], true) < 0) {
			err_errno(e, "freezing %s", cgs[i].dir);
			fz_thaw(cgs, i, &e2);
			free(done);
			return -1;
		}
	for (;;) {
		size_t left = 0;
		int64_t now;

		for (size_t i = 0; i < n; i++) {
			int f;

			if (done[i])
				continue;
			if ((f = is_frozen(&cgs[i])) < 0) {
				err_errno(e, "reading the freezer state of %s", cgs[i].dir);
				goto fail;
			}
			done[i] = f == 1;
			left += !done[i];
		}
		if (!left)
			break;
		now = ev_mono_ms();
		if (now - start > timeout_ms) {
			for (size_t i = 0; i < n; i++)
				if (!done[i]) {
					err_set(e, "%s did not freeze within %lld ms", cgs[i].dir, (long long)timeout_ms);
					break;
				}
			goto fail;
		}
		/* v1: a task that kept running through the first pass is asked again. */
		if (now - last_write >= FZ_REWRITE_MS) {
			for (size_t i = 0; i < n; i++)
				if (!done[i] && cgs[i].version == 1)
					(void)set_state(&cgs[i], true);
			last_write = now;
		}
		nap_ns(wait);
		wait = wait * 2 > SC_FREEZE_POLL_MAX_NS ? SC_FREEZE_POLL_MAX_NS : wait * 2;
	}
	free(done);
	return 0;
fail:
	fz_thaw(cgs, n, &e2);
	free(done);
	return -1;
}

/* ---- the record of a freeze in progress ---- */

void fz_record_path(const char *data, const char *env, char *out, size_t n)
{
	snprintf(out, n, "%s/envs/%s/frozen", data, env);
}

int fz_record_begin(const char *path, const struct fz_cg *cgs, size_t n, struct err *e)
{
	char tmp[FZ_PATH_MAX + 32];
	struct buf b = BUF_INIT;
	int fd;

	for (size_t i = 0; i < n; i++)
		if (strchr(cgs[i].dir, '\n') || buf_addf(&b, "v%d %s\n", cgs[i].version, cgs[i].dir) < 0) {
			buf_release(&b);
			return err_set(e, "cannot record cgroup %s", cgs[i].dir);
		}
	snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", path, (long)getpid());
	(void)unlink(tmp);
	if ((fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0) {
		buf_release(&b);
		return err_errno(e, "create %s", tmp);
	}
	/* Locked before it has its name: never seen unlocked while we live. No
	 * fsync: the record only has to outlive this process, not the machine
	 * (a reboot thaws everything). */
	if (flock(fd, LOCK_EX) < 0 || sys_write_all(fd, b.data, b.len) < 0 || rename(tmp, path) < 0) {
		err_errno(e, "write %s", path);
		sys_close(fd);
		(void)unlink(tmp);
		buf_release(&b);
		return -1;
	}
	buf_release(&b);
	return fd;
}

int fz_record_end(const char *path, int fd, struct err *e)
{
	int rc = 0;

	if (unlink(path) < 0 && errno != ENOENT)
		rc = err_errno(e, "remove %s", path);
	sys_close(fd);
	return rc;
}

/* Is dir below one of the freezer/cgroup2 mounts (root prefixed)? */
static int mount_version(const struct fz_sys *s, const struct fz_mount *m, size_t nm, const char *dir)
{
	char base[FZ_PATH_MAX * 2];

	if (!plain_path(dir))
		return 0;
	for (size_t i = 0; i < nm; i++) {
		size_t bl;

		snprintf(base, sizeof(base), "%s%s", s->root, m[i].point);
		bl = strlen(base);
		if (strncmp(dir, base, bl) == 0 && (dir[bl] == '/' || dir[bl] == '\0'))
			return m[i].version;
	}
	return 0;
}

int fz_recover(const struct fz_sys *s, const char *path, struct err *e)
{
	struct fz_mount *m = NULL;
	struct buf b = BUF_INIT;
	struct stat a, c;
	char **lines = NULL;
	size_t nl = 0, nm = 0;
	int fd, rc = -1, thawed = 0;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return errno == ENOENT ? 0 : err_errno(e, "open %s", path);
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		sys_close(fd);
		if (errno == EWOULDBLOCK)
			return 0;	/* its worker lives and will thaw */
		return err_errno(e, "lock %s", path);
	}
	/* Another recovery may have removed it between our open and our lock. */
	if (fstat(fd, &a) < 0 || stat(path, &c) < 0 || a.st_ino != c.st_ino || a.st_dev != c.st_dev) {
		sys_close(fd);
		return 0;
	}
	m = xcalloc(SC_FREEZE_MOUNTS_MAX, sizeof(*m));
	if (mounts_load(s, "freezer", m, &nm, e) < 0)
		goto out;
	{
		char tmp[4096];
		ssize_t r;

		while ((r = sys_read(fd, tmp, sizeof(tmp))) > 0)
			if (buf_add(&b, tmp, (size_t)r) < 0 || b.len > FZ_RECORD_MAX) {
				err_set(e, "%s: too large", path);
				goto out;
			}
	}
	lines = str_split(b.data, "\n", &nl);
	for (size_t i = 0; i < nl; i++) {
		struct fz_cg cg;
		struct err e2;

		memset(&cg, 0, sizeof(cg));
		if ((lines[i][0] != 'v' || (lines[i][1] != '1' && lines[i][1] != '2') || lines[i][2] != ' ') ||
		    str_copy(cg.dir, sizeof(cg.dir), lines[i] + 3) < 0) {
			log_warn("denvd", "%s: ignoring line \"%.100s\"", path, lines[i]);
			continue;
		}
		cg.version = lines[i][1] - '0';
		if (mount_version(s, m, nm, cg.dir) != cg.version) {
			log_warn("denvd", "%s: %s is not below a cgroup v%d freezer mount; left alone", path, cg.dir,
				 cg.version);
			continue;
		}
		if (fz_thaw(&cg, 1, &e2) < 0) {
			err_set(e, "%s", e2.msg);
			goto out;
		}
		if (fs_exists(cg.dir)) {
			log_info("denvd", "thawed %s (frozen by a snapshot whose worker died)", cg.dir);
			thawed++;
		}
	}
	if (unlink(path) < 0 && errno != ENOENT) {
		err_errno(e, "remove %s", path);
		goto out;
	}
	rc = thawed > 0;
out:
	str_list_free(lines);
	buf_release(&b);
	free(m);
	sys_close(fd);
	return rc;
}

int fz_recover_env(const char *data, const char *env, struct err *e)
{
	struct fz_sys s;
	char path[FZ_PATH_MAX];

	fz_sys_default(&s);
	fz_record_path(data, env, path, sizeof(path));
	return fz_recover(&s, path, e);
}

int fz_recover_all(const char *data, struct err *e)
{
	char dir[FS_PATH_MAX];
	DIR *d;
	struct dirent *de;
	int rc = 0;

	if (fs_path(dir, sizeof(dir), e, "%s/envs", data) < 0)
		return -1;
	if (!(d = opendir(dir)))
		return errno == ENOENT ? 0 : err_errno(e, "open %s", dir);
	while ((de = readdir(d))) {
		struct err e2;

		if (!sc_safe_id(de->d_name))
			continue;
		if (fz_recover_env(data, de->d_name, &e2) < 0 && rc == 0)
			rc = err_set(e, "environment %s: %s", de->d_name, e2.msg);
	}
	closedir(d);
	return rc;
}
