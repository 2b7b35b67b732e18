/* cmd_logs.c: denv logs (a service's output: stdout to stdout, stderr to
 * stderr, -f to keep following) and denv metrics (what each service and
 * volume uses now), denv-cp(8), METRICS AND LOGS. */
#include <stdio.h>
#include <string.h>

#include "base/str.h"
#include "cli/cli.h"
#include "http/http.h"
#include "json/json.h"

#define LOGS_STAMP_MAX 64	/* docker's fixed-width RFC 3339 timestamp */

/* Write text's lines to f, each after since only (then since = its stamp),
 * without the stamp unless keep. Lines without a stamp are written whole. */
static void write_lines(FILE *f, const struct json *text, char since[LOGS_STAMP_MAX], bool keep)
{
	const char *p = text && text->type == JSON_STRING ? text->u.str.s : "";
	const char *end = p + (text && text->type == JSON_STRING ? text->u.str.len : 0);

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p)), *stop = nl ? nl + 1 : end;
		const char *sp = memchr(p, ' ', (size_t)(stop - p));
		size_t k = sp ? (size_t)(sp - p) : 0;
		char ts[LOGS_STAMP_MAX] = "";

		if (k > 0 && k < sizeof(ts)) {
			memcpy(ts, p, k);
			ts[k] = '\0';
		}
		if (!*ts || !*since || strcmp(ts, since) > 0) {
			const char *from = *ts && !keep ? sp + 1 : p;

			fwrite(from, 1, (size_t)(stop - from), f);
			if (*ts)
				str_copy(since, LOGS_STAMP_MAX, ts);
		}
		p = stop;
	}
	fflush(f);
}

/* GET .../logs once (with the stamps, so that -f knows where it is). */
static int logs_once(struct cli *c, const char *env, const struct cli_args *a, const char *tail, char so[LOGS_STAMP_MAX],
		     char se[LOGS_STAMP_MAX], struct err *e)
{
	struct buf path = BUF_INIT;
	struct json *doc = NULL;
	const char *svc = cli_flag_str(a, "service");
	const char *since = strcmp(so, se) > 0 ? se : so;	/* the older: each stream filters its own */
	int rc;

	cli_path(&path, "/v1/envs/", env, "/logs?timestamps=true&tail=");
	http_pct_encode(&path, tail, "");
	if (svc) {
		buf_adds(&path, "&service=");
		http_pct_encode(&path, svc, "");
	}
	if (*since) {
		buf_adds(&path, "&since=");
		http_pct_encode(&path, since, "");
	}
	rc = cli_call(c, "GET", path.data, NULL, &doc, e);
	if (rc == 0) {
		bool keep = cli_flag_bool(a, "timestamps", false);

		write_lines(stdout, json_get(doc, "stdout"), so, keep);
		write_lines(stderr, json_get(doc, "stderr"), se, keep);
	}
	json_free(doc);
	buf_release(&path);
	return rc;
}

static int run_logs(struct cli *c, const struct cli_args *a, struct err *e)
{
	char env[128], so[LOGS_STAMP_MAX] = "", se[LOGS_STAMP_MAX] = "";
	const char *tail = cli_flag_str(a, "tail");
	int64_t n;

	if (tail && (str_to_i64(tail, &n) < 0 || n < 0)) {
		err_set(e, "--tail: want a number of lines from 0");
		return CLI_USAGE;
	}
	if (cli_resolve_env(c, a->pos[0], env, sizeof(env), e) < 0 || logs_once(c, env, a, tail ? tail : "100", so, se, e) < 0)
		return -1;
	/* -f: ask again every poll for what came after the last line seen. */
	while (cli_flag_bool(a, "follow", false)) {
		cli_sleep_ms(CLI_POLL_MS);
		if (logs_once(c, env, a, "100000", so, se, e) < 0)
			return e->code == 409 ? 0 : -1;	/* destroyed: the end of its logs */
	}
	return 0;
}

static const struct cli_flag logs_flags[] = {
	{ "service", 0, CLI_STR, "S", "the service (default: the environment's first)" },
	{ "tail", 'n', CLI_STR, "N", "the last N lines, stdout and stderr together (default 100)" },
	{ "follow", 'f', CLI_BOOL, NULL, "keep printing new lines until interrupted or the environment is destroyed" },
	{ "timestamps", 't', CLI_BOOL, NULL, "keep docker's timestamp in front of each line" },
	{ 0 },
};

const struct cli_cmd cli_cmd_logs = {
	.name = "logs", .args = "<env>", .summary = "print a service's output (stdout to stdout, stderr to stderr)",
	.flags = logs_flags, .min_pos = 1, .max_pos = 1, .run = run_logs,
};

/* ---- metrics ---- */

/* " %10.<prec>f" of key / div, or " -" right-aligned when the host had no figure. */
static void print_num(const struct json *o, const char *key, double div, int prec)
{
	const struct json *v = json_get(o, key);

	if (v && v->type == JSON_INT)
		printf(" %10.*f", prec, (double)v->u.i / div);
	else
		printf(" %10s", "-");
}

static int run_metrics(struct cli *c, const struct cli_args *a, struct err *e)
{
	struct buf path = BUF_INIT;
	struct json *doc = NULL;
	const struct json *svcs, *vols;
	int rc;

	if (cli_env_path(c, a->pos[0], "/metrics", &path, e) < 0)
		return -1;
	rc = cli_call(c, "GET", path.data, NULL, &doc, e);
	buf_release(&path);
	if (rc < 0)
		return -1;
	if (cli_flag_bool(a, "json", false)) {
		rc = cli_print_json(doc, e);
		json_free(doc);
		return rc;
	}
	svcs = json_get(doc, "services");
	vols = json_get(doc, "volumes");
	printf("%-20s %-10s %10s %10s %10s %10s\n", "SERVICE", "STATUS", "CPU_S", "MEM_MIB", "LIMIT_MIB", "PIDS");
	for (size_t i = 0; i < json_len(svcs); i++) {
		const struct json *s = json_at(svcs, i);

		printf("%-20s %-10s", json_get_str(s, "service"), json_get_str(s, "status"));
		print_num(s, "cpu_usec", 1e6, 2);
		print_num(s, "memory_bytes", 1048576.0, 1);
		print_num(s, "memory_limit_bytes", 1048576.0, 0);
		print_num(s, "pids", 1.0, 0);
		printf("\n");
	}
	printf("\n%-20s %10s  (storage %s)\n", "VOLUME", "MIB", json_get_str(doc, "storage"));
	for (size_t i = 0; i < json_len(vols); i++) {
		printf("%-20s", json_get_str(json_at(vols, i), "name"));
		print_num(json_at(vols, i), "bytes", 1048576.0, 2);
		printf("\n");
	}
	if (json_get(doc, "disk")) {
		printf("%-20s", "(all volumes)");
		print_num(json_get(doc, "disk"), "used_bytes", 1048576.0, 2);
		printf("  of a disk cap of");
		print_num(json_get(doc, "disk"), "limit_mb", 1.0, 0);
		printf(" MiB\n");
	}
	json_free(doc);
	return 0;
}

static const struct cli_flag metrics_flags[] = {
	{ "json", 0, CLI_BOOL, NULL, "print the server's answer as JSON" },
	{ 0 },
};

const struct cli_cmd cli_cmd_metrics = {
	.name = "metrics", .args = "<env>", .summary = "show what each service and volume of an environment uses now",
	.flags = metrics_flags, .min_pos = 1, .max_pos = 1, .run = run_metrics,
};
