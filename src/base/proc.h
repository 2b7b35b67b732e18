/*
 * proc.h: child processes (after git's run-command.c; STYLE.md habit 6).
 *
 * A child is described by a struct proc_spec built before fork: argv, the
 * environment, the working directory, what each of stdin/stdout/stderr is
 * connected to, whether it leads its own process group, and a timeout.
 * Between fork and exec the child makes only async-signal-safe calls: it
 * resets every signal disposition and the signal mask, moves its stdio into
 * place, changes directory, and execs. If chdir or exec fails, the errno
 * travels back through a close-on-exec pipe and proc_spawn fails with
 * "exec docker: No such file or directory"; a missing program is never
 * reported as a silent exit 127. No shell is ever involved.
 *
 * Three ways to run one:
 *  - proc_spawn: start it and get the pipes; the caller moves the data;
 *  - proc_run: block until it is done, feeding stdin and collecting
 *    stdout/stderr with poll() (for the CLI and for tests);
 *  - proc_start: the same on the event loop; a callback gets the result.
 * Every child is reaped on every path. The parent ends of pipes are
 * O_CLOEXEC and non-blocking.
 */
#ifndef DENV_PROC_H
#define DENV_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/ev.h"

/* Collected stdout or stderr is capped at this when the spec gives no cap. */
#define PROC_OUTPUT_MAX_DEFAULT ((size_t)16 << 20)
/* Most "K=V" entries in proc_spec.env_extra. */
#define PROC_ENV_EXTRA_MAX 256
/* Most arguments in argv. */
#define PROC_ARGV_MAX 4096
/* Bytes moved per read(2) or write(2) on a child's pipe. */
#define PROC_IO_CHUNK 65536
/* Reads per ready pipe per loop turn, so one chatty child cannot starve the loop. */
#define PROC_READS_PER_TURN 16
/* PATH used to find argv[0] when neither the child's nor our env has one. */
#define PROC_DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

enum proc_io_mode {
	PROC_INHERIT = 0,	/* the child shares the parent's stream */
	PROC_NULL,		/* /dev/null */
	PROC_PIPE,		/* a pipe to the parent (proc.in / out / err) */
	PROC_FD,		/* the caller's fd (not closed by us) */
};

struct proc_io {
	enum proc_io_mode mode;
	int fd;			/* for PROC_FD */
};

/* A stream's consumer: gets each chunk as it is read. -1 with e stops the run. */
typedef int (*proc_sink_fn)(void *arg, const void *data, size_t len, struct err *e);

struct proc_spec {
	const char *const *argv;	/* NULL-terminated; argv[0] without '/' is searched in PATH */
	const char *const *envp;	/* NULL: inherit our environment */
	const char *const *env_extra;	/* NULL-terminated "K=V" set on top (replacing K), or NULL */
	const char *cwd;		/* NULL: ours */
	struct proc_io in, out, err;
	bool new_pgroup;		/* setpgid(0, 0): the timeout and kill reach its children too */
	int64_t timeout_ms;		/* proc_run / proc_start: SIGKILL after this; 0 = none */
	size_t out_max, err_max;	/* collection caps; 0 = PROC_OUTPUT_MAX_DEFAULT */
	bool err_tail;			/* keep stderr's last err_max bytes, not its first */
	proc_sink_fn out_sink;		/* proc_run only: stdout streams here instead of res->out */
	void *out_sink_arg;
};

/* Fill s with the common case: stdin from /dev/null, stdout and stderr piped
 * and collected, own process group, no timeout. */
void proc_spec_init(struct proc_spec *s, const char *const *argv);

/* A started child. in/out/err are the parent's pipe ends, -1 if not piped. */
struct proc {
	pid_t pid;
	int in, out, err;
	bool pgroup;		/* leads its own process group */
};

/* fork + exec. 0, or -1 with e ("exec docker: No such file or directory",
 * "chdir /nope: No such file or directory"); on failure nothing is left
 * behind (no child, no fd). The caller must reap p->pid and close the pipes. */
int proc_spawn(const struct proc_spec *spec, struct proc *p, struct err *e);

/* SIGKILL the child, or its whole process group if it has one. */
void proc_kill(const struct proc *p);

struct proc_result {
	int status;		/* raw wait status */
	int exit_code;		/* 0..255, or -1 if killed by a signal */
	int signo;		/* the signal that killed it, or 0 */
	bool timed_out;		/* the timeout fired and we killed it */
	struct buf out, err;	/* collected output (empty unless PROC_PIPE) */
	bool out_truncated, err_truncated;	/* more than the cap was written; the rest was discarded */
	int64_t duration_ms;	/* spawn to reap, monotonic */
};

void proc_result_init(struct proc_result *r);
void proc_result_release(struct proc_result *r);

/* Run to completion: write stdin_data (if any; spec->in must then be
 * PROC_PIPE) and close the child's stdin, collect piped stdout/stderr up to
 * their caps (or stream stdout to spec->out_sink), kill at the timeout, reap.
 * A non-zero exit is not an error here: it is in res. -1 with e only if the
 * child could not be started, the machinery failed, or the sink failed (the
 * child is then killed and reaped; e is the sink's). res is always
 * initialised by this call; release it with proc_result_release. */
int proc_run(const struct proc_spec *spec, const void *stdin_data, size_t stdin_len,
	     struct proc_result *res, struct err *e);

/* Asynchronous: the same on an event loop. */
struct proc_job;

/* Called once, from the loop, when the child has exited and its stdout and
 * stderr have reached EOF (or were cut off at the timeout). res is valid only
 * during the call (copy what you keep); the job is freed when done returns. */
typedef void (*proc_done_fn)(struct proc_job *job, const struct proc_result *res, void *arg);

/* Start the child and return at once; stdin_data is copied. *out (if not
 * NULL) gets the job handle, valid until done has returned. 0, or -1 with e
 * (done is then never called). */
int proc_start(struct ev *ev, const struct proc_spec *spec, const void *stdin_data, size_t stdin_len,
	       proc_done_fn done, void *arg, struct proc_job **out, struct err *e);

/* SIGKILL the job's child (or group); done still fires, with signo SIGKILL.
 * A no-op once the child has exited. */
void proc_job_kill(struct proc_job *job);

/* Kill the child, drop the job without calling done, free it. The loop
 * still reaps the child. Not to be called from the job's own done. */
void proc_job_cancel(struct proc_job *job);

/* The child's pid (for logs). */
pid_t proc_job_pid(const struct proc_job *job);

/* An argument vector that grows: v is NULL-terminated after every add,
 * each string its own copy, so it can be a proc_spec's argv as it is. */
struct argv {
	char **v;
	size_t n, cap;
};
void av_init(struct argv *a);
void av_add(struct argv *a, const char *s);
void av_addf(struct argv *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Each of the strings up to a NULL, in order. */
void av_addl(struct argv *a, ...) __attribute__((sentinel));
void av_release(struct argv *a);

#endif
