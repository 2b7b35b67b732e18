/*
 * cp.h: denv-cp, the control plane. State shared by the API files, the
 * helpers they all use, and every limit the control plane enforces.
 *
 * One process, one event loop. Handlers read the store directly, build a
 * transaction for what they change, and answer from the commit's done
 * callback (cp_commit_reply) so that nothing is acknowledged before it is
 * durable. Stored rows carry the Go-style field names of the wire contract;
 * a few bookkeeping fields (key and token hashes, TeamID on environments and
 * deployments) are stored too and stripped before a row is shown.
 */
#ifndef DENV_CP_H
#define DENV_CP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/id.h"
#include "http/http.h"
#include "json/json.h"
#include "store/store.h"

/* ---- limits ---- */

#define CP_BODY_JSON ((size_t)1 << 20)		/* ordinary JSON routes */
#define CP_BODY_DEPLOY ((size_t)2 << 20)	/* POST .../deploy: the compose text inside JSON */
#define CP_BODY_WEBHOOK ((size_t)2 << 20)	/* POST /webhooks/github */
#define CP_BODY_FILES ((size_t)32 << 20)	/* PUT /v1/envs/{env}/files ([F5]) */
#define CP_SHUTDOWN_GRACE_MS 10000		/* SIGINT/SIGTERM: wait for requests in flight */
#define CP_SESSION_TTL_S (30 * 24 * 3600)	/* dst_ sessions */
#define CP_DEVICE_TTL_S 900			/* device codes, and approved keys held for them */
#define CP_DEVICE_INTERVAL_S 5			/* how often the CLI may poll the token route */
#define CP_DEVICE_MAX 1024			/* device codes alive at once */
#define CP_OAUTH_STATE_TTL_S 600		/* GitHub sign-in state values */
#define CP_OAUTH_STATE_MAX 1024
#define CP_JOIN_TOKEN_TTL_S 3600		/* djt_ join tokens */
#define CP_EVENTS_MAX 200			/* GET /v1/events answers at most this many */
#define CP_KEY_TOUCH_MS 60000			/* LastUsedAt is written at most this often per key */
#define CP_TOKEN_BYTES 32			/* random bytes in dak_, dst_, djt_, ddc_ tokens */
#define CP_NAME_MAX 63				/* project, environment, cloud and key names */
#define CP_TEAM_NAME_MAX 100
#define CP_EMAIL_MAX 254
#define CP_RELEASE_MAX ((size_t)256 << 20)	/* largest denvd binary served */
#define CP_COMPOSE_PATH_MAX 1024
#define CP_BRANCH_MAX 255
#define CP_ROW_ID_MAX 160			/* composite row ids (member, phase) */

/* ---- configuration (flags and environment, see main.c and denv-cp(8)) ---- */

struct cp_config {
	const char *addr;
	const char *db;
	bool db_repair;
	const char *public_url;		/* no trailing slash */
	const char *denvd_url;
	bool verbose;
	const char *tls_cert;
	const char *tls_key;
	const char *team_name;		/* DENV_TEAM */
	const char *bootstrap_key;	/* DENV_BOOTSTRAP_KEY, may be NULL */
	const char *console_url;	/* DENV_CONSOLE_URL, NULL when unset; no trailing slash */
	bool dev_login;			/* DENV_DEV_LOGIN=1 */
	const char *gh_client_id;	/* GitHub OAuth (console sign-in) */
	const char *gh_client_secret;
	const char *gh_app_id;		/* GitHub App (push to deploy) */
	const char *gh_app_key;
	const char *gh_webhook_secret;
	const char *gh_api_url;
	const char *releases_dir;
};

/* ---- in-memory state that config.md says is not stored ---- */

enum cp_device_state { CP_DEVICE_PENDING, CP_DEVICE_APPROVED, CP_DEVICE_CLAIMED };

/* One CLI login in progress. The device code is kept as its hash only. */
struct cp_device {
	char code_hash[65];
	char user_code[10];		/* "XXXX-XXXX" */
	int64_t expires_ms;		/* realtime */
	enum cp_device_state state;
	char *api_key;			/* plaintext between approval and hand-out, then wiped */
	char team_id[ID_MAX];
	struct cp_device *next;
};

/* A GitHub sign-in between /auth/github/start and the callback. */
struct cp_oauth_state {
	char state[48];
	char *ret;			/* where the browser goes afterwards */
	int64_t expires_ms;
	struct cp_oauth_state *next;
};

struct cp_route;

struct cp {
	struct ev *ev;
	struct http_server *srv;
	struct st_db *db;
	struct cp_config cfg;
	struct cp_device *devices;
	size_t ndevices;
	struct cp_oauth_state *oauth;
	size_t noauth;
	struct cp_route *routes;	/* handler trampolines, freed at exit */
	bool stopping;
};

/* ---- routing (main.c / cors.c) ---- */

typedef void (*cp_handler_fn)(struct cp *cp, struct http_req *req);

/* Register a route whose handler gets cp; answers under /v1/ and /auth/ get
 * the CORS headers first. -1 on a bad pattern (a bug: main refuses to start). */
int cp_route(struct cp *cp, const char *method, const char *pattern, size_t max_body, cp_handler_fn fn);
void cp_routes_free(struct cp *cp);

/* Add CORS headers to req when config.md says so. */
void cp_cors_headers(struct cp *cp, struct http_req *req);
bool cp_cors_path(const char *path);
/* OPTIONS preflights and JSON 404s for unknown /v1/ and /auth/ paths. */
int cp_cors_routes(struct cp *cp);

/* The route groups. Each returns 0, or -1 if a route could not be added. */
int cp_api_auth(struct cp *cp);
int cp_api_teams(struct cp *cp);
int cp_api_projects(struct cp *cp);
int cp_api_envs(struct cp *cp);
int cp_api_events(struct cp *cp);
int cp_api_hosts(struct cp *cp);
int cp_api_misc(struct cp *cp);
int cp_api_github(struct cp *cp);

/* ---- store (db.c) ---- */

/* Open the store and declare every table and index. */
int cp_db_open(struct cp *cp, struct err *e);
/* On a store without teams: the first team and its key (DENV_BOOTSTRAP_KEY or
 * a new one, printed to stderr once). */
int cp_bootstrap(struct cp *cp, struct err *e);

/* ---- authentication (auth.c) ---- */

enum cp_auth_need {
	CP_AUTH_TEAM,	/* an API key, or a session that resolves to a team */
	CP_AUTH_ANY,	/* an API key, or any session (team may be empty) */
	CP_AUTH_USER,	/* a session only (team may be empty) */
};

struct cp_caller {
	char team_id[ID_MAX];	/* "" for a session without a team */
	char user_id[ID_MAX];	/* "" for an API key */
	char key_id[ID_MAX];	/* "" for a session */
};

/* Authenticate req. 0 with who filled, or -1 after answering 401/403. */
int cp_auth(struct cp *cp, struct http_req *req, enum cp_auth_need need, struct cp_caller *who);
/* Whether user is a member of team; role gets the member's role. */
bool cp_is_member(struct cp *cp, const char *team_id, const char *user_id, const char **role);
/* Member row id for team and user. */
void cp_member_id(const char *team_id, const char *user_id, char out[CP_ROW_ID_MAX]);

/* Row builders shared by sign-in, teams and keys (api_auth.c). Both put
 * their rows into txn and return a public copy (the caller owns it). */
struct json *cp_team_create(struct st_txn *txn, const char *name, const char *owner_id /* may be NULL */);
/* A new dak_ key: key gets the plaintext (CRYPTO_TOKEN_MAX bytes); NULL with e on failure. */
struct json *cp_key_create(struct st_txn *txn, const char *team_id, const char *name, const char *created_by,
			   char *key, struct err *e);

/* ---- responding (respond.c) ---- */

/* Answer with v (freed) / with {"error": msg}. */
void cp_reply(struct http_req *req, int status, struct json *v);
void cp_fail(struct http_req *req, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Called from the commit's done callback before the reply; ok is false when the
 * commit is not durable. */
typedef void (*cp_after_fn)(struct cp *cp, bool ok, void *arg);

/* Commit txn; when it is durable answer status with resp, or 500 if it failed.
 * Takes txn and resp in every case. after (may be NULL) runs first. */
void cp_commit_reply(struct cp *cp, struct st_txn *txn, struct http_req *req, int status,
		     struct json *resp, cp_after_fn after, void *after_arg);
/* Commit a write that no reply waits for (LastUsedAt, driver hosts); failures are logged. */
void cp_commit_quiet(struct st_txn *txn, const char *what);

/* The request body as a JSON object (an empty body is {}). -1 after answering 400. */
int cp_body(struct http_req *req, struct json **out);
/* Optional members of a body: absent or null leaves *out as it was (0); the
 * wrong type answers 400 and returns -1. */
int cp_opt_str(struct http_req *req, const struct json *body, const char *key, const char **out);
int cp_opt_bool(struct http_req *req, const struct json *body, const char *key, int *out /* -1 unset */);
int cp_opt_int(struct http_req *req, const struct json *body, const char *key, int64_t *out);
/* A required non-empty string member; -1 after answering 400 "<key> is required". */
int cp_req_str(struct http_req *req, const struct json *body, const char *key, const char **out);

/* Names: 1..CP_NAME_MAX of [A-Za-z0-9._-], starting with a letter or digit. */
bool cp_valid_name(const char *s);

/* Now as RFC 3339 (Go's RFC3339Nano, UTC). */
void cp_now(char out[48]);
struct json *cp_now_json(void);

/* A copy of row without its bookkeeping fields (hashes, TeamID where the
 * contract has none). */
struct json *cp_public(const struct json *row, const char *table);

/* Rows of table where field = value (field NULL: all), as a JSON array of
 * public copies. keep (may be NULL) filters. */
typedef bool (*cp_keep_fn)(const struct json *row, void *arg);
struct json *cp_list(struct cp *cp, const char *table, const char *field, const char *value,
		     bool newest_first, size_t limit, cp_keep_fn keep, void *keep_arg);
/* The first row of table with field = value (indexed) whose member key equals
 * want (key NULL: any). NULL if none. */
const struct json *cp_find(struct cp *cp, const char *table, const char *field, const char *value,
			   const char *key, const char *want);

/* Team-scoped lookups: NULL (after answering 404) when the row is absent or
 * belongs to another team. Projects accept an id or a name. */
const struct json *cp_team_project(struct cp *cp, struct http_req *req, const char *team_id, const char *ref);
const struct json *cp_team_row(struct cp *cp, struct http_req *req, const char *table, const char *team_id,
			       const char *id, const char *what);

/* ---- deployments (deploy.c) ---- */

/* The phase names of a deployment kind, NULL-terminated; NULL for an unknown kind. */
const char *const *cp_phase_names(const char *kind);
/* Put a pending deployment and its pending phases into txn. The returned
 * {deployment, phases} is the reply body (the caller owns it). */
struct json *cp_deployment_create(struct st_txn *txn, const char *team_id, const char *project_id,
				  const char *env_id, const char *kind, struct json *params);
/* {deployment, phases} as stored. */
struct json *cp_deployment_view(struct cp *cp, const struct json *dep);
/* A new environment row (not yet put). */
struct json *cp_env_new(const char *team_id, const char *project_id, const char *name, const char *stage);

/* ---- templates (templates.c) ---- */

struct cp_template {
	const char *name;
	const char *kind;
	const char *description;
	const char *const *requires;	/* NULL-terminated, or NULL */
	const char *compose;
	const char *const *warm;	/* NULL-terminated, or NULL */
};
extern const struct cp_template cp_templates[];
extern const size_t cp_ntemplates;
/* Parse every template with our own compose reader; logs and returns -1 on the first failure. */
int cp_templates_check(void);

/* ---- hosts and clouds (clouds.c) ---- */

/* Capability row of a hosted provider, or NULL. */
struct json *cp_provider_table(const char *provider);
bool cp_provider_is_driver(const char *provider);

#endif
