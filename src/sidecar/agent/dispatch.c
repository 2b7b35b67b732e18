/* dispatch.c: what happens to a command frame (protocol.md "Command
 * lifecycle"): ack at once; a command id already in the command log is
 * answered from it; one still running (here, or in a worker a previous agent
 * left behind) is not started again; otherwise it waits until its
 * environment is idle and runs in a worker (runner.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/str.h"
#include "sidecar/agent/dispatch.h"
#include "sidecar/storage/storage.h"

struct dispatch *dispatch_new(struct agent *a)
{
	struct dispatch *d = xcalloc(1, sizeof(*d));

	d->a = a;
	d->data = agent_config(a)->data_dir;
	d->sp = spools_new(d->data);
	return d;
}

/* Running workers are left to finish: their results land in the command log. */
void dispatch_free(struct dispatch *d)
{
	struct job *j, *next;

	if (!d)
		return;
	tx_drop_all(d);
	for (j = d->jobs; j; j = next) {
		next = j->next;
		runner_forget(j);
		json_free(j->frame);
		buf_release(&j->line);
		buf_release(&j->ctl_out);
		free(j);
	}
	spools_free(d->sp);
	free(d);
}

static struct json *frame_for(const char *type, const char *id, const char *kind, const char *env)
{
	struct json *f = json_new_object();

	json_object_set_str(f, "type", type);
	json_object_set_str(f, "command_id", id);
	json_object_set_str(f, "kind", kind);
	if (env && *env)
		json_object_set_str(f, "env_id", env);
	return f;
}

void dispatch_answer(struct dispatch *d, const struct json *res)
{
	const char *id = json_get_str(res, "command_id");

	spools_drop(d->sp, id);
	/* The answers that are archives: their chunks go first. */
	if ((str_eq(json_get_str(res, "kind"), "env.get") || str_eq(json_get_str(res, "kind"), "snap.read")) &&
	    json_get_bool(res, "ok", false)) {
		if (tx_start(d, id, cmdlog_frame(res)) == 0)
			return;
	}
	agent_send(d->a, cmdlog_frame(res));
}

/* Record and send a failure for a command that never reached a worker. */
static void fail_now(struct dispatch *d, const char *id, const char *kind, const char *env, const char *msg)
{
	struct json *res = NULL;
	struct err e;

	if (cmdlog_write(d->data, id, kind, env, false, NULL, msg, &e) < 0 ||
	    cmdlog_read(d->data, id, &res, &e) != 1) {
		struct json *f = frame_for("result", id, kind, env);

		log_error("denvd", "command %s: cannot record its result: %s", id, e.msg);
		json_object_set_bool(f, "ok", false);
		json_object_set_str(f, "error", msg);
		agent_send(d->a, f);
		json_free(res);
		return;
	}
	dispatch_answer(d, res);
	json_free(res);
}

void dispatch_remove(struct dispatch *d, struct job *j)
{
	struct job **pp;

	for (pp = &d->jobs; *pp; pp = &(*pp)->next) {
		if (*pp != j)
			continue;
		*pp = j->next;
		break;
	}
	if (j->state != JOB_QUEUED && d->running > 0)
		d->running--;
	d->njobs--;
	runner_forget(j);
	json_free(j->frame);
	buf_release(&j->line);
	buf_release(&j->ctl_out);
	free(j);
}

/* env.exec and the background commands' kinds (bg.c). */
static bool in_container(const char *kind)
{
	return str_eq(kind, "env.exec") || str_has_prefix(kind, "env.bg.");
}

/*
 * Commands on one environment run one at a time, except that commands in a
 * container (env.exec, env.bg.*) run beside each other: they do not change
 * the environment's lifecycle, a client that cancels a long command kills it
 * with a second exec, which must not wait behind the first, and a wait for a
 * background command must not hold up reading its output. env.pause and
 * env.resume may start beside them too (not the other way round).
 * env.metrics and env.logs only read, so they run beside anything (a
 * deploy's logs are wanted while it runs).
 */
static bool dispatch_is_read(const char *kind)
{
	return str_eq(kind, "env.metrics") || str_eq(kind, "env.logs");
}

bool dispatch_may_overlap(const char *running_kind, const char *queued_kind)
{
	/* Reads of what the containers use and print change nothing either way. */
	if (dispatch_is_read(running_kind) || dispatch_is_read(queued_kind))
		return true;
	/* A pause must not wait for a command it would freeze (a long exec, or
	 * a wait for a background command): it freezes it where it is. */
	if (str_eq(queued_kind, "env.pause") || str_eq(queued_kind, "env.resume"))
		return in_container(running_kind);
	return in_container(running_kind) && in_container(queued_kind);
}

static bool env_busy(struct dispatch *d, const struct job *q)
{
	for (struct job *j = d->jobs; j; j = j->next)
		if (j->state != JOB_QUEUED && *q->env && str_eq(j->env, q->env) &&
		    !dispatch_may_overlap(j->kind, q->kind))
			return true;
	return false;
}

void dispatch_schedule(struct dispatch *d)
{
	struct job *j, *next;
	struct err e;

	for (j = d->jobs; j && d->running < SC_MAX_WORKERS; j = next) {
		next = j->next;
		if (j->state != JOB_QUEUED || env_busy(d, j))
			continue;
		if (runner_start(j, &e) < 0) {
			char msg[ERR_MSG_MAX + 160];

			snprintf(msg, sizeof(msg), "%s: cannot start a worker: %s", j->kind, e.msg);
			fail_now(d, j->id, j->kind, j->env, msg);
			dispatch_remove(d, j);
			continue;
		}
		j->state = JOB_RUNNING;
		d->running++;
	}
}

static struct job *find_job(struct dispatch *d, const char *id)
{
	for (struct job *j = d->jobs; j; j = j->next)
		if (str_eq(j->id, id))
			return j;
	return NULL;
}

/* Kinds whose second run would repeat a visible effect: a cut-off one is
 * reported, not run again. The others converge (create removes what a
 * previous attempt left, destroy and reads are repeatable). */
static bool rerun_safe(const char *kind)
{
	return !str_eq(kind, "env.exec") && !str_eq(kind, "env.put") && !str_eq(kind, "env.bg.start") &&
	       !str_eq(kind, "env.bg.signal");
}

/* A worker that held the command's lock is gone and wrote no result. */
void dispatch_interrupted(struct dispatch *d, struct job *j)
{
	char msg[256];

	if (rerun_safe(j->kind)) {
		log_info("denvd", "command %s (%s) was cut off by a restart; running it to completion", j->id, j->kind);
		runner_forget(j);
		if (j->state != JOB_QUEUED && d->running > 0)
			d->running--;
		j->state = JOB_QUEUED;
		dispatch_schedule(d);
		return;
	}
	snprintf(msg, sizeof(msg), "%s: interrupted by a denvd restart before it finished; not run again "
		 "(check the environment before retrying)", j->kind);
	fail_now(d, j->id, j->kind, j->env, msg);
	dispatch_remove(d, j);
	dispatch_schedule(d);
}

static struct job *new_job(struct dispatch *d, const struct json *frame, const char *id,
			   const char *kind, const char *env)
{
	struct job *j = xcalloc(1, sizeof(*j)), **pp;

	j->d = d;
	str_copy(j->id, sizeof(j->id), id);
	str_copy(j->kind, sizeof(j->kind), kind);
	str_copy(j->env, sizeof(j->env), env);
	j->frame = json_dup(frame);
	j->out_fd = -1;
	j->ctl_fd = -1;
	j->line = (struct buf)BUF_INIT;
	buf_init(&j->ctl_out, SC_CTL_QUEUED_MAX);
	j->state = JOB_QUEUED;
	for (pp = &d->jobs; *pp; pp = &(*pp)->next)
		;
	*pp = j;
	d->njobs++;
	return j;
}

void dispatch_command(struct dispatch *d, const struct json *frame)
{
	const char *id = json_get_str(frame, "command_id"), *kind = json_get_str(frame, "kind");
	const char *env = json_get_str(frame, "env_id");
	struct json *res = NULL;
	struct job *j;
	struct err e;
	int busy;

	if (!sc_safe_id(id)) {
		log_warn("denvd", "command without a usable command_id ignored");
		return;
	}
	kind = kind ? kind : "";
	env = env ? env : "";
	agent_send(d->a, frame_for("ack", id, kind, env));
	switch (cmdlog_read(d->data, id, &res, &e)) {
	case 1:
		log_info("denvd", "command %s (%s) already done: answering from the log", id, kind);
		dispatch_answer(d, res);
		json_free(res);
		return;
	case -1:
		log_error("denvd", "%s", e.msg);
		break;
	}
	if (find_job(d, id))
		return;	/* acked again; its result follows when it is done */
	if (*env && !sc_safe_id(env)) {
		fail_now(d, id, kind, env, "bad env_id");
		return;
	}
	if (strlen(kind) >= sizeof(j->kind) || d->njobs >= SC_MAX_QUEUED) {
		fail_now(d, id, kind, env, d->njobs >= SC_MAX_QUEUED ? "sidecar busy: too many queued commands"
								    : "unknown command kind");
		return;
	}
	j = new_job(d, frame, id, kind, env);
	busy = runner_lock_busy(d->data, id);
	if (busy == 1) {
		log_info("denvd", "command %s (%s) is still running in a worker from before a restart; waiting for it",
			 id, kind);
		j->state = JOB_ORPHAN;
		d->running++;
		runner_watch_orphan(j);
		return;
	}
	if (busy == 0) {
		dispatch_interrupted(d, j);
		return;
	}
	dispatch_schedule(d);
}

void dispatch_exec_ctl(struct dispatch *d, const struct json *frame)
{
	runner_exec_ctl(d, frame);
}

void dispatch_chunk(struct dispatch *d, const struct json *frame)
{
	spools_chunk(d->sp, frame, ev_mono_ms());
}

void dispatch_offline(struct dispatch *d)
{
	tx_drop_all(d);
	runner_resume_all(d);	/* nothing is queued now; output sent meanwhile is lost */
}

void dispatch_drain(struct dispatch *d)
{
	tx_pump(d);
	runner_resume_all(d);
}

void dispatch_sweep(struct dispatch *d)
{
	int n;

	spools_sweep(d->sp, ev_mono_ms());
	if ((n = cmdlog_prune(d->data, clock_now_ms() / 1000)) > 0)
		log_info("denvd", "command log: %d old file(s) removed", n);
	if ((n = storage_fill_prune(d->data, clock_now_ms() / 1000)) > 0)
		log_info("denvd", "volume fill cache: %d unused entr%s removed", n, n == 1 ? "y" : "ies");
	if ((n = move_prune(d->data, clock_now_ms() / 1000)) > 0)
		log_info("denvd", "snapshot moves: %d old stream file(s) removed", n);
	if ((n = build_prune(d->data, clock_now_ms() / 1000)) > 0)
		log_info("denvd", "build contexts: %d old file(s) removed", n);
	if ((n = build_images_prune(d->data, clock_now_ms() / 1000)) > 0)
		log_info("denvd", "built images: %d no version pins removed", n);
}
