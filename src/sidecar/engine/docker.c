/* docker.c: the docker CLI from a worker, as argument vectors (never a shell
 * string), each call with a timeout, failures turned into messages that
 * quote Docker's own first line of stderr. Also the naming rules shared with
 * Docker Compose: project = env id in lower case, containers
 * <project>-<service>-1, network <project>_default. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ev.h"
#include "base/proc.h"
#include "base/str.h"
#include "sidecar/sidecar.h"

void dk_first_line(const char *s, char *out, size_t n)
{
	size_t len;

	while (*s && isspace((unsigned char)*s))
		s++;
	len = strcspn(s, "\n");
	while (len > 0 && isspace((unsigned char)s[len - 1]))
		len--;
	if (len >= n)
		len = n - 1;
	memcpy(out, s, len);
	out[len] = '\0';
}

int dk_run(const struct argv *a, int64_t timeout_ms, struct buf *out, struct err *e)
{
	const char **argv = xcalloc(a->n + 2, sizeof(char *));
	struct proc_spec s;
	struct proc_result r;
	char line[SC_DOCKER_LINE_MAX];
	int rc = 0;

	argv[0] = "docker";
	for (size_t i = 0; i < a->n; i++)
		argv[i + 1] = a->v[i];
	proc_spec_init(&s, argv);
	s.timeout_ms = timeout_ms;
	s.out_max = SC_DOCKER_OUT_MAX;
	s.err_max = 65536;
	if (proc_run(&s, NULL, 0, &r, e) < 0) {
		free(argv);
		return err_prefix(e, "docker %s", a->n ? a->v[0] : "");
	}
	free(argv);
	if (r.timed_out)
		rc = err_set(e, "docker %s: no answer within %lld s", a->n ? a->v[0] : "",
			     (long long)(timeout_ms / 1000));
	else if (r.exit_code != 0) {
		dk_first_line(r.err.len ? r.err.data : r.out.data, line, sizeof(line));
		rc = err_set(e, "docker %s: %s", a->n ? a->v[0] : "", *line ? line : "failed");
		e->code = r.exit_code;
	} else if (out) {
		buf_add(out, r.out.data, r.out.len);
	}
	proc_result_release(&r);
	return rc;
}

/* ---- several at once ---- */

struct many {
	size_t left;
	int failed;		/* index of the first failure, -1 none */
	struct err first;
};

struct many_job {
	struct many *m;
	size_t i;
	const char *verb;
	int64_t timeout_ms;
};

static void many_done(struct proc_job *job, const struct proc_result *r, void *arg)
{
	struct many_job *j = arg;
	struct many *m = j->m;
	char line[SC_DOCKER_LINE_MAX];

	m->left--;
	if (m->failed >= 0 && (size_t)m->failed < j->i)
		return;	/* report the failure of the earliest command */
	if (r->timed_out) {
		err_set(&m->first, "docker %s: no answer within %lld s", j->verb, (long long)(j->timeout_ms / 1000));
	} else if (r->exit_code != 0) {
		dk_first_line(r->err.len ? r->err.data : r->out.data ? r->out.data : "", line, sizeof(line));
		err_set(&m->first, "docker %s: %s", j->verb, *line ? line : "failed");
	} else {
		return;
	}
	m->failed = (int)j->i;
}

int dk_run_many(const struct argv *cmds, size_t n, int64_t timeout_ms, size_t *failed, struct err *e)
{
	struct ev *ev = ev_new();
	struct many m;
	struct many_job *jobs = xcalloc(n ? n : 1, sizeof(*jobs));
	int rc = 0;

	memset(&m, 0, sizeof(m));
	m.failed = -1;
	for (size_t i = 0; i < n; i++) {
		const char **argv = xcalloc(cmds[i].n + 2, sizeof(char *));
		struct proc_spec s;

		argv[0] = "docker";
		memcpy(argv + 1, cmds[i].v, cmds[i].n * sizeof(char *));
		proc_spec_init(&s, argv);
		s.timeout_ms = timeout_ms;
		s.out_max = SC_DOCKER_OUT_MAX;
		s.err_max = 65536;
		jobs[i] = (struct many_job){ &m, i, cmds[i].n ? cmds[i].v[0] : "", timeout_ms };
		if (proc_start(ev, &s, NULL, 0, many_done, &jobs[i], NULL, e) < 0) {
			free(argv);
			if (m.failed < 0) {
				m.failed = (int)i;
				m.first = *e;
			}
			continue;	/* the ones started still run to their end */
		}
		free(argv);
		m.left++;
	}
	while (m.left > 0)
		ev_run_once(ev, -1);
	ev_free(ev);
	free(jobs);
	if (m.failed >= 0) {
		*e = m.first;
		if (failed)
			*failed = (size_t)m.failed;
		rc = -1;
	}
	return rc;
}

int dk(struct buf *out, int64_t timeout_ms, struct err *e, ...)
{
	struct argv a;
	va_list ap;
	const char *s;
	int rc;

	av_init(&a);
	va_start(ap, e);
	while ((s = va_arg(ap, const char *)))
		av_add(&a, s);
	va_end(ap);
	rc = dk_run(&a, timeout_ms, out, e);
	av_release(&a);
	return rc;
}

void dk_project(const char *env, char *out, size_t n)
{
	size_t i;

	for (i = 0; env[i] && i + 1 < n; i++)
		out[i] = (char)tolower((unsigned char)env[i]);
	out[i] = '\0';
}

void dk_container(const char *project, const char *svc, char *out, size_t n)
{
	snprintf(out, n, "%s-%s-1", project, svc);
}

int dk_project_containers(const char *project, struct buf *out, struct err *e)
{
	char filter[SC_DOCKER_NAME_MAX];

	snprintf(filter, sizeof(filter), "label=com.docker.compose.project=%s", project);
	return dk(out, SC_DOCKER_QUICK_MS, e, "ps", "-aq", "--no-trunc", "--filter", filter, NULL);
}

/* Everything Docker holds for the project: its containers (by label, so a
 * probe or fill container left by a crash goes too) and its network. */
int dk_project_down(const char *project, struct err *e)
{
	struct buf ids = BUF_INIT;
	struct argv a;
	char **list;
	char net[SC_DOCKER_NAME_MAX];
	size_t n = 0;
	int rc = 0;

	if (dk_project_containers(project, &ids, e) < 0) {
		buf_release(&ids);
		return -1;
	}
	list = str_split(ids.data, "\n", &n);
	buf_release(&ids);
	if (n) {
		av_init(&a);
		av_add(&a, "rm");
		av_add(&a, "-f");
		av_add(&a, "-v");
		for (size_t i = 0; i < n; i++)
			av_add(&a, list[i]);
		rc = dk_run(&a, SC_DOCKER_TIMEOUT_MS, NULL, e);
		av_release(&a);
	}
	str_list_free(list);
	if (rc < 0)
		return -1;
	snprintf(net, sizeof(net), "%s_default", project);
	if (dk(NULL, SC_DOCKER_QUICK_MS, e, "network", "inspect", "--format", "{{.Name}}", net, NULL) == 0 &&
	    dk(NULL, SC_DOCKER_TIMEOUT_MS, e, "network", "rm", net, NULL) < 0)
		return -1;
	err_clear(e);
	return hw_release(project, e);
}
