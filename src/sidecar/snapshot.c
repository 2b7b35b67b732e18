/* snapshot.c: env.snapshot, env.fork and env.rollback (protocol.md), over
 * the storage backends of storage.h.
 *
 * A snapshot, in order:
 *  0. one `docker inspect` for every service: state, main pid, container
 *     id, health; each running container's freezer cgroup from its pid
 *     (freeze.c);
 *  1. checkpoint the databases found running (by process name: the comm of
 *     the processes in the container's cgroup, from the host's /proc; docker
 *     top when /proc does not show them): PostgreSQL CHECKPOINT, Redis
 *     BGSAVE waited to finish, MySQL FLUSH TABLES. Their files on disk are
 *     then complete, so the copy has little to replay. A checkpoint that
 *     fails is reported in the evidence and does not stop the capture,
 *     which is crash-consistent anyway;
 *  2. flush the volumes' dirty data (syncfs) BEFORE the freeze, so the
 *     freeze does not pay for writeback (notes/machine.md: 1.4 s vs 3 ms);
 *  3. record what we freeze (<data>/envs/<env>/frozen, freeze.c: a killed
 *     worker's freeze is thawed by the next command or denvd's start), then
 *     freeze every running container with the cgroup freezer: writers stop.
 *     keep_paused services (and any without a usable cgroup) get `docker
 *     pause` instead: Docker must show them paused after we are gone;
 *  4. capture every volume with the backend under the snapshot's name;
 *  5. thaw what we froze; `docker unpause` what docker paused, before us
 *     (verify.collect) or for us, except keep_paused; frozen_for is 3 to 5;
 *  6. write the record <data>/snaps/<env>/<name>/snapshot.json: backend,
 *     volumes, datasets, the env's spec (so a rollback re-renders the
 *     version's own services), the evidence. A snapshot exists when its
 *     record does;
 *  7. wait until every unpaused service is running and healthy again
 *     (SC_SNAP_HEALTH_MS): health probes that ran during the freeze failed.
 *     Nothing to wait for when each was running, thawed by us, and has no
 *     healthcheck (a thawed process is running).
 * With refuse (a verify's capture), a capture or record that fails over
 * what the volumes hold (stg_volume_fault: a full disk, a path too long to
 * copy) is answered ok as {snapshot: null, refused: ["volume v: why"]}: the
 * agent can cause it at will, so it must score 0, not make an error. The
 * keep_paused services stay paused on every failure path. env.fork takes
 * refuse too (the grader's fork), answering {refused: [...]} the same way.
 * A fork is env.create of a new env from the snapshot (create.c); a rollback
 * is the same over the existing env with volumes restored.
 *
 * Dependents: a fork records its origin (envs/<fork>/origin.json). A
 * destroy keeps every snapshot a live fork names (a zfs clone cannot
 * outlive its origin, and any fork may be rolled back to the version it was
 * forked from); the source is marked retired and what it kept is reclaimed
 * when the last such fork is destroyed. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/str.h"
#include "base/sys.h"
#include "sidecar/sidecar.h"
#include "sidecar/storage/storage.h"

struct svc_state {
	const char *name;
	char cname[300];
	char id[100];		/* docker's container id */
	char status[32];	/* running | paused | exited | ... | absent | unknown */
	char health[32];	/* healthy | unhealthy | starting | none */
	long pid;		/* main process, on the host */
	bool has_health, keep;
	bool docker_paused;	/* paused by docker: before us, or by us (keep_paused, no cgroup) */
	bool frozen;		/* frozen by us through cg, to be thawed */
	bool watch;		/* wait_healthy looks at it */
	struct fz_cg cg;	/* version 0: not found */
};

static void sleep_ms(int64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static void fmt_ms(int64_t ms, char *out, size_t n)
{
	clock_format_duration(ms, out, n);
}

/* ---- containers ---- */

/* What one `docker inspect` says of every service at once. Health through
 * index: with several containers the docker 20.10 CLI fails ".State.Health"
 * on one without a healthcheck ("map has no entry for key") once it has
 * seen one with. */
#define SNAP_INSPECT_FORMAT \
	"{{.Name}} {{.Id}} {{.State.Status}} {{.State.Pid}} " \
	"{{with index .State \"Health\"}}{{.Status}}{{else}}none{{end}}"

static void parse_state(struct svc_state *s, const char *line)
{
	char id[100] = "", st[32] = "", health[32] = "";
	long pid = 0;

	if (sscanf(line, "%*s %99s %31s %ld %31s", id, st, &pid, health) != 4) {
		str_copy(s->status, sizeof(s->status), "unknown");
		return;
	}
	str_copy(s->id, sizeof(s->id), id);
	str_copy(s->status, sizeof(s->status), st);
	str_copy(s->health, sizeof(s->health), health);
	s->pid = pid;
	s->has_health = !str_eq(health, "none");
}

/* Fill status, pid, id and health of every service in one docker call; a
 * container that does not exist makes the call fail, then each is asked
 * alone (and the missing one is "absent"). */
static void inspect_all(struct svc_state *ss, size_t n)
{
	struct buf out = BUF_INIT;
	struct argv a;
	struct err e;
	char **lines;
	size_t nl = 0;
	int rc;

	av_init(&a);
	av_add(&a, "inspect");
	av_add(&a, "--type");
	av_add(&a, "container");
	av_add(&a, "--format");
	av_add(&a, SNAP_INSPECT_FORMAT);
	for (size_t i = 0; i < n; i++) {
		av_add(&a, ss[i].cname);
		str_copy(ss[i].status, sizeof(ss[i].status), "absent");
	}
	rc = dk_run(&a, SC_DOCKER_QUICK_MS, &out, &e);
	av_release(&a);
	if (rc < 0 && n > 1) {
		for (size_t i = 0; i < n; i++) {
			buf_reset(&out);
			if (dk(&out, SC_DOCKER_QUICK_MS, &e, "inspect", "--type", "container", "--format",
			       SNAP_INSPECT_FORMAT, ss[i].cname, NULL) == 0)
				parse_state(&ss[i], out.data);
		}
		buf_release(&out);
		return;
	}
	lines = str_split(out.data, "\n", &nl);
	buf_release(&out);
	for (size_t k = 0; k < nl; k++) {
		char name[310];

		if (sscanf(lines[k], "/%309s", name) != 1)
			continue;
		for (size_t i = 0; i < n; i++)
			if (str_eq(name, ss[i].cname))
				parse_state(&ss[i], lines[k]);
	}
	str_list_free(lines);
}

/* The freezer cgroup of every running container; one that cannot be found
 * (an odd host: rootless, another pid namespace) is paused by docker instead. */
static void find_cgroups(const struct fz_sys *sys, struct svc_state *ss, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct err e;

		if (!str_eq(ss[i].status, "running"))
			continue;
		if (fz_cgroup_of(sys, ss[i].pid, ss[i].id, &ss[i].cg, &e) < 0) {
			ss[i].cg.version = 0;
			log_info("snapshot", "service \"%s\": %s; docker pause is used instead", ss[i].name, e.msg);
		}
	}
}

/* One docker call for the services that want docker's own pause or
 * unpause: protocol.md's keep_paused, containers docker had paused before
 * (verify.collect froze the agent; resume: true is a snapshot without
 * keep_paused: they are unpaused), and any whose cgroup was not found. */
static int docker_pause(struct svc_state *ss, size_t n, bool pause, struct err *e)
{
	struct argv a;
	size_t k = 0;
	int rc = 0;

	av_init(&a);
	av_add(&a, pause ? "pause" : "unpause");
	for (size_t i = 0; i < n; i++)
		if (pause ? (str_eq(ss[i].status, "running") && (ss[i].keep || !ss[i].cg.version))
			  : (ss[i].docker_paused && !ss[i].keep)) {
			av_add(&a, ss[i].cname);
			k++;
		}
	if (k)
		rc = dk_run(&a, SC_DOCKER_TIMEOUT_MS, NULL, e);
	av_release(&a);
	return rc;
}

/* Running and healthy (or without a healthcheck), every service not left
 * paused. Unlike env.create's wait, "unhealthy" is not final here: probes
 * failed while the containers were frozen, and the next one decides.
 * Nothing to ask when every such service was running, came back from our
 * own freeze (a thawed process is running) and has no healthcheck. */
static int wait_healthy(struct svc_state *ss, size_t n, struct err *e)
{
	int64_t start = ev_mono_ms();
	char last[200] = "";
	bool any = false;

	for (size_t i = 0; i < n; i++) {
		ss[i].watch = !ss[i].keep && (ss[i].docker_paused || ss[i].frozen);
		if (ss[i].watch && (ss[i].has_health || !ss[i].frozen))
			any = true;
	}
	if (!any)
		return 0;
	for (;;) {
		bool all = true;

		inspect_all(ss, n);
		for (size_t i = 0; i < n && all; i++) {
			if (!ss[i].watch)
				continue;
			if (str_eq(ss[i].status, "exited") || str_eq(ss[i].status, "dead") ||
			    str_eq(ss[i].status, "absent"))
				return err_set(e, "service \"%s\" %s after the snapshot", ss[i].name, ss[i].status);
			if (!str_eq(ss[i].status, "running") ||
			    !(str_eq(ss[i].health, "none") || str_eq(ss[i].health, "healthy"))) {
				all = false;
				snprintf(last, sizeof(last), "service \"%s\" is %s/%s", ss[i].name, ss[i].status,
					 ss[i].health);
			}
		}
		if (all)
			return 0;
		if (ev_mono_ms() - start > SC_SNAP_HEALTH_MS)
			return err_set(e, "not healthy %d s after the snapshot: %s", SC_SNAP_HEALTH_MS / 1000, last);
		sleep_ms(SC_SNAP_HEALTH_POLL_MS);
	}
}

/* ---- checkpoints ---- */

static const char *kind_of_comm(const char *comm)
{
	if (str_eq(comm, "postgres"))
		return "postgres";
	if (str_eq(comm, "redis-server"))
		return "redis";
	if (str_eq(comm, "mysqld") || str_eq(comm, "mariadbd"))
		return "mysql";
	return NULL;
}

/* "postgres", "redis", "mysql" when the container runs that server, else
 * NULL: from the host's /proc (the processes of its cgroup), else from
 * docker top. */
static const char *db_kind(const struct fz_sys *sys, const struct svc_state *s)
{
	struct buf out = BUF_INIT;
	struct err e;
	const char *kind = NULL;
	char **lines;
	size_t n = 0;
	bool top = false;

	if (!s->cg.version || fz_comms(sys, &s->cg, &out, &e) < 0) {
		buf_reset(&out);
		if (dk(&out, SC_DOCKER_QUICK_MS, &e, "top", s->cname, "-o", "pid,comm", NULL) < 0) {
			buf_release(&out);
			return NULL;
		}
		top = true;
	}
	lines = str_split(out.data, "\n", &n);
	buf_release(&out);
	for (size_t i = top ? 1 : 0; i < n && !kind; i++) {
		const char *comm = lines[i];

		if (top) {	/* "  PID COMM" */
			while (*comm == ' ')
				comm++;
			comm = strchr(comm, ' ');
			while (comm && *comm == ' ')
				comm++;
			if (!comm)
				continue;
		}
		kind = kind_of_comm(comm);
	}
	str_list_free(lines);
	return kind;
}

static const char *svc_env(const struct json *svc, const char *key, const char *fallback)
{
	const char *v = json_get_str(json_get(svc, "env"), key);

	return v && *v ? v : fallback;
}

static int pg_checkpoint(const char *cname, const struct json *svc, struct err *e)
{
	char user[200], pw[300];
	int rc;

	snprintf(user, sizeof(user), "PGUSER=%s", svc_env(svc, "POSTGRES_USER", "postgres"));
	snprintf(pw, sizeof(pw), "PGPASSWORD=%s", svc_env(svc, "POSTGRES_PASSWORD", ""));
	/* As the postgres OS user over the default socket (trust in the
	 * official image and ours), else over TCP with the password. */
	rc = dk(NULL, SC_SNAP_CHECKPOINT_TIMEOUT_MS, e, "exec", "-u", "postgres", "-e", user, "-e", "PGDATABASE=postgres",
		cname, "psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", "CHECKPOINT", NULL);
	if (rc < 0)
		rc = dk(NULL, SC_SNAP_CHECKPOINT_TIMEOUT_MS, e, "exec", "-e", user, "-e", pw, "-e", "PGDATABASE=postgres",
			cname, "psql", "-X", "-q", "-h", "127.0.0.1", "-v", "ON_ERROR_STOP=1", "-c", "CHECKPOINT",
			NULL);
	return rc;
}

/* The value of key in INFO output ("key:value\r\n"), or -1. */
static int64_t info_int(const char *info, const char *key)
{
	size_t kl = strlen(key);
	int64_t v;

	for (const char *p = info; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (strncmp(p, key, kl) == 0 && p[kl] == ':') {
			char num[32];
			size_t len = strcspn(p + kl + 1, "\r\n");

			if (len >= sizeof(num))
				return -1;
			memcpy(num, p + kl + 1, len);
			num[len] = '\0';
			return str_to_i64(num, &v) == 0 ? v : -1;
		}
	}
	return -1;
}

static int redis_info(const char *cname, struct buf *out, struct err *e)
{
	buf_reset(out);
	return dk(out, SC_DOCKER_QUICK_MS, e, "exec", cname, "redis-cli", "INFO", "persistence", NULL);
}

/* BGSAVE, then wait until a save that started after our request has
 * finished: rdb_saves (Redis >= 7) grows, or rdb_last_save_time moves. */
static int redis_bgsave(const char *cname, struct err *e)
{
	struct buf out = BUF_INIT;
	int64_t start = ev_mono_ms(), saves0, last0;
	bool asked = false;
	int rc = -1;

	if (redis_info(cname, &out, e) < 0)
		goto out;
	saves0 = info_int(out.data, "rdb_saves");
	last0 = info_int(out.data, "rdb_last_save_time");
	while (ev_mono_ms() - start < SC_SNAP_CHECKPOINT_TIMEOUT_MS) {
		int64_t busy, saves, last;

		if (!asked) {
			/* "already in progress" means that save began before us: wait it out, then ask. */
			buf_reset(&out);
			if (dk(&out, SC_DOCKER_QUICK_MS, e, "exec", cname, "redis-cli", "BGSAVE", NULL) < 0)
				goto out;
			if (strstr(out.data, "ERR") && !strstr(out.data, "in progress")) {
				dk_first_line(out.data, e->msg, sizeof(e->msg));
				goto out;
			}
			asked = !strstr(out.data, "in progress");
			if (asked) {
				if (redis_info(cname, &out, e) < 0)
					goto out;
				/* a save done before BGSAVE returned is ours only if it counted */
			}
		}
		sleep_ms(SC_SNAP_BGSAVE_POLL_MS);
		if (redis_info(cname, &out, e) < 0)
			goto out;
		busy = info_int(out.data, "rdb_bgsave_in_progress");
		saves = info_int(out.data, "rdb_saves");
		last = info_int(out.data, "rdb_last_save_time");
		if (!asked || busy != 0)
			continue;
		if (!strstr(out.data, "rdb_last_bgsave_status:ok")) {
			err_set(e, "BGSAVE failed (rdb_last_bgsave_status is not ok)");
			goto out;
		}
		if ((saves0 >= 0 && saves > saves0) || (saves0 < 0 && last != last0) ||
		    (saves0 < 0 && ev_mono_ms() - start > 2000)) {	/* same second, no counter: assume done */
			rc = 0;
			goto out;
		}
	}
	err_set(e, "BGSAVE not finished after %d s", SC_SNAP_CHECKPOINT_TIMEOUT_MS / 1000);
out:
	buf_release(&out);
	return rc;
}

static int mysql_flush(const char *cname, const struct json *svc, struct err *e)
{
	char pw[300];

	snprintf(pw, sizeof(pw), "MYSQL_PWD=%s", svc_env(svc, "MYSQL_ROOT_PASSWORD", svc_env(svc, "MARIADB_ROOT_PASSWORD", "")));
	return dk(NULL, SC_SNAP_CHECKPOINT_TIMEOUT_MS, e, "exec", "-e", pw, cname, "mysql", "-uroot", "-e", "FLUSH TABLES",
		  NULL);
}

static struct json *checkpoint_all(const struct fz_sys *sys, struct svc_state *ss, size_t n,
				   const struct json *order)
{
	struct json *list = json_new_array();

	for (size_t i = 0; i < n; i++) {
		const struct json *svc = json_at(order, i);
		const char *kind;
		struct json *c;
		struct err e;
		int64_t t0 = ev_mono_ms();
		int rc;
		char dur[CLOCK_DURATION_MAX];

		if (!str_eq(ss[i].status, "running") || !(kind = db_kind(sys, &ss[i])))
			continue;
		err_clear(&e);
		wk_progress("checkpointing %s (%s)", ss[i].name, kind);
		if (str_eq(kind, "postgres"))
			rc = pg_checkpoint(ss[i].cname, svc, &e);
		else if (str_eq(kind, "redis"))
			rc = redis_bgsave(ss[i].cname, &e);
		else
			rc = mysql_flush(ss[i].cname, svc, &e);
		c = json_new_object();
		json_object_set_str(c, "service", ss[i].name);
		json_object_set_str(c, "kind", kind);
		json_object_set_str(c, "what", str_eq(kind, "postgres") ? "CHECKPOINT"
					       : str_eq(kind, "redis") ? "BGSAVE" : "FLUSH TABLES");
		json_object_set_bool(c, "ok", rc == 0);
		fmt_ms(ev_mono_ms() - t0, dur, sizeof(dur));
		json_object_set_str(c, "took", dur);
		if (rc < 0) {
			json_object_set_str(c, "error", e.msg);
			wk_progress("checkpoint of %s failed (the capture stays crash-consistent): %s", ss[i].name, e.msg);
		}
		json_array_push(list, c);
	}
	return list;
}

/* ---- env.snapshot ---- */

static struct json *evidence(const struct json *rec)
{
	struct json *r = json_new_object();

	json_object_set_str(r, "snapshot", json_get_str(rec, "name"));
	json_object_set(r, "datasets", json_dup(json_get(rec, "datasets")));
	json_object_set_str(r, "frozen_for", json_get_str(rec, "frozen_for"));
	json_object_set_bool(r, "consistent", json_get_bool(rec, "consistent", false));
	json_object_set_str(r, "storage", json_get_str(rec, "storage"));
	json_object_set(r, "checkpoints", json_dup(json_get(rec, "checkpoints")));
	json_object_set_int(r, "frozen_ms", json_get_int(rec, "frozen_ms", 0));
	return r;
}

static bool in_list(const struct json *arr, const char *s)
{
	for (size_t i = 0; i < json_len(arr); i++)
		if (json_at(arr, i)->type == JSON_STRING && str_eq(json_at(arr, i)->u.str.s, s))
			return true;
	return false;
}

/* Test hook: sleep this many ms inside the frozen window (t/sidecar, to
 * kill a worker there and see the next command thaw what it froze). */
static int64_t test_frozen_sleep_ms(void)
{
	const char *v = getenv("DENVD_TEST_FROZEN_SLEEP_MS");
	int64_t ms;

	return v && str_to_i64(v, &ms) == 0 && ms > 0 ? ms : 0;
}

/* Steps 3 to 5: freeze, capture, thaw. *frozen_ms runs from the first
 * freeze to the end of the last thaw. */
static int frozen_capture(struct wk *w, struct stg *stg, const char *name, const struct json *vols,
			  struct svc_state *ss, size_t n, struct json *datasets, int64_t *frozen_ms, struct err *e)
{
	struct fz_cg *cgs = xcalloc(n ? n : 1, sizeof(*cgs));
	char record[FZ_PATH_MAX];
	size_t ncg = 0;
	int64_t t0, nap;
	int fd = -1, rc = -1, cap_rc, thaw_rc = 0, unpause_rc;
	struct err e2;

	for (size_t i = 0; i < n; i++)
		if (str_eq(ss[i].status, "running") && !ss[i].keep && ss[i].cg.version)
			cgs[ncg++] = ss[i].cg;
	{
		size_t nd = 0;

		for (size_t i = 0; i < n; i++)
			nd += str_eq(ss[i].status, "running") && (ss[i].keep || !ss[i].cg.version);
		wk_progress("freezing %zu container(s) with the cgroup freezer, pausing %zu with docker", ncg, nd);
	}
	/* Docker does not know of our freeze: say what we freeze before we do. */
	fz_record_path(w->data, w->env, record, sizeof(record));
	if (ncg && (fd = fz_record_begin(record, cgs, ncg, e)) < 0)
		goto out;
	/* Between here and the thaw every container is frozen. */
	t0 = ev_mono_ms();
	if (docker_pause(ss, n, true, e) < 0) {
		for (size_t i = 0; i < n; i++)
			if (str_eq(ss[i].status, "running") && (ss[i].keep || !ss[i].cg.version))
				ss[i].docker_paused = true;
		docker_pause(ss, n, false, &e2);	/* whatever did pause */
		err_prefix(e, "pausing the containers");
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		if (str_eq(ss[i].status, "running") && (ss[i].keep || !ss[i].cg.version))
			ss[i].docker_paused = true;
	if (fz_freeze(cgs, ncg, FZ_FREEZE_TIMEOUT_MS, e) < 0) {
		docker_pause(ss, n, false, &e2);
		err_prefix(e, "freezing the containers");
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		ss[i].frozen = str_eq(ss[i].status, "running") && !ss[i].keep && ss[i].cg.version;
	if ((nap = test_frozen_sleep_ms()) > 0) {
		wk_progress("frozen; test hook: sleeping %lld ms", (long long)nap);
		sleep_ms(nap);
	}
	cap_rc = stg->ops->snapshot(stg, w->env, name, vols, datasets, e);
	thaw_rc = fz_thaw(cgs, ncg, cap_rc < 0 ? &e2 : e);
	unpause_rc = docker_pause(ss, n, false, cap_rc < 0 || thaw_rc < 0 ? &e2 : e);
	*frozen_ms = ev_mono_ms() - t0;
	/* A failed thaw leaves the record: the next command for the env thaws again. */
	if (cap_rc < 0) {
		stg->ops->drop_snapshot(stg, w->env, name, &e2);
		goto out;
	}
	if (thaw_rc < 0 || unpause_rc < 0) {
		err_prefix(e, thaw_rc < 0 ? "thawing the containers" : "unpausing the containers");
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0) {
		if (thaw_rc == 0)	/* nothing of ours is frozen */
			(void)fz_record_end(record, fd, &e2);
		else
			sys_close(fd);
	}
	free(cgs);
	return rc;
}

/* A capture or fork that failed because of what the volumes hold, as a
 * refusal ("volume home: disk full"): the volume from the "volume \"x\""
 * the backends and create.c put in their messages, when there is one. */
static struct json *refused_result(const struct err *e, const char *what, const char *why)
{
	struct json *r = json_new_object(), *list = json_new_array();
	const char *p = strstr(e->msg, "volume \""), *q = p ? strchr(p + 8, '"') : NULL;
	struct buf b = BUF_INIT;

	if (q)
		buf_addf(&b, "volume %.*s: %s", (int)(q - (p + 8)), p + 8, why);
	else
		buf_addf(&b, "%s: %s", what, why);
	json_array_push(list, json_new_str(b.data));
	buf_release(&b);
	json_object_set(r, "snapshot", json_new_null());
	json_object_set(r, "refused", list);
	json_object_set_str(r, "error", e->msg);
	return r;
}

/* The record of a capture (step 6): it takes datasets and checkpoints. */
static struct json *snap_record(const char *env, const char *name, const char *storage, const struct json *vols,
				struct json *datasets, int64_t frozen, struct json *checkpoints, const struct json *spec)
{
	struct json *rec = json_new_object();
	char dur[CLOCK_DURATION_MAX], ts[CLOCK_RFC3339_MAX];

	fmt_ms(frozen, dur, sizeof(dur));
	clock_format_rfc3339(clock_now_ns(), ts);
	json_object_set_str(rec, "name", name);
	json_object_set_str(rec, "env", env);
	json_object_set_str(rec, "storage", storage);
	json_object_set(rec, "volumes", vols ? json_dup(vols) : json_new_array());
	json_object_set(rec, "datasets", datasets);
	json_object_set_str(rec, "frozen_for", dur);
	json_object_set_int(rec, "frozen_ms", frozen);
	json_object_set_bool(rec, "consistent", true);	/* every volume captured inside one freeze */
	json_object_set(rec, "checkpoints", checkpoints);
	json_object_set_str(rec, "created_at", ts);
	json_object_set(rec, "spec", json_dup(spec));
	return rec;
}

static int snapshot_run(struct wk *w, const char *name, const struct json *keep, bool refuse, struct json *spec,
			struct json **result, struct err *e)
{
	const struct json *vols = json_get(spec, "volumes");
	struct json *order = NULL, *checkpoints = NULL, *datasets = NULL, *rec = NULL;
	struct svc_state *ss = NULL;
	char project[SC_ID_MAX], dir[STG_PATH_MAX], path[STG_PATH_MAX + 32], dur[CLOCK_DURATION_MAX];
	struct stg stg;
	struct fz_sys sys;
	size_t n;
	int64_t frozen = 0;
	int rc = -1;

	if (stg_for_env(&stg, w, w->env, e) < 0)
		return -1;
	if (!(order = render_order(json_get(spec, "services"), e)))
		return -1;
	if ((n = json_len(order)) > SC_SNAP_MAX_SERVICES) {
		json_free(order);
		return err_set(e, "more than %d services", SC_SNAP_MAX_SERVICES);
	}
	fz_sys_default(&sys);
	dk_project(w->env, project, sizeof(project));
	ss = xcalloc(n ? n : 1, sizeof(*ss));
	for (size_t i = 0; i < n; i++) {
		ss[i].name = json_get_str(json_at(order, i), "name");
		dk_container(project, ss[i].name, ss[i].cname, sizeof(ss[i].cname));
		/* What the user paused (env.pause) stays paused, like keep_paused. */
		ss[i].keep = in_list(keep, ss[i].name) || pause_marked(w->data, w->env, ss[i].name);
	}
	inspect_all(ss, n);
	for (size_t i = 0; i < n; i++)
		ss[i].docker_paused = str_eq(ss[i].status, "paused");
	find_cgroups(&sys, ss, n);
	checkpoints = checkpoint_all(&sys, ss, n, order);
	if (stg.ops->sync(&stg, w->env, e) < 0)
		goto out;
	datasets = json_new_array();
	if (frozen_capture(w, &stg, name, vols, ss, n, datasets, &frozen, e) < 0)
		goto refusal;
	fmt_ms(frozen, dur, sizeof(dur));
	wk_progress("captured %zu volume(s) with %s; frozen for %s", json_len(vols), stg.ops->name, dur);

	rec = snap_record(w->env, name, stg.ops->name, vols, datasets, frozen, checkpoints, spec);
	datasets = checkpoints = NULL;
	snap_dir(w->data, w->env, name, dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/snapshot.json", dir);
	if (fs_mkdir_p(dir, 0700, e) < 0 || snap_write_json(path, rec, e) < 0) {
		struct err e2;

		stg.ops->drop_snapshot(&stg, w->env, name, &e2);
		goto refusal;
	}
	wk_progress("waiting for health after the snapshot");
	if (wait_healthy(ss, n, e) < 0)
		goto out;
	*result = evidence(rec);
	{
		struct json *kp = json_new_array();

		for (size_t i = 0; i < n; i++)
			if (ss[i].keep && ss[i].docker_paused)
				json_array_push(kp, json_new_str(ss[i].name));
		json_object_set(*result, "kept_paused", kp);
	}
	rc = 0;
	goto out;
refusal:
	/* A verify's capture: what the agent's volumes hold (a full disk, a
	 * tree deeper than the copier goes) is the agent's doing and scores 0;
	 * keep_paused services stay paused either way (frozen_capture). */
	if (refuse && stg_volume_fault(e)) {
		wk_progress("refused: %s (%s)", stg_volume_fault(e), e->msg);
		*result = refused_result(e, "snapshot", stg_volume_fault(e));
		rc = 0;
	}
out:
	free(ss);
	json_free(order);
	json_free(checkpoints);
	json_free(datasets);
	json_free(rec);
	return rc;
}

int cmd_env_snapshot(struct wk *w, const struct json *payload, struct json **result, struct err *e)
{
	const char *name = json_get_str(payload, "name");
	const struct json *keep = json_get(payload, "keep_paused");
	struct json *spec = NULL, *rec = NULL;
	bool refuse = json_get_bool(payload, "refuse", false);
	int rc;

	if (!sc_safe_id(w->env))
		return err_set(e, "env.snapshot: the command has no usable env_id");
	if (!sc_safe_id(name))
		return err_set(e, "env.snapshot: name must be a version id ([A-Za-z0-9_-]), got \"%s\"",
			       name ? name : "");
	if (keep && keep->type != JSON_ARRAY)
		return err_set(e, "env.snapshot: keep_paused must be a list of services");
	if ((rc = snap_record_load(w->data, w->env, name, &rec, e)) != 0) {
		/* Taken already (a command re-sent under another id): the same answer. */
		if (rc > 0) {
			*result = evidence(rec);
			json_free(rec);
			return 0;
		}
		return err_prefix(e, "env.snapshot");
	}
	if (create_read_spec(w, w->env, &spec, e) < 0)
		return err_prefix(e, "env.snapshot");
	rc = snapshot_run(w, name, keep, refuse, spec, result, e);
	json_free(spec);
	return rc < 0 ? err_prefix(e, "env.snapshot") : 0;
}

/* ---- env.fork and env.rollback ---- */

/* The command's env_id and the snapshot it names under key usable as ids;
 * -1 with e in kind's words. */
static int fork_ids_ok(const struct wk *w, const char *kind, const char *key, const char *snap, struct err *e)
{
	if (!sc_safe_id(w->env))
		return err_set(e, "%s: the command has no usable env_id", kind);
	if (!sc_safe_id(snap))
		return err_set(e, "%s: %s must name a snapshot, got \"%s\"", kind, key, snap ? snap : "");
	return 0;
}

int cmd_env_fork(struct wk *w, const struct json *payload, struct json **result, struct err *e)
{
	const char *from_env = json_get_str(payload, "from_env"), *snap = json_get_str(payload, "from_snapshot");
	struct create_from from;
	struct json *rec = NULL, *res = NULL, *spec;
	char src_env[SC_ID_MAX], dur[CLOCK_DURATION_MAX];
	int64_t t0 = ev_mono_ms();
	int rc;

	if (fork_ids_ok(w, "env.fork", "from_snapshot", snap, e) < 0)
		return -1;
	if (from_env && str_eq(from_env, w->env))
		return err_set(e, "env.fork: an environment cannot be forked into itself");
	if (snap_from(w, from_env, snap, &from, src_env, sizeof(src_env), &rec, e) < 0)
		return err_prefix(e, "env.fork");
	/* The services and volumes are the version's: the payload's, else the record's. */
	spec = json_dup(json_len(json_get(payload, "services")) ? payload : json_get(rec, "spec"));
	if (!json_get_str(payload, "egress") && json_get_str(json_get(rec, "spec"), "egress"))
		json_object_set_str(spec, "egress", json_get_str(json_get(rec, "spec"), "egress"));
	wk_progress("forking %s from snapshot %s of %s (%s)", w->env, snap, src_env, from.storage);
	rc = create_stack(w, "env.fork", spec, &from, &res, e);
	json_free(spec);
	json_free(rec);
	if (rc < 0 && json_get_bool(payload, "refuse", false) && stg_volume_fault(e)) {
		/* A verify's grader fork: the agent's volumes did not fit (a full
		 * disk), which is the agent's doing, as for the snapshot. */
		wk_progress("refused: %s (%s)", stg_volume_fault(e), e->msg);
		*result = refused_result(e, "fork", stg_volume_fault(e));
		return 0;
	}
	if (rc < 0)
		return -1;
	fmt_ms(ev_mono_ms() - t0, dur, sizeof(dur));
	json_object_set_str(res, "forked_in", dur);
	json_object_set_str(res, "from", snap);
	json_object_set_str(res, "from_env", src_env);
	*result = res;
	return 0;
}

int cmd_env_rollback(struct wk *w, const struct json *payload, struct json **result, struct err *e)
{
	const char *snap = json_get_str(payload, "snapshot");
	struct create_from from;
	struct json *rec = NULL, *res = NULL, *spec = NULL, *origin = NULL;
	char src_env[SC_ID_MAX], dur[CLOCK_DURATION_MAX], path[STG_PATH_MAX];
	int64_t t0 = ev_mono_ms();
	int rc;

	if (fork_ids_ok(w, "env.rollback", "snapshot", snap, e) < 0)
		return -1;
	/* Its own snapshots first, then the one it was forked from. */
	snprintf(path, sizeof(path), "%s/envs/%s/origin.json", w->data, w->env);
	if (fs_exists(path) && snap_read_json(path, &origin, e) < 0)
		return err_prefix(e, "env.rollback");
	rc = snap_from(w, w->env, snap, &from, src_env, sizeof(src_env), &rec, e);
	if (rc < 0 && origin && json_get_str(origin, "env"))
		rc = snap_from(w, json_get_str(origin, "env"), snap, &from, src_env, sizeof(src_env), &rec, e);
	json_free(origin);
	if (rc < 0)
		return err_prefix(e, "env.rollback");
	from.restore = true;
	spec = json_dup(json_get(rec, "spec"));
	if (!spec || spec->type != JSON_OBJECT) {
		json_free(spec);
		json_free(rec);
		return err_set(e, "env.rollback: snapshot %s has no saved spec", snap);
	}
	wk_progress("rolling %s back to snapshot %s", w->env, snap);
	rc = create_stack(w, "env.rollback", spec, &from, &res, e);
	json_free(spec);
	json_free(rec);
	if (rc < 0)
		return -1;
	fmt_ms(ev_mono_ms() - t0, dur, sizeof(dur));
	json_object_set_str(res, "snapshot", snap);
	json_object_set_str(res, "restored_in", dur);
	*result = res;
	return 0;
}

/* ---- destroy and reclaim ---- */

/* Does a live environment other than except name (env, snap) as its origin? */
static bool has_dependent(const char *data, const char *env, const char *snap, const char *except)
{
	char dir[STG_PATH_MAX], path[STG_PATH_MAX + 300];
	DIR *d;
	struct dirent *de;
	bool found = false;

	snprintf(dir, sizeof(dir), "%s/envs", data);
	if (!(d = opendir(dir)))
		return false;
	while (!found && (de = readdir(d))) {
		struct json *o = NULL;
		struct err e;

		if (!sc_safe_id(de->d_name) || str_eq(de->d_name, except))
			continue;
		snprintf(path, sizeof(path), "%s/%s/origin.json", dir, de->d_name);
		if (!fs_exists(path) || snap_read_json(path, &o, &e) < 0)
			continue;
		found = str_eq(json_get_str(o, "env"), env) && (!snap || str_eq(json_get_str(o, "snapshot"), snap));
		json_free(o);
	}
	closedir(d);
	return found;
}

/* Drop every snapshot of env that nothing depends on, then (when none is
 * left) the env's volumes; 1 when something had to be kept. */
static int drop_unreferenced(struct wk *w, const struct stg *stg, const char *env, const char *except,
			     struct err *e)
{
	char dir[STG_PATH_MAX], sd[STG_PATH_MAX + 300];
	DIR *d;
	struct dirent *de;
	int kept = 0, rc;

	snprintf(dir, sizeof(dir), "%s/snaps/%s", w->data, env);
	if ((d = opendir(dir))) {
		while ((de = readdir(d))) {
			if (!sc_safe_id(de->d_name))
				continue;
			if (has_dependent(w->data, env, de->d_name, except)) {
				wk_progress("keeping snapshot %s: a live fork depends on it", de->d_name);
				kept = 1;
				continue;
			}
			snprintf(sd, sizeof(sd), "%s/%s", dir, de->d_name);
			if (stg->ops->drop_snapshot(stg, env, de->d_name, e) < 0 || fs_remove_all(sd, e) < 0) {
				closedir(d);
				return -1;
			}
		}
		closedir(d);
	}
	if ((rc = stg->ops->drop_env(stg, env, e)) < 0)
		return -1;
	return kept || rc > 0;
}

static int reclaim(struct wk *w, const char *env, const char *except, int depth, struct err *e);

/* After env (a fork) is gone, its origin may have been waiting for it. */
static int reclaim_origin(struct wk *w, const struct json *origin, const char *except, int depth, struct err *e)
{
	const char *oenv = json_get_str(origin, "env");
	char mark[STG_PATH_MAX];

	if (!oenv || !sc_safe_id(oenv) || depth >= STG_RECLAIM_DEPTH_MAX)
		return 0;
	snprintf(mark, sizeof(mark), "%s/snaps/%s/retired.json", w->data, oenv);
	return fs_exists(mark) ? reclaim(w, oenv, except, depth + 1, e) : 0;
}

/* A retired env (destroyed, something kept): drop what is free now. */
static int reclaim(struct wk *w, const char *env, const char *except, int depth, struct err *e)
{
	char mark[STG_PATH_MAX + 32], dir[STG_PATH_MAX];
	struct json *r = NULL;
	struct stg stg;
	int kept;

	snprintf(dir, sizeof(dir), "%s/snaps/%s", w->data, env);
	snprintf(mark, sizeof(mark), "%s/retired.json", dir);
	if (snap_read_json(mark, &r, e) < 0)
		return -1;
	if (stg_open(&stg, w, json_get_str(r, "storage"), e) < 0 ||
	    (kept = drop_unreferenced(w, &stg, env, except, e)) < 0) {
		json_free(r);
		return -1;
	}
	if (!kept) {
		wk_progress("reclaimed the last of destroyed environment %s", env);
		if (fs_remove_all(dir, e) < 0 || reclaim_origin(w, json_get(r, "origin"), except, depth, e) < 0) {
			json_free(r);
			return -1;
		}
	}
	json_free(r);
	return 0;
}

int snap_destroy_env(struct wk *w, const char *env, struct err *e)
{
	char path[STG_PATH_MAX + 32], dir[STG_PATH_MAX];
	struct json *origin = NULL, *mark;
	struct stg stg;
	int kept;

	snprintf(path, sizeof(path), "%s/envs/%s/origin.json", w->data, env);
	if (fs_exists(path) && snap_read_json(path, &origin, e) < 0)
		return -1;
	if (stg_for_env(&stg, w, env, e) < 0 || (kept = drop_unreferenced(w, &stg, env, env, e)) < 0) {
		json_free(origin);
		return -1;
	}
	snprintf(dir, sizeof(dir), "%s/snaps/%s", w->data, env);
	if (kept) {
		mark = json_new_object();
		json_object_set_str(mark, "storage", stg.ops->name);
		json_object_set(mark, "origin", origin ? json_dup(origin) : json_new_null());
		snprintf(path, sizeof(path), "%s/retired.json", dir);
		if (snap_write_json(path, mark, e) < 0) {
			json_free(mark);
			json_free(origin);
			return -1;
		}
		json_free(mark);
	} else if (fs_remove_all(dir, e) < 0) {
		json_free(origin);
		return -1;
	}
	/* This env's origin.json goes with its directory (the caller's next
	 * step); excluding it now lets its origin be reclaimed already. */
	if (origin && reclaim_origin(w, origin, env, 0, e) < 0) {
		json_free(origin);
		return -1;
	}
	json_free(origin);
	return 0;
}
