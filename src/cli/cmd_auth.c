/* cmd_auth.c: login (the device flow), whoami, keys. */
#include "cli/cli.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/proc.h"
#include "base/str.h"
#include "json/json.h"

/* ---- login ---- */

/* The console's URLs may be relative to the server. */
static void absolute(const char *server, const char *u, struct buf *out)
{
	if (u && u[0] == '/')
		buf_addf(out, "%s%s", server, u);
	else
		buf_adds(out, u ? u : "");
}

/* xdg-open in the background; the browser may keep it running. */
static pid_t open_browser(const char *url)
{
	const char *argv[] = { "xdg-open", url, NULL };
	struct proc_spec s;
	struct proc p;
	struct err e;

	proc_spec_init(&s, argv);
	s.out.mode = PROC_NULL;
	s.err.mode = PROC_NULL;
	if (proc_spawn(&s, &p, &e) < 0) {
		fprintf(stderr, "denv: could not open a browser (%s); open the URL above yourself\n", e.msg);
		return -1;
	}
	return p.pid;
}

/* Poll /v1/device/token until approved, expired or refused. */
static int poll_token(struct cli *c, const char *device_code, int64_t interval_s, int64_t expires_s,
		      struct json **out, struct err *e)
{
	struct json *body = json_new_object();
	int64_t deadline = clock_now_ms() + expires_s * 1000;
	int rc = -1;

	json_object_set_str(body, "device_code", device_code);
	for (;;) {
		poll(NULL, 0, (int)(interval_s * 1000));
		if (cli_call(c, "POST", "/v1/device/token", body, out, e) == 0) {
			rc = 0;
			break;
		}
		if (e->code == 428 && strstr(e->msg, "slow_down")) {
			interval_s += 5;
		} else if (e->code == 400 && strstr(e->msg, "invalid_device_code")) {
			/* The server forgets a code when it expires (or restarts). */
			err_set(e, "the code expired before it was approved (or denv-cp restarted); "
				   "run denv login again");
			break;
		} else if (e->code != 428) {
			break;
		}
		if (clock_now_ms() >= deadline) {
			err_set(e, "the code expired before it was approved; run denv login again");
			break;
		}
	}
	json_free(body);
	return rc;
}

static int login_save(const struct cli *c, const char *path, const struct json *tok, struct err *e)
{
	const char *key = json_get_str(tok, "api_key");
	const struct json *team = json_get(tok, "team");

	if (!key || !*key)
		return err_set(e, "the server approved the login but sent no key");
	if (cli_config_save(path, c->cfg.server, key, json_get_str(team, "ID"), e) < 0)
		return -1;
	printf("Signed in to team %s. Key saved to %s\n",
	       json_get_str(team, "Name") ? json_get_str(team, "Name") : "?", path);
	return 0;
}

static int run_login(struct cli *c, const struct cli_args *a, struct err *e)
{
	const char *server = cli_flag_str(a, "server");
	struct json *code = NULL, *tok = NULL;
	struct buf uri = BUF_INIT, full = BUF_INIT;
	pid_t browser = -1;
	int rc = CLI_FAIL;

	if (server && *server) {
		free(c->cfg.server);
		c->cfg.server = xstrdup(server);
	}
	/* The device flow is anonymous: no key goes out, old or new. */
	free(c->cfg.api_key);
	c->cfg.api_key = NULL;
	if (!c->cfg.path)
		return err_set(e, "neither XDG_CONFIG_HOME nor HOME is set: nowhere to save the key"), CLI_FAIL;
	if (cli_call(c, "POST", "/v1/device/code", NULL, &code, e) < 0) {
		err_prefix(e, "login to %s", c->cfg.server);
		goto out;
	}
	absolute(c->cfg.server, json_get_str(code, "verification_uri"), &uri);
	absolute(c->cfg.server, json_get_str(code, "verification_uri_complete"), &full);
	/* On stderr, unbuffered: a person must see it even when stdout is a
	 * file or a pipe that nobody reads until the command ends. */
	fprintf(stderr, "To sign in, open %s and enter the code %s\n", uri.data,
		json_get_str(code, "user_code") ? json_get_str(code, "user_code") : "?");
	if (full.len)
		fprintf(stderr, "or open %s\n", full.data);
	fprintf(stderr, "Waiting for approval...\n");
	if (!cli_flag_bool(a, "no-browser", false) && full.len)
		browser = open_browser(full.data);
	if (poll_token(c, json_get_str(code, "device_code") ? json_get_str(code, "device_code") : "",
		       json_get_int(code, "interval", 5) > 0 ? json_get_int(code, "interval", 5) : 5,
		       json_get_int(code, "expires_in", CLI_DEVICE_EXPIRY_S), &tok, e) < 0 ||
	    login_save(c, c->cfg.path, tok, e) < 0)
		goto out;
	rc = CLI_OK;
out:
	if (browser > 0)
		waitpid(browser, NULL, WNOHANG);
	json_free(code);
	json_free(tok);
	buf_release(&uri);
	buf_release(&full);
	return rc;
}

static const struct cli_flag login_flags[] = {
	{ "server", 0, CLI_STR, "URL", "control plane to sign in to (default: DENV_SERVER, the saved server, or " CLI_DEFAULT_SERVER ")" },
	{ "no-browser", 0, CLI_BOOL, NULL, "print the URL only; do not run xdg-open" },
	{ 0 },
};

const struct cli_cmd cli_cmd_login = {
	.name = "login", .summary = "sign in with the device flow and save a team API key",
	.flags = login_flags, .max_pos = 0, .no_auth = true, .run = run_login,
};

/* ---- whoami ---- */

static int run_whoami(struct cli *c, const struct cli_args *a, struct err *e)
{
	return cli_get_print(c, "/v1/me", e);
}

const struct cli_cmd cli_cmd_whoami = {
	.name = "whoami", .summary = "show the team (and user) the credential belongs to",
	.max_pos = 0, .run = run_whoami,
};

/* ---- keys ---- */

static int run_keys_list(struct cli *c, const struct cli_args *a, struct err *e)
{
	return cli_get_print(c, "/v1/keys", e);
}

static int run_keys_create(struct cli *c, const struct cli_args *a, struct err *e)
{
	struct json *body = json_new_object();

	if (cli_flag_str(a, "name"))
		json_object_set_str(body, "name", cli_flag_str(a, "name"));
	/* The new key is printed: showing it once is what this command is for. */
	return cli_send_print(c, "POST", "/v1/keys", NULL, NULL, body, e);
}

static int run_keys_revoke(struct cli *c, const struct cli_args *a, struct err *e)
{
	return cli_send_print(c, "DELETE", "/v1/keys/", a->pos[0], NULL, NULL, e);
}

static const struct cli_flag keys_create_flags[] = {
	{ "name", 0, CLI_STR, "NAME", "name of the key (default: key)" },
	{ 0 },
};

static const struct cli_cmd keys_subs[] = {
	{ .name = "list", .summary = "list the team's API keys (never their secret)", .max_pos = 0,
	  .run = run_keys_list },
	{ .name = "create", .summary = "mint a team API key; it is shown once", .flags = keys_create_flags,
	  .max_pos = 0, .run = run_keys_create },
	{ .name = "revoke", .args = "<key-id>", .summary = "revoke a key", .min_pos = 1, .max_pos = 1,
	  .run = run_keys_revoke },
	{ 0 },
};

const struct cli_cmd cli_cmd_keys = {
	.name = "keys", .summary = "list, create and revoke team API keys", .subs = keys_subs,
};
