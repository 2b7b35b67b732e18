/*
 * dispatch.h: the agent's command machinery, shared by dispatch.c (intake,
 * the command log, one command at a time per environment but for execs), runner.c (the
 * worker processes) and tx.c (env.get archives streamed as chunk frames).
 */
#ifndef DENV_SIDECAR_DISPATCH_H
#define DENV_SIDECAR_DISPATCH_H

#include <sys/types.h>

#include "sidecar/sidecar.h"

enum job_state { JOB_QUEUED, JOB_RUNNING, JOB_ORPHAN };

struct job {
	struct dispatch *d;
	char id[SC_ID_MAX], kind[64], env[SC_ID_MAX];
	struct json *frame;		/* the command frame (owned) */
	enum job_state state;
	pid_t pid;
	int out_fd;			/* the worker's progress pipe */
	bool exited, eof;
	int status;
	struct buf line;		/* progress bytes not yet ending in '\n' */
	int64_t out_seq;		/* next exec.out frame's seq */
	bool paused;			/* its pipe is not read until the queue drains */
	int ctl_fd;			/* a streamed exec's control FIFO (<id>.ctl), -1 if none */
	struct buf ctl_out;		/* control lines the FIFO could not take yet */
	struct ev_timer poll;		/* JOB_ORPHAN: checking on the old worker */
	int64_t deadline;
	struct job *next;
};

struct tx;

struct dispatch {
	struct agent *a;
	const char *data;
	struct job *jobs;		/* arrival order */
	size_t njobs, running;
	struct spools *sp;
	struct tx *tx;			/* get archives being streamed, in order */
};

/* dispatch.c */
void dispatch_remove(struct dispatch *d, struct job *j);
void dispatch_schedule(struct dispatch *d);
/* Send a stored result (streaming an env.get archive first). */
void dispatch_answer(struct dispatch *d, const struct json *res);
void dispatch_interrupted(struct dispatch *d, struct job *j);

/* runner.c */
int runner_start(struct job *j, struct err *e);
void runner_watch_orphan(struct job *j);
void runner_forget(struct job *j);
/* exec.in, exec.resize, exec.kill for a running streamed exec: to its worker. */
void runner_exec_ctl(struct dispatch *d, const struct json *frame);
/* Read the pipes of workers paused by a full queue again. */
void runner_resume_all(struct dispatch *d);
/* 1 if a live process holds the lock on <id>.cmd, 0 if none, -1 if no such file. */
int runner_lock_busy(const char *data, const char *id);

/* tx.c */
/* Queue the archive <id>.tar as chunk frames followed by result. -1 if the
 * archive is missing (the caller runs the command again). */
int tx_start(struct dispatch *d, const char *id, struct json *result);
void tx_pump(struct dispatch *d);
void tx_drop_all(struct dispatch *d);

/* Whether a queued command of kind queued_kind may start while one of
 * running_kind runs on the same environment (only env.exec beside env.exec). */
bool dispatch_may_overlap(const char *running_kind, const char *queued_kind);

#endif
