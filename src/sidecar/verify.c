/* verify.c: verify.collect and verify.run (protocol.md; compose.md, verifier
 * contract; protections.md 2 and 3).
 *
 * collect, on the agent's environment: freeze the agent service first
 * (`docker pause`), so nothing the agent left running can touch its answer
 * again; check each declared path in the frozen container's own tree
 * (verify_tree.c, through /proc/<pid>/root); only if nothing is refused,
 * copy each path with `docker cp -a=false` (links are copied as links, never
 * followed) into <data>/verify/<id>/submission (root-owned, 0700), keeping
 * its absolute layout; walk the copy again with lstat, since the copy is
 * what a grader sees. Any refusal deletes the whole copy. Once the agent
 * is frozen, whatever its files make fail (a copy that meets what the
 * check did not, a full disk, an entry root cannot read) is a refusal, a
 * score of 0, never an error: an error is no score, which an agent could
 * prefer to a 0. missing is settled for every path before the walk, so it
 * does not depend on where a refusal stopped it. The agent stays frozen:
 * unfreezing is the snapshot's business (keep_paused), or, on a refusal
 * (no snapshot follows), resume's here; thaw (promote's replays, which
 * grade a fork and take no snapshot) unpauses it after any collect.
 * The outcome is kept as <data>/verify/<id>/collect.json for verify.run.
 *
 * run, on the grader's fork (same host): with refused (in the payload, or
 * in collect.json: a control plane that forgot to say so does not get a
 * grader run over a refused copy) the answer is reward 0, source refused,
 * and nothing starts. Otherwise the verifier runs as uid 0, either as its
 * own container on the fork's network with the copy mounted read-only, or
 * inside a service of the fork with the copy placed at /submission; the
 * reward is reward.txt, else the last token of stdout. timeout_sec bounds
 * the run: past it the verifier is killed and the grade fails. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fs.h"
#include "base/proc.h"
#include "base/str.h"
#include "base/sys.h"
#include "sidecar/sidecar.h"
#include "sidecar/storage/storage.h"
#include "tar/tar.h"

/* ---- running a child with a deadline, its output streamed ---- */

typedef proc_sink_fn vf_sink;

struct vf_ran {
	int exit_code;
	bool timed_out;
	int64_t ms;
};

/* Keep the last SC_VERIFY_TAIL_BYTES of a stream. */
static int tail_sink(void *arg, const void *p, size_t n, struct err *e)
{
	struct buf *b = arg;

	(void)e;
	if (n > SC_VERIFY_TAIL_BYTES) {
		p = (const char *)p + (n - SC_VERIFY_TAIL_BYTES);
		n = SC_VERIFY_TAIL_BYTES;
	}
	if (b->len + n > SC_VERIFY_TAIL_BYTES)
		buf_consume(b, b->len + n - SC_VERIFY_TAIL_BYTES);
	buf_add(b, p, n);
	return 0;
}

/* Collect at most max bytes; more is an error (the sink's, reported as is). */
struct cap_sink {
	struct buf *b;
	size_t max;
	const char *what;
};

static int cap_sink(void *arg, const void *p, size_t n, struct err *e)
{
	struct cap_sink *c = arg;

	if (c->b->len + n > c->max)
		return err_set(e, "%s larger than %zu bytes", c->what, c->max);
	buf_add(c->b, p, n);
	return 0;
}

static int tar_sink(void *arg, const void *p, size_t n, struct err *e)
{
	return tar_extract_feed(arg, p, n, e);
}

/* Run argv (no shell) until it exits or timeout_ms passes; stdout goes to
 * out (stops the child if it fails), stderr's tail to err_tail. At the
 * deadline the child and its process group are killed. -1 only when the
 * child could not run or out failed; a non-zero exit or a timeout is in r. */
static int vf_run(const char *const *argv, int64_t timeout_ms, vf_sink out, void *out_arg, struct buf *err_tail,
		  struct vf_ran *r, struct err *e)
{
	struct proc_spec s;
	struct proc_result res;
	int rc;

	proc_spec_init(&s, argv);
	s.timeout_ms = timeout_ms;
	s.out_sink = out;
	s.out_sink_arg = out_arg;
	s.err_max = SC_VERIFY_TAIL_BYTES;
	s.err_tail = true;
	rc = proc_run(&s, NULL, 0, &res, e);
	r->exit_code = res.exit_code;
	r->timed_out = res.timed_out;
	r->ms = res.duration_ms;
	tail_sink(err_tail, res.err.data, res.err.len, NULL);
	proc_result_release(&res);
	return rc;
}

/* ---- paths ---- */

/* "/home//agent/./x" -> "home/agent/x"; ".." and "/" itself are refused:
 * a declared path names one thing below the root, and says so plainly. */
static int norm_path(const char *decl, struct buf *out, struct err *e)
{
	const char *p = decl;

	if (!decl || decl[0] != '/' || strlen(decl) > SC_VERIFY_PATH_MAX)
		return err_set(e, "collect path \"%s\" must be absolute", decl ? decl : "");
	while (*p) {
		size_t n;

		while (*p == '/')
			p++;
		n = strcspn(p, "/");
		if (n == 0)
			break;
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return err_set(e, "collect path \"%s\" must not contain \"..\"", decl);
		if (n > 255)
			return err_set(e, "collect path \"%s\" has a component over 255 bytes", decl);
		if (!(n == 1 && p[0] == '.')) {
			if (out->len)
				buf_addch(out, '/');
			buf_add(out, p, n);
		}
		p += n;
	}
	if (!out->len)
		return err_set(e, "collect path \"%s\" names the root; name what to collect", decl);
	return 0;
}

/* Directories under <data>/verify older than SC_VERIFY_KEEP_S: a verify that
 * never reached its grade (control plane gone, command cut off). */
static void prune_old(const struct wk *w)
{
	char top[FS_PATH_MAX], path[FS_PATH_MAX];
	DIR *d;
	struct dirent *de;
	time_t now = time(NULL);
	struct err e;

	if (fs_path(top, sizeof(top), &e, "%s/verify", w->data) < 0 || !(d = opendir(top)))
		return;
	while ((de = readdir(d))) {
		struct stat st;

		if (!sc_safe_id(de->d_name) || fs_path(path, sizeof(path), &e, "%s/%s", top, de->d_name) < 0)
			continue;
		if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && now - st.st_mtime > SC_VERIFY_KEEP_S &&
		    fs_remove_all(path, &e) < 0)
			wk_progress("removing the old %s: %s", path, e.msg);
	}
	closedir(d);
}

/* A fresh, empty, root-only directory (anything already there was ours). */
static int fresh_dir(const char *path, struct err *e)
{
	if (fs_remove_all(path, e) < 0)
		return -1;
	if (mkdir(path, 0700) < 0)
		return err_errno(e, "mkdir %s", path);
	if (chmod(path, 0700) < 0)
		return err_errno(e, "chmod %s", path);
	return 0;
}

/* ---- verify.collect ---- */

struct collect {
	struct wk *w;
	const char *id, *svc;
	char cname[SC_DOCKER_NAME_MAX], dir[FS_PATH_MAX], sub[FS_PATH_MAX];
	long pid;
	bool gvisor;			/* its files are seen through Docker's mounts, not /proc */
	char ended[ERR_MSG_MAX];	/* why the agent's container is gone, when it ended by itself */
	size_t npaths;
	bool resume;			/* unpause the agent when refused */
	bool thaw;			/* unpause it after any collect: no snapshot follows (promote's replays) */
	char **rel;			/* normalised paths */
	const char **decl;		/* as declared */
	bool *missing;
};

/* docker pause or unpause, through the Engine API where it can be used
 * (a CLI call costs a process and its start-up: most of a refused verify). */
static int pause_ctl(const char *cname, const char *action, struct err *e)
{
	int rc = engine_container_do(cname, action, e);

	return rc != 0 ? (rc > 0 ? 0 : -1) : dk(NULL, SC_DOCKER_TIMEOUT_MS, e, action, cname, NULL);
}

static int freeze(struct collect *c, struct err *e)
{
	struct engine_ctr st;
	int rc;

	if (wk_container_ended_too(c->w, "verify.collect", c->svc, c->cname, sizeof(c->cname), e) < 0)
		return -1;
	if ((rc = engine_container(c->cname, &st, e)) <= 0)
		return rc == 0 ? err_set(e, "cannot read the state of %s: no such container", c->cname) : -1;
	c->pid = st.pid;
	c->gvisor = st.gvisor;
	/* What ran in it ended it (under runc the agent cannot end its pid 1;
	 * under gVisor a fork bomb ends the sandbox): a finding, not a fault,
	 * or ending the container would dodge a 0. */
	if (str_eq(st.status, "exited") || str_eq(st.status, "dead")) {
		snprintf(c->ended, sizeof(c->ended), "its container ended before collect (%s, exit %d)",
			 st.status, st.exit_code);
		return 0;
	}
	if (str_eq(st.status, "paused")) {
		wk_progress("agent service %s is already frozen", c->svc);
		return 0;
	}
	wk_progress("freezing agent service %s", c->svc);
	return pause_ctl(c->cname, "pause", e);
}

/* Where path rel ("home/agent/x") of a gVisor container lies on the host:
 * below the deepest mount whose destination holds it, else below the root
 * directory; *sub is what remains of rel there ("" for the mount itself). */
static const char *host_dir_of(const struct json *mounts, const char *rootfs, const char *rel, const char **sub)
{
	const char *best = rootfs;
	size_t best_len = 0;

	*sub = rel;
	for (size_t i = 0; i < json_len(mounts); i++) {
		const char *dst = json_get_str(json_at(mounts, i), "Destination");
		const char *src = json_get_str(json_at(mounts, i), "Source");
		size_t len = dst ? strlen(dst) : 0;

		if (len < 2 || !src || *dst != '/' || len - 1 <= best_len || strncmp(rel, dst + 1, len - 1) != 0 ||
		    (rel[len - 1] != '\0' && rel[len - 1] != '/'))
			continue;
		best = src;
		best_len = len - 1;
		*sub = rel[best_len] ? rel + best_len + 1 : "";
	}
	return best;
}

/* One declared path below the directory fd: missing, or walked into t. */
static int check_one(struct collect *c, size_t i, int fd, const char *rel, struct vtree *t, struct err *e)
{
	bool gone = false;
	int rc;

	if (!*rel)	/* a mount point itself: a directory, walked whole */
		return vtree_all(fd, t, e);
	rc = vtree_path(fd, rel, t, &gone, e);
	c->missing[i] = c->missing[i] || gone;
	return rc;
}

/* Under gVisor the sandbox process's /proc/<pid>/root is gVisor's own empty
 * root, not the container's: the paths are looked up where Docker keeps
 * them on the host (the volumes' sources, the merged root directory).
 * What gVisor keeps only inside its sandbox (a FIFO, a socket made there)
 * is missing here, and a missing path gives the grader nothing. */
static int check_source_gvisor(struct collect *c, struct vtree *t, struct err *e)
{
	struct json *mounts = NULL;
	char rootfs[FS_PATH_MAX];
	int rc;

	if ((rc = engine_container_files(c->cname, &mounts, rootfs, sizeof(rootfs), e)) <= 0)
		return rc == 0 ? err_set(e, "agent service %s: no container %s", c->svc, c->cname) : -1;
	rc = 0;
	/* Pass 0 settles missing for every path, pass 1 walks (as below). */
	for (int pass = 0; pass < 2 && rc == 0; pass++) {
		for (size_t i = 0; i < c->npaths && rc == 0 && !t->stop; i++) {
			const char *sub, *dir = host_dir_of(mounts, rootfs, c->rel[i], &sub);
			int fd;

			if (pass == 1 && c->missing[i])
				continue;
			if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
				rc = err_errno(e, "cannot look into the agent's files (%s)", dir);
				break;
			}
			if (pass == 0)
				c->missing[i] = *sub && vtree_missing(fd, sub);
			else
				rc = check_one(c, i, fd, sub, t, e);
			sys_close(fd);
		}
	}
	json_free(mounts);
	return rc;
}

/* The declared paths in the frozen container itself. Which of them are
 * missing is settled first, for every path: a walk stops at the first
 * crossed limit, and what it did not reach must still be reported. */
static int check_source(struct collect *c, struct vtree *t, struct err *e)
{
	char root[64];
	int fd, rc = 0;

	if (c->pid <= 0)
		return err_set(e, "agent service %s has no process to look into", c->svc);
	if (c->gvisor)
		return check_source_gvisor(c, t, e);
	snprintf(root, sizeof(root), "/proc/%ld/root", c->pid);
	/* Following this one link is the point: it is the container's root. */
	if ((fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return err_errno(e, "cannot look into the agent's files (%s)", root);
	for (size_t i = 0; i < c->npaths; i++)
		c->missing[i] = vtree_missing(fd, c->rel[i]);
	for (size_t i = 0; i < c->npaths && rc == 0 && !t->stop; i++)
		if (!c->missing[i])
			rc = check_one(c, i, fd, c->rel[i], t, e);
	sys_close(fd);
	return rc;
}

/* Why a failed copy is the submission's doing (disk full, a tree that grew
 * past a limit since the check: another service writes the volume), or
 * NULL when docker or the host failed. Every tar error is about the stream
 * docker made of the agent's files. */
static const char *copy_fault(const struct err *e)
{
	const char *why = stg_volume_fault(e);

	if (why)
		return why;
	if ((str_has_prefix(e->msg, "tar: ") || strstr(e->msg, ": tar: ")) && e->code != EIO && e->code != ENOMEM)
		return "changed while it was copied";
	return NULL;
}

/* docker cp -a=false <ctr>:/<rel> - | extract into submission/<dirname rel>. */
static int copy_one(struct collect *c, size_t i, struct err *e)
{
	const char *rel = c->rel[i], *slash = strrchr(rel, '/');
	char dest[FS_PATH_MAX], src[SC_DOCKER_CP_MAX];
	const char *argv[] = { "docker", "cp", "-a=false", src, "-", NULL };
	struct tar_limits lim = { 2 * SC_VERIFY_MAX_FILES + 2, SC_VERIFY_MAX_BYTES, 0, SC_VERIFY_MAX_DEPTH };
	struct tar_extract *x;
	struct buf errt = BUF_INIT;
	struct vf_ran r;
	int rc;

	if (fs_path(dest, sizeof(dest), e, "%s%s%.*s", c->sub, slash ? "/" : "", slash ? (int)(slash - rel) : 0,
		    rel) < 0 || fs_mkdir_p(dest, 0700, e) < 0)
		return -1;
	if (str_fmt(src, sizeof(src), "%s:/%s", c->cname, rel) < 0)
		return err_set(e, "collect path /%.64s...: too long for docker cp", rel);
	/* Devices and FIFOs were refused in the source walk; should one appear
	 * since (a volume another service writes), it is not made on the host.
	 * Links are made as links, never followed, for the copy walk to refuse. */
	if (!(x = tar_extract_new(dest, &lim, TAR_X_SKIP_SPECIAL | TAR_X_ALLOW_ESCAPING_SYMLINKS, e)))
		return -1;
	buf_init(&errt, SC_VERIFY_TAIL_BYTES * 2);
	rc = vf_run(argv, SC_DOCKER_TIMEOUT_MS, tar_sink, x, &errt, &r, e);
	if (rc == 0 && r.timed_out)
		rc = err_set(e, "docker cp %s: no answer within %d s", c->decl[i], SC_DOCKER_TIMEOUT_MS / 1000);
	else if (rc == 0 && r.exit_code != 0) {
		char line[SC_DOCKER_LINE_MAX];

		dk_first_line(errt.data, line, sizeof(line));
		if (strstr(line, "No such container:path") || strstr(line, "Could not find the file"))
			c->missing[i] = true;	/* gone since the check (a shared volume) */
		else
			rc = err_set(e, "docker cp %s: %s", c->decl[i], *line ? line : "failed");
	} else if (rc == 0 && tar_extract_finish(x, e) < 0)
		rc = -1;
	if (rc < 0 && !strstr(e->msg, c->decl[i]))
		err_prefix(e, "copying %s", c->decl[i]);
	tar_extract_free(x);
	buf_release(&errt);
	return rc;
}

static struct json *strings(const char **v, const bool *pick, size_t n)
{
	struct json *a = json_new_array();

	for (size_t i = 0; i < n; i++)
		if (pick[i])
			json_array_push(a, json_new_str(v[i]));
	return a;
}

/* Copy every present path; a copy that fails over what it copies is a
 * finding in t (and the end of the copying), anything else an error. */
static int copy_all(struct collect *c, struct vtree *t, struct err *e)
{
	for (size_t i = 0; i < c->npaths; i++) {
		const char *why;

		if (c->missing[i])
			continue;
		wk_progress("copying %s", c->decl[i]);
		if (copy_one(c, i, e) == 0)
			continue;
		if (!(why = copy_fault(e)))
			return -1;
		wk_progress("copying %s: %s", c->decl[i], e->msg);
		vtree_refuse(t, c->rel[i], why);
		return 0;
	}
	return 0;
}

/* --resume on a refused collect: no snapshot follows to unpause the agent. */
static void resume_agent(struct collect *c)
{
	struct err e2;

	wk_progress("resuming agent service %s", c->svc);
	if (pause_ctl(c->cname, "unpause", &e2) < 0)
		wk_progress("resuming %s: %s", c->svc, e2.msg);
}

/* A disk filled up under the collect (the agent's doing: its volumes
 * share the data directory's filesystem) is a refusal, not an error. */
static bool disk_full(const struct err *e)
{
	return e->code == ENOSPC || e->code == EDQUOT;
}

/* The copy, and its check: what made the copying fail is a finding in
 * src, what the walk of the copy refuses one in cp. -1 only for the
 * host's or docker's failures. */
static int copy_and_check(struct collect *c, struct vtree *src, struct vtree *cp, struct err *e)
{
	int fd, rc;

	if (copy_all(c, src, e) < 0)
		return -1;
	if (json_len(src->refused))
		return 0;
	wk_progress("checking the copy");
	if ((fd = open(c->sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return err_errno(e, "open %s", c->sub);
	rc = vtree_all(fd, cp, e);
	sys_close(fd);
	return rc;
}

static int collect_run(struct collect *c, struct json **result, struct err *e)
{
	struct vtree src, cp;
	struct json *res;
	const struct vtree *t;
	char path[FS_PATH_MAX];
	char *text;
	int rc = -1;

	vtree_init(&src);
	vtree_init(&cp);
	if (freeze(c, e) < 0)
		goto out;
	prune_old(c->w);
	/* From here on the agent is frozen: what its files make fail is a
	 * finding (a score of 0), never an error (no score at all). */
	if (*c->ended) {
		vtree_refuse(&src, c->svc, c->ended);
	} else {
		wk_progress("checking %zu path%s in %s", c->npaths, c->npaths == 1 ? "" : "s", c->svc);
		if (check_source(c, &src, e) < 0)
			goto out;
	}
	if (fs_path(path, sizeof(path), e, "%s/verify", c->w->data) < 0 || fs_mkdir_p(path, 0700, e) < 0 ||
	    fresh_dir(c->dir, e) < 0 || fresh_dir(c->sub, e) < 0 ||
	    (!json_len(src.refused) && copy_and_check(c, &src, &cp, e) < 0)) {
		if (!disk_full(e))
			goto out;
		wk_progress("collecting: %s", e->msg);
		vtree_refuse(&src, "collect", stg_volume_fault(e));
	}
	t = json_len(src.refused) ? &src : &cp;
	if (json_len(t->refused)) {
		struct err e2;

		wk_progress("refused: %s; the copy is deleted and no grader will run",
			    json_at(t->refused, 0)->u.str.s);
		if (fs_remove_all(c->sub, &e2) < 0) {
			*e = e2;
			goto out;
		}
	}
	res = json_new_object();
	/* The copy's numbers when there is a copy; what was seen before refusing otherwise. */
	json_object_set_int(res, "files", (int64_t)t->files);
	json_object_set_int(res, "bytes", (int64_t)t->bytes);
	json_object_set(res, "missing", strings(c->decl, c->missing, c->npaths));
	json_object_set(res, "refused", json_dup(t->refused));
	text = json_to_string(res, JSON_PRETTY);
	rc = fs_path(path, sizeof(path), e, "%s/collect.json", c->dir);
	if (rc == 0)
		rc = fs_write_atomic(path, text, strlen(text), 0600, e);
	free(text);
	if (rc < 0 && (disk_full(e) || json_len(t->refused))) {
		/* No record then, and no grader either: verify.run grades nothing
		 * without one. A full disk is the finding when there was none. */
		wk_progress("recording the collect: %s", e->msg);
		if (!json_len(t->refused))
			json_array_push(json_get(res, "refused"), json_new_str("collect: disk full"));
		rc = 0;
	}
	if (rc < 0) {
		json_free(res);
		goto out;
	}
	if (((json_len(json_get(res, "refused")) && c->resume) || c->thaw) && !*c->ended)
		resume_agent(c);
	*result = res;
out:
	vtree_release(&src);
	vtree_release(&cp);
	return rc;
}

int cmd_verify_collect(struct wk *w, const struct json *payload, struct json **result, struct err *e)
{
	const struct json *list = json_get(payload, "collect");
	struct collect c;
	int rc = -1;

	memset(&c, 0, sizeof(c));
	c.w = w;
	c.id = json_get_str(payload, "id");
	c.svc = json_get_str(payload, "agent_service");
	c.resume = json_get_bool(payload, "resume", false);
	c.thaw = json_get_bool(payload, "thaw", false);
	if (!sc_safe_id(c.id))
		return err_set(e, "verify.collect: payload.id must be a verify id");
	if (!c.svc || !*c.svc)
		return err_set(e, "verify.collect: payload.agent_service must name the agent's service");
	if (list && list->type != JSON_ARRAY)
		return err_set(e, "verify.collect: payload.collect must be a list of absolute paths");
	c.npaths = json_len(list);
	c.rel = xcalloc(c.npaths + 1, sizeof(char *));
	c.decl = xcalloc(c.npaths + 1, sizeof(char *));
	c.missing = xcalloc(c.npaths + 1, sizeof(bool));
	for (size_t i = 0; i < c.npaths; i++) {
		struct buf b = BUF_INIT;

		if (json_at(list, i)->type != JSON_STRING) {
			err_set(e, "verify.collect: payload.collect must be a list of absolute paths");
			goto out;
		}
		c.decl[i] = json_at(list, i)->u.str.s;
		if (norm_path(c.decl[i], &b, e) < 0) {
			buf_release(&b);
			err_prefix(e, "verify.collect");
			goto out;
		}
		c.rel[i] = buf_detach(&b, NULL);
	}
	rc = fs_path(c.dir, sizeof(c.dir), e, "%s/verify/%s", w->data, c.id) < 0 ||
	     fs_path(c.sub, sizeof(c.sub), e, "%s/submission", c.dir) < 0 ? -1 : collect_run(&c, result, e);
	if (rc < 0)
		err_prefix(e, "verify.collect");
out:
	for (size_t i = 0; i < c.npaths; i++)
		free(c.rel[i]);
	free(c.rel);
	free(c.decl);
	free(c.missing);
	return rc;
}

/* ---- verify.run ---- */

struct grade {
	struct wk *w;
	const char *id, *image, *svc;
	const struct json *command;
	int64_t timeout_s;
	char dir[FS_PATH_MAX], sub[FS_PATH_MAX], logs[FS_PATH_MAX];
	struct buf out, err, reward;	/* tails; reward.txt's bytes */
	bool have_reward;
	struct vf_ran ran;
};

static struct json *refused_result(void)
{
	struct json *r = json_new_object();

	json_object_set_int(r, "reward", 0);
	json_object_set(r, "exit_code", json_new_null());
	json_object_set_str(r, "stdout", "");
	json_object_set_str(r, "stderr", "");
	json_object_set_str(r, "source", "refused");
	json_object_set_str(r, "ran_for", "0s");
	return r;
}

static void add_command(struct argv *a, const struct json *cmd)
{
	for (size_t i = 0; i < json_len(cmd); i++)
		av_add(a, json_at(cmd, i)->u.str.s);
}

/* reward.txt from the logs directory the image verifier wrote into: a
 * regular file only (the verifier is root in its container and could leave
 * a link or a FIFO there), at most SC_VERIFY_REWARD_MAX bytes. */
static void read_reward_file(struct grade *g)
{
	struct stat st;
	char tmp[SC_VERIFY_REWARD_MAX];
	int dfd, fd;
	ssize_t n;

	if ((dfd = open(g->logs, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return;
	fd = openat(dfd, "reward.txt", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	sys_close(dfd);
	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (n = sys_read_full(fd, tmp, sizeof(tmp))) >= 0) {
		buf_add(&g->reward, tmp, (size_t)n);
		g->have_reward = true;
	}
	sys_close(fd);
}

/* A one-service env with egress denied has no network (render_networkless):
 * the verifier then shares that service's namespace (and its /etc/hosts,
 * where the service's name is loopback). net "" when the env has a network. */
static int lone_service(struct grade *g, const char *project, char *net, size_t n, struct err *e)
{
	struct json *spec = NULL;
	const char *svc;
	char cname[SC_DOCKER_NAME_MAX];

	net[0] = '\0';
	if (create_read_spec(g->w, g->w->env, &spec, e) < 0)
		return -1;
	if (render_networkless(spec, g->w->leaky_network) &&
	    (svc = json_get_str(json_at(json_get(spec, "services"), 0), "name"))) {
		dk_container(project, svc, cname, sizeof(cname));
		snprintf(net, n, "container:%s", cname);
	}
	json_free(spec);
	return 0;
}

static int run_image(struct grade *g, struct err *e)
{
	char project[SC_ID_MAX], net[SC_ID_MAX + 300];
	char name[SC_ID_MAX * 2 + 16], lower[SC_ID_MAX];
	struct argv a;
	struct err e2;
	int rc;

	dk_project(g->w->env, project, sizeof(project));
	if (lone_service(g, project, net, sizeof(net), e) < 0)
		return -1;
	if (!*net) {
		snprintf(net, sizeof(net), "%s_default", project);
		if (dk(NULL, SC_DOCKER_QUICK_MS, e, "network", "inspect", "--format", "{{.Name}}", net, NULL) < 0)
			return err_set(e, "environment %s has no network %s (is it running?)", g->w->env, net);
	}
	if (dk(NULL, SC_DOCKER_QUICK_MS, e, "image", "inspect", "--format", "{{.Id}}", g->image, NULL) < 0) {
		wk_progress("pulling %s", g->image);
		if (dk(NULL, SC_VERIFY_PULL_MS, e, "pull", g->image, NULL) < 0)
			return -1;
	}
	if (strchr(g->sub, ',') || strchr(g->logs, ','))
		return err_set(e, "the data directory %s has a comma, which docker --mount cannot take", g->w->data);
	dk_project(g->id, lower, sizeof(lower));
	snprintf(name, sizeof(name), "%s-verifier-%s", project, lower);
	/* A container of the same name is from an earlier attempt of this verify. */
	(void)dk(NULL, SC_DOCKER_TIMEOUT_MS, &e2, "rm", "-f", name, NULL);
	av_init(&a);
	av_addl(&a, "docker", "run", "--rm", "--name", name, "--user", "0", "--network", net, NULL);
	/* Labelled as the fork's, so destroying the fork removes a verifier
	 * that outlived its run (the sidecar killed mid-grade). */
	av_add(&a, "--label");
	av_addf(&a, "com.docker.compose.project=%s", project);
	av_add(&a, "--label");
	av_addf(&a, "ai.denv.env=%s", g->w->env);
	av_add(&a, "--label");
	av_addf(&a, "ai.denv.verify=%s", g->id);
	av_add(&a, "--memory");
	av_addf(&a, "%dm", SC_DEFAULT_MEMORY_MB);
	av_add(&a, "--pids-limit");
	av_addf(&a, "%d", SC_DEFAULT_PIDS);
	av_add(&a, "--cpus");
	av_addf(&a, "%.1f", SC_DEFAULT_CPUS);
	av_add(&a, "--mount");
	av_addf(&a, "type=bind,source=%s,target=/submission,readonly", g->sub);
	av_add(&a, "--mount");
	av_addf(&a, "type=bind,source=%s,target=/logs/verifier", g->logs);
	av_addl(&a, "-e", "SUBMISSION=/submission", "-e", NULL);
	av_addf(&a, "DENV_VERIFY_ID=%s", g->id);
	av_add(&a, g->image);
	add_command(&a, g->command);
	wk_progress("grading in %s", g->image);
	rc = vf_run((const char *const *)a.v, g->timeout_s * 1000, tail_sink, &g->out, &g->err, &g->ran, e);
	av_release(&a);
	if (rc == 0 && g->ran.timed_out) {
		/* Killing `docker run` leaves the container running: remove it. */
		if (dk(NULL, SC_DOCKER_TIMEOUT_MS, &e2, "rm", "-f", name, NULL) < 0)
			wk_progress("stopping the verifier %s: %s", name, e2.msg);
	}
	if (rc == 0 && !g->ran.timed_out)
		read_reward_file(g);
	return rc;
}

/* reward.txt copied back out of the service: docker cp gives a tar stream,
 * whose one entry must be a regular file. */
static int fetch_reward(struct grade *g, const char *cname, struct err *e)
{
	char src[400];
	const char *argv[] = { "docker", "cp", src, "-", NULL };
	struct buf tarb = BUF_INIT, errt = BUF_INIT;
	struct cap_sink cs = { &tarb, SC_VERIFY_REWARD_TAR_MAX, "reward.txt" };
	struct tar_reader *r;
	struct tar_event ev;
	struct vf_ran ran;
	size_t off = 0;
	int rc;

	snprintf(src, sizeof(src), "%s:/logs/verifier/reward.txt", cname);
	buf_init(&tarb, SC_VERIFY_REWARD_TAR_MAX + 1);
	buf_init(&errt, SC_VERIFY_TAIL_BYTES * 2);
	rc = vf_run(argv, SC_DOCKER_QUICK_MS, cap_sink, &cs, &errt, &ran, e);
	buf_release(&errt);
	if (rc < 0 || ran.timed_out || ran.exit_code != 0) {	/* no reward.txt (or not a small one) */
		buf_release(&tarb);
		err_clear(e);
		return 0;
	}
	r = tar_reader_new();
	while (off < tarb.len) {
		size_t used = 0;
		int k = tar_reader_feed(r, tarb.data + off, tarb.len - off, &used, &ev, e);

		off += used;
		if (k < 0 || k == TAR_EV_END || k == TAR_EV_MORE)
			break;
		if (k == TAR_EV_ENTRY && (ev.entry->type != TAR_REG || ev.entry->size > SC_VERIFY_REWARD_MAX))
			break;	/* a link or a FIFO is no reward */
		if (k == TAR_EV_DATA) {
			buf_add(&g->reward, ev.data, ev.len);
			if (ev.remain == 0) {
				g->have_reward = true;
				break;
			}
		}
	}
	tar_reader_free(r);
	buf_release(&tarb);
	err_clear(e);
	if (g->have_reward) {	/* kept beside the run, as the image verifier's would be */
		char path[FS_PATH_MAX];
		struct err e2;

		if (fs_path(path, sizeof(path), &e2, "%s/reward.txt", g->logs) < 0 ||
		    fs_write_atomic(path, g->reward.data, g->reward.len, 0600, &e2) < 0)
			wk_progress("keeping reward.txt: %s", e2.msg);
	}
	return 0;
}

static int run_service(struct grade *g, struct err *e)
{
	char cname[SC_DOCKER_NAME_MAX], src[FS_PATH_MAX], dst[SC_DOCKER_CP_MAX];
	struct argv a;
	struct err e2;
	int rc;

	if (wk_container(g->w, "verify.run", g->svc, cname, sizeof(cname), e) < 0)
		return -1;
	wk_progress("placing the copy at /submission in %s", g->svc);
	/* Whatever the fork's service holds at these paths is replaced: the
	 * grader sees the collected copy and an empty logs directory. */
	if (dk(NULL, SC_DOCKER_TIMEOUT_MS, e, "exec", "-u", "0", cname, "rm", "-rf", "/submission", "/logs/verifier",
	       NULL) < 0 ||
	    dk(NULL, SC_DOCKER_TIMEOUT_MS, e, "exec", "-u", "0", cname, "mkdir", "-p", "/submission", "/logs/verifier",
	       NULL) < 0)
		return err_prefix(e, "service %s", g->svc);
	if (fs_path(src, sizeof(src), e, "%s/.", g->sub) < 0 ||
	    str_fmt(dst, sizeof(dst), "%s:/submission", cname) < 0)
		return err_prefix(e, "placing the copy in %s", g->svc);
	if (dk(NULL, SC_DOCKER_TIMEOUT_MS, e, "cp", src, dst, NULL) < 0)
		return err_prefix(e, "placing the copy in %s", g->svc);
	av_init(&a);
	av_add(&a, "docker");
	av_add(&a, "exec");
	av_add(&a, "--user");
	av_add(&a, "0");
	av_add(&a, "-e");
	av_add(&a, "SUBMISSION=/submission");
	av_add(&a, "-e");
	av_addf(&a, "DENV_VERIFY_ID=%s", g->id);
	av_add(&a, cname);
	add_command(&a, g->command);
	wk_progress("grading inside service %s", g->svc);
	rc = vf_run((const char *const *)a.v, g->timeout_s * 1000, tail_sink, &g->out, &g->err, &g->ran, e);
	av_release(&a);
	if (rc == 0 && g->ran.timed_out) {
		/* Killing `docker exec` leaves its process running in the service,
		 * and Docker has no way to kill one exec: the fork's service goes
		 * (the fork is destroyed at the verdict anyway). */
		if (dk(NULL, SC_DOCKER_TIMEOUT_MS, &e2, "kill", cname, NULL) < 0)
			wk_progress("stopping %s: %s", cname, e2.msg);
	}
	if (rc == 0 && !g->ran.timed_out)
		return fetch_reward(g, cname, e);
	return rc;
}

/* The whole text as one number (reward.txt), or its last token (stdout). */
static bool parse_number(const char *s, size_t n, bool last_token, double *out)
{
	char *t = xstrndup(s, n), *p = str_trim(t);
	bool ok;

	if (last_token) {
		char *q = p + strlen(p);

		while (q > p && !strchr(" \t\r\n\v\f", q[-1]))
			q--;
		p = q;
	}
	ok = str_to_double(p, out) == 0;
	free(t);
	return ok;
}

static int grade_run(struct grade *g, struct json **result, struct err *e)
{
	const char *source = NULL;
	char dur[CLOCK_DURATION_MAX];
	double reward = 0;
	struct json *res;
	int rc;

	if (fresh_dir(g->logs, e) < 0)
		return -1;
	rc = g->image ? run_image(g, e) : run_service(g, e);
	if (rc < 0)
		return -1;
	if (g->ran.timed_out)
		return err_set(e, "the verifier ran past timeout_sec (%lld s) and was stopped", (long long)g->timeout_s);
	if (g->have_reward && parse_number(g->reward.data, g->reward.len, false, &reward))
		source = "reward.txt";
	else if (parse_number(g->out.data, g->out.len, true, &reward))
		source = "stdout";
	if (!source)	/* compose.md's words exactly: the grade phase reports them */
		return err_set(e, "verifier wrote no reward (exit %d)", g->ran.exit_code);
	res = json_new_object();
	json_object_set(res, "reward", json_new_double(reward));
	json_object_set_int(res, "exit_code", g->ran.exit_code);
	json_object_set(res, "stdout", json_new_strn(g->out.data, g->out.len));
	json_object_set(res, "stderr", json_new_strn(g->err.data, g->err.len));
	json_object_set_str(res, "source", source);
	clock_format_duration(g->ran.ms, dur, sizeof(dur));
	json_object_set_str(res, "ran_for", dur);
	wk_progress("reward %g from %s (exit %d)", reward, source, g->ran.exit_code);
	*result = res;
	return 0;
}

static int check_verifier(struct grade *g, const struct json *v, struct err *e)
{
	g->image = json_get_str(v, "image");
	g->svc = json_get_str(v, "service");
	g->command = json_get(v, "command");
	if (g->image && !*g->image)
		g->image = NULL;
	if (g->svc && !*g->svc)
		g->svc = NULL;
	if (!g->image == !g->svc)
		return err_set(e, "payload.verifier needs exactly one of image or service");
	if (!g->command || g->command->type != JSON_ARRAY || json_len(g->command) == 0)
		return err_set(e, "payload.verifier.command must be a non-empty list of strings");
	for (size_t i = 0; i < json_len(g->command); i++)
		if (json_at(g->command, i)->type != JSON_STRING)
			return err_set(e, "payload.verifier.command must be a non-empty list of strings");
	g->timeout_s = json_get_int(v, "timeout_sec", 0);
	if (g->timeout_s <= 0)
		g->timeout_s = SC_VERIFY_TIMEOUT_DEFAULT_S;
	if (g->timeout_s > SC_VERIFY_TIMEOUT_MAX_S)
		g->timeout_s = SC_VERIFY_TIMEOUT_MAX_S;
	return 0;
}

int cmd_verify_run(struct wk *w, const struct json *payload, struct json **result, struct err *e)
{
	struct grade g;
	struct json *col = NULL;
	char path[FS_PATH_MAX], real[PATH_MAX];
	struct stat st;
	struct err e2;
	int rc;

	memset(&g, 0, sizeof(g));
	g.w = w;
	g.id = json_get_str(payload, "id");
	if (!sc_safe_id(g.id))
		return err_set(e, "verify.run: payload.id must be a verify id");
	if (!sc_safe_id(w->env))
		return err_set(e, "verify.run: the command has no usable env_id");
	if (fs_path(g.dir, sizeof(g.dir), e, "%s/verify/%s", w->data, g.id) < 0)
		return err_prefix(e, "verify.run");
	if (json_get_bool(payload, "refused", false)) {
		wk_progress("the submission was refused: no grader runs");
		*result = refused_result();
		return 0;
	}
	if (fs_path(path, sizeof(path), e, "%s/collect.json", g.dir) < 0)
		return err_prefix(e, "verify.run");
	if (json_parse_file(path, SC_VERIFY_COLLECT_JSON_MAX, &col, e) < 0)
		return err_set(e, "verify.run: nothing was collected for %s on this host", g.id);
	rc = json_len(json_get(col, "refused")) > 0;
	json_free(col);
	if (rc) {
		wk_progress("the submission was refused at collect: no grader runs");
		*result = refused_result();
		return 0;
	}
	if (check_verifier(&g, json_get(payload, "verifier"), e) < 0)
		return err_prefix(e, "verify.run");
	/* Docker wants absolute paths to mount; --data may be relative. */
	if (!realpath(g.dir, real))
		return err_set(e, "verify.run: the collected copy for %s is gone", g.id);
	if (fs_path(g.sub, sizeof(g.sub), e, "%s/submission", real) < 0 ||
	    fs_path(g.logs, sizeof(g.logs), e, "%s/logs", real) < 0)
		return err_prefix(e, "verify.run");
	if (lstat(g.sub, &st) < 0 || !S_ISDIR(st.st_mode))
		return err_set(e, "verify.run: the collected copy for %s is gone", g.id);
	buf_init(&g.out, SC_VERIFY_TAIL_BYTES * 2);
	buf_init(&g.err, SC_VERIFY_TAIL_BYTES * 2);
	buf_init(&g.reward, SC_VERIFY_REWARD_MAX + 1);
	rc = grade_run(&g, result, e);
	if (rc < 0 && !str_has_prefix(e->msg, "verifier wrote no reward"))
		err_prefix(e, "verify.run");
	/* The copy has served; the logs directory stays (pruned with the rest). */
	if (fs_remove_all(g.sub, &e2) < 0)
		wk_progress("removing the copy: %s", e2.msg);
	buf_release(&g.out);
	buf_release(&g.err);
	buf_release(&g.reward);
	return rc;
}
