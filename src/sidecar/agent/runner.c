/* runner.c: worker processes, seen from the agent. A command's frame is
 * written to <data>/commands/<id>.cmd, locked with flock, and given to a new
 * "denvd __worker" as its stdin, so the lock lives exactly as long as the
 * worker. Progress lines on the worker's stdout become progress frames; when
 * the worker has exited, its result is read back from the command log and
 * sent. A worker left by a previous agent (lock busy) is watched until its
 * result appears. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/enc.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/proc.h"
#include "base/str.h"
#include "base/sys.h"
#include "sidecar/agent/dispatch.h"
#include "ws/xframe.h"

int runner_lock_busy(const char *data, const char *id)
{
	char path[FS_PATH_MAX];
	int fd, rc;

	if (cmdlog_path(data, id, ".cmd", path, sizeof(path)) < 0)
		return -1;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	rc = flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK ? 1 : 0;
	sys_close(fd);	/* closing drops our lock, if we got it */
	return rc;
}

/* The command's input file, and its control FIFO if it had one (a worker
 * left by an earlier agent leaves that behind too). */
static void remove_cmd_file(const char *data, const char *id)
{
	char path[FS_PATH_MAX];

	if (cmdlog_path(data, id, ".cmd", path, sizeof(path)) == 0)
		unlink(path);
	if (cmdlog_path(data, id, ".ctl", path, sizeof(path)) == 0)
		unlink(path);
}

/* ---- a streamed exec's control FIFO: stdin, resizes, kill ---- */

static void ctl_close(struct job *j)
{
	char path[FS_PATH_MAX];

	if (j->ctl_fd < 0)
		return;
	ev_fd_del(agent_ev(j->d->a), j->ctl_fd);
	sys_close(j->ctl_fd);
	j->ctl_fd = -1;
	buf_reset(&j->ctl_out);
	if (cmdlog_path(j->d->data, j->id, ".ctl", path, sizeof(path)) == 0)
		unlink(path);
}

static void ctl_flush(struct job *j)
{
	ssize_t n = j->ctl_out.len ? write(j->ctl_fd, j->ctl_out.data, j->ctl_out.len) : 0;

	if (n > 0)
		buf_consume(&j->ctl_out, (size_t)n);
	/* Whatever the FIFO cannot take now waits for it to be writable. */
	(void)ev_fd_set(agent_ev(j->d->a), j->ctl_fd, j->ctl_out.len ? EV_WRITE : 0);
}

static void on_ctl_writable(struct ev *ev, int fd, int revents, void *arg)
{
	ctl_flush(arg);
}

/* Made before the worker starts, opened read-write so that neither side's
 * open blocks and the agent never sees EPIPE; the worker opens it to read. */
static int ctl_open(struct job *j, struct err *e)
{
	char path[FS_PATH_MAX];

	if (cmdlog_path(j->d->data, j->id, ".ctl", path, sizeof(path)) < 0)
		return err_set(e, "bad command id");
	unlink(path);
	if (mkfifo(path, 0600) < 0)
		return err_errno(e, "mkfifo %s", path);
	if ((j->ctl_fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)) < 0) {
		unlink(path);
		return err_errno(e, "open %s", path);
	}
	ev_fd_add(agent_ev(j->d->a), j->ctl_fd, 0, on_ctl_writable, j);
	ctl_flush(j);	/* what came while it was queued */
	return 0;
}

static bool wants_ctl(const struct job *j)
{
	return str_eq(j->kind, "env.exec") && json_get_bool(json_get(j->frame, "payload"), "stream", false);
}

void runner_exec_ctl(struct dispatch *d, const struct json *frame)
{
	const char *id = json_get_str(frame, "command_id");
	struct job *j = NULL;
	struct xf_frame f;
	struct err e;
	size_t before;

	for (struct job *k = d->jobs; k && id; k = k->next)
		if (str_eq(k->id, id))
			j = k;
	/* A queued one keeps the lines until its worker starts (ctl_open). */
	if (!j || !wants_ctl(j) || j->state == JOB_ORPHAN) {
		log_debug("denvd", "exec control frame for %s, which is not a streamed exec here", id ? id : "?");
		return;
	}
	xf_frame_init(&f);
	if (xf_from_json(frame, &f, &e) < 0) {
		log_warn("denvd", "command %s: %s", j->id, e.msg);
		xf_frame_release(&f);
		return;
	}
	before = j->ctl_out.len;
	if (f.kind == XF_IN && f.data.len) {
		buf_addch(&j->ctl_out, SC_CTL_STDIN);
		enc_base64_encode(&j->ctl_out, f.data.data, f.data.len, ENC_BASE64);
		buf_addch(&j->ctl_out, '\n');
	}
	if (f.kind == XF_IN && f.eof)
		buf_addf(&j->ctl_out, "%c\n", SC_CTL_EOF);
	else if (f.kind == XF_RESIZE)
		buf_addf(&j->ctl_out, "%c%d %d\n", SC_CTL_RESIZE, f.rows, f.cols);
	else if (f.kind == XF_KILL)
		buf_addf(&j->ctl_out, "%c\n", SC_CTL_KILL);
	/* Over the cap a line is not added whole: drop it rather than send half. */
	if (j->ctl_out.len && j->ctl_out.data[j->ctl_out.len - 1] != '\n') {
		log_warn("denvd", "command %s: more than %zu bytes of stdin waiting; dropped", j->id, SC_CTL_QUEUED_MAX);
		buf_truncate(&j->ctl_out, before);
	}
	xf_frame_release(&f);
	if (j->ctl_fd >= 0)
		ctl_flush(j);
}

static void send_progress(struct job *j, const char *msg, size_t n)
{
	struct json *f = json_new_object();

	json_object_set_str(f, "type", "progress");
	json_object_set_str(f, "command_id", j->id);
	json_object_set_str(f, "kind", j->kind);
	if (*j->env)
		json_object_set_str(f, "env_id", j->env);
	json_object_set(f, "message", json_new_strn(msg, n));
	agent_send(j->d->a, f);
}

/* The worker is done and its pipe is closed: answer and make room. */
static void finish(struct job *j)
{
	struct dispatch *d = j->d;
	struct json *res = NULL;
	struct err e;
	int rc = cmdlog_read(d->data, j->id, &res, &e);

	if (rc != 1) {
		char msg[ERR_MSG_MAX];

		if (WIFSIGNALED(j->status))
			snprintf(msg, sizeof(msg), "%s: the sidecar's worker died (signal %d) before it finished",
				 j->kind, WTERMSIG(j->status));
		else
			snprintf(msg, sizeof(msg), "%s: the sidecar's worker exited (%d) without a result",
				 j->kind, WIFEXITED(j->status) ? WEXITSTATUS(j->status) : -1);
		if (cmdlog_write(d->data, j->id, j->kind, j->env, false, NULL, msg, &e) < 0 ||
		    cmdlog_read(d->data, j->id, &res, &e) != 1)
			log_error("denvd", "command %s: %s", j->id, e.msg);
	}
	remove_cmd_file(d->data, j->id);
	ctl_close(j);
	if (res) {
		log_info("denvd", "command %s (%s) %s", j->id, j->kind,
			 json_get_bool(res, "ok", false) ? "done" : json_get_str(res, "error"));
		dispatch_answer(d, res);
		json_free(res);
	}
	dispatch_remove(d, j);
	dispatch_schedule(d);
}

/* An output line of a streamed exec (ws/xframe.h) as an exec.out frame. */
static void send_output(struct job *j, const char *line, size_t n)
{
	struct json *f = xf_pipe_frame(j->id, j->out_seq, line, n);

	if (!f) {
		log_warn("denvd", "command %s: a malformed output line from its worker dropped", j->id);
		return;
	}
	j->out_seq++;
	json_object_set_str(f, "kind", j->kind);
	if (*j->env)
		json_object_set_str(f, "env_id", j->env);
	agent_send(j->d->a, f);
}

static void flush_lines(struct job *j)
{
	char *nl;

	while ((nl = memchr(j->line.data, '\n', j->line.len))) {
		size_t n = (size_t)(nl - j->line.data);

		if (n && j->line.data[0] == XF_PIPE_MARK)
			send_output(j, j->line.data, n);
		else if (n)
			send_progress(j, j->line.data, n > SC_PROGRESS_LINE_MAX ? SC_PROGRESS_LINE_MAX : n);
		buf_consume(&j->line, n + 1);
	}
	if (j->line.len && j->line.data[0] == XF_PIPE_MARK) {
		if (j->line.len > XF_PIPE_LINE_MAX) {
			log_warn("denvd", "command %s: an output line over %zu bytes dropped", j->id, XF_PIPE_LINE_MAX);
			buf_reset(&j->line);
		}
		return;
	}
	if (j->line.len >= SC_PROGRESS_LINE_MAX) {	/* a line without end: send what we have */
		send_progress(j, j->line.data, j->line.len);
		buf_reset(&j->line);
	}
}

static void on_progress(struct ev *ev, int fd, int revents, void *arg)
{
	struct job *j = arg;
	char tmp[SC_RUNNER_READ_CHUNK];
	ssize_t n = sys_read(fd, tmp, sizeof(tmp));

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return;
	if (n > 0) {
		if (buf_add(&j->line, tmp, (size_t)n) < 0)
			buf_reset(&j->line);
		flush_lines(j);
		/* Backpressure: a streamed exec's output waits in the pipe (and
		 * the process in its write) while the control plane reads slowly. */
		if (agent_queued(j->d->a) > SC_STREAM_QUEUED_MAX && ev_fd_set(ev, fd, 0) == 0)
			j->paused = true;
		return;
	}
	ev_fd_del(ev, fd);
	sys_close(fd);
	j->out_fd = -1;
	j->eof = true;
	if (j->line.len && j->line.data[0] != XF_PIPE_MARK)
		send_progress(j, j->line.data, j->line.len);
	if (j->exited)
		finish(j);
}

static void on_exit_status(struct ev *ev, pid_t pid, int status, void *arg)
{
	struct job *j = arg;

	j->exited = true;
	j->status = status;
	j->pid = 0;
	if (j->eof)
		finish(j);
}

/* The frame the worker runs: an env.put, env.context or snap.write carries its spool's state. */
static char *worker_input(struct job *j)
{
	struct json *f = json_dup(j->frame);
	struct json *sp;
	char *text;

	if ((str_eq(j->kind, "env.put") || str_eq(j->kind, "env.context") || str_eq(j->kind, "snap.write")) &&
	    (sp = spools_take(j->d->sp, j->id)))
		json_object_set(f, "_spool", sp);
	text = json_to_string(f, JSON_COMPACT);
	json_free(f);
	return text;
}

/* The worker's command line: this binary's __worker verb with the agent's
 * settings (what a worker needs of them). */
static void worker_argv(const struct sc_config *c, struct argv *a)
{
	av_init(a);
	av_addl(a, "/proc/self/exe", "__worker", "--data", c->data_dir, "--probe-image", c->probe_image,
		"--probe-url", c->probe_url, "--probe-mode", c->probe_mode, "--runtime", c->runtime, NULL);
	if (c->disk_limit && *c->disk_limit)
		av_addl(a, "--disk-limit", c->disk_limit, NULL);
	if (c->zfs_pool && *c->zfs_pool)
		av_addl(a, "--zfs-pool", c->zfs_pool, NULL);
	if (c->btrfs_root && *c->btrfs_root)
		av_addl(a, "--btrfs-root", c->btrfs_root, NULL);
	if (c->leaky_network)
		av_add(a, "--test-leaky-network");
	if (c->verbose)
		av_add(a, "-v");
}

int runner_start(struct job *j, struct err *e)
{
	const struct sc_config *c = agent_config(j->d->a);
	struct ev *ev = agent_ev(j->d->a);
	struct argv argv;
	struct proc_spec s;
	struct proc p;
	char path[FS_PATH_MAX];
	char *text;
	int fd, rc;

	if (cmdlog_path(j->d->data, j->id, ".cmd", path, sizeof(path)) < 0)
		return err_set(e, "bad command id");
	if (wants_ctl(j) && j->ctl_fd < 0 && ctl_open(j, e) < 0)
		return -1;
	text = worker_input(j);
	rc = fs_write_atomic(path, text, strlen(text), 0600, e);
	free(text);
	if (rc < 0)
		return -1;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return err_errno(e, "open %s", path);
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		sys_close(fd);
		return err_errno(e, "lock %s", path);
	}
	worker_argv(c, &argv);
	proc_spec_init(&s, (const char *const *)argv.v);
	s.in.mode = PROC_FD;
	s.in.fd = fd;
	s.out.mode = PROC_PIPE;
	s.err.mode = PROC_INHERIT;
	s.new_pgroup = true;	/* a signal meant for the agent does not cut a command short */
	rc = proc_spawn(&s, &p, e);
	av_release(&argv);
	sys_close(fd);		/* the worker holds the lock now */
	if (rc < 0) {
		unlink(path);
		return -1;
	}
	j->pid = p.pid;
	j->out_fd = p.out;
	j->exited = j->eof = false;
	ev_fd_add(ev, p.out, EV_READ, on_progress, j);
	ev_child_add(ev, p.pid, on_exit_status, j);
	log_info("denvd", "command %s (%s%s%s) started in worker %d", j->id, j->kind, *j->env ? " " : "",
		 j->env, (int)p.pid);
	return 0;
}

static void orphan_poll(struct ev *ev, void *arg)
{
	struct job *j = arg;
	struct dispatch *d = j->d;
	struct json *res = NULL;
	struct err e;

	if (cmdlog_read(d->data, j->id, &res, &e) == 1) {
		remove_cmd_file(d->data, j->id);
		dispatch_answer(d, res);
		json_free(res);
		dispatch_remove(d, j);
		dispatch_schedule(d);
		return;
	}
	if (runner_lock_busy(d->data, j->id) != 1) {
		/* Gone between our two looks? Its result may have just landed. */
		if (cmdlog_read(d->data, j->id, &res, &e) == 1) {
			ev_timer_start(ev, &j->poll, 0, orphan_poll, j);
			json_free(res);
			return;
		}
		dispatch_interrupted(d, j);
		return;
	}
	if (ev_mono_ms() > j->deadline) {
		log_error("denvd", "command %s: the worker from before the restart is still running after %d min",
			  j->id, SC_ORPHAN_WAIT_MS / 60000);
		return;	/* keep the environment blocked: running a second copy is worse */
	}
	ev_timer_start(ev, &j->poll, SC_ORPHAN_POLL_MS, orphan_poll, j);
}

void runner_watch_orphan(struct job *j)
{
	j->deadline = ev_mono_ms() + SC_ORPHAN_WAIT_MS;
	ev_timer_start(agent_ev(j->d->a), &j->poll, SC_ORPHAN_POLL_MS, orphan_poll, j);
}

/* Stop watching (the process, if any, runs on and is reaped by the loop). */
void runner_forget(struct job *j)
{
	struct ev *ev = agent_ev(j->d->a);

	ev_timer_stop(ev, &j->poll);
	ctl_close(j);
	if (j->out_fd >= 0) {
		ev_fd_del(ev, j->out_fd);
		sys_close(j->out_fd);
		j->out_fd = -1;
	}
	if (j->pid > 0) {
		ev_child_del(ev, j->pid);
		j->pid = 0;
	}
}

void runner_resume_all(struct dispatch *d)
{
	for (struct job *j = d->jobs; j; j = j->next)
		if (j->paused && j->out_fd >= 0 && ev_fd_set(agent_ev(d->a), j->out_fd, EV_READ) == 0)
			j->paused = false;
}
