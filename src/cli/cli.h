/*
 * cli.h: the denv command-line client.
 *
 * Layout (after crun): main.c holds the command table and dispatch; each
 * cmd_*.c holds one command group; args.c parses flags, config.c finds the
 * credential, client.c talks to the REST API, wait.c follows a deployment.
 * Everything but main.c is linked into the unit tests (t/unit/cli-*.c).
 *
 * Exit codes: 0 success, 1 an error (printed as "denv: <message>" on
 * stderr), 2 a usage error (the message, then the command's usage); a
 * command with own_fail (exec) passes its command's code on and uses its
 * own code for both kinds of error (CLI_EXEC_FAIL).
 */
#ifndef DENV_CLI_H
#define DENV_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/buf.h"
#include "base/err.h"

struct json;
struct http_client;

/* ---- limits and defaults ---- */

#define CLI_DEFAULT_SERVER "http://localhost:8080"
#define CLI_MAX_FLAGS 16			/* flags one command declares */
#define CLI_MAX_ARGS 4096			/* command-line words we look at */
#define CLI_HTTP_TIMEOUT_MS (5 * 60 * 1000)	/* per request */
#define CLI_EXEC_SLACK_MS (60 * 1000)		/* exec waits its --timeout plus this */
#define CLI_MAX_RESPONSE ((size_t)256 << 20)	/* largest body we accept (files get) */
#define CLI_FILES_MAX ((size_t)32 << 20)	/* archive limit of PUT /files */
#define CLI_CONTEXT_MAX ((size_t)256 << 20)	/* one packed build context (PUT /v1/contexts) */
#define CLI_POLL_MS 700				/* deployment polling interval */
#define CLI_STREAM_REFRESH_MS 2000		/* re-read a deployment this often even when streaming */
#define CLI_STREAM_DIAL_MS 5000			/* give up on the live stream after this */
#define CLI_EXEC_DEFAULT_TIMEOUT_S 120		/* the server's timeout when exec has no --timeout */
#define CLI_NAME_MAX 64				/* project / environment names */
#define CLI_ID_MAX 128				/* ids we accept or build */
#define CLI_CONFIG_MAX ((size_t)64 << 10)	/* config.json */
#define CLI_CANDIDATES_MAX 8			/* names listed when a bare environment name is unclear */
#define CLI_RESOLVE_PROJECTS_MAX 500		/* projects searched for a bare environment name */
#define CLI_ENV_ID_PREFIX "env_"
#define CLI_DEVICE_EXPIRY_S 900			/* device code lifetime when the server does not say */
#define CLI_WAIT_DETAIL_MAX 200			/* evidence characters on a phase line without -v */
#define CLI_XSTR(x) CLI_STR_(x)
#define CLI_STR_(x) #x

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

/*
 * exec passes the command's exit code through, so its own failures need
 * codes a command rarely uses, as docker run and timeout(1) do: 124 the
 * command ran past its timeout (killed), 125 denv could not run it (usage,
 * credential, unknown environment, host refused: a "denv: " line on stderr).
 */
#define CLI_EXEC_TIMEOUT 124
#define CLI_EXEC_FAIL 125
/* What a command's run returns for a usage error when its other returns
 * are exit codes (cli_cmd.own_fail). */
#define CLI_RUN_USAGE (-2)
/* The terminal on fd's size. 0, or -1 when fd is not a terminal. */
int cli_tty_size(int fd, int *rows, int *cols);
#define CLI_EXEC_NO_STREAM (-3)	/* exec_stream.c: no stream; use the one-shot exec */

/* ---- flags (args.c) ---- */

enum cli_flag_kind { CLI_STR, CLI_BOOL };

struct cli_flag {
	const char *name;	/* long name without dashes: "service" */
	char short_name;	/* 'f' for -f, or 0 */
	enum cli_flag_kind kind;
	const char *metavar;	/* "NAME" in the help; NULL for booleans */
	const char *help;
};

struct cli_args {
	const struct cli_flag *flags;	/* the table parsed against (NULL-name terminated) */
	const char *val[CLI_MAX_FLAGS];	/* value of each flag, NULL when not given */
	int npos;
	const char **pos;		/* positional words (malloc'd array of views into argv) */
	bool help;			/* --help / -h was given */
};

/*
 * Parse argv[0..argc) (the words after the command name) against flags.
 * Flags may come before, between or after positionals: --name v, --name=v,
 * -name v (Go style), -f v for a short name; booleans take no separate value
 * (--wait, --wait=false). "--" ends the flags. When stop_after > 0, the first
 * word that is not a flag once stop_after positionals were seen starts the
 * positional tail: it and every word after it are positionals (exec's argv).
 * 0, or -1 with e (a usage error: unknown flag, missing or bad value).
 * Release with cli_args_release.
 */
int cli_args_parse(const struct cli_flag *flags, int stop_after, int argc, char **argv,
		   struct cli_args *a, struct err *e);
void cli_args_release(struct cli_args *a);
/* A string flag's value, or NULL when it was not given. */
const char *cli_flag_str(const struct cli_args *a, const char *name);
/* A boolean flag's value: def when not given. */
bool cli_flag_bool(const struct cli_args *a, const char *name, bool def);
/* Whether name was given at all. */
bool cli_flag_set(const struct cli_args *a, const char *name);
/* Go's boolean spellings: 1 t T TRUE true True, 0 f F FALSE false False. 0 / -1. */
int cli_parse_bool(const char *s, bool *out);

/* ---- configuration (config.c) ---- */

/* What configuration is read from; tests fill it by hand. NULL = unset. */
struct cli_env {
	const char *flag_server;	/* --server */
	const char *api_key;		/* DENV_API_KEY */
	const char *server;		/* DENV_SERVER */
	const char *xdg_config_home;	/* XDG_CONFIG_HOME */
	const char *home;		/* HOME */
};

struct cli_config {
	char *server;		/* never NULL after cli_config_resolve; no trailing '/' */
	char *api_key;		/* NULL when not signed in */
	char *team;		/* from the file, may be NULL */
	char *path;		/* the config file's path (may not exist); NULL without HOME */
	const char *key_source;	/* "DENV_API_KEY", "config file" or NULL */
};

/* $XDG_CONFIG_HOME/denv/config.json, else $HOME/.config/denv/config.json
 * (a relative XDG_CONFIG_HOME is ignored, as the XDG spec says). */
int cli_config_path(const struct cli_env *env, struct buf *out, struct err *e);
/*
 * Precedence: the key is DENV_API_KEY, else the file's api_key. The server is
 * --server, else DENV_SERVER, else the file's server, else the default. The
 * file is read only when DENV_API_KEY is unset (a key from the environment
 * never pairs with a server saved for another key). A missing file is no
 * error; an unreadable or malformed one is.
 */
int cli_config_resolve(const struct cli_env *env, struct cli_config *cfg, struct err *e);
void cli_config_release(struct cli_config *cfg);
/* Write {server, api_key, team} to path, mode 0600, atomically; creates the
 * directory (0700). */
int cli_config_save(const char *path, const char *server, const char *api_key, const char *team,
		    struct err *e);
/* The exact message for a command run without a credential. */
#define CLI_NOT_SIGNED_IN "not signed in: run `denv login` or set DENV_API_KEY"

/* ---- names (ref.c) ---- */

/*
 * Split an environment reference. "<project>/<env>" gives 1 with both parts
 * copied; anything without '/' gives 0 with nothing copied: an id or a bare
 * name (cli_ref_is_id tells which). -1 with e for
 * a malformed reference ("a/", "/b", "a/b/c", over-long parts).
 */
int cli_ref_split(const char *ref, char *project, size_t psize, char *env, size_t esize, struct err *e);
/* Whether a reference without '/' is an id (env_...) rather than a bare name. */
bool cli_ref_is_id(const char *ref);
/*
 * A bare environment name among envs, a JSON array of environment rows each
 * with a "project" member added (the project's name). Exactly one live
 * environment of that name (Status not "destroyed"; with none live, exactly
 * one destroyed) copies its ID into id. Otherwise -1 with e saying to use
 * <project>/<env> and listing at most CLI_CANDIDATES_MAX candidates: the
 * namesakes when there are several, else the environments there are.
 */
int cli_ref_pick(const char *name, const struct json *envs, char *id, size_t size, struct err *e);

/* ---- the API client (client.c) ---- */

struct cli {
	struct cli_config cfg;
	struct http_client *http;
	bool verbose;		/* the command's -v/--verbose (dispatch.c): whole evidence when following */
	int64_t timeout_ms;	/* per request; 0: CLI_HTTP_TIMEOUT_MS (exec waits longer) */
};

void cli_init(struct cli *c);
void cli_release(struct cli *c);
/* e = CLI_NOT_SIGNED_IN unless a key is configured. */
int cli_need_key(struct cli *c, struct err *e);

/* Append the WebSocket URL of server (http -> ws, https -> wss) and path. */
void cli_ws_url(struct buf *out, const char *server, const char *path);

/*
 * One JSON request: method, path (already escaped, starting with '/'), body
 * (NULL: none). A 2xx answer is parsed into *out (NULL for an empty body;
 * out may be NULL). Any other status is an error with the server's "error"
 * message (or the status and the start of the body). e->code is the status.
 */
int cli_call(struct cli *c, const char *method, const char *path, const struct json *body,
	     struct json **out, struct err *e);
/* The same for raw bodies (files): content_type may be NULL; the response
 * body goes to resp (its cap bounds it). */
int cli_call_raw(struct cli *c, const char *method, const char *path, const char *content_type,
		 const void *body, size_t len, struct buf *resp, struct err *e);
/* Print v indented to stdout. */
int cli_print_json(const struct json *v, struct err *e);
/* GET path and print the answer. */
int cli_get_print(struct cli *c, const char *path, struct err *e);
/* Append prefix, id percent-encoded, and suffix (may be NULL) to out:
 * "/v1/keys/" + "k 1" -> "/v1/keys/k%201". */
void cli_path(struct buf *out, const char *prefix, const char *id, const char *suffix);
/* method on prefix + id + suffix (as cli_path; id NULL: prefix alone) with
 * body (NULL: none; freed here either way), and print the answer. */
int cli_send_print(struct cli *c, const char *method, const char *prefix, const char *id, const char *suffix,
		   struct json *body, struct err *e);
/* Append "/v1/envs/<id><suffix>" to path for the environment ref names
 * (cli_resolve_env). 0 / -1. */
int cli_env_path(struct cli *c, const char *ref, const char *suffix, struct buf *path, struct err *e);
/* Resolve an environment reference to an id: "env_…" is one already,
 * "<project>/<env>" is looked up in the project, a bare name in every
 * project of the team (cli_ref_pick decides). */
int cli_resolve_env(struct cli *c, const char *ref, char *id, size_t size, struct err *e);

/* ---- following a deployment (wait.c) ---- */

/* Tracks the phase statuses already printed. */
struct cli_watch {
	char **status;		/* per phase index, last printed status */
	size_t n;
	bool verbose;		/* evidence whole, not cut at CLI_WAIT_DETAIL_MAX */
};
void cli_watch_release(struct cli_watch *w);
/* Print one line for each phase of doc ({deployment, phases}) whose status
 * changed since the last call: the phase, its status, then its error, else
 * its evidence. A failed phase's stderr (evidence "stderr", or "stdout"
 * when that is empty) follows on lines of its own, and with verbose its
 * whole evidence. Returns the number of phases printed. */
int cli_watch_print(struct cli_watch *w, const struct json *doc, struct buf *out);
/* Sleep ms milliseconds (between polls). */
void cli_sleep_ms(int ms);
/* Whether a deployment status is final. */
bool cli_status_final(const char *status);

/*
 * Follow deployment dep until it ends: live event stream when the server
 * offers it, else GET every CLI_POLL_MS. Prints one line per phase change,
 * then "deployment <id>: <status>". *final (may be NULL) gets the last
 * {deployment, phases} document. 0 when the deployment ended (whatever its
 * status), -1 with e when it could not be followed.
 */
int cli_wait(struct cli *c, const char *dep, struct json **final, struct err *e);
/* After a 202 {deployment, phases}: with wait, follow it and return
 * CLI_FAIL unless it succeeded; without, print the response. extra (may be
 * NULL) runs on the final document before the exit code is decided (verify
 * prints the reward). */
int cli_started(struct cli *c, const struct json *resp, bool wait,
		void (*extra)(const struct json *final), struct err *e);

/* ---- exec (cmd_env.c) ---- */

/* Whether an error of POST /exec (e->code the HTTP status, msg the server's)
 * is the command's timeout, from the host ("env.exec: timed out after N s")
 * or from the control plane waiting for the host ("env.exec timed out"). */
bool cli_exec_timed_out(int status, const char *msg);
/* The command's exit code (0-255) from a {exit_code, ...} answer; -1 with e
 * when the host reported none. */
int cli_exec_code(const struct json *resp, struct err *e);
/* {service, cmd: the positionals after the environment, timeout_sec (when
 * > 0)} from --service (required) and --timeout (a positive number of
 * seconds, also into *timeout_s; 0 when not given). NULL with e, a usage
 * error that starts with verb, when either flag is wrong. */
struct json *cli_exec_body(const struct cli_args *a, const char *verb, int64_t *timeout_s, struct err *e);
/* exec_stream.c: run body ({service, cmd, timeout_sec}) in env_id through the
 * streamed exec, writing its output as it arrives. The command's code (or
 * CLI_EXEC_TIMEOUT with e), -1 with e, or CLI_EXEC_NO_STREAM when the stream
 * could not be opened and nothing ran. */
int cli_exec_stream(struct cli *c, const char *env_id, const struct json *body, int64_t timeout_s, struct err *e);

/* ---- files (cmd_files.c) ---- */

/* Extract a downloaded archive under dir (created if missing) with the safe
 * extraction; *written counts the files and links created. */
/* pack.c: the build contexts of a compose file (text, read from
 * compose_file): each service's build context packed (.dockerignore
 * honoured, at most CLI_CONTEXT_MAX), uploaded unless the server has it,
 * and named in body's "contexts" {service: sha256}. A file that does not
 * parse is left for the server to refuse. */
int cli_pack_contexts(struct cli *c, const char *compose_file, const char *text, size_t len, struct json *body,
		      struct err *e);
/* One service's context into tar (initialised here, capped). */
int cli_pack_context(const char *compose_file, const char *svc, const struct json *build, struct buf *tar,
		     struct err *e);
int cli_files_extract(const void *p, size_t len, const char *dir, uint64_t *written, struct err *e);

/* ---- commands ---- */

struct cli_cmd {
	const char *name;
	const char *args;		/* positional synopsis: "<env> <version>" */
	const char *summary;
	const char *notes;		/* printed after the flags in the usage; may be NULL */
	const struct cli_flag *flags;	/* NULL-name terminated; may be NULL */
	int min_pos, max_pos;		/* max_pos -1: unbounded */
	int stop_after;			/* see cli_args_parse */
	bool no_auth;			/* runs without a credential */
	/* Non-zero: every failure of denv itself, usage errors included, exits
	 * with this code, and run returns an exit code (>= 0) to pass on, -1
	 * for an error, CLI_RUN_USAGE for a usage error (exec: CLI_EXEC_FAIL). */
	int own_fail;
	int (*run)(struct cli *c, const struct cli_args *a, struct err *e);
	const struct cli_cmd *subs;	/* a group: its subcommands (NULL-name terminated) */
};

/* Tables exported by the cmd_*.c files. */
extern const struct cli_cmd cli_cmd_login, cli_cmd_whoami, cli_cmd_keys;
extern const struct cli_cmd cli_cmd_templates, cli_cmd_init, cli_cmd_project, cli_cmd_deploy;
extern const struct cli_cmd cli_cmd_cloud, cli_cmd_host;
extern const struct cli_cmd cli_cmd_env, cli_cmd_fork, cli_cmd_snapshot, cli_cmd_verify,
	cli_cmd_rollback, cli_cmd_redeploy, cli_cmd_exec, cli_cmd_bg, cli_cmd_pause, cli_cmd_resume;
extern const struct cli_cmd cli_cmd_files, cli_cmd_deployment, cli_cmd_events;
extern const struct cli_cmd cli_cmd_quotas;
extern const struct cli_cmd cli_cmd_mcp;	/* cmd_mcp.c */
/* The version `denv version` prints (the VERSION file). */
const char *cli_version(void);
extern const struct cli_cmd cli_cmd_import, cli_cmd_export;
extern const struct cli_cmd cli_cmd_batch, cli_cmd_logs, cli_cmd_metrics;
extern const struct cli_cmd cli_cmd_promote, cli_cmd_sheet;	/* cmd_promote.c */
/* denv top lives in src/tui (linked into bin/denv, not into the unit tests). */
extern const struct cli_cmd cli_cmd_top;

/* The flag every deployment-starting command has. */
#define CLI_FLAG_WAIT { "wait", 0, CLI_BOOL, NULL, "follow the deployment until it ends (default true; --wait=false to return at once)" }
#define CLI_FLAG_VERBOSE { "verbose", 'v', CLI_BOOL, NULL, "while following, print each phase's evidence whole (default: cut at " CLI_XSTR(CLI_WAIT_DETAIL_MAX) " characters)" }

/* Print the usage of cmd (parent: the group it belongs to, or NULL). */
void cli_usage(FILE *f, const struct cli_cmd *parent, const struct cli_cmd *cmd);

/*
 * Run argv (argv[0] is the program) with the given command table and
 * environment lookup: the whole CLI minus process exit. Returns the exit
 * code. getenv_fn is getenv in main, a fake in tests.
 */
int cli_main(const struct cli_cmd *const *table, int argc, char **argv,
	     const char *(*getenv_fn)(const char *));

#endif
