/*
 * build.c: images built on this host from compose build: (the control
 * plane's orch_build.c and contexts.c).
 *
 * env.context receives a context archive in parts (each part one command's
 * chunked archive, doc/host-stream-chunks.md) into
 * <data>/contexts/<digest>.<env>.part; the part that completes it is
 * checked against the digest and renamed <digest>.tar. Its result says how
 * many bytes the host holds, so the control plane sends only what is
 * missing: all of them count as held when the image the payload's build
 * would make is here already (nothing needs sending).
 *
 * builds_ensure, at the start of env.create (before images_ensure), builds
 * each service whose build has no image_id yet. The cache key is the
 * sha256 of the context's digest, the Dockerfile path, the target and the
 * args; the image is tagged denv-build/<service>:<key, 12 digits> (and
 * with the service's image: when it names one). A tag that exists is a
 * cached build: no build runs. A build is `docker build -` with the
 * archive on stdin (the classic builder: BuildKit is not needed), its
 * output lines sent as progress while it runs; a failure ends the create
 * with the last lines of that output. The service's image becomes the
 * built image's id, so spec.json (and the version the control plane
 * records) pins it: a fork or rollback runs that id and never builds.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/crypto.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/proc.h"
#include "base/str.h"
#include "base/sys.h"
#include "sidecar/sidecar.h"

static bool is_digest(const char *s)
{
	size_t n = 0;

	for (; s && s[n]; n++)
		if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
			return false;
	return n == SHA256_HEX_LEN;
}

static int cmp_members(const void *a, const void *b)
{
	return strcmp(((const struct json_member *)a)->key, ((const struct json_member *)b)->key);
}

/* denv-build/<service, lower case>:<first 12 digits of the cache key>. */
int build_tag(const char *svc, const struct json *b, char *tag, size_t n)
{
	const struct json *args = json_get(b, "args");
	struct json_member *m = NULL;
	struct buf key = BUF_INIT;
	char hex[SHA256_HEX_LEN + 1], lower[SC_ID_MAX];
	size_t na = args && args->type == JSON_OBJECT ? args->u.obj.n : 0, i;

	/* Every field with its length: "a" + "bc" never reads as "ab" + "c". */
	buf_addf(&key, "denv-build-1\n%s\n%zu:%s\n%zu:%s\n", json_get_str(b, "context_digest"),
		 strlen(json_get_str(b, "dockerfile") ? json_get_str(b, "dockerfile") : ""),
		 json_get_str(b, "dockerfile") ? json_get_str(b, "dockerfile") : "",
		 strlen(json_get_str(b, "target") ? json_get_str(b, "target") : ""),
		 json_get_str(b, "target") ? json_get_str(b, "target") : "");
	if (na) {
		m = xcalloc(na, sizeof(*m));
		memcpy(m, args->u.obj.m, na * sizeof(*m));
		qsort(m, na, sizeof(*m), cmp_members);
	}
	for (i = 0; i < na; i++) {
		const char *v = m[i].val->type == JSON_STRING ? m[i].val->u.str.s : "";

		buf_addf(&key, "%zu:%s=%zu:%s\n", strlen(m[i].key), m[i].key, strlen(v), v);
	}
	free(m);
	if (sha256_hex(key.data, key.len, hex) < 0) {
		buf_release(&key);
		return -1;
	}
	buf_release(&key);
	for (i = 0; svc[i] && i + 1 < sizeof(lower); i++)
		lower[i] = (char)(svc[i] >= 'A' && svc[i] <= 'Z' ? svc[i] - 'A' + 'a' : svc[i]);
	lower[i] = '\0';
	return str_fmt(tag, n, "denv-build/%s:%.12s", lower, hex);
}

/* <data>/contexts/<digest><suffix>, into out (FS_PATH_MAX bytes). */
static int context_file(const struct wk *w, const char *digest, const char *suffix, char *out, struct err *e)
{
	return fs_path(out, FS_PATH_MAX, e, "%s/contexts/%s%s", w->data, digest, suffix);
}

static int64_t file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) ? (int64_t)st.st_size : -1;
}

int cmd_env_context(struct wk *w, const struct json *p, struct json **result, struct err *e)
{
	const char *digest = json_get_str(p, "digest"), *svc = json_get_str(p, "service");
	int64_t size = json_get_int(p, "size", -1), have;
	char dir[FS_PATH_MAX], final[FS_PATH_MAX], part[FS_PATH_MAX], tag[SC_DOCKER_NAME_MAX], hex[SHA256_HEX_LEN + 1];
	struct engine_img im;
	bool cached = false;

	if (!is_digest(digest) || !svc || size < 0 || (uint64_t)size > SC_CONTEXT_MAX)
		return err_set(e, "env.context: payload needs service, digest (sha256) and a size of at most %llu MiB",
			       (unsigned long long)(SC_CONTEXT_MAX >> 20));
	if (fs_path(dir, sizeof(dir), e, "%s/contexts", w->data) < 0 || context_file(w, digest, ".tar", final, e) < 0 ||
	    fs_path(part, sizeof(part), e, "%s/%s.%s.part", dir, digest, w->env) < 0 || fs_mkdir_p(dir, 0700, e) < 0)
		return err_prefix(e, "env.context");
	if (json_get(p, "build") && build_tag(svc, json_get(p, "build"), tag, sizeof(tag)) == 0 &&
	    engine_image(tag, &im, e) > 0)
		cached = true;
	if (cached || file_size(final) == size) {
		have = size;
		if (json_get_str(json_get(w->cmd, "_spool"), "path"))
			unlink(json_get_str(json_get(w->cmd, "_spool"), "path"));
	} else {
		have = file_size(part) < 0 ? 0 : file_size(part);
		if (sc_part_take("env.context", w, p, part, &have, e) < 0)
			return -1;
		if (have == size) {
			if (sc_file_sha256(part, hex, e) < 0)
				return -1;
			if (!str_eq(hex, digest)) {
				unlink(part);
				return err_set(e, "env.context: the context's sha256 is %s, not %s", hex, digest);
			}
			if (rename(part, final) < 0)
				return err_errno(e, "env.context: rename %s", part);
		}
	}
	*result = json_new_object();
	json_object_set_int(*result, "have", have);
	json_object_set_bool(*result, "cached", cached);
	return 0;
}

/* ---- the build ---- */

/* The last SC_BUILD_ERROR_TAIL bytes of log, from a line's start, lines joined by " | ". */
static void log_tail(const struct buf *log, char *out, size_t n)
{
	size_t len = log->len, from = len > SC_BUILD_ERROR_TAIL ? len - SC_BUILD_ERROR_TAIL : 0, k = 0;
	const char *s = log->data ? log->data : "";

	while (len > 0 && (s[len - 1] == '\n' || s[len - 1] == '\r'))
		len--;
	if (from > 0) {
		const char *nl = memchr(s + from, '\n', len > from ? len - from : 0);

		from = nl ? (size_t)(nl + 1 - s) : from;
	}
	for (size_t i = from; i < len && k + 4 < n; i++) {
		if (s[i] == '\r')
			continue;
		if (s[i] == '\n') {
			memcpy(out + k, " | ", 3);
			k += 3;
		} else {
			out[k++] = (unsigned char)s[i] < 0x20 ? ' ' : s[i];
		}
	}
	out[k] = '\0';
}

static void trim_log(struct buf *log)
{
	if (log->len > SC_BUILD_LOG_KEEP) {
		size_t cut = log->len - SC_BUILD_LOG_KEEP / 2;

		memmove(log->data, log->data + cut, log->len - cut);
		buf_truncate(log, log->len - cut);
	}
}

/* The build's output as it is read. The classic builder colours the
 * steps' stderr (ESC [ 91 m): the escapes are dropped, not quoted. */
struct output {
	struct buf log;		/* the last SC_BUILD_LOG_KEEP bytes or so */
	struct buf line;	/* the line being read */
	int lines;		/* lines sent as progress */
	int esc;		/* 0 text, 1 after ESC, 2 inside ESC [ ... */
};

static bool in_escape(struct output *o, unsigned char c)
{
	if (o->esc == 0 && c == 0x1b)
		return (o->esc = 1);
	if (o->esc == 1)
		return (o->esc = c == '[' ? 2 : 0), true;
	if (o->esc == 2) {
		if (c >= 0x40 && c <= 0x7e)
			o->esc = 0;
		return true;
	}
	return false;
}

/* Each complete line also goes out as progress (the live event stream). */
static void take_output(struct output *o, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (in_escape(o, (unsigned char)p[i]))
			continue;
		buf_addch(&o->log, p[i]);
		if (p[i] != '\n') {
			if (o->line.len < SC_PROGRESS_LINE_MAX - 64)
				buf_addch(&o->line, p[i]);
			continue;
		}
		if (o->line.len && o->lines++ < SC_BUILD_PROGRESS_MAX)
			wk_progress("build: %.*s", (int)o->line.len, o->line.data);
		buf_reset(&o->line);
	}
	trim_log(&o->log);
}


/* Run argv with stdin from tarfd, stdout and stderr into o; the exit code, or -1 with e. */
static int run_build(const char *const *argv, int tarfd, struct output *o, struct err *e)
{
	static const char *const env_extra[] = { "DOCKER_BUILDKIT=0", NULL };
	struct proc_spec s;
	struct proc p;
	int fds[2], status = 0, rc;
	int64_t deadline = ev_mono_ms() + SC_BUILD_TIMEOUT_MS;
	bool timed_out = false;

	if (pipe(fds) < 0)
		return err_errno(e, "pipe");
	sys_set_cloexec(fds[0]);
	sys_set_cloexec(fds[1]);
	proc_spec_init(&s, argv);
	s.env_extra = env_extra;
	s.in.mode = PROC_FD;
	s.in.fd = tarfd;
	s.out.mode = s.err.mode = PROC_FD;
	s.out.fd = s.err.fd = fds[1];
	rc = proc_spawn(&s, &p, e);
	sys_close(fds[1]);
	if (rc < 0) {
		sys_close(fds[0]);
		return -1;
	}
	for (;;) {
		struct pollfd pf = { fds[0], POLLIN, 0 };
		int64_t left = deadline - ev_mono_ms();
		char tmp[8192];
		ssize_t n;

		if (left <= 0) {
			timed_out = true;
			proc_kill(&p);
			break;
		}
		if (poll(&pf, 1, (int)(left < 1000 ? left : 1000)) < 0 && errno != EINTR)
			break;
		if (!(pf.revents & (POLLIN | POLLHUP)))
			continue;
		if ((n = sys_read(fds[0], tmp, sizeof(tmp))) <= 0)
			break;
		take_output(o, tmp, (size_t)n);
	}
	sys_close(fds[0]);
	while (waitpid(p.pid, &status, 0) < 0 && errno == EINTR)
		;
	if (timed_out)
		return err_set(e, "no result within %d s", SC_BUILD_TIMEOUT_MS / 1000);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* `docker build -` with the archive on stdin: the exit code, or -1 with e. */
static int cli_build(const char *svc, const struct json *s, const char *tag, const char *data, int fd,
		     struct output *o, struct err *e)
{
	const struct json *b = json_get(s, "build"), *args = json_get(b, "args");
	const char *image = json_get_str(s, "image"), *target = json_get_str(b, "target");
	struct argv a;
	int code;

	(void)svc;
	av_init(&a);
	av_add(&a, "docker");
	av_add(&a, "build");
	av_add(&a, "--force-rm");	/* no container of a failed step is left behind */
	av_add(&a, "--tag");
	av_add(&a, tag);
	if (image && *image) {
		av_add(&a, "--tag");
		av_add(&a, image);
	}
	av_add(&a, "--file");
	av_add(&a, json_get_str(b, "dockerfile") ? json_get_str(b, "dockerfile") : "Dockerfile");
	if (target && *target) {
		av_add(&a, "--target");
		av_add(&a, target);
	}
	for (size_t i = 0; args && args->type == JSON_OBJECT && i < args->u.obj.n; i++) {
		av_add(&a, "--build-arg");
		av_addf(&a, "%s=%s", args->u.obj.m[i].key, json_get_str(args, args->u.obj.m[i].key));
	}
	av_add(&a, "--label");
	av_addf(&a, "ai.denv.build=%s", tag);
	av_add(&a, "--label");
	av_addf(&a, "ai.denv.data=%s", data);
	av_add(&a, "-");	/* v stays NULL-terminated */
	code = run_build((const char *const *)a.v, fd, o, e);
	av_release(&a);
	return code;
}

static void output_line(void *arg, const char *p, size_t n)
{
	take_output(arg, p, n);
}

/* POST /build on the Engine API: the exit code (1 when the daemon gave
 * none), -1 with e, or -2 when the API cannot be used (the CLI then).
 * DENVD_BUILD_CLI=1 skips it (to compare the two, or on a daemon whose
 * /build misbehaves). */
static int api_build(const struct json *s, const char *tag, const char *data, int fd, int64_t size,
		     struct output *o, struct err *e)
{
	const struct json *b = json_get(s, "build");
	const char *image = json_get_str(s, "image"), *flag = getenv("DENVD_BUILD_CLI");
	struct engine_build r = { { tag, image && *image ? image : NULL }, NULL, NULL, NULL, NULL, NULL, fd,
				  size, output_line, o };
	struct engine_build_result res;
	int rc;

	if (flag && str_eq(flag, "1"))
		return -2;
	r.dockerfile = json_get_str(b, "dockerfile") ? json_get_str(b, "dockerfile") : "Dockerfile";
	r.target = json_get_str(b, "target");
	r.args = json_get(b, "args");
	r.label = tag;
	r.data = data;
	if ((rc = engine_build(&r, &res, e)) == 0) {
		log_debug("worker", "build through the engine API not possible (%s); using the docker CLI", e->msg);
		err_clear(e);
		return -2;
	}
	if (rc < 0)
		return -1;
	return res.failed ? (res.code > 0 ? res.code : 1) : 0;
}

/* The build, through the API or else the CLI; *builder says which ran. */
static int docker_build(struct wk *w, const char *svc, const struct json *s, const char *tag,
			const char **builder, struct err *e)
{
	const struct json *b = json_get(s, "build");
	char ctx[FS_PATH_MAX], tail[SC_BUILD_ERROR_TAIL + 64];
	struct output o;
	struct stat st;
	int fd, code;

	if (context_file(w, json_get_str(b, "context_digest"), ".tar", ctx, e) < 0)
		return -1;
	if ((fd = open(ctx, O_RDONLY | O_CLOEXEC)) < 0 || fstat(fd, &st) < 0) {
		struct engine_img im;
		struct err e2;

		if (fd >= 0)
			sys_close(fd);
		/* Another environment's create may have built it (and removed the archive) just now. */
		if (engine_image(tag, &im, &e2) > 0)
			return 0;
		return err_set(e, "service \"%s\": its build context %.12s is not on this host (the control plane "
			       "sends it before env.create)", svc, json_get_str(b, "context_digest"));
	}
	memset(&o, 0, sizeof(o));
	buf_init(&o.log, SC_BUILD_LOG_KEEP * 2);
	buf_init(&o.line, SC_PROGRESS_LINE_MAX);
	*builder = "engine-api";
	if ((code = api_build(s, tag, w->data, fd, (int64_t)st.st_size, &o, e)) == -2) {
		*builder = "docker-cli";
		if (lseek(fd, 0, SEEK_SET) < 0)
			code = err_errno(e, "seek %s", ctx);
		else
			code = cli_build(svc, s, tag, w->data, fd, &o, e);
	}
	buf_release(&o.line);
	sys_close(fd);
	if (code != 0) {
		log_tail(&o.log, tail, sizeof(tail));
		if (code > 0)
			err_set(e, "service \"%s\": docker build failed (exit %d): %s", svc, code, tail);
		else
			err_prefix(e, "service \"%s\": docker build", svc);
		buf_release(&o.log);
		return -1;
	}
	buf_release(&o.log);
	/* The image holds the context now; the archive is not needed again. */
	unlink(ctx);
	return 0;
}

/* One service: built (or found cached); s's image becomes the id. */
static int ensure_one(struct wk *w, struct json *s, struct json *builds, struct err *e)
{
	struct json *b = json_get(s, "build"), *rec;
	const char *svc = json_get_str(s, "name"), *image = json_get_str(s, "image"), *builder = "cache";
	char tag[SC_DOCKER_NAME_MAX];
	struct engine_img im;
	int64_t t0 = ev_mono_ms();
	int rc;

	if (build_tag(svc, b, tag, sizeof(tag)) < 0)
		return err_set(e, "service \"%s\": cannot name its build", svc);
	if ((rc = engine_image(tag, &im, e)) < 0)
		return err_prefix(e, "service \"%s\": image %s", svc, tag);
	if (rc > 0) {
		wk_progress("service %s: image %s is built already (cached)", svc, tag);
		if (image && *image && dk(NULL, SC_DOCKER_QUICK_MS, e, "tag", tag, image, NULL) < 0)
			return err_prefix(e, "service \"%s\"", svc);
	} else {
		wk_progress("service %s: building %s from context %.12s (%s)", svc, tag,
			    json_get_str(b, "context_digest"), json_get_str(b, "dockerfile"));
		if (docker_build(w, svc, s, tag, &builder, e) < 0)
			return -1;
		if (engine_image(tag, &im, e) <= 0)
			return err_set(e, "service \"%s\": image %s is not here after its build", svc, tag);
	}
	rec = json_new_object();
	json_object_set_str(rec, "service", svc);
	json_object_set_str(rec, "context_digest", json_get_str(b, "context_digest"));
	json_object_set_str(rec, "image", tag);
	json_object_set_str(rec, "image_id", im.id);
	json_object_set_bool(rec, "cached", rc > 0);
	json_object_set_str(rec, "builder", builder);
	json_object_set_int(rec, "took_ms", ev_mono_ms() - t0);
	json_array_push(builds, rec);
	json_object_set_str(b, "image_id", im.id);
	json_object_set_str(b, "tag", tag);
	json_object_set_str(s, "image", im.id);
	return 0;
}

int builds_ensure(struct wk *w, struct json *services, struct json **builds, struct err *e)
{
	struct json *list = json_new_array();

	for (size_t i = 0; i < json_len(services); i++) {
		struct json *s = json_at(services, i), *b = json_get(s, "build");
		const char *id = json_get_str(b, "image_id");

		if (!b)
			continue;
		if (id && *id) {	/* a pinned build (fork, rollback): run that image */
			json_object_set_str(s, "image", id);
			continue;
		}
		if (!is_digest(json_get_str(b, "context_digest"))) {
			json_free(list);
			return err_set(e, "service \"%s\" has a build but no context_digest", json_get_str(s, "name"));
		}
		if (ensure_one(w, s, list, e) < 0) {
			json_free(list);
			return -1;
		}
	}
	*builds = list;
	return 0;
}

/* Archives of contexts never built (a failed build, a deploy given up) and
 * parts of transfers never finished. */
static int64_t context_keep(const char *name)
{
	return str_has_suffix(name, ".tar") || str_has_suffix(name, ".part") ? SC_CONTEXT_KEEP_S : -1;
}

int build_prune(const char *data, int64_t now_s)
{
	return fs_prune_under(data, "contexts", now_s, context_keep);
}
