/* Unit tests: child processes (spawn, run, on the loop). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/proc.h"
#include "base/str.h"
#include "base/sys.h"
#include "tap.h"

#define ARGV(...) ((const char *const[]){ __VA_ARGS__, NULL })

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;	/* the directory's own fd */
}

/* Run argv with the defaults (stdin /dev/null, stdout+stderr collected). */
static int run(const char *const *argv, struct proc_result *r, struct err *e)
{
	struct proc_spec s;

	proc_spec_init(&s, argv);
	return proc_run(&s, NULL, 0, r, e);
}

static void test_exit_codes(void)
{
	struct proc_result r;
	struct err e;

	ok(run(ARGV("true"), &r, &e) == 0 && r.exit_code == 0 && r.signo == 0 && !r.timed_out, "true exits 0");
	proc_result_release(&r);
	ok(run(ARGV("false"), &r, &e) == 0 && r.exit_code == 1, "false exits 1 (not an error of proc_run)");
	proc_result_release(&r);
	ok(run(ARGV("sh", "-c", "exit 42"), &r, &e) == 0 && r.exit_code == 42, "exit 42");
	ok(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 42, "raw status kept");
	proc_result_release(&r);
	ok(run(ARGV("sh", "-c", "kill -TERM $$"), &r, &e) == 0 && r.exit_code == -1 && r.signo == SIGTERM,
	   "death by signal: exit_code -1, signo SIGTERM");
	proc_result_release(&r);
	ok(run(ARGV("/bin/sh", "-c", "exit 3"), &r, &e) == 0 && r.exit_code == 3, "absolute argv[0]");
	proc_result_release(&r);
}

static void test_streams(void)
{
	struct proc_result r;
	struct err e;
	struct proc_spec s;
	char path[512];
	int fd;
	struct buf file = BUF_INIT;

	ok(run(ARGV("sh", "-c", "echo out; echo err >&2; echo out2"), &r, &e) == 0, "run");
	is_str(r.out.data, "out\nout2\n", "stdout collected");
	is_str(r.err.data, "err\n", "stderr collected separately");
	proc_result_release(&r);

	proc_spec_init(&s, ARGV("cat"));
	ok(proc_run(&s, NULL, 0, &r, &e) == 0 && r.exit_code == 0 && r.out.len == 0, "stdin /dev/null gives EOF");
	proc_result_release(&r);

	snprintf(path, sizeof(path), "%s/out.txt", tap_tmpdir());
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	proc_spec_init(&s, ARGV("sh", "-c", "echo to-file; echo e >&2"));
	s.out.mode = PROC_FD;
	s.out.fd = fd;
	ok(proc_run(&s, NULL, 0, &r, &e) == 0 && r.out.len == 0, "stdout to a caller fd");
	is_str(r.err.data, "e\n", "while stderr is still collected");
	close(fd);
	fs_read_file(path, &file, 100, &e);
	is_str(file.data, "to-file\n", "the file got stdout");
	buf_release(&file);
	proc_result_release(&r);

	/* both stdout and stderr to the same caller fd 1-style: 2>&1 */
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	proc_spec_init(&s, ARGV("sh", "-c", "echo a; echo b >&2"));
	s.out = (struct proc_io){ PROC_FD, fd };
	s.err = (struct proc_io){ PROC_FD, fd };
	ok(proc_run(&s, NULL, 0, &r, &e) == 0, "stdout and stderr to one fd");
	close(fd);
	fs_read_file(path, &file, 100, &e);
	is_str(file.data, "a\nb\n", "both landed in the file");
	buf_release(&file);
	proc_result_release(&r);

	proc_spec_init(&s, ARGV("cat"));
	s.out.mode = PROC_NULL;
	s.err.mode = PROC_NULL;
	ok(proc_run(&s, "x", 1, &r, &e) == -1, "stdin data without a piped stdin refused");
	is_str(e.msg, "exec cat: stdin data needs a piped stdin", "message");
	proc_result_release(&r);
	proc_spec_init(&s, ARGV("sh", "-c", "echo gone"));
	s.out.mode = PROC_NULL;
	ok(proc_run(&s, NULL, 0, &r, &e) == 0 && r.out.len == 0 && r.exit_code == 0, "stdout to /dev/null");
	proc_result_release(&r);
}

static void test_stdin_big(void)
{
	enum { N = 3 << 20 };
	struct proc_result r;
	struct proc_spec s;
	struct err e;
	char *data = malloc(N);

	for (size_t i = 0; i < N; i++)
		data[i] = (char)('a' + (i * 7 + i / 4096) % 26);
	proc_spec_init(&s, ARGV("cat"));
	s.in.mode = PROC_PIPE;
	ok(proc_run(&s, data, N, &r, &e) == 0 && r.exit_code == 0, "3 MiB through cat (stdin and stdout at once)");
	ok(r.out.len == N && memcmp(r.out.data, data, N) == 0 && !r.out_truncated, "came back byte for byte");
	proc_result_release(&r);

	/* same through stderr, while stdout also runs: neither pipe may block the other */
	proc_spec_init(&s, ARGV("sh", "-c", "tee /dev/stderr"));
	s.in.mode = PROC_PIPE;
	ok(proc_run(&s, data, N, &r, &e) == 0 && r.exit_code == 0, "tee to stdout and stderr");
	ok(r.out.len == N && r.err.len == N && memcmp(r.err.data, data, N) == 0, "both streams complete");
	proc_result_release(&r);

	/* a child that never reads stdin: no hang, and no SIGPIPE for us */
	proc_spec_init(&s, ARGV("true"));
	s.in.mode = PROC_PIPE;
	ok(proc_run(&s, data, N, &r, &e) == 0 && r.exit_code == 0, "stdin data to a child that does not read it");
	proc_result_release(&r);
	free(data);
}

static void test_caps(void)
{
	struct proc_result r;
	struct proc_spec s;
	struct err e;

	proc_spec_init(&s, ARGV("head", "-c", "300000", "/dev/zero"));
	s.out_max = 1000;
	ok(proc_run(&s, NULL, 0, &r, &e) == 0, "run over the cap");
	ok(r.out.len == 1000 && r.out_truncated, "first 1000 bytes kept, marked truncated");
	ok(r.exit_code == 0, "rest drained: the child was not blocked or killed by SIGPIPE");
	proc_result_release(&r);

	s.out_max = 300000;
	ok(proc_run(&s, NULL, 0, &r, &e) == 0 && r.out.len == 300000 && !r.out_truncated, "exactly the cap is not truncated");
	proc_result_release(&r);

	proc_spec_init(&s, ARGV("sh", "-c", "echo 0123456789 >&2; echo ok"));
	s.err_max = 4;
	ok(proc_run(&s, NULL, 0, &r, &e) == 0 && strcmp(r.err.data, "0123") == 0 && r.err_truncated &&
	   strcmp(r.out.data, "ok\n") == 0 && !r.out_truncated, "stderr has its own cap");
	proc_result_release(&r);

	proc_spec_init(&s, ARGV("true"));
	ok(proc_run(&s, NULL, 0, &r, &e) == 0 && r.out.max == PROC_OUTPUT_MAX_DEFAULT, "default cap");
	proc_result_release(&r);
}

/* A sink that counts what it is given and fails past fail_after bytes. */
struct count_sink {
	size_t got, fail_after, calls;
};

static int count_into(void *arg, const void *data, size_t len, struct err *e)
{
	struct count_sink *c = arg;

	(void)data;
	c->got += len;
	c->calls++;
	if (c->got > c->fail_after)
		return err_set(e, "sink full at %zu bytes", c->got);
	return 0;
}

static void test_sink_and_tail(void)
{
	struct count_sink c = { 0, (size_t)-1, 0 };
	struct proc_result r;
	struct proc_spec s;
	struct err e;
	struct ev *ev;

	proc_spec_init(&s, ARGV("head", "-c", "1000000", "/dev/zero"));
	s.out_sink = count_into;
	s.out_sink_arg = &c;
	ok(proc_run(&s, NULL, 0, &r, &e) == 0 && r.exit_code == 0, "a streamed stdout runs to the end");
	ok(c.got == 1000000 && r.out.len == 0, "every byte went to the sink, none to res->out (%zu)", c.got);
	proc_result_release(&r);

	/* a failing sink stops a child that would never end by itself */
	c = (struct count_sink){ 0, 100000, 0 };
	proc_spec_init(&s, ARGV("cat", "/dev/zero"));
	s.out_sink = count_into;
	s.out_sink_arg = &c;
	ok(proc_run(&s, NULL, 0, &r, &e) < 0 && strstr(e.msg, "sink full"), "the sink's error is the run's: %s", e.msg);
	ok(r.signo == SIGKILL, "the child was killed and reaped");
	proc_result_release(&r);

	proc_spec_init(&s, ARGV("sh", "-c", "echo 0123456789 >&2; echo abcdef >&2"));
	s.err_max = 5;
	s.err_tail = true;
	ok(proc_run(&s, NULL, 0, &r, &e) == 0 && r.err.len == 5 && memcmp(r.err.data, "cdef\n", 5) == 0 &&
	   r.err_truncated, "err_tail keeps the last bytes of stderr");
	proc_result_release(&r);

	ev = ev_new();
	proc_spec_init(&s, ARGV("true"));
	s.out_sink = count_into;
	ok(proc_start(ev, &s, NULL, 0, NULL, NULL, NULL, &e) < 0 && strstr(e.msg, "proc_run only"),
	   "proc_start refuses a sink: %s", e.msg);
	ev_free(ev);
}

static bool pid_gone(pid_t pid)
{
	/* killed grandchildren are reaped by init; allow it a moment */
	for (int i = 0; i < 200; i++) {
		char path[64], stat[256] = "";
		struct buf b = BUF_INIT;
		struct err e;
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		if (fs_read_file(path, &b, 4096, &e) < 0)
			return true;
		snprintf(stat, sizeof(stat), "%s", b.data);
		buf_release(&b);
		if (strstr(stat, ") Z "))
			return true;	/* dead, waiting for its parent */
		usleep(10000);
	}
	return false;
}

static void test_timeout(void)
{
	struct proc_result r;
	struct proc_spec s;
	struct err e;
	int64_t gpid;

	proc_spec_init(&s, ARGV("sleep", "30"));
	s.timeout_ms = 200;
	ok(proc_run(&s, NULL, 0, &r, &e) == 0, "run with a timeout");
	ok(r.timed_out && r.signo == SIGKILL && r.exit_code == -1, "sleep 30 killed at the timeout");
	ok(r.duration_ms >= 200 && r.duration_ms < 10000, "well before 30 s (%lld ms)", (long long)r.duration_ms);
	proc_result_release(&r);

	/* own group: the grandchild holding the pipes dies too */
	proc_spec_init(&s, ARGV("sh", "-c", "sleep 30 & echo $!; wait"));
	s.timeout_ms = 300;
	ok(proc_run(&s, NULL, 0, &r, &e) == 0 && r.timed_out, "timeout with a grandchild");
	str_trim(r.out.data);
	ok(str_to_i64(r.out.data, &gpid) == 0 && gpid > 0, "grandchild pid printed before the timeout");
	ok(gpid > 1 && pid_gone((pid_t)gpid), "the whole process group was killed");
	proc_result_release(&r);

	/* no group of its own: only the child is killed, and we do not wait
	 * for the grandchild that still holds stdout */
	proc_spec_init(&s, ARGV("sh", "-c", "sleep 30 & echo $!; wait"));
	s.new_pgroup = false;
	s.timeout_ms = 300;
	ok(proc_run(&s, NULL, 0, &r, &e) == 0 && r.timed_out && r.signo == SIGKILL, "timeout without own group");
	ok(r.duration_ms < 10000, "returns although a grandchild keeps the pipe open");
	str_trim(r.out.data);
	if (str_to_i64(r.out.data, &gpid) == 0 && gpid > 1) {
		ok(kill((pid_t)gpid, 0) == 0, "the grandchild was left alone (not in a group we own)");
		kill((pid_t)gpid, SIGKILL);
	} else {
		ok(0, "grandchild pid printed");
	}
	proc_result_release(&r);
}

static void test_exec_failure(void)
{
	struct proc_result r;
	struct proc_spec s;
	struct err e;
	struct proc p;
	char path[512];
	int fds = count_fds();

	proc_spec_init(&s, ARGV("docker-not-installed-here", "ps"));
	ok(proc_run(&s, NULL, 0, &r, &e) == -1, "missing program fails proc_run");
	is_str(e.msg, "exec docker-not-installed-here: No such file or directory", "message names the program");
	is_int(e.code, ENOENT, "code ENOENT");
	proc_result_release(&r);
	ok(proc_spawn(&s, &p, &e) == -1 && p.pid == -1, "and proc_spawn");

	proc_spec_init(&s, ARGV("/nonexistent/docker"));
	ok(proc_spawn(&s, &p, &e) == -1, "missing absolute path fails (reported by the child)");
	is_str(e.msg, "exec /nonexistent/docker: No such file or directory", "through the report pipe");

	snprintf(path, sizeof(path), "%s/not-executable", tap_tmpdir());
	fs_write_atomic(path, "#!/bin/sh\n", 10, 0644, &e);
	proc_spec_init(&s, ARGV(path));
	ok(proc_spawn(&s, &p, &e) == -1 && e.code == EACCES, "non-executable file refused");
	ok(str_has_suffix(e.msg, "/not-executable: Permission denied"), "message: %s", e.msg);

	/* found in PATH but not executable: EACCES, as execvp does */
	{
		char env_path[600];
		snprintf(env_path, sizeof(env_path), "PATH=%s", tap_tmpdir());
		proc_spec_init(&s, ARGV("not-executable"));
		s.env_extra = (const char *const[]){ env_path, NULL };
		ok(proc_spawn(&s, &p, &e) == -1, "PATH hit without x bit refused");
		is_str(e.msg, "exec not-executable: Permission denied", "message");
	}

	proc_spec_init(&s, ARGV("pwd"));
	s.cwd = "/nonexistent-dir";
	ok(proc_spawn(&s, &p, &e) == -1, "bad cwd fails the spawn");
	is_str(e.msg, "chdir /nonexistent-dir: No such file or directory", "message");

	proc_spec_init(&s, ARGV(""));
	ok(proc_spawn(&s, &p, &e) == -1, "empty argv[0] refused");
	is_str(e.msg, "run: empty command", "message");
	proc_spec_init(&s, NULL);
	ok(proc_spawn(&s, &p, &e) == -1, "NULL argv refused");

	proc_spec_init(&s, ARGV("true"));
	s.out = (struct proc_io){ PROC_FD, 987 };
	ok(proc_spawn(&s, &p, &e) == -1, "closed caller fd refused");
	is_str(e.msg, "exec true: stdout: fd 987 is not open", "message");

	is_int(count_fds(), fds, "failed spawns leave no fd behind");
	errno = 0;
	ok(waitpid(-1, NULL, WNOHANG) == -1 && errno == ECHILD, "and no child");
}

static void test_env_cwd(void)
{
	struct proc_result r;
	struct proc_spec s;
	struct err e;
	char real[4096];

	proc_spec_init(&s, ARGV("env"));
	s.envp = ARGV("A=1", "PATH=/usr/bin:/bin", "B=x");
	s.env_extra = ARGV("B=2", "C=3", "C=4");
	ok(proc_run(&s, NULL, 0, &r, &e) == 0, "env with envp and extras");
	is_str(r.out.data, "A=1\nPATH=/usr/bin:/bin\nB=2\nC=4\n", "exact environment: extras replace, last wins");
	proc_result_release(&r);

	proc_spec_init(&s, ARGV("env"));
	s.envp = ARGV("ONLY=1");
	ok(proc_run(&s, NULL, 0, &r, &e) == 0, "envp without PATH: argv[0] found in the default PATH");
	is_str(r.out.data, "ONLY=1\n", "nothing else inherited");
	proc_result_release(&r);

	setenv("DENV_T_VAR", "old", 1);
	proc_spec_init(&s, ARGV("sh", "-c", "echo $DENV_T_VAR-$DENV_T_NEW"));
	s.env_extra = ARGV("DENV_T_VAR=new", "DENV_T_NEW=yes");
	ok(proc_run(&s, NULL, 0, &r, &e) == 0, "inherit plus extras");
	is_str(r.out.data, "new-yes\n", "extra replaces an inherited variable");
	proc_result_release(&r);
	proc_spec_init(&s, ARGV("sh", "-c", "echo $DENV_T_VAR"));
	ok(proc_run(&s, NULL, 0, &r, &e) == 0 && strcmp(r.out.data, "old\n") == 0, "plain inherit");
	proc_result_release(&r);
	unsetenv("DENV_T_VAR");

	proc_spec_init(&s, ARGV("true"));
	s.env_extra = ARGV("NOEQUALS");
	ok(proc_run(&s, NULL, 0, &r, &e) == -1, "extra without = refused");
	is_str(e.msg, "exec true: environment entry \"NOEQUALS\" is not KEY=VALUE", "message");
	proc_result_release(&r);

	proc_spec_init(&s, ARGV("pwd", "-P"));
	s.cwd = tap_tmpdir();
	ok(proc_run(&s, NULL, 0, &r, &e) == 0, "cwd");
	ok(realpath(tap_tmpdir(), real) != NULL, "realpath");
	str_trim(r.out.data);
	is_str(r.out.data, real, "child runs in cwd");
	proc_result_release(&r);
}

static void test_child_state(void)
{
	struct proc_result r;
	struct proc_spec s;
	struct err e;
	sigset_t block, old;
	struct sigaction ign, old_usr2;
	int leak = dup(1);	/* deliberately without O_CLOEXEC */

	memset(&ign, 0, sizeof(ign));
	ign.sa_handler = SIG_IGN;
	sigaction(SIGUSR2, &ign, &old_usr2);
	sigemptyset(&block);
	sigaddset(&block, SIGUSR1);
	sigprocmask(SIG_BLOCK, &block, &old);
	proc_spec_init(&s, ARGV("grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"));
	ok(proc_run(&s, NULL, 0, &r, &e) == 0, "run grep");
	{
		/* Signals 32 and 33 are glibc's own (thread cancellation, setxid):
		 * sigaction cannot touch them, and make(1) leaves them ignored, so
		 * only the signals a program can set are checked. */
		unsigned long long blk = ~0ULL, ignored = ~0ULL;
		const unsigned long long libc_own = (1ULL << 31) | (1ULL << 32);
		const char *b = strstr(r.out.data, "SigBlk:"), *g = strstr(r.out.data, "SigIgn:");
		if (b && g) {
			blk = strtoull(b + 7, NULL, 16);
			ignored = strtoull(g + 7, NULL, 16);
		}
		if (!ok((blk & ~libc_own) == 0 && (ignored & ~libc_own) == 0,
			"child has no blocked and no ignored signals"))
			tap_diag("child's /proc/self/status: %s", r.out.data);
	}
	proc_result_release(&r);
	sigprocmask(SIG_SETMASK, &old, NULL);
	sigaction(SIGUSR2, &old_usr2, NULL);

	proc_spec_init(&s, ARGV("ls", "/proc/self/fd"));
	ok(proc_run(&s, NULL, 0, &r, &e) == 0, "run ls");
	is_str(r.out.data, "0\n1\n2\n3\n", "child has only 0-2 (and ls's own dir fd), not our stray fd");
	proc_result_release(&r);
	close(leak);

	proc_spec_init(&s, ARGV("sh", "-c", "ps -o pgid= -p $$; echo $$"));
	ok(proc_run(&s, NULL, 0, &r, &e) == 0, "run ps");
	{
		char **lines = str_split(r.out.data, " \n", NULL);
		ok(lines[0] && lines[1] && strcmp(lines[0], lines[1]) == 0, "new_pgroup: the child leads its own group");
		str_list_free(lines);
	}
	proc_result_release(&r);
}

static void test_spawn_raw(void)
{
	struct proc_spec s;
	struct proc p;
	struct err e;
	char buf[16] = "";
	int status;
	ssize_t n;

	proc_spec_init(&s, ARGV("cat"));
	s.in.mode = PROC_PIPE;
	s.err.mode = PROC_NULL;
	ok(proc_spawn(&s, &p, &e) == 0 && p.pid > 0, "spawn cat");
	ok(p.in >= 0 && p.out >= 0 && p.err == -1, "pipe ends for the piped streams only");
	ok((fcntl(p.in, F_GETFD) & FD_CLOEXEC) && (fcntl(p.out, F_GETFD) & FD_CLOEXEC), "parent ends are O_CLOEXEC");
	ok((fcntl(p.in, F_GETFL) & O_NONBLOCK) && (fcntl(p.out, F_GETFL) & O_NONBLOCK), "and non-blocking");
	sys_write_all(p.in, "ping", 4);
	close(p.in);
	sys_set_nonblock(p.out, 0);
	n = sys_read_full(p.out, buf, sizeof(buf) - 1);
	ok(n == 4 && strcmp(buf, "ping") == 0, "round trip through the raw pipes");
	close(p.out);
	ok(waitpid(p.pid, &status, 0) == p.pid && WIFEXITED(status) && WEXITSTATUS(status) == 0, "reaped by the caller");
}

/* ---- asynchronous ---- */

struct jres {
	int calls;
	int exit_code, signo;
	bool timed_out, out_trunc;
	char out[128], err[128];
	size_t out_len;
	int64_t exit_seen;
	struct ev *ev;
	int *pending;
	const char *expect;	/* whole stdout expected, if not NULL */
	bool out_ok;
};

static void on_done(struct proc_job *job, const struct proc_result *res, void *arg)
{
	struct jres *j = arg;

	j->calls++;
	j->exit_code = res->exit_code;
	j->signo = res->signo;
	j->timed_out = res->timed_out;
	j->out_trunc = res->out_truncated;
	j->out_len = res->out.len;
	snprintf(j->out, sizeof(j->out), "%s", res->out.data);
	snprintf(j->err, sizeof(j->err), "%s", res->err.data);
	if (j->expect)
		j->out_ok = res->out.len == strlen(j->expect) && memcmp(res->out.data, j->expect, res->out.len) == 0;
	if (j->pending && --*j->pending == 0)
		ev_stop(j->ev);
}

static void on_guard(struct ev *ev, void *arg)
{
	ev_stop(ev);
}

static void run_loop(struct ev *ev, int *pending)
{
	struct ev_timer guard = EV_TIMER_INIT;

	/* the loop stops when the last job is done; the guard only ends a hang */
	ev_timer_start(ev, &guard, 20000, on_guard, NULL);
	if (*pending)
		ev_run(ev);
	ev_timer_stop(ev, &guard);
}

static void test_async_many(void)
{
	enum { N = 20 };
	struct ev *ev = ev_new();
	struct jres j[N];
	struct proc_job *job;
	struct err e;
	int pending = 0, good = 0;
	char args[N][16];
	char *big = malloc(512 << 10);

	for (size_t i = 0; i < (512 << 10); i++)
		big[i] = (char)(i % 251);
	big[(512 << 10) - 1] = '\0';	/* so it can be the expected stdout */
	for (int i = 0; i < N; i++) {
		struct proc_spec s;
		memset(&j[i], 0, sizeof(j[i]));
		j[i].ev = ev;
		j[i].pending = &pending;
		snprintf(args[i], sizeof(args[i]), "%d", i);
		if (i % 4 == 0) {
			/* a quarter stream half a MiB through cat */
			proc_spec_init(&s, ARGV("cat"));
			s.in.mode = PROC_PIPE;
			j[i].expect = big;
			ok(proc_start(ev, &s, big, strlen(big), on_done, &j[i], &job, &e) == 0 && job != NULL,
			   "start cat job %d", i);
		} else {
			const char *const argv[] = { "sh", "-c", "sleep 0.0$1; echo out $1; echo err $1 >&2; exit $1",
						     "sh", args[i], NULL };
			proc_spec_init(&s, argv);
			ok(proc_start(ev, &s, NULL, 0, on_done, &j[i], NULL, &e) == 0, "start job %d", i);
		}
		pending++;
	}
	run_loop(ev, &pending);
	is_int(pending, 0, "all 20 jobs finished");
	for (int i = 0; i < N; i++) {
		char want_out[32], want_err[32];
		snprintf(want_out, sizeof(want_out), "out %d\n", i);
		snprintf(want_err, sizeof(want_err), "err %d\n", i);
		if (i % 4 == 0)
			good += j[i].calls == 1 && j[i].exit_code == 0 && j[i].out_ok;
		else
			good += j[i].calls == 1 && j[i].exit_code == i && strcmp(j[i].out, want_out) == 0 &&
				strcmp(j[i].err, want_err) == 0;
	}
	is_int(good, N, "every job's done fired once with its own exit code, stdout and stderr");
	free(big);
	ev_free(ev);
}

static void test_async_timeout_kill_cancel(void)
{
	struct ev *ev = ev_new();
	struct jres a, b, c;
	struct proc_job *jb, *jc;
	struct proc_spec s;
	struct err e;
	int pending = 0;
	pid_t cpid;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	memset(&c, 0, sizeof(c));
	a.ev = b.ev = ev;
	a.pending = b.pending = &pending;

	proc_spec_init(&s, ARGV("sleep", "30"));
	s.timeout_ms = 150;
	ok(proc_start(ev, &s, NULL, 0, on_done, &a, NULL, &e) == 0, "start sleep 30 with a timeout");
	pending++;
	s.timeout_ms = 0;
	ok(proc_start(ev, &s, NULL, 0, on_done, &b, &jb, &e) == 0, "start sleep 30 to kill");
	pending++;
	ok(proc_start(ev, &s, NULL, 0, on_done, &c, &jc, &e) == 0, "start sleep 30 to cancel");
	cpid = proc_job_pid(jc);
	ok(cpid > 0, "job pid");
	proc_job_cancel(jc);
	proc_job_kill(jb);
	run_loop(ev, &pending);
	ok(a.calls == 1 && a.timed_out && a.signo == SIGKILL, "timeout on the loop kills with SIGKILL");
	ok(b.calls == 1 && !b.timed_out && b.signo == SIGKILL, "proc_job_kill: done fires with SIGKILL");
	is_int(c.calls, 0, "cancelled job never calls done");
	/* the loop reaps the cancelled child in passing */
	for (int i = 0; i < 50 && waitpid(cpid, NULL, WNOHANG) == 0 && kill(cpid, 0) == 0; i++)
		ev_run_once(ev, 20);
	errno = 0;
	ok(waitpid(cpid, NULL, WNOHANG) == -1 && errno == ECHILD, "cancelled child reaped by the loop");

	proc_spec_init(&s, ARGV("no-such-program-xyz"));
	ok(proc_start(ev, &s, NULL, 0, on_done, &c, &jc, &e) == -1 && jc == NULL, "async exec failure");
	is_str(e.msg, "exec no-such-program-xyz: No such file or directory", "message");
	ev_free(ev);
}

static void test_async_order(void)
{
	struct ev *ev = ev_new();
	struct jres a, b;
	struct proc_spec s;
	struct err e;
	int pending = 0;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	a.ev = b.ev = ev;
	a.pending = b.pending = &pending;
	/* pipes close first, exit later: done waits for the exit status */
	proc_spec_init(&s, ARGV("sh", "-c", "echo early; exec >&- 2>&-; sleep 0.2; exit 3"));
	ok(proc_start(ev, &s, NULL, 0, on_done, &a, NULL, &e) == 0, "start");
	pending++;
	/* exits first, a grandchild writes later: done waits for EOF */
	proc_spec_init(&s, ARGV("sh", "-c", "(sleep 0.2; echo late) & exit 4"));
	ok(proc_start(ev, &s, NULL, 0, on_done, &b, NULL, &e) == 0, "start");
	pending++;
	run_loop(ev, &pending);
	ok(a.calls == 1 && a.exit_code == 3 && strcmp(a.out, "early\n") == 0, "EOF before exit: done has the exit code");
	ok(b.calls == 1 && b.exit_code == 4 && strcmp(b.out, "late\n") == 0, "exit before EOF: done has all the output");

	/* caps on the loop */
	memset(&a, 0, sizeof(a));
	a.ev = ev;
	a.pending = &pending;
	proc_spec_init(&s, ARGV("head", "-c", "1000000", "/dev/zero"));
	s.out_max = 10;
	ok(proc_start(ev, &s, NULL, 0, on_done, &a, NULL, &e) == 0, "start");
	pending++;
	run_loop(ev, &pending);
	ok(a.calls == 1 && a.exit_code == 0 && a.out_len == 10 && a.out_trunc, "cap and drain on the loop");
	ev_free(ev);
}

/* struct argv: grows past its first 16, NULL-terminated after every add,
 * its own copies, usable as a proc_spec's argv. */
static void test_argv(void)
{
	struct argv a;
	struct proc_spec s;
	struct proc_result r;
	struct err e = { 0 };
	char word[] = "changed-after";
	bool all = true;

	av_init(&a);
	av_addl(&a, "sh", "-c", "echo $#", "sh", NULL);
	for (int i = 0; i < 40; i++)
		av_addf(&a, "arg%d", i);
	av_add(&a, word);
	word[0] = 'X';
	for (size_t i = 0; i < a.n; i++)
		all = all && a.v[i] != NULL;
	ok(a.n == 45 && all && a.v[a.n] == NULL, "45 arguments, NULL-terminated (n %zu)", a.n);
	ok(strcmp(a.v[44], "changed-after") == 0 && strcmp(a.v[43], "arg39") == 0, "each its own copy, formatted");
	proc_spec_init(&s, (const char *const *)a.v);
	if (ok(proc_run(&s, NULL, 0, &r, &e) == 0, "runs as a proc_spec's argv (%s)", e.msg)) {
		ok(r.exit_code == 0 && r.out.data && strcmp(r.out.data, "41\n") == 0, "sh saw 41 arguments");
		proc_result_release(&r);
	}
	av_release(&a);
	ok(a.v == NULL && a.n == 0, "released");
}

int main(void)
{
	int fds;

	ev_free(ev_new());	/* the loop's process-wide self-pipe, opened once */
	fds = count_fds();
	test_exit_codes();
	test_streams();
	test_stdin_big();
	test_caps();
	test_sink_and_tail();
	test_timeout();
	test_exec_failure();
	test_env_cwd();
	test_child_state();
	test_spawn_raw();
	test_async_many();
	test_async_timeout_kill_cancel();
	test_async_order();
	test_argv();
	errno = 0;
	ok(waitpid(-1, NULL, WNOHANG) == -1 && errno == ECHILD, "no child left unreaped (no zombie)");
	is_int(count_fds(), fds, "no fd leaked");
	return tap_done();
}
