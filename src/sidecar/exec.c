/* exec.c: env.exec, an argv run in a service's container as the service's
 * own user, with a timeout (the process is killed when it passes) and
 * stdout and stderr capped at SC_EXEC_OUTPUT_MAX each. Through dockerd's
 * Engine API (engine_exec.c), or `docker exec` when the API cannot take it.
 * A non-zero exit is a successful command whose result carries the code.
 * With payload.stream true the output is not kept: each piece goes to the
 * agent as it arrives, as worker pipe lines (ws/xframe.h) that the agent
 * sends as exec.out frames; the result is then {exit_code, timed_out,
 * streamed, frames (how many exec.out there were)}, and a timeout is such a result rather than a failure. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fs.h"
#include "base/proc.h"
#include "base/str.h"
#include "base/sys.h"
#include "sidecar/sidecar.h"
#include "ws/xframe.h"

/* Which states a command takes its service in, beyond running. */
enum ctr_take { CTR_RUNNING, CTR_PAUSED_TOO, CTR_ENDED_TOO };

static int container_of(struct wk *w, const char *kind, const char *svc, enum ctr_take take, char *out, size_t n,
			struct err *e)
{
	bool paused_ok = take != CTR_RUNNING;

	char project[SC_ID_MAX];
	struct engine_ctr c;
	struct err ie;

	if (!sc_safe_id(w->env))
		return err_set(e, "%s: the command has no usable env_id", kind);
	if (!svc || !*svc || !sc_safe_id(svc))
		return err_set(e, "%s: payload.service must name a service", kind);
	dk_project(w->env, project, sizeof(project));
	dk_container(project, svc, out, n);
	err_clear(&ie);
	if (engine_container(out, &c, &ie) <= 0)
		return err_set(e, "%s: environment %s has no service \"%s\" running", kind, w->env, svc);
	w->ctr_gvisor = c.gvisor;
	if (!str_eq(c.env, w->env))
		return err_set(e, "%s: container %s does not belong to environment %s", kind, out, w->env);
	/* Only verify pauses a service (docker pause: collect freezes the agent,
	 * which stays so without resume); a snapshot unpauses what it finds
	 * paused, as verify --resume does. */
	if (str_eq(c.status, "paused") && !paused_ok && pause_marked(w->data, w->env, svc))
		return err_set(e, "%s: service \"%s\" is paused; resume it with `denv resume %s`", kind, svc, w->env);
	if (str_eq(c.status, "paused") && !paused_ok)
		return err_set(e,
			       "%s: service \"%s\" is frozen by verify (its container is paused); resume it with "
			       "`denv verify --resume %s` or `denv snapshot %s`",
			       kind, svc, w->env, w->env);
	if (take == CTR_ENDED_TOO && (str_eq(c.status, "exited") || str_eq(c.status, "dead")))
		return 0;
	if (!str_eq(c.status, "running") && !str_eq(c.status, "paused"))
		return err_set(e, "%s: service \"%s\" is %s, not running", kind, svc, c.status);
	return 0;
}

int wk_container(struct wk *w, const char *kind, const char *svc, char *out, size_t n, struct err *e)
{
	return container_of(w, kind, svc, CTR_PAUSED_TOO, out, n, e);
}

int wk_container_running(struct wk *w, const char *kind, const char *svc, char *out, size_t n, struct err *e)
{
	return container_of(w, kind, svc, CTR_RUNNING, out, n, e);
}

int wk_container_ended_too(struct wk *w, const char *kind, const char *svc, char *out, size_t n, struct err *e)
{
	return container_of(w, kind, svc, CTR_ENDED_TOO, out, n, e);
}

static struct json *result_of(int exit_code, const struct buf *out, const struct buf *err, bool truncated)
{
	struct json *res = json_new_object();

	json_object_set_int(res, "exit_code", exit_code);
	json_object_set(res, "stdout", json_new_strn(out->data ? out->data : "", out->len));
	json_object_set(res, "stderr", json_new_strn(err->data ? err->data : "", err->len));
	if (truncated)
		json_object_set_bool(res, "truncated", true);
	return res;
}

/* The docker CLI's way: when the Engine API cannot run it (engine_exec.c). */
static int exec_cli(const char *cname, const char *const *cmd, int64_t timeout, struct json **result,
		    struct err *e)
{
	const char **argv;
	struct proc_spec s;
	struct proc_result r;
	size_t n = 0;
	int rc;

	for (n = 0; cmd[n]; n++)
		;
	argv = xcalloc(n + 4, sizeof(char *));
	argv[0] = "docker";
	argv[1] = "exec";
	argv[2] = cname;
	memcpy(argv + 3, cmd, n * sizeof(char *));
	proc_spec_init(&s, argv);
	s.timeout_ms = timeout * 1000;
	s.out_max = s.err_max = SC_EXEC_OUTPUT_MAX;
	rc = proc_run(&s, NULL, 0, &r, e);
	free(argv);
	if (rc < 0)
		return err_prefix(e, "env.exec");
	if (r.timed_out) {
		proc_result_release(&r);
		return err_set(e, "env.exec: timed out after %lld s", (long long)timeout);
	}
	*result = result_of(r.exit_code, &r.out, &r.err, r.out_truncated || r.err_truncated);
	proc_result_release(&r);
	return 0;
}

/* A piece of output to the agent; if it is gone the command runs on.
 * arg counts the lines, so the result can say how many frames there were. */
static void to_agent(void *arg, int which, const char *p, size_t n)
{
	int64_t *lines = arg;

	*lines += (int64_t)xf_pipe_lines(n);
	(void)xf_pipe_write(1, which == 1 ? XF_STDERR : XF_STDOUT, p, n);
}

static void to_agent_member(const struct json *res, const char *key, int which, int64_t *lines)
{
	const struct json *v = json_get(res, key);

	if (v && v->type == JSON_STRING && v->u.str.len)
		to_agent(lines, which, v->u.str.s, v->u.str.len);
}

/* The control FIFO the agent made for this command (runner.c), or -1. */
static int open_ctl(const struct wk *w)
{
	char path[FS_PATH_MAX];

	if (cmdlog_path(w->data, w->id, ".ctl", path, sizeof(path)) < 0)
		return -1;
	return open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
}

static int exec_stream(struct wk *w, const struct json *payload, const char *cname, const char *const *argv,
		       int64_t timeout, struct json **result, struct err *e)
{
	struct engine_tty t = { json_get_bool(payload, "stdin", false), json_get_bool(payload, "tty", false),
				(int)json_get_int(payload, "rows", 0), (int)json_get_int(payload, "cols", 0), -1 };
	struct engine_exec x;
	struct json *cli = NULL;
	int64_t lines = 0;
	int rc;

	t.ctl_fd = open_ctl(w);
	rc = engine_exec_interactive(cname, argv, timeout * 1000, &t, to_agent, &lines, &x, e);
	if (t.ctl_fd >= 0)
		sys_close(t.ctl_fd);
	if (rc == 0 && (t.stdin_open || t.tty)) {
		engine_exec_release(&x);
		return err_set(e, "env.exec: stdin and tty need dockerd's Engine API socket");
	}
	if (rc == 0) {
		/* The CLI's way keeps the output until the end: sent then, whole. */
		if (exec_cli(cname, argv, timeout, &cli, e) < 0) {
			engine_exec_release(&x);
			return -1;
		}
		to_agent_member(cli, "stdout", 0, &lines);
		to_agent_member(cli, "stderr", 1, &lines);
		x.exit_code = (int)json_get_int(cli, "exit_code", -1);
		json_free(cli);
	} else if (rc < 0) {
		engine_exec_release(&x);
		return err_prefix(e, "env.exec");
	}
	*result = json_new_object();
	json_object_set_int(*result, "exit_code", x.timed_out ? -1 : x.exit_code);
	json_object_set_bool(*result, "timed_out", x.timed_out);
	json_object_set_bool(*result, "streamed", true);
	json_object_set_int(*result, "frames", lines);
	if (x.killed)
		json_object_set_bool(*result, "killed", true);
	if (x.timed_out)
		json_object_set_int(*result, "timeout_sec", timeout);
	engine_exec_release(&x);
	return 0;
}

int cmd_env_exec(struct wk *w, const struct json *payload, struct json **result, struct err *e)
{
	const struct json *cmd = json_get(payload, "cmd");
	int64_t timeout = json_get_int(payload, "timeout_sec", 0);
	struct engine_exec x;
	char cname[SC_DOCKER_NAME_MAX];
	const char **argv;
	int rc;

	if (wk_container_running(w, "env.exec", json_get_str(payload, "service"), cname, sizeof(cname), e) < 0)
		return -1;
	if (!cmd || cmd->type != JSON_ARRAY || json_len(cmd) == 0)
		return err_set(e, "env.exec: payload.cmd must be a non-empty list of strings");
	if (timeout <= 0)
		timeout = SC_EXEC_TIMEOUT_DEFAULT_S;
	if (timeout > SC_EXEC_TIMEOUT_MAX_S)
		timeout = SC_EXEC_TIMEOUT_MAX_S;
	argv = xcalloc(json_len(cmd) + 1, sizeof(char *));
	for (size_t i = 0; i < json_len(cmd); i++) {
		if (json_at(cmd, i)->type != JSON_STRING) {
			free(argv);
			return err_set(e, "env.exec: payload.cmd must be a list of strings");
		}
		argv[i] = json_at(cmd, i)->u.str.s;
	}
	if (json_get_bool(payload, "stream", false)) {
		rc = exec_stream(w, payload, cname, argv, timeout, result, e);
		free(argv);
		return rc;
	}
	rc = engine_exec(cname, argv, timeout * 1000, SC_EXEC_OUTPUT_MAX, &x, e);
	if (rc == 0)
		rc = exec_cli(cname, argv, timeout, result, e);
	else if (rc < 0)
		err_prefix(e, "env.exec");
	else if (x.timed_out)
		rc = err_set(e, "env.exec: timed out after %lld s (the process was killed)", (long long)timeout);
	else
		*result = result_of(x.exit_code, &x.mux.out[0], &x.mux.out[1], x.mux.truncated[0] || x.mux.truncated[1]);
	rc = rc > 0 ? 0 : rc;
	engine_exec_release(&x);
	free(argv);
	return rc;
}
