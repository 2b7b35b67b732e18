/*
 * bg.c: background commands (denvd(8), "Background commands"). env.bg.start
 * runs an argv in a service's container and answers at once with the
 * command's id ("bg_<ULID>"); the command outlives the call, the worker and
 * the agent, because a supervisor process (forked from the worker, in its
 * own session) attaches to it through the Engine API and writes its output
 * to files on the host:
 *   <data>/envs/<env>/bg/<id>/state.json  what it is and how it ended
 *   <data>/envs/<env>/bg/<id>/stdout      the first SC_BG_OUTPUT_MAX bytes
 *   <data>/envs/<env>/bg/<id>/stderr      (the rest is counted as dropped)
 *   <data>/envs/<env>/bg/<id>/lock        flock'd by the supervisor while it runs
 * The lock is how a reader tells "running" from "its supervisor died" and
 * how env.bg.get waits for the end without polling. The files live in the
 * environment's directory, so env.destroy (which removes the containers,
 * and with them the processes) removes them too. env.bg.list,
 * env.bg.get (status, output from offsets, wait) and env.bg.signal read
 * these files; they run beside env.exec (dispatch.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/enc.h"
#include "base/ev.h"
#include "base/fs.h"
#include "base/id.h"
#include "base/log.h"
#include "base/str.h"
#include "base/sys.h"
#include "sidecar/sidecar.h"

static const struct {
	const char *name;
	int sig;
} signals[] = {
	{ "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "KILL", SIGKILL },
	{ "TERM", SIGTERM }, { "USR1", SIGUSR1 }, { "USR2", SIGUSR2 },
};

static int bg_dir(const struct wk *w, const char *id, const char *file, char *out, size_t n)
{
	int k = id ? snprintf(out, n, "%s/envs/%s/bg/%s%s%s", w->data, w->env, id, file ? "/" : "", file ? file : "")
		   : snprintf(out, n, "%s/envs/%s/bg", w->data, w->env);

	return k < 0 || (size_t)k >= n ? -1 : 0;
}

static int read_state(const struct wk *w, const char *id, struct json **st, struct err *e)
{
	char path[SC_BG_PATH_MAX];
	struct buf b = BUF_INIT;
	int rc;

	if (bg_dir(w, id, "state.json", path, sizeof(path)) < 0)
		return err_set(e, "background command %s: path too long", id);
	buf_init(&b, SC_BG_STATE_MAX);
	rc = fs_read_file(path, &b, SC_BG_STATE_MAX, e);
	if (rc == 0 && json_parse(b.data ? b.data : "", b.len, NULL, st, e) < 0)
		rc = -1;
	buf_release(&b);
	if (rc < 0 && errno == ENOENT)
		return err_set(e, "no background command %s in environment %s", id, w->env);
	return rc;
}

static int write_state(const struct wk *w, const char *id, const struct json *st, struct err *e)
{
	char path[SC_BG_PATH_MAX];
	char *text;
	int rc;

	if (bg_dir(w, id, "state.json", path, sizeof(path)) < 0)
		return err_set(e, "background command %s: path too long", id);
	text = json_to_string(st, JSON_COMPACT);
	rc = fs_write_atomic(path, text, strlen(text), 0600, e);
	free(text);
	return rc;
}

/* 1 if a supervisor holds the command's lock, 0 if none does. */
static int supervised(const struct wk *w, const char *id)
{
	char path[SC_BG_PATH_MAX];
	int fd, rc;

	if (bg_dir(w, id, "lock", path, sizeof(path)) < 0 || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	rc = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK ? 1 : 0;
	sys_close(fd);
	return rc;
}

static int64_t file_size(const struct wk *w, const char *id, const char *name)
{
	char path[SC_BG_PATH_MAX];
	struct stat st;

	if (bg_dir(w, id, name, path, sizeof(path)) < 0 || stat(path, &st) < 0)
		return 0;
	return (int64_t)st.st_size;
}

/* The state as a reader reports it: sizes from the files while it runs, and
 * "lost" when it says running but nobody holds its lock any more. */
static void state_view(const struct wk *w, const char *id, struct json *st)
{
	const char *s = json_get_str(st, "state");

	if ((str_eq(s, "running") || str_eq(s, "starting")) && !supervised(w, id))
		json_object_set_str(st, "state", "lost");
	json_object_set_int(st, "stdout_bytes", file_size(w, id, "stdout"));
	json_object_set_int(st, "stderr_bytes", file_size(w, id, "stderr"));
	json_object_set_bool(st, "done", !str_eq(json_get_str(st, "state"), "running"));
	json_object_del(st, "exec_id");
}

/* A reader's answer: {"command": st} (taken). */
static struct json *wrap(struct json *st)
{
	struct json *r = json_new_object();

	json_object_set(r, "command", st);
	return r;
}

/* ---- the supervisor ---- */

struct sup {
	const struct wk *w;
	const char *id;
	struct json *st;
	int fd[2];		/* stdout, stderr files */
	int64_t kept[2];
	int64_t dropped;
	int ready;		/* pipe to the worker; -1 once told */
};

static void sup_sink(void *arg, int which, const char *p, size_t n)
{
	struct sup *s = arg;
	int64_t room = (int64_t)SC_BG_OUTPUT_MAX - s->kept[which];
	size_t take = room <= 0 ? 0 : (int64_t)n > room ? (size_t)room : n;

	if (take && sys_write_all(s->fd[which], p, take) == 0)
		s->kept[which] += (int64_t)take;
	else
		take = 0;
	s->dropped += (int64_t)(n - take);
}

static void sup_created(void *arg, const char *exec_id)
{
	struct sup *s = arg;
	struct err e;

	json_object_set_str(s->st, "exec_id", exec_id);
	json_object_set_str(s->st, "state", "running");
	if (write_state(s->w, s->id, s->st, &e) < 0)
		log_warn("bg", "%s: %s", s->id, e.msg);
	(void)sys_write_all(s->ready, "1", 1);
	sys_close(s->ready);
	s->ready = -1;
}

static int open_out(const struct wk *w, const char *id, const char *name, struct err *e)
{
	char path[SC_BG_PATH_MAX];
	int fd;

	if (bg_dir(w, id, name, path, sizeof(path)) < 0)
		return err_set(e, "path too long");
	if ((fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)) < 0)
		return err_errno(e, "open %s", path);
	return fd;
}

/* Runs in the forked child; never returns. */
static void supervise(const struct wk *w, const char *id, const char *cname, const char *const *argv,
		      int64_t timeout_s, struct json *st, int ready)
{
	struct sup s = { w, id, st, { -1, -1 }, { 0, 0 }, 0, ready };
	struct engine_exec x;
	struct err e;
	int rc;

	err_clear(&e);
	if ((s.fd[0] = open_out(w, id, "stdout", &e)) < 0 || (s.fd[1] = open_out(w, id, "stderr", &e)) < 0)
		rc = -1;
	else
		rc = engine_exec_watch(cname, argv, timeout_s * 1000, sup_sink, sup_created, &s, &x, &e);
	if (rc == 0)
		err_set(&e, "background commands need dockerd's Engine API socket");
	if (rc <= 0 && s.ready >= 0) {
		(void)sys_write_all(s.ready, e.msg, strlen(e.msg));
		_exit(1);
	}
	json_object_set_str(st, "state", "exited");
	json_object_set_int(st, "exit_code", rc < 0 ? -1 : x.timed_out ? -1 : x.exit_code);
	json_object_set_bool(st, "timed_out", rc > 0 && x.timed_out);
	if (rc < 0)
		json_object_set_str(st, "error", e.msg);
	json_object_set_int(st, "dropped_bytes", s.dropped);
	json_object_set_int(st, "ended_at_ms", clock_now_ms());
	if (write_state(w, id, st, &e) < 0)
		log_warn("bg", "%s: %s", id, e.msg);
	_exit(0);
}

/* Fork the supervisor; 0 once it says the exec exists, -1 with its reason. */
static int spawn(const struct wk *w, const char *id, const char *cname, const char *const *argv, int64_t timeout_s,
		 struct json *st, struct err *e)
{
	char path[SC_BG_PATH_MAX], msg[ERR_MSG_MAX];
	int lock, p[2];
	ssize_t n;
	pid_t pid;

	if (bg_dir(w, id, "lock", path, sizeof(path)) < 0)
		return err_set(e, "path too long");
	if ((lock = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0)
		return err_errno(e, "open %s", path);
	/* Taken before the fork: a waiter that comes at once already waits. */
	if (flock(lock, LOCK_EX) < 0 || pipe(p) < 0) {
		sys_close(lock);
		return err_errno(e, "lock %s", path);
	}
	if ((pid = fork()) < 0) {
		sys_close(lock);
		sys_close(p[0]);
		sys_close(p[1]);
		return err_errno(e, "fork");
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		/* Drop the worker's stdin (it holds the command's lock) and its
		 * pipe to the agent: this process must not keep either alive. */
		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
			if (null > 2)
				close(null);
		}
		close(p[0]);
		setsid();
		signal(SIGHUP, SIG_IGN);
		json_object_set_int(st, "supervisor_pid", (int64_t)getpid());
		supervise(w, id, cname, argv, timeout_s, st, p[1]);
	}
	sys_close(lock);
	sys_close(p[1]);
	msg[0] = '\0';
	n = ev_wait_fd(p[0], EV_READ, ev_mono_ms() + SC_BG_READY_MS) ? sys_read_full(p[0], msg, sizeof(msg) - 1) : -1;
	sys_close(p[0]);
	if (n == 1 && msg[0] == '1')
		return 0;
	if (n > 0) {
		msg[n] = '\0';
		return err_set(e, "%s", msg);
	}
	/* Not a word in time: it must not run on with no record of it. */
	kill(pid, SIGKILL);
	return err_set(e, "the command's supervisor did not start it within %d s", SC_BG_READY_MS / 1000);
}

/* ---- env.bg.start ---- */

static int running_count(const struct wk *w, size_t *n, struct json **oldest_done, struct err *e);

int cmd_env_bg_start(struct wk *w, const struct json *payload, struct json **result, struct err *e)
{
	const struct json *cmd = json_get(payload, "cmd");
	const char *svc = json_get_str(payload, "service");
	int64_t timeout = json_get_int(payload, "timeout_sec", SC_BG_TIMEOUT_MAX_S);
	char cname[SC_DOCKER_NAME_MAX], id[ID_MAX], dir[SC_BG_PATH_MAX];
	const char **argv;
	struct json *st, *done = NULL;
	size_t running = 0;
	int rc;

	if (wk_container_running(w, "env.bg.start", svc, cname, sizeof(cname), e) < 0)
		return -1;
	if (!cmd || cmd->type != JSON_ARRAY || json_len(cmd) == 0)
		return err_set(e, "env.bg.start: payload.cmd must be a non-empty list of strings");
	if (timeout <= 0 || timeout > SC_BG_TIMEOUT_MAX_S)
		timeout = SC_BG_TIMEOUT_MAX_S;
	if (running_count(w, &running, &done, e) < 0)
		return err_prefix(e, "env.bg.start");
	if (running >= SC_BG_RUNNING_MAX) {
		json_free(done);
		return err_set(e, "env.bg.start: %zu background commands already run in environment %s (the most "
			       "there may be); wait for one or kill one", running, w->env);
	}
	/* Records beyond SC_BG_KEEP: the oldest finished one goes. */
	for (size_t i = 0; done && i < json_len(done); i++) {
		if (bg_dir(w, json_at(done, i)->u.str.s, NULL, dir, sizeof(dir)) == 0)
			(void)fs_remove_all(dir, e);
	}
	json_free(done);
	err_clear(e);
	if (id_new("bg", id) < 0 || bg_dir(w, id, NULL, dir, sizeof(dir)) < 0 || fs_mkdir_p(dir, 0700, e) < 0)
		return err_set(e, "env.bg.start: cannot make the command's directory: %s", e->msg);
	argv = xcalloc(json_len(cmd) + 1, sizeof(char *));
	for (size_t i = 0; i < json_len(cmd); i++) {
		if (json_at(cmd, i)->type != JSON_STRING) {
			free(argv);
			(void)fs_remove_all(dir, e);
			return err_set(e, "env.bg.start: payload.cmd must be a list of strings");
		}
		argv[i] = json_at(cmd, i)->u.str.s;
	}
	st = json_new_object();
	json_object_set_str(st, "id", id);
	json_object_set_str(st, "service", svc);
	json_object_set(st, "cmd", json_dup(cmd));
	json_object_set_str(st, "state", "starting");
	json_object_set_int(st, "timeout_sec", timeout);
	json_object_set_int(st, "started_at_ms", clock_now_ms());
	rc = write_state(w, id, st, e);
	if (rc == 0)
		rc = spawn(w, id, cname, argv, timeout, st, e);
	free(argv);
	if (rc < 0) {
		struct err ie;

		(void)fs_remove_all(dir, &ie);
		json_free(st);
		return err_prefix(e, "env.bg.start");
	}
	json_object_set_str(st, "state", "running");
	state_view(w, id, st);
	*result = wrap(st);
	return 0;
}

/* ---- the readers ---- */

static int by_id(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Ids under bg/, oldest first (ULIDs sort by time). */
static int list_ids(const struct wk *w, char ***ids, size_t *n, struct err *e)
{
	char dir[SC_BG_PATH_MAX];
	DIR *d;
	struct dirent *de;
	size_t cap = 0;

	*ids = NULL;
	*n = 0;
	if (bg_dir(w, NULL, NULL, dir, sizeof(dir)) < 0)
		return err_set(e, "path too long");
	if (!(d = opendir(dir)))
		return errno == ENOENT ? 0 : err_errno(e, "open %s", dir);
	while ((de = readdir(d))) {
		if (!id_valid(de->d_name, "bg"))
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 16;
			*ids = xrealloc(*ids, cap * sizeof(char *));
		}
		(*ids)[(*n)++] = xstrdup(de->d_name);
	}
	closedir(d);
	if (*n)
		qsort(*ids, *n, sizeof(char *), by_id);
	return 0;
}

static void free_ids(char **ids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(ids[i]);
	free(ids);
}

static int running_count(const struct wk *w, size_t *n, struct json **oldest_done, struct err *e)
{
	char **ids;
	size_t k, total;

	if (list_ids(w, &ids, &total, e) < 0)
		return -1;
	*oldest_done = json_new_array();
	for (k = 0; k < total; k++) {
		if (supervised(w, ids[k]))
			(*n)++;
		else if (total - json_len(*oldest_done) >= SC_BG_KEEP)
			json_array_push(*oldest_done, json_new_str(ids[k]));
	}
	free_ids(ids, total);
	return 0;
}

int cmd_env_bg_list(struct wk *w, const struct json *payload, struct json **result, struct err *e)
{
	struct json *list = json_new_array();
	char **ids;
	size_t n;

	if (!sc_safe_id(w->env))
		return err_set(e, "env.bg.list: the command has no usable env_id");
	if (list_ids(w, &ids, &n, e) < 0) {
		json_free(list);
		return err_prefix(e, "env.bg.list");
	}
	for (size_t i = 0; i < n; i++) {
		struct json *st = NULL;
		struct err ie;

		if (read_state(w, ids[i], &st, &ie) < 0)
			continue;	/* removed meanwhile */
		state_view(w, ids[i], st);
		json_array_push(list, st);
	}
	free_ids(ids, n);
	*result = json_new_object();
	json_object_set(*result, "commands", list);
	return 0;
}

static volatile sig_atomic_t alarmed;

static void on_alarm(int sig)
{
	(void)sig;
	alarmed = 1;
}

/* Wait up to ms for the supervisor to let go of its lock. 1 ended, 0 not yet. */
static int wait_end(const struct wk *w, const char *id, int64_t ms)
{
	char path[SC_BG_PATH_MAX];
	struct sigaction sa, old;
	struct itimerval t = { { 0, 0 }, { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 } };
	int fd, rc;

	if (bg_dir(w, id, "lock", path, sizeof(path)) < 0 || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;	/* no SA_RESTART: the alarm ends flock's wait */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, &old);
	alarmed = 0;
	setitimer(ITIMER_REAL, &t, NULL);
	rc = flock(fd, LOCK_SH) == 0 ? 1 : 0;
	memset(&t, 0, sizeof(t));
	setitimer(ITIMER_REAL, &t, NULL);
	sigaction(SIGALRM, &old, NULL);
	sys_close(fd);
	return rc;
}

/* Up to max bytes of the stream's file from off, as base64, into res. */
static void add_output(const struct wk *w, const char *id, const char *name, int64_t off, size_t max,
		       struct json *res)
{
	char path[SC_BG_PATH_MAX], key[32];
	struct buf raw = BUF_INIT, b64 = BUF_INIT;
	int fd = -1;
	ssize_t n = 0;

	buf_init(&raw, max);
	if (off >= 0 && bg_dir(w, id, name, path, sizeof(path)) == 0 && (fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0 &&
	    buf_grow(&raw, max) == 0) {
		n = pread(fd, raw.data, max, (off_t)off);
		raw.len = n > 0 ? (size_t)n : 0;
	}
	if (fd >= 0)
		sys_close(fd);
	enc_base64_encode(&b64, raw.data ? raw.data : "", raw.len, ENC_BASE64);
	json_object_set(res, name, json_new_strn(b64.data ? b64.data : "", b64.len));
	snprintf(key, sizeof(key), "%s_offset", name);
	json_object_set_int(res, key, (off < 0 ? 0 : off) + (int64_t)raw.len);
	buf_release(&raw);
	buf_release(&b64);
}

int cmd_env_bg_get(struct wk *w, const struct json *payload, struct json **result, struct err *e)
{
	const char *id = json_get_str(payload, "id");
	int64_t wait = json_get_int(payload, "wait_sec", 0);
	int64_t max = json_get_int(payload, "max_bytes", (int64_t)SC_BG_READ_MAX);
	struct json *st = NULL;

	if (!sc_safe_id(w->env) || !id || !id_valid(id, "bg"))
		return err_set(e, "env.bg.get: payload.id must be a background command's id");
	if (read_state(w, id, &st, e) < 0)
		return -1;
	if (wait > 0 && supervised(w, id)) {
		wait = wait > SC_BG_WAIT_MAX_S ? SC_BG_WAIT_MAX_S : wait;
		json_free(st);
		st = NULL;
		(void)wait_end(w, id, wait * 1000);
		if (read_state(w, id, &st, e) < 0)
			return -1;
	}
	state_view(w, id, st);
	if (json_get_bool(payload, "output", false)) {
		size_t m = max <= 0 || max > (int64_t)SC_BG_READ_MAX ? SC_BG_READ_MAX : (size_t)max;

		json_object_set_str(st, "encoding", "base64");
		add_output(w, id, "stdout", json_get_int(payload, "stdout_offset", 0), m, st);
		add_output(w, id, "stderr", json_get_int(payload, "stderr_offset", 0), m, st);
	}
	*result = wrap(st);
	return 0;
}

int cmd_env_bg_signal(struct wk *w, const struct json *payload, struct json **result, struct err *e)
{
	const char *id = json_get_str(payload, "id"), *name = json_get_str(payload, "signal");
	struct json *st = NULL;
	size_t n;
	int sig = 0, pid = 0;
	bool running = false;

	if (!sc_safe_id(w->env) || !id || !id_valid(id, "bg"))
		return err_set(e, "env.bg.signal: payload.id must be a background command's id");
	name = name && *name ? name : "TERM";
	if (str_has_prefix(name, "SIG"))
		name += 3;
	for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++)
		if (str_eq(name, signals[i].name))
			sig = signals[i].sig;
	if (!sig)
		return err_set(e, "env.bg.signal: signal must be one of HUP INT QUIT KILL TERM USR1 USR2");
	if (read_state(w, id, &st, e) < 0)
		return -1;
	if (!str_eq(json_get_str(st, "state"), "running") || !json_get_str(st, "exec_id") ||
	    engine_exec_state(json_get_str(st, "exec_id"), &pid, &running, e) < 0 || !running || pid <= 1) {
		json_free(st);
		err_clear(e);
		return err_set(e, "env.bg.signal: background command %s has ended", id);
	}
	n = sc_kill_tree((pid_t)pid, sig);
	/* A command that heeds the signal has ended within this wait. */
	if (sig == SIGKILL || sig == SIGTERM || sig == SIGINT)
		(void)wait_end(w, id, SC_BG_SIGNAL_WAIT_MS);
	json_free(st);
	if (read_state(w, id, &st, e) < 0)
		return -1;
	state_view(w, id, st);
	json_object_set_str(st, "signal", name);
	json_object_set_int(st, "signalled", (int64_t)n);
	*result = wrap(st);
	return 0;
}
