/* cmd_promote.c: promote (run the gates, then point the target at the
 * version) and sheet (the environment's data sheet). */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

#include "base/str.h"
#include "json/json.h"

/* ---- promote ---- */

/* After the verdict: what the target runs now, or which gate stopped it. */
static void print_promoted(const struct json *final)
{
	const struct json *phases = json_get(final, "phases"), *verdict = NULL;

	for (size_t i = 0; i < json_len(phases); i++)
		if (str_eq(json_get_str(json_at(phases, i), "Name"), "verdict"))
			verdict = json_get(json_at(phases, i), "Evidence");
	if (str_eq(json_get_str(json_get(final, "deployment"), "Status"), "succeeded"))
		printf("promoted: %s runs %s (%s)\n", json_get_str(verdict, "target") ? json_get_str(verdict, "target") : "?",
		       json_get_str(verdict, "version") ? json_get_str(verdict, "version") : "?",
		       json_get_str(verdict, "env") ? json_get_str(verdict, "env") : "?");
	else
		printf("not promoted: %s; the target is unchanged\n",
		       json_get_str(json_get(final, "deployment"), "Error") ?
			       json_get_str(json_get(final, "deployment"), "Error") : "failed");
	fflush(stdout);
}

static int run_promote(struct cli *c, const struct cli_args *a, struct err *e)
{
	struct json *body = json_new_object(), *resp = NULL;
	struct buf ref = BUF_INIT, path = BUF_INIT;
	int rc = CLI_FAIL;

	/* ENV within PROJECT, unless it is an id already. */
	if (cli_ref_is_id(a->pos[1]))
		buf_adds(&ref, a->pos[1]);
	else
		buf_addf(&ref, "%s/%s", a->pos[0], a->pos[1]);
	json_object_set_str(body, "target", a->pos[2]);
	if (cli_flag_str(a, "version"))
		json_object_set_str(body, "version", cli_flag_str(a, "version"));
	if (cli_env_path(c, ref.data, "/promote", &path, e) == 0 && cli_call(c, "POST", path.data, body, &resp, e) == 0)
		rc = cli_started(c, resp, cli_flag_bool(a, "wait", true), print_promoted, e);
	json_free(resp);
	json_free(body);
	buf_release(&ref);
	buf_release(&path);
	return rc;
}

static const struct cli_flag promote_flags[] = {
	{ "version", 0, CLI_STR, "VER", "healthy version of ENV to promote (default: its current one)" },
	CLI_FLAG_WAIT,
	CLI_FLAG_VERBOSE,
	{ 0 },
};

const struct cli_cmd cli_cmd_promote = {
	.name = "promote", .args = "<project> <env> <target>",
	.summary = "run the gates on a fresh fork of a version; if all pass, the target runs it",
	.notes = "Gates: gate.fork, gate.consistency, gate.replay, gate.invariants, gate.soak\n"
		 "(x-denv.promote in denv-compose(5)); then apply and verdict. A failed gate\n"
		 "leaves the target as it was. The record is the target's data sheet: denv sheet.\n",
	.flags = promote_flags, .min_pos = 3, .max_pos = 3, .run = run_promote,
};

/* ---- sheet ---- */

static void print_compact(const char *label, const struct json *v)
{
	struct buf b = BUF_INIT;

	if (v)
		json_write(&b, v, JSON_COMPACT);
	printf("%-12s %s\n", label, v ? b.data : "none");
	buf_release(&b);
}

static const char *s_or(const struct json *o, const char *key, const char *dflt)
{
	const char *s = json_get_str(o, key);

	return s && *s ? s : dflt;
}

static void print_lines(const struct json *s)
{
	const struct json *env = json_get(s, "environment"), *v = json_get(s, "version");
	const struct json *prot = json_get(s, "protections"), *promo = json_get(s, "promotion");

	printf("%-12s %s (%s) in %s, %s\n", "environment", s_or(env, "name", "?"), s_or(env, "id", "?"),
	       s_or(env, "project", "?"), s_or(env, "status", "?"));
	printf("%-12s %s (number %lld of %s), snapshot %s\n", "version", s_or(v, "id", "?"),
	       (long long)json_get_int(v, "number", 0), s_or(v, "env", "?"), s_or(v, "snapshot", "none"));
	print_compact("images", json_get(s, "images"));
	for (size_t i = 0; i < json_len(json_get(s, "datasets")); i++) {
		const struct json *d = json_at(json_get(s, "datasets"), i);

		printf("%-12s %s: %s\n", i ? "" : "datasets", s_or(d, "volume", "?"),
		       s_or(d, "digest", "not digested yet (recorded at the first promote)"));
	}
	printf("protections\n");
	for (size_t i = 0; i < json_len(prot); i++) {
		const struct json *p = json_at(prot, i);
		struct buf b = BUF_INIT;

		json_write(&b, json_get(p, "evidence"), JSON_COMPACT);
		printf("  %lld %-8s %s: %s\n", (long long)json_get_int(p, "n", 0),
		       json_get_bool(p, "held", false) ? "held" : "NOT held", s_or(p, "name", "?"), b.data);
		buf_release(&b);
	}
	print_compact("caps", json_get(s, "caps"));
	print_compact("egress", json_get(s, "egress"));
	if (!json_get(s, "clock") || json_get(s, "clock")->type == JSON_NULL)
		printf("%-12s real\n", "clock");
	else
		print_compact("clock", json_get(s, "clock"));
	print_compact("verifier", json_get(s, "verifier"));
	if (!promo || promo->type == JSON_NULL) {
		printf("%-12s none: not made by a promote\n", "promotion");
		return;
	}
	printf("%-12s %s\n", "promotion", s_or(promo, "deployment", "?"));
	for (size_t i = 0; i < json_len(json_get(promo, "gates")); i++) {
		const struct json *g = json_at(json_get(promo, "gates"), i);
		struct buf b = BUF_INIT;

		json_write(&b, json_get(g, "evidence"), JSON_COMPACT);
		printf("  %-17s %-8s %s\n", s_or(g, "name", "?"), s_or(g, "status", "?"),
		       *s_or(g, "error", "") ? s_or(g, "error", "") : b.data);
		buf_release(&b);
	}
}

static int run_sheet(struct cli *c, const struct cli_args *a, struct err *e)
{
	struct buf path = BUF_INIT;
	struct json *resp = NULL;
	int rc = -1;

	if (cli_env_path(c, a->pos[0], "/sheet", &path, e) == 0 && cli_call(c, "GET", path.data, NULL, &resp, e) == 0) {
		if (cli_flag_bool(a, "json", false))
			rc = cli_print_json(resp, e);
		else {
			print_lines(json_get(resp, "sheet"));
			rc = fflush(stdout) == 0 ? 0 : err_set(e, "sheet: cannot write the output");
		}
	}
	json_free(resp);
	buf_release(&path);
	return rc;
}

static const struct cli_flag sheet_flags[] = {
	{ "json", 0, CLI_BOOL, NULL, "print the sheet as the API's JSON" },
	{ 0 },
};

const struct cli_cmd cli_cmd_sheet = {
	.name = "sheet", .args = "<env>",
	.summary = "print an environment's data sheet: digests, protections, caps, probe, verifier, gates",
	.flags = sheet_flags, .min_pos = 1, .max_pos = 1, .run = run_sheet,
};
