/* cmd_batch.c: denv batch create | get: many sandboxes in one call, from one
 * image or as forks of one version, and each member's state (denv-cp(8),
 * BATCHES). */
#include <stdio.h>
#include <string.h>

#include "base/ev.h"
#include "base/str.h"
#include "cli/cli.h"
#include "http/http.h"
#include "json/json.h"

#define BATCH_WAIT_DEFAULT_S 600	/* --wait without --timeout */
#define BATCH_WAIT_S 30			/* wait_sec of one GET (under the CLI's HTTP timeout) */

/* The POST body from the flags and the command tail; CLI_USAGE with e. */
static int batch_body(const struct cli_args *a, struct json **out, struct err *e)
{
	const char *image = cli_flag_str(a, "image"), *ver = cli_flag_str(a, "version");
	const char *count = cli_flag_str(a, "count");
	static const char *const passed[] = { "name-prefix", "project", "egress" };
	static const char *const wire[] = { "name_prefix", "project", "egress" };
	int64_t n;
	struct json *b;

	if (!image == !ver) {
		err_set(e, "give one of --image or --version");
		return CLI_USAGE;
	}
	if (!count || str_to_i64(count, &n) < 0 || n < 1) {
		err_set(e, "--count: want a number of sandboxes from 1");
		return CLI_USAGE;
	}
	b = json_new_object();
	json_object_set_str(b, image ? "image" : "from_version", image ? image : ver);
	json_object_set_int(b, "count", n);
	for (size_t i = 0; i < sizeof(passed) / sizeof(passed[0]); i++)
		if (cli_flag_str(a, passed[i]))
			json_object_set_str(b, wire[i], cli_flag_str(a, passed[i]));
	if (a->npos > 0) {
		struct json *cmd = json_new_array();

		for (int i = 0; i < a->npos; i++)
			json_array_push(cmd, json_new_str(a->pos[i]));
		json_object_set(b, "cmd", cmd);
	}
	*out = b;
	return 0;
}

/* One line per member whose state changed since seen (a string per index);
 * whether any did. */
static bool print_changes(const struct json *view, struct json *seen)
{
	const struct json *ms = json_get(view, "members");
	bool changed = false;

	for (size_t i = 0; i < json_len(ms); i++) {
		const struct json *m = json_at(ms, i);
		const char *state = json_get_str(m, "state"), *err = json_get_str(m, "error");
		char key[24];

		snprintf(key, sizeof(key), "%zu", i);
		if (str_eq(json_get_str(seen, key), state))
			continue;
		json_object_set_str(seen, key, state);
		changed = true;
		printf("%s %s %s%s%s\n", json_get_str(m, "name"), json_get_str(m, "environment"), state,
		       err ? ": " : "", err ? err : "");
	}
	fflush(stdout);
	return changed;
}

/* Poll the batch until no member is pending; 0 when all are healthy. */
static int batch_follow(struct cli *c, const char *id, int64_t timeout_s, struct err *e)
{
	struct buf path = BUF_INIT;
	struct json *view = NULL, *seen = json_new_object();
	int64_t deadline = ev_mono_ms() + timeout_s * 1000;
	int rc = -1;

	for (bool first = true;; first = false) {
		int64_t left = (deadline - ev_mono_ms()) / 1000;

		/* After the first look the server holds the GET until a member's
		 * deployment ends (wait_sec), so a line comes as each one does. */
		buf_reset(&path);
		buf_adds(&path, "/v1/batches/");
		http_pct_encode(&path, id, "");
		if (!first && left > 0)
			buf_addf(&path, "?wait_sec=%lld", (long long)(left < BATCH_WAIT_S ? left : BATCH_WAIT_S));
		json_free(view);
		view = NULL;
		if (cli_call(c, "GET", path.data, NULL, &view, e) < 0)
			goto out;
		bool changed = print_changes(view, seen);

		if (json_get_bool(view, "done", false))
			break;
		if (ev_mono_ms() >= deadline) {
			err_set(e, "batch %s: members still pending after %lld s", id, (long long)timeout_s);
			goto out;
		}
		if (!changed)
			cli_sleep_ms(CLI_POLL_MS);
	}
	{
		const struct json *counts = json_get(view, "counts");
		int64_t healthy = json_get_int(counts, "healthy", 0), all = (int64_t)json_len(json_get(view, "members"));

		printf("batch %s: %lld of %lld healthy\n", id, (long long)healthy, (long long)all);
		rc = healthy == all ? 0 : err_set(e, "batch %s: %lld of %lld members not healthy", id,
						  (long long)(all - healthy), (long long)all);
	}
out:
	json_free(view);
	json_free(seen);
	buf_release(&path);
	return rc;
}

static int run_batch_create(struct cli *c, const struct cli_args *a, struct err *e)
{
	struct json *body = NULL, *resp = NULL;
	const char *tmo = cli_flag_str(a, "timeout");
	int64_t timeout = BATCH_WAIT_DEFAULT_S;
	char id[64];
	int rc = batch_body(a, &body, e);

	if (rc != 0)
		return rc;
	if (tmo && (str_to_i64(tmo, &timeout) < 0 || timeout < 1)) {
		json_free(body);
		err_set(e, "--timeout: want seconds from 1");
		return CLI_USAGE;
	}
	rc = cli_call(c, "POST", "/v1/sandboxes/batch", body, &resp, e);
	json_free(body);
	if (rc < 0)
		return -1;
	if (!cli_flag_bool(a, "wait", true)) {
		rc = cli_print_json(resp, e);
	} else {
		str_copy(id, sizeof(id), json_get_str(json_get(resp, "batch"), "ID"));
		rc = batch_follow(c, id, timeout, e);
	}
	json_free(resp);
	return rc;
}

static int run_batch_get(struct cli *c, const struct cli_args *a, struct err *e)
{
	return cli_send_print(c, "GET", "/v1/batches/", a->pos[0], NULL, NULL, e);
}

static const struct cli_flag create_flags[] = {
	{ "image", 0, CLI_STR, "IMAGE", "one container from this image per member" },
	{ "version", 0, CLI_STR, "VER", "or: fork this healthy version per member" },
	{ "count", 'n', CLI_STR, "N", "how many members (1 to 256)" },
	{ "name-prefix", 0, CLI_STR, "P", "member i is named P<i> (default b-xxxxxx-)" },
	{ "project", 0, CLI_STR, "P", "project of image members (default sandboxes)" },
	{ "egress", 0, CLI_STR, "E", "deny (default) or allow" },
	{ "timeout", 0, CLI_STR, "SEC", "with --wait: give up after SEC seconds (default 600)" },
	{ "wait", 0, CLI_BOOL, NULL, "follow the members until none is pending (default true; --wait=false: print the 202)" },
	{ 0 },
};

static const struct cli_cmd batch_subs[] = {
	{ .name = "create", .args = "[--] [CMD [ARGS...]]", .summary = "make N sandboxes in one call",
	  .flags = create_flags, .max_pos = -1, .run = run_batch_create,
	  .notes = "Waiting, it prints one line per member as its state changes (pending,\n"
		   "healthy, failed), then exits 1 unless every member is healthy.\n" },
	{ .name = "get", .args = "<batch>", .summary = "show each member's state", .min_pos = 1, .max_pos = 1,
	  .run = run_batch_get },
	{ 0 },
};

const struct cli_cmd cli_cmd_batch = {
	.name = "batch", .summary = "many sandboxes in one call, and their states", .subs = batch_subs,
};
