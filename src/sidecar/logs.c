/* logs.c: env.logs: the last lines a service's container printed, from
 * `docker logs --timestamps` (payload: service, tail, since). Each line
 * keeps docker's fixed-width RFC 3339 timestamp in front, so the control
 * plane can merge stdout with stderr and follow on from last_ts; it strips
 * them unless the client asked for them. A read: it runs beside anything. */
#include <stdio.h>
#include <string.h>

#include "base/proc.h"
#include "base/str.h"
#include "sidecar/sidecar.h"

/* The timestamp at the start of the last complete line of b, into out. */
static void last_stamp(const struct buf *b, char *out, size_t n)
{
	const char *end, *start;

	if (!b->data || b->len == 0)
		return;
	end = b->data + b->len;
	if (end[-1] == '\n')
		end--;
	for (start = end; start > b->data && start[-1] != '\n'; start--)
		;
	for (size_t k = 0; k + 1 < n && start + k < end && start[k] != ' '; k++) {
		out[k] = start[k];
		out[k + 1] = '\0';
	}
}

int cmd_env_logs(struct wk *w, const struct json *payload, struct json **result, struct err *e)
{
	const char *svc = json_get_str(payload, "service"), *since = json_get_str(payload, "since");
	int64_t tail = json_get_int(payload, "tail", SC_LOGS_TAIL_DEFAULT);
	char cname[SC_DOCKER_NAME_MAX], tailarg[32], a[SC_LOGS_STAMP_MAX] = "", b[SC_LOGS_STAMP_MAX] = "";
	const char *argv[10];
	struct proc_spec s;
	struct proc_result r;
	size_t n = 0;

	if (wk_container(w, "env.logs", svc, cname, sizeof(cname), e) < 0)
		return -1;
	if (tail < 0 || tail > SC_LOGS_TAIL_MAX)
		return err_set(e, "env.logs: tail must be 0 to %d", SC_LOGS_TAIL_MAX);
	snprintf(tailarg, sizeof(tailarg), "%lld", (long long)tail);
	argv[n++] = "docker";
	argv[n++] = "logs";
	argv[n++] = "--timestamps";
	argv[n++] = "--tail";
	argv[n++] = tailarg;
	if (since && *since) {
		if (strlen(since) >= SC_LOGS_STAMP_MAX || since[0] == '-')
			return err_set(e, "env.logs: since is not a timestamp");
		argv[n++] = "--since";
		argv[n++] = since;
	}
	argv[n++] = cname;
	argv[n] = NULL;
	proc_spec_init(&s, argv);
	s.timeout_ms = SC_DOCKER_QUICK_MS;
	s.out_max = SC_LOGS_MAX;
	s.err_max = SC_LOGS_MAX;
	if (proc_run(&s, NULL, 0, &r, e) < 0)
		return err_prefix(e, "env.logs");
	if (r.exit_code != 0 || r.timed_out) {
		char line[SC_DOCKER_LINE_MAX];

		dk_first_line(r.err.data, line, sizeof(line));
		proc_result_release(&r);
		return err_set(e, "env.logs: docker logs: %s", r.timed_out ? "timed out" : line);
	}
	last_stamp(&r.out, a, sizeof(a));
	last_stamp(&r.err, b, sizeof(b));
	*result = json_new_object();
	json_object_set_str(*result, "service", svc);
	json_object_set(*result, "stdout", json_new_strn(r.out.data ? r.out.data : "", r.out.len));
	json_object_set(*result, "stderr", json_new_strn(r.err.data ? r.err.data : "", r.err.len));
	json_object_set_str(*result, "last_ts", strcmp(a, b) >= 0 ? a : b);
	if (r.out_truncated || r.err_truncated)
		json_object_set_bool(*result, "truncated", true);
	proc_result_release(&r);
	return 0;
}
