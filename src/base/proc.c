/* proc.c: see proc.h. */
#include "base/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/sys.h"

extern char **environ;

/* What went wrong in the child before exec, sent back through the pipe. */
enum { STAGE_STDIO = 1, STAGE_CHDIR, STAGE_EXEC };
struct child_report {
	int stage;
	int err;
};

void proc_spec_init(struct proc_spec *s, const char *const *argv)
{
	memset(s, 0, sizeof(*s));
	s->argv = argv;
	s->in.mode = PROC_NULL;
	s->out.mode = PROC_PIPE;
	s->err.mode = PROC_PIPE;
	s->in.fd = s->out.fd = s->err.fd = -1;
	s->new_pgroup = true;
}

/* ---- preparing, before fork ---- */

struct prep {
	char *path;		/* what to execve */
	char **envp;		/* malloc'd array (strings borrowed), or NULL for environ */
	int child_fd[3];	/* what the child gets as 0, 1, 2; -1: leave as is */
	int parent_fd[3];	/* our pipe ends, -1 if none */
	int close_fd[4];	/* ours to close after fork: child pipe ends, /dev/null */
	int nclose;
};

static void prep_init(struct prep *pr)
{
	memset(pr, 0, sizeof(*pr));
	for (int i = 0; i < 3; i++)
		pr->child_fd[i] = pr->parent_fd[i] = -1;
}

static void prep_close_child_side(struct prep *pr)
{
	for (int i = 0; i < pr->nclose; i++)
		sys_close(pr->close_fd[i]);
	pr->nclose = 0;
}

static void prep_release(struct prep *pr)
{
	prep_close_child_side(pr);
	for (int i = 0; i < 3; i++) {
		sys_close(pr->parent_fd[i]);
		pr->parent_fd[i] = -1;
	}
	free(pr->path);
	free(pr->envp);
	pr->path = NULL;
	pr->envp = NULL;
}

static size_t key_len(const char *kv)
{
	const char *eq = strchr(kv, '=');
	return eq ? (size_t)(eq - kv) : strlen(kv);
}

static bool same_key(const char *a, const char *b)
{
	size_t n = key_len(a);
	return n == key_len(b) && strncmp(a, b, n) == 0;
}

static int build_env(const struct proc_spec *spec, struct prep *pr, struct err *e)
{
	const char *const *base = spec->envp ? spec->envp : (const char *const *)environ;
	size_t nbase = 0, nextra = 0, n = 0;

	if (!spec->env_extra) {
		if (spec->envp)
			for (; spec->envp[nbase]; nbase++)
				;
		if (spec->envp) {
			pr->envp = xmalloc((nbase + 1) * sizeof(*pr->envp));
			memcpy(pr->envp, spec->envp, (nbase + 1) * sizeof(*pr->envp));
		}
		return 0;
	}
	for (; spec->env_extra[nextra]; nextra++) {
		const char *kv = spec->env_extra[nextra];
		if (nextra == PROC_ENV_EXTRA_MAX)
			return err_set(e, "more than %d extra environment variables", PROC_ENV_EXTRA_MAX);
		if (!strchr(kv, '=') || kv[0] == '=')
			return err_set(e, "environment entry \"%s\" is not KEY=VALUE", kv);
	}
	for (; base && base[nbase]; nbase++)
		;
	pr->envp = xmalloc((nbase + nextra + 1) * sizeof(*pr->envp));
	for (size_t i = 0; i < nbase; i++) {
		bool replaced = false;
		for (size_t j = 0; j < nextra && !replaced; j++)
			replaced = same_key(base[i], spec->env_extra[j]);
		if (!replaced)
			pr->envp[n++] = (char *)base[i];
	}
	for (size_t j = 0; j < nextra; j++) {
		bool later = false;	/* the last of repeated keys wins */
		for (size_t k = j + 1; k < nextra && !later; k++)
			later = same_key(spec->env_extra[j], spec->env_extra[k]);
		if (!later)
			pr->envp[n++] = (char *)spec->env_extra[j];
	}
	pr->envp[n] = NULL;
	return 0;
}

/* The PATH the child will run with. */
static const char *child_path_var(const struct prep *pr)
{
	const char *const *env = pr->envp ? (const char *const *)pr->envp : (const char *const *)environ;

	for (size_t i = 0; env && env[i]; i++)
		if (strncmp(env[i], "PATH=", 5) == 0)
			return env[i] + 5;
	return PROC_DEFAULT_PATH;
}

/* Find name in PATH as execvp would, but before fork (so a missing program
 * fails here, cheaply). Relative and empty PATH entries are skipped: they
 * would depend on the child's directory. NULL with errno ENOENT or EACCES. */
static char *find_in_path(const char *name, const char *path)
{
	int err = ENOENT;
	char full[PATH_MAX];

	while (*path) {
		size_t len = strcspn(path, ":");
		if (len > 0 && path[0] == '/' &&
		    snprintf(full, sizeof(full), "%.*s/%s", (int)len, path, name) < (int)sizeof(full)) {
			struct stat st;
			if (stat(full, &st) == 0 && S_ISREG(st.st_mode)) {
				if (access(full, X_OK) == 0)
					return xstrdup(full);
				err = EACCES;
			}
		}
		path += len;
		if (*path == ':')
			path++;
	}
	errno = err;
	return NULL;
}

/* Set up one of the child's standard streams (0 stdin, 1 stdout, 2 stderr). */
static int prep_stdio(struct prep *pr, int which, const struct proc_io *io, int *devnull, struct err *e)
{
	static const char *names[] = { "stdin", "stdout", "stderr" };
	int fds[2];

	switch (io->mode) {
	case PROC_INHERIT:
		return 0;
	case PROC_NULL:
		if (*devnull < 0) {
			*devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
			if (*devnull < 0)
				return err_errno(e, "open /dev/null");
			pr->close_fd[pr->nclose++] = *devnull;
		}
		pr->child_fd[which] = *devnull;
		return 0;
	case PROC_FD:
		if (io->fd < 0 || fcntl(io->fd, F_GETFD) < 0)
			return err_set(e, "%s: fd %d is not open", names[which], io->fd);
		pr->child_fd[which] = io->fd;
		return 0;
	case PROC_PIPE:
		if (pipe2(fds, O_CLOEXEC) < 0)
			return err_errno(e, "pipe for %s", names[which]);
		/* fds[0] reads, fds[1] writes: stdin is written by us */
		pr->child_fd[which] = which == 0 ? fds[0] : fds[1];
		pr->parent_fd[which] = which == 0 ? fds[1] : fds[0];
		pr->close_fd[pr->nclose++] = pr->child_fd[which];
		if (sys_set_nonblock(pr->parent_fd[which], 1) < 0)
			return err_errno(e, "pipe for %s", names[which]);
		return 0;
	}
	return err_set(e, "%s: unknown mode %d", names[which], (int)io->mode);
}

/* ---- the child, between fork and exec: async-signal-safe calls only ---- */

static void child_fail(int fd, int stage, int err)
{
	struct child_report r = { stage, err };

	(void)!write(fd, &r, sizeof(r));
	_exit(127);
}

static void child_exec(const struct proc_spec *spec, const struct prep *pr, int report_fd)
{
	struct sigaction sa;
	sigset_t none;
	int src[3];

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	sigemptyset(&sa.sa_mask);
	/* Dispositions the parent set (SIGPIPE ignored by the loop, handlers
	 * writing to the loop's self-pipe) must not leak into the program. */
	for (int s = 1; s < NSIG; s++)
		sigaction(s, &sa, NULL);	/* fails harmlessly for SIGKILL, SIGSTOP, libc's own */
	if (spec->new_pgroup)
		setpgid(0, 0);

	/* A source fd in 0..2 could be overwritten by an earlier dup2: move
	 * those out of the way first. */
	for (int i = 0; i < 3; i++) {
		src[i] = pr->child_fd[i];
		if (src[i] >= 0 && src[i] < 3 && src[i] != i) {
			src[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 3);
			if (src[i] < 0)
				child_fail(report_fd, STAGE_STDIO, errno);
		}
	}
	for (int i = 0; i < 3; i++) {
		if (src[i] < 0)
			continue;
		if (src[i] == i) {
			if (fcntl(i, F_SETFD, 0) < 0)	/* keep it across exec */
				child_fail(report_fd, STAGE_STDIO, errno);
		} else if (dup2(src[i], i) < 0) {
			child_fail(report_fd, STAGE_STDIO, errno);
		}
	}
#ifdef SYS_close_range
	/* Whatever fd someone forgot to mark close-on-exec stops here. */
	syscall(SYS_close_range, 3U, ~0U, 4U /* CLOSE_RANGE_CLOEXEC */);
#endif
	if (spec->cwd && chdir(spec->cwd) < 0)
		child_fail(report_fd, STAGE_CHDIR, errno);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execve(pr->path, (char *const *)spec->argv, pr->envp ? pr->envp : environ);
	child_fail(report_fd, STAGE_EXEC, errno);
}

/* ---- spawn ---- */

int proc_spawn(const struct proc_spec *spec, struct proc *p, struct err *e)
{
	struct prep pr;
	int report[2] = { -1, -1 }, devnull = -1;
	sigset_t all, old;
	struct child_report r;
	size_t argc = 0;
	ssize_t n;
	pid_t pid;
	const char *name;

	p->pid = -1;
	p->in = p->out = p->err = -1;
	p->pgroup = spec->new_pgroup;
	if (!spec->argv || !spec->argv[0] || !spec->argv[0][0])
		return err_set(e, "run: empty command");
	name = spec->argv[0];
	for (; spec->argv[argc]; argc++)
		if (argc == PROC_ARGV_MAX)
			return err_set(e, "exec %s: more than %d arguments", name, PROC_ARGV_MAX);

	prep_init(&pr);
	if (build_env(spec, &pr, e) < 0)
		goto fail_prefixed;
	if (strchr(name, '/')) {
		pr.path = xstrdup(name);
	} else if (!(pr.path = find_in_path(name, child_path_var(&pr)))) {
		err_errno(e, "exec %s", name);
		goto fail;
	}
	if (prep_stdio(&pr, 0, &spec->in, &devnull, e) < 0 ||
	    prep_stdio(&pr, 1, &spec->out, &devnull, e) < 0 ||
	    prep_stdio(&pr, 2, &spec->err, &devnull, e) < 0)
		goto fail_prefixed;
	if (pipe2(report, O_CLOEXEC) < 0) {
		err_errno(e, "exec %s: pipe", name);
		goto fail;
	}
	if (report[1] < 3) {
		/* the child's dup2 onto 0..2 must not clobber it */
		int moved = fcntl(report[1], F_DUPFD_CLOEXEC, 3);
		if (moved < 0) {
			err_errno(e, "exec %s: pipe", name);
			goto fail;
		}
		close(report[1]);
		report[1] = moved;
	}

	/* No handler of ours may run in the child before it resets them. */
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old);
	pid = fork();
	if (pid == 0) {
		close(report[0]);
		child_exec(spec, &pr, report[1]);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (pid < 0) {
		err_errno(e, "exec %s: fork", name);
		goto fail;
	}
	close(report[1]);
	report[1] = -1;
	prep_close_child_side(&pr);

	/* EOF: exec succeeded (the pipe closed on exec). A report: it failed. */
	do
		n = read(report[0], &r, sizeof(r));
	while (n < 0 && errno == EINTR);
	close(report[0]);
	report[0] = -1;
	if (n == (ssize_t)sizeof(r)) {
		int status;
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		if (r.stage == STAGE_CHDIR)
			err_set(e, "chdir %s: %s", spec->cwd, strerror(r.err));
		else if (r.stage == STAGE_STDIO)
			err_set(e, "exec %s: set up stdio: %s", name, strerror(r.err));
		else
			err_set(e, "exec %s: %s", name, strerror(r.err));
		e->code = r.err;
		goto fail;
	}
	p->pid = pid;
	p->in = pr.parent_fd[0];
	p->out = pr.parent_fd[1];
	p->err = pr.parent_fd[2];
	for (int i = 0; i < 3; i++)
		pr.parent_fd[i] = -1;
	prep_release(&pr);
	return 0;

fail_prefixed:
	err_prefix(e, "exec %s", name);
fail:
	sys_close(report[0]);
	sys_close(report[1]);
	prep_release(&pr);
	return -1;
}

void proc_kill(const struct proc *p)
{
	if (p->pid <= 0)
		return;
	if (p->pgroup)
		kill(-p->pid, SIGKILL);
	kill(p->pid, SIGKILL);
}

/* ---- results ---- */

void proc_result_init(struct proc_result *r)
{
	memset(r, 0, sizeof(*r));
	buf_init(&r->out, PROC_OUTPUT_MAX_DEFAULT);
	buf_init(&r->err, PROC_OUTPUT_MAX_DEFAULT);
	r->exit_code = -1;
}

void proc_result_release(struct proc_result *r)
{
	buf_release(&r->out);
	buf_release(&r->err);
}

static void set_status(struct proc_result *r, int status)
{
	r->status = status;
	if (WIFEXITED(status)) {
		r->exit_code = WEXITSTATUS(status);
		r->signo = 0;
	} else if (WIFSIGNALED(status)) {
		r->exit_code = -1;
		r->signo = WTERMSIG(status);
	}
}

/* A collected stream: its first b->max bytes, or with tail its last. */
struct keeper {
	struct buf *b;
	bool tail;
	bool *truncated;
};

static int keep(void *arg, const void *data, size_t n, struct err *e)
{
	struct keeper *k = arg;
	struct buf *b = k->b;
	const char *p = data;
	size_t room = b->max - b->len;

	(void)e;
	if (n > room)
		*k->truncated = true;
	if (n > room && !k->tail) {
		n = room;
	} else if (n > room) {
		if (n > b->max) {
			p += n - b->max;
			n = b->max;
		}
		buf_consume(b, b->len + n - b->max);
	}
	buf_add(b, p, n);
	return 0;
}

/* Read what is there from fd into sink. 1 at EOF or on a read error, 0 when
 * it would block, -1 with e when the sink fails. */
static int pump_read(int fd, proc_sink_fn sink, void *arg, int max_reads, struct err *e)
{
	char chunk[PROC_IO_CHUNK];

	for (int i = 0; i < max_reads; i++) {
		ssize_t n = sys_read(fd, chunk, sizeof(chunk));
		if (n == 0)
			return 1;
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : 1;
		if (sink(arg, chunk, (size_t)n, e) < 0)
			return -1;
	}
	return 0;
}

/* Write more of data to fd. 1 when all is written or the child stopped
 * reading (EPIPE and the like), 0 when it would block. */
static int pump_write(int fd, const char *data, size_t len, size_t *off)
{
	while (*off < len) {
		size_t n = len - *off > PROC_IO_CHUNK ? PROC_IO_CHUNK : len - *off;
		ssize_t w = write(fd, data + *off, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : 1;
		}
		*off += (size_t)w;
	}
	return 1;
}

static size_t cap_or_default(size_t cap)
{
	return cap ? cap : PROC_OUTPUT_MAX_DEFAULT;
}

/* ---- blocking ---- */

static int open_pidfd(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0U);
#else
	errno = ENOSYS;
	return -1;
#endif
}

int proc_run(const struct proc_spec *spec, const void *stdin_data, size_t stdin_len,
	     struct proc_result *res, struct err *e)
{
	struct proc p;
	struct sigaction ign, old_pipe;
	int64_t start = ev_mono_ms(), deadline = spec->timeout_ms > 0 ? start + spec->timeout_ms : -1;
	size_t off = 0;
	int status = 0, pidfd = -1, rc = 0;
	bool reaped = false;
	struct keeper out_k = { &res->out, false, &res->out_truncated };
	struct keeper err_k = { &res->err, spec->err_tail, &res->err_truncated };

	proc_result_init(res);
	res->out.max = cap_or_default(spec->out_max);
	res->err.max = cap_or_default(spec->err_max);
	if (stdin_len && spec->in.mode != PROC_PIPE)
		return err_set(e, "exec %s: stdin data needs a piped stdin",
			       spec->argv && spec->argv[0] ? spec->argv[0] : "");
	if (proc_spawn(spec, &p, e) < 0)
		return -1;

	/* A child that stops reading must give us EPIPE, not kill us. */
	memset(&ign, 0, sizeof(ign));
	ign.sa_handler = SIG_IGN;
	sigemptyset(&ign.sa_mask);
	sigaction(SIGPIPE, &ign, &old_pipe);
	if (p.in >= 0 && stdin_len == 0) {
		close(p.in);
		p.in = -1;
	}

	while (!reaped) {
		struct pollfd pfd[3];
		int n = 0, timeout = -1, r;

		if (p.in >= 0)
			pfd[n++] = (struct pollfd){ p.in, POLLOUT, 0 };
		if (p.out >= 0)
			pfd[n++] = (struct pollfd){ p.out, POLLIN, 0 };
		if (p.err >= 0)
			pfd[n++] = (struct pollfd){ p.err, POLLIN, 0 };
		if (n == 0) {
			/* every pipe is done: wait for the exit itself */
			pid_t w = waitpid(p.pid, &status, WNOHANG);
			if (w == p.pid || (w < 0 && errno != EINTR)) {
				reaped = w == p.pid;
				if (!reaped)
					rc = err_errno(e, "exec %s: wait", spec->argv[0]);
				break;
			}
			if (pidfd < 0)
				pidfd = open_pidfd(p.pid);
			if (pidfd >= 0)
				pfd[n++] = (struct pollfd){ pidfd, POLLIN, 0 };
			else
				timeout = 10;	/* no pidfd (old kernel): look again soon */
		}
		if (deadline >= 0) {
			int64_t left = deadline - ev_mono_ms();
			if (left <= 0) {
				res->timed_out = true;
				break;
			}
			if (timeout < 0 || left < timeout)
				timeout = left > INT_MAX ? INT_MAX : (int)left;
		}
		r = poll(pfd, (nfds_t)n, timeout);
		if (r < 0 && errno != EINTR) {
			rc = err_errno(e, "exec %s: poll", spec->argv[0]);
			break;
		}
		for (int i = 0; r > 0 && i < n; i++) {
			if (!pfd[i].revents)
				continue;
			if (pfd[i].fd == p.in) {
				if (pump_write(p.in, stdin_data, stdin_len, &off)) {
					close(p.in);
					p.in = -1;
				}
			} else if (pfd[i].fd == p.out) {
				int got = spec->out_sink ? pump_read(p.out, spec->out_sink, spec->out_sink_arg,
								     PROC_READS_PER_TURN, e)
							 : pump_read(p.out, keep, &out_k, PROC_READS_PER_TURN, e);
				if (got < 0) {
					rc = -1;
					break;
				}
				if (got) {
					close(p.out);
					p.out = -1;
				}
			} else if (pfd[i].fd == p.err) {
				if (pump_read(p.err, keep, &err_k, PROC_READS_PER_TURN, e)) {
					close(p.err);
					p.err = -1;
				}
			}
		}
		if (rc < 0)
			break;	/* the sink failed */
	}
	if (!reaped)
		proc_kill(&p);	/* the timeout, or our own failure */
	/* Cut off at the timeout: a grandchild may hold the pipes open. */
	sys_close(p.in);
	sys_close(p.out);
	sys_close(p.err);
	sys_close(pidfd);
	sigaction(SIGPIPE, &old_pipe, NULL);
	while (!reaped) {
		if (waitpid(p.pid, &status, 0) == p.pid || errno != EINTR)
			reaped = true;
	}
	set_status(res, status);
	res->duration_ms = ev_mono_ms() - start;
	return rc;
}

/* ---- on the event loop ---- */

struct proc_job {
	struct ev *ev;
	struct proc p;
	proc_done_fn done;
	void *arg;
	char *in_data;
	size_t in_len, in_off;
	struct proc_result res;
	struct ev_timer timer;
	int64_t start;
	bool err_tail;		/* spec->err_tail */
	bool exited;		/* reaped; res.status is valid */
	bool in_done;		/* inside the done callback */
};

static void job_close(struct proc_job *job, int *fd)
{
	if (*fd < 0)
		return;
	ev_fd_del(job->ev, *fd);
	close(*fd);
	*fd = -1;
}

static void job_free(struct proc_job *job)
{
	job_close(job, &job->p.in);
	job_close(job, &job->p.out);
	job_close(job, &job->p.err);
	ev_timer_stop(job->ev, &job->timer);
	proc_result_release(&job->res);
	free(job->in_data);
	free(job);
}

/* Finish once the child is reaped and its output pipes are closed. Callers
 * must not touch job after this returns. */
static void job_maybe_finish(struct proc_job *job)
{
	if (!job->exited || job->p.out >= 0 || job->p.err >= 0)
		return;
	job_close(job, &job->p.in);
	ev_timer_stop(job->ev, &job->timer);
	set_status(&job->res, job->res.status);
	job->res.duration_ms = ev_mono_ms() - job->start;
	job->in_done = true;
	job->done(job, &job->res, job->arg);
	job_free(job);
}

static void job_on_stdin(struct ev *ev, int fd, int revents, void *arg)
{
	struct proc_job *job = arg;

	if (pump_write(fd, job->in_data, job->in_len, &job->in_off))
		job_close(job, &job->p.in);
}

static void job_on_output(struct ev *ev, int fd, int revents, void *arg)
{
	struct proc_job *job = arg;
	bool out = fd == job->p.out;
	struct keeper k = { out ? &job->res.out : &job->res.err, !out && job->err_tail,
			    out ? &job->res.out_truncated : &job->res.err_truncated };

	if (pump_read(fd, keep, &k, PROC_READS_PER_TURN, NULL)) {
		job_close(job, out ? &job->p.out : &job->p.err);
		job_maybe_finish(job);
	}
}

static void job_on_exit(struct ev *ev, pid_t pid, int status, void *arg)
{
	struct proc_job *job = arg;

	job->res.status = status;
	job->exited = true;
	job_maybe_finish(job);
}

static void job_on_timeout(struct ev *ev, void *arg)
{
	struct proc_job *job = arg;

	job->res.timed_out = true;
	proc_kill(&job->p);
	/* Stop reading now: a grandchild outside the group could keep the
	 * pipes open for ever. done fires when the loop has reaped the child. */
	job_close(job, &job->p.in);
	job_close(job, &job->p.out);
	job_close(job, &job->p.err);
	job_maybe_finish(job);
}

int proc_start(struct ev *ev, const struct proc_spec *spec, const void *stdin_data, size_t stdin_len,
	       proc_done_fn done, void *arg, struct proc_job **out, struct err *e)
{
	struct proc_job *job;

	if (out)
		*out = NULL;
	if (stdin_len && spec->in.mode != PROC_PIPE)
		return err_set(e, "exec %s: stdin data needs a piped stdin",
			       spec->argv && spec->argv[0] ? spec->argv[0] : "");
	if (spec->out_sink)
		return err_set(e, "exec %s: a stdout sink is for proc_run only", spec->argv[0]);
	job = xcalloc(1, sizeof(*job));
	job->ev = ev;
	job->err_tail = spec->err_tail;
	job->done = done;
	job->arg = arg;
	job->start = ev_mono_ms();
	proc_result_init(&job->res);
	job->res.out.max = cap_or_default(spec->out_max);
	job->res.err.max = cap_or_default(spec->err_max);
	if (proc_spawn(spec, &job->p, e) < 0) {
		proc_result_release(&job->res);
		free(job);
		return -1;
	}
	if (job->p.in >= 0 && stdin_len) {
		job->in_data = xmemdup(stdin_data, stdin_len);
		job->in_len = stdin_len;
	}
	/* Registration fails only for a bad or already-watched fd, which would
	 * be a bug: clean up all the same rather than leave a child behind. */
	if (job->p.in >= 0 && !job->in_len) {
		close(job->p.in);	/* nothing to send: EOF at once */
		job->p.in = -1;
	}
	if ((job->p.in >= 0 && ev_fd_add(ev, job->p.in, EV_WRITE, job_on_stdin, job) < 0) ||
	    (job->p.out >= 0 && ev_fd_add(ev, job->p.out, EV_READ, job_on_output, job) < 0) ||
	    (job->p.err >= 0 && ev_fd_add(ev, job->p.err, EV_READ, job_on_output, job) < 0) ||
	    ev_child_add(ev, job->p.pid, job_on_exit, job) < 0) {
		err_errno(e, "exec %s: event loop", spec->argv[0]);
		proc_kill(&job->p);
		ev_child_del(ev, job->p.pid);
		while (waitpid(job->p.pid, NULL, 0) < 0 && errno == EINTR)
			;
		job_free(job);
		return -1;
	}
	if (spec->timeout_ms > 0)
		ev_timer_start(ev, &job->timer, spec->timeout_ms, job_on_timeout, job);
	if (out)
		*out = job;
	return 0;
}

void proc_job_kill(struct proc_job *job)
{
	if (job && !job->exited)
		proc_kill(&job->p);
}

void proc_job_cancel(struct proc_job *job)
{
	if (!job || job->in_done)
		return;
	if (!job->exited) {
		proc_kill(&job->p);
		ev_child_del(job->ev, job->p.pid);	/* the loop reaps it and drops the status */
	}
	job_free(job);
}

pid_t proc_job_pid(const struct proc_job *job)
{
	return job->p.pid;
}

/* ---- argument vectors ---- */

void av_init(struct argv *a)
{
	a->n = 0;
	a->cap = 16;
	a->v = xcalloc(a->cap, sizeof(char *));
}

void av_add(struct argv *a, const char *s)
{
	if (a->n + 2 > a->cap) {
		a->cap *= 2;
		a->v = xrealloc(a->v, a->cap * sizeof(char *));
	}
	a->v[a->n++] = xstrdup(s);
	a->v[a->n] = NULL;
}

void av_addf(struct argv *a, const char *fmt, ...)
{
	struct buf b = BUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	buf_vaddf(&b, fmt, ap);
	va_end(ap);
	av_add(a, b.data);
	buf_release(&b);
}

void av_addl(struct argv *a, ...)
{
	va_list ap;
	const char *s;

	va_start(ap, a);
	while ((s = va_arg(ap, const char *)))
		av_add(a, s);
	va_end(ap);
}

void av_release(struct argv *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->v[i]);
	free(a->v);
	a->v = NULL;
	a->n = a->cap = 0;
}
