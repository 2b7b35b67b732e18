/* cmd_project.c: templates, init, project, deploy. */
#include "cli/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/str.h"
#include "base/sys.h"
#include "http/http.h"
#include "json/json.h"

/* Largest compose file we send (the server has its own limit too). */
#define CLI_COMPOSE_MAX ((size_t)4 << 20)

/* ---- templates ---- */

static void templates_path(const char *kind, struct buf *path)
{
	buf_adds(path, "/v1/templates");
	if (kind && *kind) {
		buf_adds(path, "?kind=");
		http_pct_encode(path, kind, "");
	}
}

static int run_templates(struct cli *c, const struct cli_args *a, struct err *e)
{
	struct buf path = BUF_INIT;
	int rc;

	templates_path(cli_flag_str(a, "kind"), &path);
	rc = cli_get_print(c, path.data, e);
	buf_release(&path);
	return rc;
}

static const struct cli_flag templates_flags[] = {
	{ "kind", 0, CLI_STR, "K", "only templates of this kind (rl-environment, agent)" },
	{ 0 },
};

const struct cli_cmd cli_cmd_templates = {
	.name = "templates", .summary = "list the project kinds and the compose templates",
	.flags = templates_flags, .max_pos = 0, .run = run_templates,
};

/* ---- init ---- */

/* The first template whose name or kind is want (any template when NULL). */
static const struct json *pick_template(const struct json *doc, const char *want)
{
	const struct json *list = json_get(doc, "templates");

	for (size_t i = 0; i < json_len(list); i++) {
		const struct json *t = json_at(list, i);

		if (!want || str_eq(json_get_str(t, "name"), want) || str_eq(json_get_str(t, "kind"), want))
			return t;
	}
	return NULL;
}

/* Create out, refusing to replace anything already there. */
static int write_new(const char *out, const char *text, struct err *e)
{
	int fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);

	if (fd < 0 && errno == EEXIST)
		return err_set(e, "%s exists; pass --out to write elsewhere", out);
	if (fd < 0)
		return err_errno(e, "create %s", out);
	if (sys_write_all(fd, text, strlen(text)) < 0 || fsync(fd) < 0) {
		err_errno(e, "write %s", out);
		sys_close(fd);
		unlink(out);
		return -1;
	}
	sys_close(fd);
	return 0;
}

/* --warm splits on whitespace, so only argv without spaces survives it. */
static void print_warm_hint(const struct json *warm, const char *out)
{
	struct buf line = BUF_INIT;
	bool splittable = true;

	for (size_t i = 0; i < json_len(warm); i++) {
		const char *s = json_at(warm, i)->type == JSON_STRING ? json_at(warm, i)->u.str.s : "";

		if (!*s || strpbrk(s, " \t\n\"'\\"))
			splittable = false;
		buf_addf(&line, "%s%s", i ? " " : "", s);
	}
	if (splittable)
		printf("The template has a warm command. Deploy with:\n  denv deploy --project <project> -f %s --warm \"%s\"\n",
		       out, line.data);
	else
		printf("The template has a warm command (x-denv.warm in %s runs it after health):\n  %s\n"
		       "Deploy with:\n  denv deploy --project <project> -f %s\n", out, line.data, out);
	buf_release(&line);
}

static int run_init(struct cli *c, const struct cli_args *a, struct err *e)
{
	const char *out = cli_flag_str(a, "out") ? cli_flag_str(a, "out") : "compose.yaml";
	const char *want = a->npos ? a->pos[0] : NULL;
	const struct json *t;
	struct json *doc = NULL;
	int rc = -1;

	if (fs_exists(out))
		return err_set(e, "%s exists; pass --out to write elsewhere", out);
	if (cli_call(c, "GET", "/v1/templates", NULL, &doc, e) < 0)
		return -1;
	t = pick_template(doc, want);
	if (!t || !json_get_str(t, "compose")) {
		err_set(e, "no template named or of kind \"%s\" (see denv templates)", want ? want : "");
		goto out;
	}
	if (write_new(out, json_get_str(t, "compose"), e) < 0)
		goto out;
	printf("wrote %s from template %s (%s)\n", out, json_get_str(t, "name") ? json_get_str(t, "name") : "?",
	       json_get_str(t, "kind") ? json_get_str(t, "kind") : "?");
	if (json_len(json_get(t, "warm")) > 0)
		print_warm_hint(json_get(t, "warm"), out);
	rc = 0;
out:
	json_free(doc);
	return rc;
}

static const struct cli_flag init_flags[] = {
	{ "out", 0, CLI_STR, "FILE", "where to write the compose file (default compose.yaml)" },
	{ 0 },
};

const struct cli_cmd cli_cmd_init = {
	.name = "init", .args = "[<template-or-kind>]",
	.summary = "write a template's compose file (rl-environment-ops, agent-runtime, or a kind)",
	.flags = init_flags, .max_pos = 1, .run = run_init,
};

/* ---- project ---- */

static int run_project_create(struct cli *c, const struct cli_args *a, struct err *e)
{
	struct json *body = json_new_object();

	json_object_set_str(body, "name", a->pos[0]);
	if (cli_flag_str(a, "kind"))
		json_object_set_str(body, "kind", cli_flag_str(a, "kind"));
	if (cli_flag_str(a, "source"))
		json_object_set_str(body, "source", cli_flag_str(a, "source"));
	return cli_send_print(c, "POST", "/v1/projects", NULL, NULL, body, e);
}

static int run_project_list(struct cli *c, const struct cli_args *a, struct err *e)
{
	return cli_get_print(c, "/v1/projects", e);
}

static int run_project_envs(struct cli *c, const struct cli_args *a, struct err *e)
{
	return cli_send_print(c, "GET", "/v1/projects/", a->pos[0], "/envs", NULL, e);
}

static const struct cli_flag project_create_flags[] = {
	{ "kind", 0, CLI_STR, "K", "rl-environment (default) or agent" },
	{ "source", 0, CLI_STR, "SRC", "where the project comes from, conventionally github:owner/repo" },
	{ 0 },
};

static const struct cli_cmd project_subs[] = {
	{ .name = "create", .args = "<name>", .summary = "create a project and its alpha environment",
	  .flags = project_create_flags, .min_pos = 1, .max_pos = 1, .run = run_project_create },
	{ .name = "list", .summary = "list the team's projects", .max_pos = 0, .run = run_project_list },
	{ .name = "envs", .args = "<project>", .summary = "list a project's environments (name or id)",
	  .min_pos = 1, .max_pos = 1, .run = run_project_envs },
	{ 0 },
};

const struct cli_cmd cli_cmd_project = {
	.name = "project", .summary = "create and list projects and their environments", .subs = project_subs,
};

/* ---- deploy ---- */

/* {env, compose, warm, contexts} from the flags and the compose file; the
 * build contexts it names are packed and uploaded first (pack.c). */
static int deploy_body(struct cli *c, const struct cli_args *a, struct json **out, struct err *e)
{
	const char *file = cli_flag_str(a, "file") ? cli_flag_str(a, "file") : "compose.yaml";
	const char *warm = cli_flag_str(a, "warm");
	struct buf text = BUF_INIT;
	struct json *body;

	if (fs_read_file(file, &text, CLI_COMPOSE_MAX, e) < 0)
		return -1;
	body = json_new_object();
	json_object_set_str(body, "env", cli_flag_str(a, "env") ? cli_flag_str(a, "env") : "alpha");
	json_object_set(body, "compose", json_new_strn(text.data, text.len));
	if (cli_flag_str(a, "placement"))
		json_object_set_str(body, "placement", cli_flag_str(a, "placement"));
	if (warm) {
		size_t n;
		char **argv = str_split(warm, " \t\n", &n);
		struct json *arr = json_new_array();

		for (size_t i = 0; i < n; i++)
			json_array_push(arr, json_new_str(argv[i]));
		str_list_free(argv);
		json_object_set(body, "warm", arr);
	}
	if (cli_pack_contexts(c, file, text.data, text.len, body, e) < 0) {
		json_free(body);
		buf_release(&text);
		return -1;
	}
	buf_release(&text);
	*out = body;
	return 0;
}

static int run_deploy(struct cli *c, const struct cli_args *a, struct err *e)
{
	const char *project = cli_flag_str(a, "project");
	struct json *body = NULL, *resp = NULL;
	struct buf path = BUF_INIT;
	int rc = CLI_FAIL;

	if (!project || !*project)
		return err_set(e, "deploy: --project is required"), CLI_USAGE;
	if (deploy_body(c, a, &body, e) < 0)
		return CLI_FAIL;
	cli_path(&path, "/v1/projects/", project, "/deploy");
	if (cli_call(c, "POST", path.data, body, &resp, e) == 0)
		rc = cli_started(c, resp, cli_flag_bool(a, "wait", true), NULL, e);
	json_free(body);
	json_free(resp);
	buf_release(&path);
	return rc;
}

static const struct cli_flag deploy_flags[] = {
	{ "project", 0, CLI_STR, "P", "project name or id (required)" },
	{ "env", 0, CLI_STR, "NAME", "environment to deploy to (default alpha; created if new)" },
	{ "file", 'f', CLI_STR, "FILE",
	  "compose file (default compose.yaml); build: contexts are packed relative to its directory and uploaded" },
	{ "warm", 0, CLI_STR, "\"CMD ARGS\"", "command run after health, split on whitespace" },
	{ "placement", 0, CLI_STR, "spread|pack", "how a new host is chosen (default: the team's policy)" },
	CLI_FLAG_WAIT,
	CLI_FLAG_VERBOSE,
	{ 0 },
};

const struct cli_cmd cli_cmd_deploy = {
	.name = "deploy", .summary = "deploy a compose file to an environment of a project",
	.flags = deploy_flags, .max_pos = 0, .run = run_deploy,
};
