/* cmd_infra.c: cloud and host (where environments run). */
#include <stdlib.h>

#include "cli/cli.h"

#include "base/buf.h"
#include "base/str.h"
#include "http/http.h"
#include "json/json.h"

/* POST body and print the answer. */
static int post_print(struct cli *c, const char *path, const struct json *body, struct err *e)
{
	struct json *resp = NULL;
	int rc = cli_call(c, "POST", path, body, &resp, e) < 0 ? -1 : cli_print_json(resp, e);

	json_free(resp);
	return rc;
}

/* ---- cloud ---- */

static int run_cloud_connect(struct cli *c, const struct cli_args *a, struct err *e)
{
	static const char *const keys[][2] = {
		{ "token", "token" }, { "server-type", "server_type" }, { "location", "location" },
		{ "access-key-id", "access_key_id" }, { "secret-access-key", "secret_access_key" },
		{ "region", "region" }, { "instance-type", "instance_type" }, { "image-id", "image_id" },
	};
	/* AWS's own variables, as its CLI and SDKs read them: the secret need
	 * not be on a command line, where ps shows it. */
	static const char *const aws_env[][2] = {
		{ "access_key_id", "AWS_ACCESS_KEY_ID" }, { "secret_access_key", "AWS_SECRET_ACCESS_KEY" },
	};
	struct json *body = json_new_object(), *config = json_new_object();
	int rc;

	json_object_set_str(body, "provider", a->pos[0]);
	if (cli_flag_str(a, "name"))
		json_object_set_str(body, "name", cli_flag_str(a, "name"));
	/* Only what was given: the provider fills in its own defaults. */
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (cli_flag_str(a, keys[i][0]))
			json_object_set_str(config, keys[i][1], cli_flag_str(a, keys[i][0]));
	for (size_t i = 0; str_eq(a->pos[0], "aws") && i < sizeof(aws_env) / sizeof(aws_env[0]); i++)
		if (!json_get(config, aws_env[i][0]) && getenv(aws_env[i][1]) && *getenv(aws_env[i][1]))
			json_object_set_str(config, aws_env[i][0], getenv(aws_env[i][1]));
	json_object_set(body, "config", config);
	rc = post_print(c, "/v1/clouds", body, e);
	json_free(body);
	return rc;
}

static int run_cloud_list(struct cli *c, const struct cli_args *a, struct err *e)
{
	return cli_get_print(c, "/v1/clouds", e);
}

static const struct cli_flag cloud_connect_flags[] = {
	{ "name", 0, CLI_STR, "N", "name of the cloud" },
	{ "token", 0, CLI_STR, "T", "the provider's API token (checked by the provider first)" },
	{ "server-type", 0, CLI_STR, "T", "machine type for provisioned hosts (hetzner)" },
	{ "location", 0, CLI_STR, "L", "where provisioned hosts run (hetzner)" },
	{ "access-key-id", 0, CLI_STR, "K", "the key pair's id (aws; else $AWS_ACCESS_KEY_ID)" },
	{ "secret-access-key", 0, CLI_STR, "S", "the key pair's secret (aws; else $AWS_SECRET_ACCESS_KEY)" },
	{ "region", 0, CLI_STR, "R", "where provisioned hosts run (aws; default us-east-1)" },
	{ "instance-type", 0, CLI_STR, "T", "machine type for provisioned hosts (aws; default t3.large)" },
	{ "image-id", 0, CLI_STR, "AMI", "the image provisioned hosts boot (aws; default Ubuntu 24.04)" },
	{ 0 },
};

static const struct cli_cmd cloud_subs[] = {
	{ .name = "connect", .args = "<provider>",
	  .summary = "record a cloud account: manual, hetzner, aws, e2b, daytona or prime",
	  .flags = cloud_connect_flags, .min_pos = 1, .max_pos = 1, .run = run_cloud_connect },
	{ .name = "list", .summary = "list the team's clouds (secrets masked)", .max_pos = 0,
	  .run = run_cloud_list },
	{ 0 },
};

const struct cli_cmd cli_cmd_cloud = {
	.name = "cloud", .summary = "connect and list cloud accounts", .subs = cloud_subs,
};

/* ---- host ---- */

static int run_host_list(struct cli *c, const struct cli_args *a, struct err *e)
{
	return cli_get_print(c, "/v1/hosts", e);
}

static int run_host_join_token(struct cli *c, const struct cli_args *a, struct err *e)
{
	struct json *body = json_new_object();
	int rc = post_print(c, "/v1/join-tokens", body, e);

	json_free(body);
	return rc;
}

/* POST /v1/hosts/{host}/<action> with an empty body and print the host. */
static int host_action(struct cli *c, const char *host, const char *action, struct err *e)
{
	struct json *body = json_new_object();
	struct buf path = BUF_INIT;
	int rc;

	buf_adds(&path, "/v1/hosts/");
	http_pct_encode(&path, host, "");
	buf_addf(&path, "/%s", action);
	rc = post_print(c, path.data, body, e);
	buf_release(&path);
	json_free(body);
	return rc;
}

static int run_host_drain(struct cli *c, const struct cli_args *a, struct err *e)
{
	return host_action(c, a->pos[0], "drain", e);
}

static int run_host_undrain(struct cli *c, const struct cli_args *a, struct err *e)
{
	return host_action(c, a->pos[0], "undrain", e);
}

static const struct cli_cmd host_subs[] = {
	{ .name = "list", .summary = "list the team's hosts and whether each is connected", .max_pos = 0,
	  .run = run_host_list },
	{ .name = "join-token", .summary = "mint a single-use token (1 hour) and the command that joins a host",
	  .max_pos = 0, .run = run_host_join_token },
	{ .name = "drain", .args = "<host>", .summary = "place nothing new on a host; its environments stay",
	  .min_pos = 1, .max_pos = 1, .run = run_host_drain },
	{ .name = "undrain", .args = "<host>", .summary = "let placement use a drained host again",
	  .min_pos = 1, .max_pos = 1, .run = run_host_undrain },
	{ 0 },
};

const struct cli_cmd cli_cmd_host = {
	.name = "host", .summary = "list hosts, mint join tokens, drain and undrain", .subs = host_subs,
};
