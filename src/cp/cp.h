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
#define CP_CONTEXT_MAX ((size_t)256 << 20)	/* PUT /v1/contexts/{sha256}: one packed build context */
#define CP_CONTEXT_KEEP_DEFAULT_S (7 * 24 * 3600)	/* -context-keep: an unreferenced context's age at removal */
#define CP_CONTEXT_SWEEP_MS (10 * 60 * 1000)	/* how often stored contexts are swept (DENV_CONTEXT_SWEEP_SEC) */
#define CP_CONTEXT_SWEEP_MAX 256		/* contexts removed per sweep, at most */
#define CP_SHUTDOWN_GRACE_MS 10000		/* SIGINT/SIGTERM: wait for requests in flight */
#define CP_LISTEN_MAX 320			/* -addr HOST:PORT */
#define CP_STANDBY_POLL_MS 500			/* a standby tries for the store's lease this often */
#define CP_STANDBY_RETRY_AFTER_S 1		/* Retry-After on a standby's 503 answers */
#define CP_TAKEOVER_S 5				/* a standby serves within this of the active's death
						 * (one poll plus loading a small store; t/integ/cp-standby-pg.sh) */
#define CP_SESSION_TTL_S (30 * 24 * 3600)	/* dst_ sessions */
#define CP_DEVICE_TTL_S 900			/* device codes, and approved keys held for them */
#define CP_DEVICE_INTERVAL_S 5			/* how often the CLI may poll the token route */
#define CP_DEVICE_MAX 1024			/* device codes alive at once */
#define CP_OAUTH_STATE_TTL_S 600		/* GitHub sign-in state values */
#define CP_OAUTH_STATE_MAX 1024
#define CP_GITHUB_TIMEOUT_MS 15000		/* one call to GitHub during a sign-in */
#define CP_GITHUB_BODY_MAX ((size_t)256 << 10)	/* one of GitHub's answers to those calls */
#define CP_GH_TOKEN_MAX 256			/* an OAuth access token from GitHub */
#define CP_GH_LOGIN_MAX 39			/* GitHub's own limit for a login */
#define CP_GH_NAME_MAX 255			/* a GitHub profile name kept as Name */
#define CP_GH_CODE_MAX 256			/* the ?code= GitHub sends back */
#define CP_GH_JWT_MAX 4096			/* the App's RS256 JWT (a 8192-bit key signs in 1366 chars) */
#define CP_GH_JWT_TTL_S 540			/* the JWT's life: GitHub takes at most ten minutes */
#define CP_GH_JWT_SKEW_S 60			/* its iat this far back, for clocks that drift */
#define CP_GH_TOKEN_MARGIN_S 300		/* an installation token is renewed this long before it expires */
#define CP_GH_TOKENS_MAX 1024			/* installation tokens cached at once */
#define CP_GH_KEY_MAX ((size_t)64 << 10)	/* DENV_GITHUB_APP_PRIVATE_KEY, as text or its file */
#define CP_GH_REDIRECTS_MAX 3			/* hops followed to a repository's tarball */
#define CP_GH_TARBALL_MAX ((size_t)32 << 20)	/* a repository tarball as downloaded (gzip) */
#define CP_GH_UNPACKED_MAX ((uint64_t)512 << 20)	/* the same, inflated: reading stops past it */
#define CP_GH_COMPOSE_MAX ((size_t)1 << 20)	/* the compose file taken from it */
#define CP_GH_TARBALL_TIMEOUT_MS 120000		/* the whole tarball download */
#define CP_GH_REPOS_PAGES_MAX 10		/* GET /v1/github/repos: pages of 100 read at most */
#define CP_GH_REF_MAX 255			/* a branch name, a sha, owner/repo */
#define CP_GH_PER_PAGE 100			/* GitHub's largest page */
#define CP_GH_PUSH_PROJECTS_MAX 64		/* projects one push deploys (more: an error each) */
#define CP_GH_COMPOSE_DEFAULT "docker-compose.yaml"	/* a source's compose path (config.md) */
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

/* The host hub, commands and the orchestrator ([F5]). */
#define CP_HUB_MAX_MESSAGE ((size_t)16 << 20)	/* one frame from a sidecar (protocol.md) */
#define CP_HUB_MAX_QUEUED ((size_t)192 << 20)	/* frames queued to one sidecar: a few 32 MiB archives */
#define CP_HUB_MAX_CONNS 4096			/* host streams at once, admitted or not */
#define CP_HUB_MAX_PENDING 256			/* of those, waiting for their hello (hub.c) */
#define CP_HUB_RETRY_AFTER_S 5			/* Retry-After when every stream slot is a host */
#define CP_HELLO_TIMEOUT_MS 10000		/* a new stream must say hello within this */
#define CP_MAX_CONNS_PER_ADDR_FLAG 65536	/* highest -max-conns-per-addr */
/* File descriptors wanted: both HTTP pools, host streams, the store, children. */
#define CP_MIN_FDS (HTTP_MAX_CONNECTIONS + HTTP_RESERVE_CONNS + CP_HUB_MAX_CONNS + 256)
#define CP_HOST_GRACE_MS 60000			/* no frame for this long: the host is unreachable */
#define CP_COMMAND_TIMEOUT_MS (15 * 60 * 1000)	/* one phase's command (orchestrator CommandTimeout) */
#define CP_EXEC_TIMEOUT_DEFAULT_S 120		/* env.exec without timeout_sec */
#define CP_EXEC_TIMEOUT_MAX_S 86400
#define CP_EXEC_SLACK_MS 10000			/* env.exec waits timeout_sec plus this */
/* Background commands (api_bg.c; the host's limits are denvd's SC_BG_*). */
#define CP_BG_TIMEOUT_MAX_S (7 * 86400)		/* a command's timeout_sec, and its default */
#define CP_BG_READ_MAX ((int64_t)1 << 20)	/* output bytes per stream in one answer */
#define CP_BG_WAIT_MAX_S 600			/* one wait */
#define CP_BG_START_WAIT_S 20			/* the host's word that the command started */
#define CP_PAUSE_TIMEOUT_MS 60000		/* env.pause / env.resume on the host */
#define CP_CMD_LATER_MAX 256			/* frames for a command not yet on its host's stream */
#define CP_WARM_TIMEOUT_S 600			/* the deploy's warm command */
#define CP_WARM_OUTPUT_TAIL 2048		/* bytes of a failed warm's stderr kept in its evidence */
#define CP_WARM_ERROR_LINE 240			/* bytes of its last stderr line in the phase's error */
#define CP_HEALTH_TIMEOUT_S 30			/* `true` after a snapshot */
#define CP_CHUNK_BYTES ((size_t)1 << 20)	/* archive bytes per chunk frame (doc/host-stream-chunks.md) */
#define CP_ARCHIVE_MAX ((size_t)32 << 20)	/* one archive either way */
/* A snapshot moving between hosts (orch_move.c) goes in parts of this much
 * (one snap.read answer, then one snap.write): the control plane's memory per
 * move. A part the target did not take is sent again at most so often. */
#define CP_MOVE_PART_BYTES ((size_t)8 << 20)
#define CP_MOVE_RESENDS_MAX 8
#define CP_RESULT_STORE_MAX ((size_t)256 << 10)	/* a bigger command result is stored as its size only */
#define CP_SANDBOX_TIMEOUT_DEFAULT_S 600	/* POST /v1/sandboxes without timeout_sec */
#define CP_SANDBOX_TIMEOUT_MAX_S 86400
#define CP_OBSERVE_TIMEOUT_MS 30000		/* env.metrics, env.logs (api_observe.c) */
#define CP_LOGS_TAIL_DEFAULT 100		/* GET .../logs without tail */
#define CP_LOGS_TAIL_MAX 100000			/* the host's own cap is SC_LOGS_TAIL_MAX */
#define CP_LOGS_FOLLOW_MS 1000			/* follow=true: how often the host is asked for new lines */
#define CP_LOGS_FOLLOW_TAIL 100000		/* lines asked for per turn after the first */
#define CP_LOGS_FOLLOW_QUEUED ((size_t)4 << 20)	/* a follower this far behind skips a turn */
#define CP_LOGS_STAMP_MAX 64			/* docker's log timestamp, fixed-width RFC 3339 */
#define CP_BATCH_MAX 256			/* members of one POST /v1/sandboxes/batch */
#define CP_BATCH_WAIT_MAX_S 60		/* GET /v1/batches/{id}?wait_sec= */
#define CP_EVENT_SUBS_MAX 1024			/* live event streams at once */
#define CP_EVENT_SUB_QUEUED ((size_t)8 << 20)	/* a stream that falls this far behind is closed */
#define CP_XS_MAX 256				/* streamed execs at once (api_exec_stream.c) */
#define CP_XS_QUEUED ((size_t)4 << 20)		/* output waiting for a slow exec stream client: over it, the stream is dropped */
#define CP_XS_MAX_MESSAGE ((size_t)1 << 20)	/* the client's one message: the command */
#define CP_SHORT_ID 6				/* characters of a ULID used in generated names */
#define CP_PROMOTE_DETAIL_MAX 256		/* one invariant finding, as the data sheet shows it */
#define CP_PROMOTE_CHECK_TIMEOUT_S 120		/* one declared invariant's command */

/* TTLs (ttl.c, denv-cp(8) "TTLs"). */
#define CP_TTL_MAX_S (30 * 24 * 3600)		/* highest idle_ttl_sec and max_ttl_sec */
#define CP_TTL_TICK_MS 1000			/* how often the reaper looks */
#define CP_POOL_TICK_MS 250			/* how often a warm pool is topped up (pool.c) */
#define CP_POOL_FILL_MAX 4			/* deployments one pool starts per tick */
#define CP_POOL_SIZE_MAX 256			/* sandboxes one pool keeps */
#define CP_POOL_BACKOFF_MAX_MS 30000		/* the longest wait after failed fills */
#define CP_POOL_KEY_LEN 16			/* hex digits of the spec's SHA-256 naming a pool */
#define CP_POOL_PROJECT "denv-pool"		/* the team's project pooled sandboxes wait in */
#define CP_TTL_SCAN_MAX 512			/* environment rows it reads per tick */
#define CP_TTL_REAP_MAX 32			/* destroys it starts per tick */
#define CP_TTL_ACTIVITY_WRITE_MS 15000		/* LastActivityAt is written at most this often per environment */
#define CP_TTL_SEEN_MAX 65536			/* environments whose activity is kept in memory */
#define CP_SANDBOX_IDLE_TTL_DEFAULT_S 3600	/* -sandbox-idle-ttl */
#define CP_SANDBOX_MAX_TTL_DEFAULT_S 0		/* -sandbox-max-ttl (0: none) */

/* Quotas and Idempotency-Key (quota.c, idem.c; denv-cp(8)). */
#define CP_QUOTA_FLAG_MAX 1000000		/* highest quota a flag or the route sets */
#define CP_IDEM_KEY_MAX 255			/* bytes of one Idempotency-Key */
#define CP_IDEM_TTL_DEFAULT_S (24 * 3600)	/* -idempotency-ttl */
#define CP_IDEM_TTL_MAX_S (30 * 24 * 3600)
#define CP_IDEM_PER_SCOPE 10000			/* answers kept per team (key) or user (session) */
#define CP_IDEM_BODY_MAX ((size_t)256 << 10)	/* a bigger answer is not kept: a retry runs again */
#define CP_IDEM_SWEEP_MAX 16			/* expired answers deleted per new one */
#define CP_IDEM_RETRY_AFTER "1"			/* Retry-After of the 409 while the first runs */

/* The device-approval page (web_device.c). */
#define CP_WEB_FORM_MAX ((size_t)4096)		/* body of one of its forms */
#define CP_WEB_FIELD_MAX ((size_t)256)		/* one decoded form field */
#define CP_WEB_CODE_MAX 16			/* a user code as typed ("bcdf ghjk", any case) */
#define CP_WEB_TEAMS_MAX 200			/* teams offered in its team selector */

/* Placement across hosts (place_fit.c, lost.c, api_place.c; denv-cp(8),
 * "PLACEMENT"). A service without a cap reserves the UNCAPPED amounts: the
 * sidecar's own defaults are limits, not what such a service uses. CPU is
 * shared, not held, so an uncapped service reserves none (at 0.1 CPU a
 * 2-core host refused its 21st idle box); memory bounds how many fit. */
#define CP_PLACE_UNCAPPED_MILLICPUS 0		/* a service without cpus */
#define CP_PLACE_UNCAPPED_MEMORY_MB 256		/* a service without a memory limit */
#define CP_PLACE_UNCAPPED_DISK_MB 1024		/* an environment without x-denv.disk */
#define CP_PLACE_EVIDENCE_HOSTS 32		/* hosts the place phase's evidence lists */
#define CP_HOST_LOST_MS (5 * 60 * 1000)		/* unreachable this long after LastSeenAt: host and its envs are lost */
#define CP_LOST_TICK_MS 2000			/* how often lost.c looks for such hosts */

/* Provisioning machines (targets.md, "Placement"). */
#define CP_JOIN_WAIT_MS (6 * 60 * 1000)		/* the join phase waits this long for a host */
#define CP_PROVIDER_TIMEOUT_MS 60000		/* one call to a cloud provider's API */
#define CP_MACHINE_DELETE_TRIES 5		/* deletes of a server that never joined, over restarts */
#define CP_PROVIDER_BODY_MAX ((size_t)1 << 20)	/* a provider's answer */
#define CP_DRV_FILES_MAX 256			/* files in one env.put archive to a hosted provider */
#define CP_DRV_HEADERS_MAX 6			/* header lines of one driver call, User-Agent aside */
#define CP_DRV_HEADER_MAX 600			/* one with its value (a token fits) */
#define CP_DRV_URL_MAX 2048			/* one driver call's URL */
#define CP_DRV_ID_MAX 128			/* a provider's sandbox id */
#define CP_DRV_SECRET_MAX 512			/* a sandbox side's token (fits CP_DRV_HEADER_MAX) */
#define CP_PROVIDER_POLL_MS 500			/* between a driver's looks at a sandbox or snapshot */
#define CP_PROVIDER_WAIT_MAX_MS 300000		/* a sandbox's start or a snapshot, at most */
#define CP_USER_DATA_MAX ((size_t)32 << 10)	/* Hetzner's limit for cloud-init user data */
#define CP_HETZNER_API_URL "https://api.hetzner.cloud/v1"
#define CP_E2B_API_URL "https://api.e2b.app"		/* the e2b SDK's default (api.<E2B_DOMAIN>) */
#define CP_DAYTONA_API_URL "https://app.daytona.io/api"	/* the daytona SDK's default */
#define CP_PRIME_API_URL "https://api.primeintellect.ai/api/v1"	/* prime-sandboxes' default base, its /api/v1 */
#define CP_TOKEN_CHECK_TIMEOUT_MS 15000		/* a connect waits this long for the provider */
/* Modal is refused at connect: its sandbox client speaks gRPC to Modal's
 * servers, and this server speaks REST only. */
#define CP_MODAL_REFUSED "modal: not supported: Modal's sandbox API is gRPC-only (its client library speaks " \
	"gRPC to Modal's servers) and denv-cp drives providers over REST; run on your own machines, " \
	"e2b, daytona or prime"
#define CP_HETZNER_SERVER_TYPE "cpx31"		/* config defaults (targets.md) */
#define CP_HETZNER_LOCATION "nbg1"
#define CP_HETZNER_IMAGE "ubuntu-24.04"

/* ---- configuration (flags and environment, see main.c and denv-cp(8)) ---- */

#define CP_PUBLIC_URL_DEFAULT "http://localhost:8080"	/* -public-url when neither it nor DENV_PUBLIC_URL is set */

struct cp_config {
	const char *addr;
	const char *db;			/* a store directory or a postgres:// DSN */
	const char *db_shown;		/* db for messages: a DSN's password as *** */
	const char *files_dir;		/* build contexts: db, or DENV_FILES_DIR with PostgreSQL */
	bool db_repair;
	const char *public_url;		/* no trailing slash */
	bool public_url_given;		/* -public-url or DENV_PUBLIC_URL was set, not the default */
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
	const char *gh_api_url;		/* DENV_GITHUB_API_URL; no trailing slash */
	const char *gh_url;		/* DENV_GITHUB_URL (OAuth pages); no trailing slash */
	const char *releases_dir;
	int64_t host_grace_ms;		/* DENV_HOST_GRACE_SEC (tests); default CP_HOST_GRACE_MS */
	int64_t command_timeout_ms;	/* DENV_COMMAND_TIMEOUT_SEC (tests); default CP_COMMAND_TIMEOUT_MS */
	int64_t join_wait_ms;		/* DENV_JOIN_WAIT_SEC (tests); default CP_JOIN_WAIT_MS */
	int64_t host_lost_ms;		/* DENV_HOST_LOST_SEC; default CP_HOST_LOST_MS */
	int64_t device_ttl_ms;		/* DENV_DEVICE_TTL_SEC (tests); default CP_DEVICE_TTL_S */
	int64_t oauth_ttl_ms;		/* DENV_OAUTH_STATE_TTL_SEC (tests); default CP_OAUTH_STATE_TTL_S */
	const char *hetzner_api_url;	/* DENV_HETZNER_API_URL (tests, proxies); no trailing slash */
	const char *aws_ec2_url;	/* DENV_AWS_EC2_URL: every region's EC2 endpoint (tests); NULL: ec2.<region>.amazonaws.com */
	const char *conns_per_addr;	/* -max-conns-per-addr, DENV_MAX_CONNS_PER_ADDR; NULL: default */
	int max_conns_per_addr;		/* parsed: 0 HTTP_MAX_CONNS_PER_ADDR, -1 no cap */
	const char *e2b_api_url;	/* DENV_E2B_API_URL; likewise */
	const char *e2b_sandbox_url;	/* DENV_E2B_SANDBOX_URL: every sandbox's envd here (tests); NULL: its own host */
	const char *daytona_api_url;	/* DENV_DAYTONA_API_URL; likewise */
	const char *prime_api_url;	/* DENV_PRIME_API_URL; likewise */
	const char *sandbox_idle_ttl;	/* -sandbox-idle-ttl, DENV_SANDBOX_IDLE_TTL; NULL: default */
	const char *sandbox_max_ttl;	/* -sandbox-max-ttl, DENV_SANDBOX_MAX_TTL; likewise */
	int64_t sandbox_idle_ttl_s;	/* parsed; 0 none */
	int64_t sandbox_max_ttl_s;
	const char *quota_flag[3];	/* -max-envs, -max-sandboxes, -max-exec (enum cp_quota_kind) */
	int64_t quota_default[3];	/* parsed: 0 unlimited */
	const char *context_keep;	/* -context-keep, DENV_CONTEXT_KEEP; NULL: default */
	int64_t context_keep_s;		/* parsed; 0 never */
	int64_t context_sweep_ms;	/* DENV_CONTEXT_SWEEP_SEC (tests); default CP_CONTEXT_SWEEP_MS */
	const char *idem_ttl_flag;	/* -idempotency-ttl, DENV_IDEMPOTENCY_TTL */
	int64_t idem_ttl_ms;		/* parsed */
	int64_t idem_max;		/* DENV_IDEMPOTENCY_MAX (tests); default CP_IDEM_PER_SCOPE */
	const char *sandbox_pool;	/* -sandbox-pool, DENV_SANDBOX_POOL: JSON (pool.c); NULL: none */
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
	char browser[65];		/* SHA-256 hex of the denv_oauth cookie it is bound to */
	char *ret;			/* where the browser goes afterwards */
	int64_t expires_ms;
	struct cp_oauth_state *next;
};

struct cp_route;
struct cp_conn;
struct cp_cmd;
struct cp_run;
struct cp_watch;
struct cp_sub;
struct cp_sweep;
struct cp_check;
struct cp_ttl;
struct cp_idem;
struct cp_exec_use;
struct cp_gh_token;
struct cp_gh_call;
struct cp_gh_flow;
struct evp_pkey_st;

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
	struct cp_conn *conns;		/* host streams (hub.c) */
	size_t nconns;
	uint64_t conn_serial;
	struct cp_cmd *cmds;		/* commands waiting for a result (cmd.c) */
	struct cp_run *runs;		/* deployments running (orch.c) */
	struct cp_watch *watches;	/* callers waiting for a deployment to finish */
	struct cp_sub *subs;		/* live event streams (events.c) */
	size_t nsubs;
	struct cp_xs *xstreams;		/* streamed execs (api_exec_stream.c) */
	size_t nxstreams;
	struct http_aclient *aclient;	/* calls to cloud providers, made on first use */
	struct cp_sweep *sweeps;	/* start-up deletes of servers that never joined (orch_place.c) */
	struct cp_check *checks;	/* token checks in flight (token_check.c) */
	struct cp_ttl *ttl;		/* the reaper and recent activity (ttl.c) */
	struct ev_timer context_sweep;	/* removes stored contexts no version names (contexts.c) */
	struct cp_idem *idem;		/* Idempotency-Keys whose first request runs (idem.c) */
	struct cp_exec_use *exec_use;	/* execs in flight per team (quota.c) */
	char listen[CP_LISTEN_MAX];	/* -addr with the port a standby was given (standby.c) */
	struct ev_timer lease_check;	/* is the PostgreSQL lease still ours (standby.c) */
	bool lease_lost;
	struct cp_pool *pools;		/* warm sandbox pools (pool.c) */
	struct ev_timer pool_timer;
	struct evp_pkey_st *gh_key;	/* the GitHub App's private key (gh_app.c) */
	struct cp_gh_token *gh_tokens;	/* installation tokens until they expire */
	size_t ngh_tokens;
	struct cp_gh_call *gh_calls;	/* calls to GitHub as an installation, in flight */
	struct cp_gh_flow *gh_flows;	/* deploys from GitHub being fetched or watched (gh_deploy.c) */
	struct ev_timer lost_timer;	/* marks long-unreachable hosts lost (lost.c) */
	int64_t lost_since_ms;		/* monotonic start: a host gets the whole grace after a restart */
};

/* ---- routing (main.c / cors.c) ---- */

typedef void (*cp_handler_fn)(struct cp *cp, struct http_req *req);

/* Register a route whose handler gets cp; answers under /v1/ and /auth/ get
 * the CORS headers first. -1 on a bad pattern (a bug: main refuses to start). */
int cp_route(struct cp *cp, const char *method, const char *pattern, size_t max_body, cp_handler_fn fn);
/* cp_route with HTTP_ROUTE_* flags (http.h). */
int cp_route_flags(struct cp *cp, const char *method, const char *pattern, size_t max_body, unsigned flags,
		   cp_handler_fn fn);
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
int cp_api_bg(struct cp *cp);		/* background commands */
int cp_api_pause(struct cp *cp);	/* pause, resume */
/* Pause every service of env_id on its host for the TTL reaper (reason goes
 * in the ttl.paused event). 0 once sent, -1 when its host is not connected. */
int cp_pause_env(struct cp *cp, const char *env_id, const char *reason, struct err *e);
int cp_api_ops(struct cp *cp);		/* fork, snapshot, rollback, verify, destroy, exec, files */
int cp_api_sandboxes(struct cp *cp);
int cp_web_device(struct cp *cp);	/* the device-approval page under /app/device/ */
int cp_auth_github(struct cp *cp);	/* GET /auth/github/start and /callback */
int cp_hub_routes(struct cp *cp);	/* GET /v1/hosts/stream */
int cp_api_contexts(struct cp *cp);	/* PUT, GET /v1/contexts/{sha256} (contexts.c) */
/* Remove stored contexts that no version's Spec names and that nobody sent,
 * asked about or deployed for cfg.context_keep_s (0: keep all); how many
 * went. cp_contexts_start sweeps every cfg.context_sweep_ms. */
int cp_contexts_sweep(struct cp *cp, int64_t now_s);
void cp_contexts_start(struct cp *cp);

/* <db>/contexts/<team>/<digest>.tar; -1 when digest is not 64 hex digits. */
int cp_context_path(const struct cp *cp, const char *team_id, const char *digest, char *out, size_t n);
/* For each service of spec with a build: the digest contexts (the deploy's
 * {service: sha256}) names for it, stored for team_id, goes into its build
 * as context_digest and context_bytes. -1 with e ("compose: ...", a 400)
 * when one was not uploaded. */
int cp_contexts_attach(struct cp *cp, const char *team_id, struct json *spec, const struct json *contexts,
		       struct err *e);

/* The device page's side of a sign-in (web_device.c). Whether ret is a
 * return to the page; the signed-in answer (session cookie, then on to
 * ret); and a sign-in that failed, as the page shows it (message, and a
 * link to try again when ret is the page). Each answers req. */
bool cp_web_is_page(const char *ret);
void cp_web_signed_in(struct cp *cp, struct http_req *req, const char *session, const char *ret);
void cp_web_signin_failed(struct cp *cp, struct http_req *req, int status, const char *msg, const char *ret);

/* ---- store (db.c) ---- */

/* Open the store and declare every table and index. */
int cp_db_open(struct cp *cp, struct err *e);
/* On a store without teams: the first team and its key (DENV_BOOTSTRAP_KEY or
 * a new one, printed to stderr once). */
int cp_bootstrap(struct cp *cp, struct err *e);

/* ---- standby (standby.c) ---- */

/* cp_db_open; when another denv-cp holds the PostgreSQL store's lease,
 * stand by on hopts' address (every request 503, Retry-After) until the
 * lease is ours, then close that listener and return 0 with the store
 * open (an -addr on port 0 becomes the standby's port: hopts->listen). -1 and e otherwise (cp->stopping: a signal ended the wait). */
int cp_db_open_or_stand_by(struct cp *cp, struct http_server_opts *hopts, struct err *e);
/* While active on PostgreSQL: stop the loop (cp->lease_lost) once the store
 * says another process took the lease. */
void cp_lease_watch(struct cp *cp);

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

/* The user of a live dst_ session token: 0 with user_id filled, -1 when the
 * token is unknown or expired. */
int cp_session_user(struct cp *cp, const char *token, char user_id[ID_MAX]);
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

/* ---- signing in and the device flow (api_auth.c), shared with web_device.c ---- */

/* Dev sign-in (DENV_DEV_LOGIN=1; the caller checks): find or create the user
 * of email (a first sign-in gets a personal team) and put a new dst_ session
 * into txn; token (CRYPTO_TOKEN_MAX bytes) gets its plaintext. -1 with e,
 * e->code the HTTP status (400 for a bad address). */
int cp_dev_signin(struct cp *cp, struct st_txn *txn, const char *email, const char *name /* may be NULL */,
		  char *token, struct err *e);
/* Put a new dst_ session (CP_SESSION_TTL_S) for user into txn; token
 * (CRYPTO_TOKEN_MAX bytes) gets its plaintext. 0 / -1 with e. */
int cp_session_new(struct st_txn *txn, const char *user_id, char *token, struct err *e);
/* A new secret (prefix_...) into token (of size n) and the row that keeps
 * only its hash: {ID: a new id_prefix id (also in id), Hash, CreatedAt,
 * ExpiresAt: ttl_s from now}. NULL with e in what's words, token wiped. */
struct json *cp_secret_row_new(const char *what, const char *prefix, const char *id_prefix, int64_t ttl_s, char *token,
			       size_t n, char id[ID_MAX], struct err *e);
/* An address a person could have: one @, no spaces or controls, at most CP_EMAIL_MAX. */
bool cp_valid_email(const char *s);

/* GitHub sign-in (auth_github.c): what GitHub's answers say, checked. Each
 * takes an answer's status and body; -1 fills e with the message a person
 * reads and e->code with our status (400 GitHub refused the code, 502
 * GitHub or this server's OAuth app is wrong). */
struct cp_gh_user {
	char id[24];			/* GitHub's numeric user id, in decimal */
	char login[CP_GH_LOGIN_MAX + 1];
	char name[CP_GH_NAME_MAX + 1];	/* "" when unset or too long */
	char email[CP_EMAIL_MAX + 1];	/* "" when private or not an address */
};
/* POST /login/oauth/access_token: the access token into token. */
int cp_gh_token_answer(int status, const char *body, size_t len, char token[CP_GH_TOKEN_MAX], struct err *e);
/* GET /user. */
int cp_gh_user_answer(int status, const char *body, size_t len, struct cp_gh_user *u, struct err *e);
/* GET /user/emails: the primary verified address, else the first verified
 * one, into email; "" when there is none (or the answer is not a list). */
void cp_gh_email_pick(int status, const char *body, size_t len, char email[CP_EMAIL_MAX + 1]);
/* Whether a sign-in may send the browser to ret afterwards: a path of this
 * server, the console, or a loopback URL. */
bool cp_gh_return_allowed(const struct cp *cp, const char *ret);

/* ---- the GitHub App (gh_app.c, gh_tarball.c, gh_deploy.c) ---- */

/* Read DENV_GITHUB_APP_PRIVATE_KEY (PEM text, or the path of a file holding
 * it) when the app is configured. 0, or -1 with e (denv-cp refuses to start). */
int cp_gh_app_start(struct cp *cp, struct err *e);
/* Drop the key, the cached tokens, the calls and flows in flight (exit). */
void cp_gh_app_free(struct cp *cp);
/* The App's JWT, RS256 over {iat: now - skew, exp: now + ttl, iss: app_id}. */
int cp_gh_jwt(struct evp_pkey_st *key, const char *app_id, int64_t now_s, char *out, size_t n, struct err *e);
/* POST /app/installations/{id}/access_tokens's answer: the token and when it
 * expires (unix seconds). -1 with e naming GitHub's message otherwise. */
int cp_gh_install_token_answer(int status, const char *body, size_t len, char token[CP_GH_TOKEN_MAX],
			       int64_t *expires_s, struct err *e);
/* A call to GitHub's API as an installation: its token (cached, renewed
 * CP_GH_TOKEN_MARGIN_S before it expires), then method path ("/repos/...",
 * under DENV_GITHUB_API_URL) with body (NULL: none). A 301, 302, 303 or 307
 * is followed (CP_GH_REDIRECTS_MAX hops, without the token: a tarball's
 * codeload URL carries its own). fn runs once from the loop: resp for any
 * status of the last hop, else resp NULL and error saying why. */
typedef void (*cp_gh_fn)(struct cp *cp, const struct http_client_resp *resp, const char *error, void *arg);
struct cp_gh_call *cp_gh_call(struct cp *cp, int64_t installation, const char *method, const char *path,
			      const struct json *body, size_t max_body, int timeout_ms, cp_gh_fn fn, void *arg);
/* fn will not be called. NULL is fine. */
void cp_gh_call_cancel(struct cp *cp, struct cp_gh_call *c);
/* "HTTP 404: Not Found" from one of GitHub's answers, for our messages. */
void cp_gh_says(const struct http_client_resp *resp, char *out, size_t n);

/* The file at path (relative to the repository's root) in a GitHub
 * tarball (gzip, every entry under one top directory): into out (at most
 * CP_GH_COMPOSE_MAX). Refused: an archive over CP_GH_UNPACKED_MAX
 * inflated, an entry whose path is absolute or has "..", a path that is a
 * link or goes through one, a missing file. -1 with e then. */
int cp_gh_tarball_file(const void *gz, size_t len, const char *path, struct buf *out, struct err *e);
/* A branch's environment name: every character outside [a-z0-9] as '-'
 * ("feature/x" is "feature-x"), cut to CP_NAME_MAX. */
void cp_gh_branch_env(const char *branch, char out[CP_NAME_MAX + 1]);

/* A deploy of a project from its GitHub source (push or deploy-from-source). */
struct cp_gh_deploy_req {
	const char *team_id, *project_id;
	const char *repo;		/* owner/name */
	int64_t installation;
	const char *branch;		/* "" or NULL: the repository's default branch, asked from GitHub */
	const char *sha;		/* "" or NULL: the branch's head, asked from GitHub */
	const char *env;		/* the environment deployed ("" with branch "": alpha) */
	const char *compose_path;
};
/* The outcome, once: status 202 with resp {deployment, phases, branch, env,
 * sha} (the callee owns it), else the HTTP status and error (a compose file
 * missing or refused, GitHub unreachable: no deployment is made). */
typedef void (*cp_gh_deploy_fn)(struct cp *cp, int status, const struct json *resp, const char *error, void *arg);
/* Start it: the sha, a check run named denv (in progress), the tarball,
 * the compose file, the deployment; when the deployment finishes the check
 * run says success or failure and links to its phase log. The flow runs on
 * without the caller after cp_gh_deploy_forget. */
struct cp_gh_flow *cp_gh_deploy(struct cp *cp, const struct cp_gh_deploy_req *rq, cp_gh_deploy_fn fn, void *arg);
void cp_gh_deploy_forget(struct cp_gh_flow *f);
/* Drop every flow (exit): their check runs stay as GitHub has them. */
void cp_gh_flows_free(struct cp *cp);
struct cp_ttl_req;
/* Deploy spec (taken) as env_name of project pid in txn, creating the
 * environment if the project has none of that name: {deployment, phases,
 * warnings} (api_projects.c, shared with POST /v1/projects/{p}/deploy).
 * params (taken, may be NULL) gets spec and warm; env_id is the environment's. */
struct json *cp_deploy_put(struct cp *cp, struct st_txn *txn, const char *team_id, const char *pid,
			   const char *env_name, struct json *spec, struct json *warm, const struct cp_ttl_req *ttl,
			   struct json *params, char env_id[ID_MAX]);
/* The device login waiting for user_code as a person typed it (any case,
 * dash optional), or NULL when it is unknown or expired. */
struct cp_device *cp_device_find(struct cp *cp, const char *user_code);
/* An approval made ready to commit: txn holds the new key; commit it, and
 * call done(cp, ok, done_arg) from the commit's callback before answering
 * (it hands the key to the waiting CLI). */
struct cp_approval {
	struct st_txn *txn;
	char key_id[ID_MAX];
	void (*done)(struct cp *cp, bool ok, void *arg);
	void *done_arg;
};
/* Check that user_id may approve code for team_id and mint its key (name
 * NULL or "": "cli"). 0 with out filled, or -1 with e, e->code the HTTP
 * status: 404 unknown or expired, 409 already approved, 403 not a member. */
int cp_device_approve(struct cp *cp, const char *user_id, const char *code, const char *team_id, const char *name,
		      struct cp_approval *out, struct err *e);

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
/* Merge fields (an object, taken) into a copy of table/id and commit it
 * quietly. -1 if the row is absent. */
int cp_update(struct cp *cp, const char *table, const char *id, struct json *fields);
/* {k1: v1, k2: v2, ...}: pairs of (const char *, struct json * taken), NULL-ended. */
struct json *cp_obj(const char *key, ...);
/* ingress_names.c: {service: "https://<service>--<env>.<domain>[:port]"} for
 * the services with a first port in endpoints, when host_id's hello named
 * an ingress domain; else NULL. A service without a name goes into unnamed
 * (when given) with the reason. */
struct json *cp_ingress_names(struct cp *cp, const char *host_id, const char *env_id, const struct json *endpoints,
			      struct json *unnamed);
/* The host's Capabilities.ingress ({domain, port, issuer}), or NULL. */
const struct json *cp_host_ingress(struct cp *cp, const char *host_id);
/* A new row of a team's table: {"ID": a new id with prefix (also into id),
 * "TeamID": team_id}; the caller adds the rest. */
struct json *cp_row_new(const char *prefix, const char *team_id, char id[ID_MAX]);
/* Answer {key: v} (v taken). */
void cp_reply_with(struct http_req *req, int status, const char *key, struct json *v);

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
/* 0 when value is such a name; -1 after answering 400 "<field> must be ...". */
int cp_name_ok(struct http_req *req, const char *field, const char *value);

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
/* The caller's environment of the {env} path, not destroyed (409), its use
 * counted as activity (ttl.c); NULL after answering. */
const struct json *cp_live_env(struct cp *cp, struct http_req *req, struct cp_caller *who);
/* The connected host of env; NULL after answering 502. */
const char *cp_env_host(struct cp *cp, struct http_req *req, const struct json *env);

/* ---- deployments (deploy.c) ---- */

/* The phase names of a deployment kind, NULL-terminated; NULL for an unknown kind. */
const char *const *cp_phase_names(const char *kind);
/* Put a pending deployment and its pending phases into txn. The returned
 * {deployment, phases} is the reply body (the caller owns it). */
struct json *cp_deployment_create(struct st_txn *txn, const char *team_id, const char *project_id,
				  const char *env_id, const char *kind, struct json *params);
/* The same with VersionID set (snapshot, verify, fork). */
struct json *cp_deployment_create_v(struct st_txn *txn, const char *team_id, const char *project_id,
				    const char *env_id, const char *kind, struct json *params, const char *version_id);
/* The phase row id of seq (1-based) in dep. */
void cp_phase_id(const char *dep_id, int seq, char out[CP_ROW_ID_MAX]);
/* A new version row (not yet put): Number is one past the environment's versions. */
struct json *cp_version_new(struct cp *cp, const struct json *env, const struct json *spec);
/* A short lowercase tail of a fresh ULID for generated names ("sbx-<tail>"). */
void cp_short_name(const char *prefix, char *out, size_t n);
/* {deployment, phases} as stored. */
struct json *cp_deployment_view(struct cp *cp, const struct json *dep);
/* A new environment row (not yet put). */
struct json *cp_env_new(const char *team_id, const char *project_id, const char *name, const char *stage);

/* ---- events (events.c) ---- */

/* Append an event (body taken) to txn, or commit it by itself when txn is
 * NULL, and push it to the team's live streams. */
void cp_event(struct cp *cp, struct st_txn *txn, const char *team_id, const char *subject, const char *kind,
	      struct json *body);
/* An event subject: "env:<id>", "dep:<id>", "host:<id>" or "cmd:<id>". */
bool cp_event_subject_valid(const char *s);
/* Is the valid subject's object (environment, deployment, host, command)
 * one of team_id's? false after answering 404 "<object> not found", exactly
 * as for a missing one: another team's ids are not confirmed to exist. */
bool cp_event_subject_visible(struct cp *cp, struct http_req *req, const char *team_id, const char *subject);
void cp_events_close_all(struct cp *cp);
/* api_exec_stream.c: GET /v1/envs/{env}/exec/stream, and dropping them all at exit. */
int cp_exec_stream_route(struct cp *cp);
void cp_exec_streams_close_all(struct cp *cp);
int cp_events_stream_route(struct cp *cp);

/* ---- host hub (hub.c) ---- */

/* Whether the host can take commands now: a sidecar with an open stream, or a driver host. */
bool cp_host_connected(struct cp *cp, const char *host_id);
/* Whether a host row is a hosted provider's (its cloud is e2b or daytona). */
bool cp_host_is_driver(struct cp *cp, const struct json *host);
/* Send one frame to a connected sidecar. -1 with e when it has no stream or the queue is full. */
int cp_hub_send(struct cp *cp, const char *host_id, const struct json *frame, struct err *e);
/* Start-up: no stream is open, so no sidecar is connected. */
void cp_hub_start(struct cp *cp);
/* Close every stream: 1001 on shutdown; free_all drops them at exit. */
void cp_hub_shutdown(struct cp *cp);
void cp_hub_free_all(struct cp *cp);

/* ---- commands (cmd.c) ---- */

/* A command's result. data: the archive that came in chunk frames, checked
 * against the result's tar_bytes, tar_chunks and tar_sha256 (NULL if none). */
struct cp_result {
	bool ok;
	const char *error;		/* when !ok */
	const struct json *payload;	/* may be NULL */
	const struct buf *data;
};
typedef void (*cp_cmd_fn)(struct cp *cp, const struct cp_result *res, void *arg);

/*
 * Record a command in the store, then (once durable) write it to the host's
 * stream; re-sent with the same id whenever the host reconnects, until a
 * result or timeout_ms. payload is taken; data (taken, may be NULL; may be
 * empty) is an archive sent in chunk frames before the command, described in
 * the payload by tar_bytes, tar_sha256 and tar_chunks. fn is called exactly
 * once, never from inside this call, unless the command is cancelled.
 */
struct cp_cmd *cp_cmd_send(struct cp *cp, const char *host_id, const char *env_id, const char *kind,
			   struct json *payload, struct buf *data, int64_t timeout_ms, cp_cmd_fn fn, void *arg);
/* The command's progress lines also become progress events of subject
 * (a deployment's dep:<id>, so the CLI following it sees a build's output). */
void cp_cmd_progress_also(struct cp_cmd *cmd, const char *subject);
/* A streamed exec's exec.out frames (ws/xframe.h) go to fn with the
 * command's arg as they arrive, until the result or a cancel. */
typedef void (*cp_cmd_out_fn)(struct cp *cp, const struct json *frame, void *arg);
void cp_cmd_on_output(struct cp_cmd *cmd, cp_cmd_out_fn fn);
/* A frame (taken) for the running command (exec.in, exec.resize,
 * exec.kill), given its command_id and host_id: sent at once if the command
 * is on the host's stream, else kept (at most CP_CMD_LATER_MAX) and sent
 * right after it. 0, or -1 (e) when cmd is NULL or the queue is full. */
int cp_cmd_send_frame(struct cp_cmd *cmd, struct json *frame, struct err *e);
/* Forget the caller: the command still runs and its row gets the result. */
void cp_cmd_cancel(struct cp_cmd *cmd);
const char *cp_cmd_id(const struct cp_cmd *cmd);
/* Frames from an admitted host: ack, progress, chunk, exec.out, result. */
void cp_cmd_frame(struct cp *cp, const char *host_id, const char *type, const struct json *frame);
/* The host is back: send its unanswered commands again. */
void cp_cmd_host_up(struct cp *cp, const char *host_id);
/* Start-up: commands left unanswered by a previous run are failed. */
void cp_cmd_recover(struct cp *cp);
void cp_cmd_free_all(struct cp *cp);
/* The archive of an env.get result: chunked data, or payload.tar_b64. */
int cp_result_archive(const struct cp_result *res, struct buf *out, struct err *e);

/* ---- placement (place_fit.c, lost.c, api_place.c) ---- */

enum cp_place_policy {
	CP_PLACE_SPREAD,	/* the host with the largest free share first (the default) */
	CP_PLACE_PACK,		/* the host with the smallest free share that still fits */
};

/* Resources in the units placement counts; CP_CAP_UNKNOWN where a host
 * did not report one (that resource is then not checked). */
#define CP_CAP_UNKNOWN (-1)
struct cp_capacity {
	int64_t millicpus;
	int64_t memory_mb;
	int64_t disk_mb;
};

/* One candidate host: what it has (its report) and what placed
 * environments reserve on it. id points into the caller's storage. */
struct cp_place_host {
	const char *id;
	struct cp_capacity cap, used;
	int64_t live;		/* environments counted in used */
};

/* What an environment with this Spec reserves: each service's cpus and
 * memory cap (or the UNCAPPED amounts), the Spec's disk_mb (or UNCAPPED). */
void cp_place_need(const struct json *spec, struct cp_capacity *need);
/* A host's capacity from its Capabilities (cpus, memory_mb, disk_gb free). */
void cp_place_host_capacity(const struct json *caps, struct cp_capacity *cap);
/* A reservation as stored on an environment row ("Reserved") and back; a
 * missing or malformed one reads as false. */
struct json *cp_capacity_json(const struct cp_capacity *c);
bool cp_capacity_from_json(const struct json *j, struct cp_capacity *c);
void cp_capacity_add(struct cp_capacity *sum, const struct cp_capacity *c);
/* cap minus used per known resource (may be negative); CP_CAP_UNKNOWN stays. */
void cp_place_free(const struct cp_place_host *h, struct cp_capacity *out);
/* Whether need fits in what h has free, on every resource h reported. */
bool cp_place_fits(const struct cp_place_host *h, const struct cp_capacity *need);
/* h's free share in permille: the smallest of free/cap over cpus and
 * memory; a host that reported neither: 1000 / (1 + live). */
int64_t cp_place_share(const struct cp_place_host *h);
/* The index of the host policy picks among those need fits, or -1; ties
 * go to the earlier host. */
int cp_place_choose(const struct cp_place_host *hosts, size_t n, const struct cp_capacity *need,
		    enum cp_place_policy policy);
/* "spread" or "pack"; -1 for anything else. */
int cp_place_policy_parse(const char *s, enum cp_place_policy *out);
const char *cp_place_policy_name(enum cp_place_policy p);

/* lost.c: every CP_LOST_TICK_MS, a sidecar host unreachable for
 * cfg.host_lost_ms becomes lost, and so do its environments (events
 * host.lost, env.lost); cp_lost_host_back gives them back their status when
 * the host reconnects (env.found). */
void cp_lost_start(struct cp *cp);
void cp_lost_stop(struct cp *cp);
void cp_lost_host_back(struct cp *cp, const char *host_id);
/* api_place.c: drain, undrain, the team's placement policy, redeploy. */
int cp_api_place(struct cp *cp);
/* A deploy body's optional "placement" (spread or pack) into params; -1
 * after answering 400. */
int cp_place_param(struct http_req *req, const struct json *body, struct json *params);

/* ---- orchestrator (orch.c, orch_deploy.c, orch_place.c, orch_kinds.c) ---- */

/* Start the environment's oldest pending deployment unless one is running. */
void cp_orch_kick(struct cp *cp, const char *env_id);
/* Start-up: deployments a previous run left running are failed; pending ones start. */
void cp_orch_start(struct cp *cp);
void cp_orch_free_all(struct cp *cp);
/* A host of team_id connected: deploys waiting in their join phase take it. */
void cp_orch_host_up(struct cp *cp, const char *team_id);
/* Call fn once when deployment dep_id finishes (dep is its row). */
typedef void (*cp_watch_fn)(struct cp *cp, const struct json *dep, void *arg);
struct cp_watch *cp_orch_watch(struct cp *cp, const char *dep_id, cp_watch_fn fn, void *arg);
void cp_orch_unwatch(struct cp *cp, struct cp_watch *w);
/* Commit txn (taken), answer req with status and resp, then start the
 * environment's queue. */
void cp_commit_deploy(struct cp *cp, struct st_txn *txn, struct http_req *req, int status, struct json *resp,
		      const char *env_id);

/* A fork of version into a new environment name: puts the environment and a
 * pending fork deployment into txn, returns {deployment, phases}; env_id gets
 * the new id and env_out (may be NULL) a public copy of the environment. */
struct json *cp_fork_create(struct cp *cp, struct st_txn *txn, const char *team_id, const struct json *version,
			    const char *name, char env_id[ID_MAX], struct json **env_out);
/* The same with TTLs: ttl's where given, else base's (cp_fork_create:
 * those of the version's environment). */
struct cp_ttl_req;
struct json *cp_fork_create_ttl(struct cp *cp, struct st_txn *txn, const char *team_id, const struct json *version,
				const char *name, const struct cp_ttl_req *ttl, const struct cp_ttl_req *base,
				char env_id[ID_MAX], struct json **env_out);
/* The same on a pinned host (host_id NULL: placed by where the snapshot
 * is); a host without the snapshot gets it moved there (orch_move.c). */
struct json *cp_fork_create_on(struct cp *cp, struct st_txn *txn, const char *team_id, const struct json *version,
			       const char *name, const struct cp_ttl_req *ttl, const struct cp_ttl_req *base,
			       const char *host_id, char env_id[ID_MAX], struct json **env_out);
/* ---- sandboxes, one or a batch (api_sandboxes.c, api_batch.c) ---- */

/* One sandbox to put into a transaction. */
struct cp_sandbox_new {
	const char *team_id;
	const char *name;
	const struct cp_ttl_req *ttl;	/* the body's; the server's sandbox defaults fill in */
	const char *target;		/* cloud name the deploy is pinned to, or NULL */
	bool spread;			/* place on the connected host with the most room (orch_place.c) */
	const char *pool;		/* a warm pool's key: the row waits for a claim (pool.c); NULL: none */
};
/* The spec an image sandbox with this body runs (caller frees); -1 with e
 * (the message a 400 carries) when the body is bad. */
int cp_sandbox_spec_of(const struct json *body, const char *image, struct json **spec, struct err *e);
/* The image form's spec (caller frees) and project name from body; -1
 * after answering 400. */
int cp_sandbox_image_spec(struct http_req *req, const struct json *body, const char *image, struct json **spec,
			  const char **project);
/* The team's project called name, created in txn when missing; its id in out. */
void cp_sandbox_project(struct cp *cp, struct st_txn *txn, const char *team_id, const char *name, char out[ID_MAX]);
/* An image sandbox's environment and deploy deployment into txn (spec is copied). */
void cp_sandbox_image_put(struct cp *cp, struct st_txn *txn, const struct cp_sandbox_new *n, const struct json *spec,
			  const char *project_id, char env_id[ID_MAX], char dep_id[ID_MAX]);
/* vid when it is a healthy version of team_id, else NULL after answering 400. */
const struct json *cp_sandbox_version(struct cp *cp, struct http_req *req, const char *team_id, const char *vid);
/* A fork sandbox of version v into txn. */
void cp_sandbox_fork_put(struct cp *cp, struct st_txn *txn, const struct cp_sandbox_new *n, const struct json *v,
			 char env_id[ID_MAX], char dep_id[ID_MAX]);
int cp_api_batch(struct cp *cp);	/* POST /v1/sandboxes/batch, GET /v1/batches/{id} */
/* ---- warm pools (pool.c) ---- */
struct cp_pool;
/* What a claim must give the caller, as a fresh image create would. */
struct cp_pool_claim {
	const char *team_id;
	const char *version_id;		/* from_version's, or NULL for the image form */
	const struct json *spec;	/* the image form's (cp_sandbox_spec_of) */
	const char *project;		/* project name, created on demand */
	const char *name;		/* NULL or "": generated */
	const struct cp_ttl_req *ttl;	/* the body's; the server's sandbox defaults fill in */
};
/* Read -sandbox-pool and start topping the pools up; -1 with e on a bad value. */
int cp_pool_start(struct cp *cp, struct err *e);
void cp_pool_free(struct cp *cp);
/* Answer req 201 with a ready pooled sandbox matching c: 1 (answered), 0
 * (none: create fresh), -1 (answered with an error, e.g. a taken name). */
int cp_pool_claim(struct cp *cp, struct http_req *req, const struct cp_pool_claim *c);
/* Keep the forks of a healthy version its spec's pool asks for (x-denv.pool),
 * retiring the pool of an older version of the same environment. */
void cp_pool_version(struct cp *cp, const char *version_id);
/* The caller's team's pools: [{key, image, size, ready, starting, claims, misses, fills, failures}]. */
struct json *cp_pool_view(struct cp *cp, const char *team_id);
int cp_api_pools(struct cp *cp);	/* GET /v1/pools */
int cp_api_observe(struct cp *cp);	/* GET /v1/envs/{env}/metrics, /logs */
/* The route's {env} of the caller's team, not destroyed, without counting
 * as activity; NULL after answering (ttl.c). */
const struct json *cp_team_env(struct cp *cp, struct http_req *req);
/* The connected host of env; NULL after answering 502 (api_ops.c). */
const char *cp_env_host(struct cp *cp, struct http_req *req, const struct json *env);

/* given when valid and free in the project, else a name made from prefix;
 * NULL after answering 400/409. */
const char *cp_new_env_name(struct cp *cp, struct http_req *req, const char *project_id, const char *given,
			    const char *prefix, char *buf, size_t n);

/* ---- promote (promote.c, orch_promote.c, api_promote.c) ---- */

/* gate.invariants' built-in checks: old_spec (what the target runs; NULL
 * for none) against new_spec. Appends {name, ok, detail} per check to
 * checks; returns how many failed. */
int cp_promote_invariants(const struct json *old_spec, const struct json *new_spec, struct json *checks);
/* The caller's environment {env}, not destroyed, its TTL's activity noted
 * (api_ops.c: every route that acts on an environment); NULL after
 * answering 401, 404 or 409. */
const struct json *cp_live_env(struct cp *cp, struct http_req *req, struct cp_caller *who);
/* POST /v1/envs/{env}/promote, GET /v1/envs/{env}/sheet. */
int cp_api_promote(struct cp *cp);

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
/* The hosted provider of a driver host (its cloud's), or NULL for a sidecar. */
const char *cp_host_driver(struct cp *cp, const struct json *host);
/* A new driver host row for a cloud of a hosted provider (not yet put). */
struct json *cp_driver_host_new(const char *team_id, const struct json *cloud);
/* Driver clouds without their one driver host get it now (targets.md,
 * "EnsureDriverHosts"), for GET /v1/targets and placement alike. Returns the
 * transaction (NULL when there is nothing to add); copies of the new rows go
 * to added (may be NULL). */
struct st_txn *cp_ensure_driver_hosts(struct cp *cp, const char *team_id, struct json *added);
/* Where installers download denvd: -denvd-url, relative to -public-url unless absolute. */
void cp_denvd_url(const struct cp *cp, char *out, size_t n);
/* Put a new single-use join token (CP_JOIN_TOKEN_TTL_S) for team and cloud
 * (NULL or "": none) into txn. token gets the plaintext (CRYPTO_TOKEN_MAX
 * bytes; the caller wipes it), id the row id. 0 / -1 with e. */
int cp_join_token_new(struct st_txn *txn, const char *team_id, const char *cloud_id, char *token,
		      size_t token_size, char id[ID_MAX], struct err *e);

/* ---- provisioning machines (cloud_init.c, cloud_machines.c, cloud_hetzner.c, cloud_aws.c) ---- */

/* The cloud-init user data of a provisioned machine (denvd.md, "Provisioned
 * machines"): install the packages, download denvd, join with token. 0 / -1
 * with e when the URLs cannot be carried safely. */
int cp_cloud_init(const struct cp *cp, const char *token, struct buf *out, struct err *e);

/* A machine a cloud created: the provision phase's evidence. */
struct cp_machine {
	char ref[32];			/* the provider's id for it */
	char ip[64];
	char name[CP_NAME_MAX + 1];
};
/* m is NULL when the provider refused or could not be reached; error says why. */
typedef void (*cp_machine_fn)(struct cp *cp, const struct cp_machine *m, const char *error, void *arg);
struct cp_machine_call;
/* Create a server named name through the Hetzner Cloud API with the cloud's
 * config (token, server_type, location, image) and user_data; labels (an
 * object, may be NULL) are attached to it. fn is called once, never from
 * inside this call, unless the call is cancelled. NULL with e if it cannot start. */
struct cp_machine_call *cp_hetzner_create(struct cp *cp, const struct json *config, const char *name,
					  const char *user_data, const struct json *labels, cp_machine_fn fn,
					  void *arg, struct err *e);
/* Delete server ref (the provider's id): fn gets m NULL and error NULL once
 * it is deleted or was already gone (404), else error says why. Same
 * lifetime rules as cp_hetzner_create. */
struct cp_machine_call *cp_hetzner_delete(struct cp *cp, const struct json *config, const char *ref,
					  cp_machine_fn fn, void *arg, struct err *e);
/* Find the server named name: fn gets it as m, or m NULL and error NULL when
 * there is none. Same lifetime rules as cp_hetzner_create. */
struct cp_machine_call *cp_hetzner_find(struct cp *cp, const struct json *config, const char *name,
					cp_machine_fn fn, void *arg, struct err *e);
/* The same three on EC2 (cloud_aws.c) with the cloud's config
 * (access_key_id, secret_access_key, region, instance_type, image_id and the
 * optional subnet_id, security_group_id, key_name): RunInstances tagged
 * with Name and the labels, TerminateInstances (an instance EC2 no longer
 * knows counts as gone), DescribeInstances by tag:Name. */
struct cp_machine_call *cp_aws_create(struct cp *cp, const struct json *config, const char *name,
				      const char *user_data, const struct json *labels, cp_machine_fn fn, void *arg,
				      struct err *e);
struct cp_machine_call *cp_aws_delete(struct cp *cp, const struct json *config, const char *ref, cp_machine_fn fn,
				      void *arg, struct err *e);
struct cp_machine_call *cp_aws_find(struct cp *cp, const struct json *config, const char *name, cp_machine_fn fn,
				    void *arg, struct err *e);
/* A cloud that creates machines (cloud_machines.c): its three calls. */
struct cp_cloud_ops {
	const char *provider;
	struct cp_machine_call *(*create)(struct cp *cp, const struct json *config, const char *name,
					  const char *user_data, const struct json *labels, cp_machine_fn fn,
					  void *arg, struct err *e);
	struct cp_machine_call *(*delete)(struct cp *cp, const struct json *config, const char *ref,
					  cp_machine_fn fn, void *arg, struct err *e);
	struct cp_machine_call *(*find)(struct cp *cp, const struct json *config, const char *name,
					cp_machine_fn fn, void *arg, struct err *e);
};
/* NULL for a provider that creates no machines (manual, e2b, daytona). */
const struct cp_cloud_ops *cp_cloud_ops(const char *provider);
/* Forget a call in flight: fn is not called (the provider may still create or
 * delete the machine). NULL is fine. */
void cp_machine_cancel(struct cp_machine_call *call);
/* The client for calls to providers, made on first use. */
struct http_aclient *cp_aclient(struct cp *cp);

/* ---- hosted provider drivers (driver_e2b.c, driver_daytona.c, driver_prime.c) ---- */

/* A command run by the control plane against a provider. fn gets the
 * outcome once, never from inside the start call: ok with the result payload
 * (and an archive in data for env.get), or the error. */
typedef void (*cp_drv_fn)(struct cp *cp, bool ok, const char *error, const struct json *payload,
			  const struct buf *data, void *arg);
struct cp_drv_op;
/* One file of env.put's archive: its path in the sandbox and its bytes. */
struct cp_drv_file {
	char *path;
	struct buf data;
};
/* The header lines of one provider call, User-Agent aside (cp_drv_header). */
struct cp_drv_headers {
	char line[CP_DRV_HEADERS_MAX][CP_DRV_HEADER_MAX];
	size_t n;
	bool cut;	/* a line did not fit, or there were too many: the call is refused */
};
/* One row of a driver's table: a command kind and the driver's first step for it. */
struct cp_drv_kind {
	const char *kind;
	int step;
};
/* One hosted provider's driver (driver_e2b.c, driver_daytona.c,
 * driver_prime.c): what driver.c needs to start its operations, send their
 * calls and hand the answers back. */
struct cp_drv_provider {
	const char *name;	/* the cloud's Provider, "e2b": the first word of every error */
	const char *title;	/* "E2B", in messages */
	const struct cp_drv_kind *kinds;
	size_t nkinds;
	const char *fork_refused;	/* env.fork's refusal in targets.md's words, or NULL */
	const char *destroy_route;	/* env.destroy: DELETE this and the sandbox id, under the API */
	size_t op_size;		/* the driver's struct, struct cp_drv_op first */
	int64_t exec_default_s, exec_extra_ms;	/* env.exec's calls: cp_drv_exec_timeout_ms */
	/* Start the operation at its first step (data: env.put's archive). */
	void (*begin)(struct cp_drv_op *op, int step, const struct buf *data);
	/* One call to the provider's API (sandbox false) or to the sandbox's own
	 * service (its agent, toolbox or gateway): 0, or -1 after failing op. */
	int (*call)(struct cp_drv_op *op, const char *method, bool sandbox, const char *path, const char *ctype,
		    const void *body, size_t len, size_t max_body);
	/* A 2xx answer to a call (env.destroy's, env.put's and env.get's are driver.c's). */
	void (*answered)(struct cp_drv_op *op, const struct http_client_resp *resp);
	/* env.put's call for one file (cp_drv_put_next). */
	void (*put)(struct cp_drv_op *op, const struct cp_drv_file *f);
};
extern const struct cp_drv_provider cp_drv_e2b, cp_drv_daytona, cp_drv_prime;
/* Who reads an operation's next answer: the driver, or driver.c for the
 * steps it runs itself. */
enum cp_drv_phase { CP_DRV_OWN, CP_DRV_PUTTING, CP_DRV_GETTING };
/* What every driver's operation has, first in the driver's own struct
 * (driver.c runs its life: cp_drv_start, then exactly one cp_drv_done or
 * cp_drv_fail, or a cp_drv_cancel). */
struct cp_drv_op {
	const struct cp_drv_provider *drv;
	struct cp *cp;
	const char *provider;	/* drv->name */
	char env_id[ID_MAX];
	char kind[32];
	char token[256];	/* the cloud's key, wiped at the end */
	char secret[CP_DRV_SECRET_MAX];	/* the sandbox side's own token (envd's, Prime's gateway's), likewise */
	struct json *payload;	/* the command's, a copy */
	int64_t started_ns, timeout_ms;	/* timeout_ms: each call's */
	int64_t deadline_ns;	/* of a wait for a start or a snapshot (cp_drv_wait_begin) */
	struct http_acall *call;	/* the call in flight, cancelled at the end */
	enum cp_drv_phase phase;	/* whose its answer is */
	struct ev_timer timer;	/* completion from the loop; a driver may use it to wait before */
	bool ok;
	char error[ERR_MSG_MAX];
	struct json *result;
	struct buf out;		/* env.get's archive */
	struct cp_drv_file files[CP_DRV_FILES_MAX];	/* env.put's, from cp_drv_put_begin */
	size_t nfiles, next;	/* next: the one cp_drv_put_next sends */
	cp_drv_fn fn;
	void *arg;
};
/* Start kind for env_id on the target of cloud, whose provider is provider.
 * NULL with refused filled when the provider cannot do it (fork, verify: the
 * words of targets.md) or is not a hosted one; fn is then never called.
 * data is env.put's archive (read during the call only). */
struct cp_drv_op *cp_drv_start(const char *provider, struct cp *cp, const struct json *cloud, const char *env_id,
			       const char *kind, const struct json *payload, const struct buf *data, int64_t timeout_ms,
			       cp_drv_fn fn, void *arg, char *refused, size_t n);
/* Drop an operation in flight: fn is not called. NULL is fine. */
void cp_drv_cancel(struct cp_drv_op *op);

/* ---- what the drivers share (driver.c) ---- */

/* Finish from the loop, never from inside the caller's call: fn gets ok and
 * result (owned here), then op is freed. */
void cp_drv_done(struct cp_drv_op *op, bool ok, struct json *result);
/* Finish with "provider: kind: message" (logged). */
void cp_drv_fail(struct cp_drv_op *op, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* kind's step in kinds[0..n), or -1 with refused filled: "provider: kind:
 * not supported on provider yet" (targets.md's words for what a provider
 * lacks). */
int cp_drv_kind_step(const struct cp_drv_kind *kinds, size_t n, const char *provider, const char *kind,
		     char *refused, size_t rn);
/* The per-call timeout of an env.exec: its timeout_sec (dflt_s when absent)
 * plus extra_ms, within timeout_ms when that is set. */
int64_t cp_drv_exec_timeout_ms(const struct json *payload, int64_t dflt_s, int64_t extra_ms, int64_t timeout_ms);
/* The environment's row's Driver object (what the driver keeps there), or NULL. */
const struct json *cp_drv_row(const struct cp_drv_op *op, const char *env_id);
/* op's environment's Driver object, its sandbox_id copied to sandbox; NULL
 * when it has none (its create did not finish), after finishing op:
 * env.destroy succeeds, there being nothing to remove; anything else fails. */
const struct json *cp_drv_sandbox(struct cp_drv_op *op, char *sandbox, size_t n);
/* The one service of env.create's payload, or NULL after failing op: more
 * than one (the provider runs one container per environment), or, with
 * image_for set (what the image is for, in the error), one without an image. */
const struct json *cp_drv_one_service(struct cp_drv_op *op, const char *image_for);
/* body: one multipart/form-data part "file" holding data[0..len), under a
 * boundary (from seed) that the bytes do not contain; ctype (size n) gets
 * the Content-Type to send with it. The providers' upload routes take it. */
void cp_drv_multipart(struct buf *body, char *ctype, size_t n, uint64_t seed, const void *data, size_t len);
/* One header line (printf's fmt) onto hs; hs->cut when it does not fit. */
void cp_drv_header(struct cp_drv_headers *hs, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Send one provider call (method, to the URL printf formats from url_fmt,
 * with hs and a Content-Type of ctype when body is set) as op's call in
 * flight; hs is wiped. A 2xx answer goes to the driver's answered, anything
 * else fails op (an env.destroy's 404 finds the sandbox already gone). -1
 * after cp_drv_fail naming what (the call's short name in the error) when it
 * cannot start: a URL longer than CP_DRV_URL_MAX or a header cut among the
 * reasons. */
int cp_drv_send(struct cp_drv_op *op, const char *method, struct cp_drv_headers *hs, const char *ctype,
		const void *body, size_t len, size_t max_body, const char *what, const char *url_fmt, ...)
	__attribute__((format(printf, 9, 10)));
/* The driver's call with body (NULL: none) as JSON, to the path printf
 * formats; 0, or -1 after failing op (a path too long among the reasons). */
int cp_drv_call_json(struct cp_drv_op *op, const char *method, bool sandbox, const struct json *body,
		     const char *path_fmt, ...) __attribute__((format(printf, 5, 6)));
/* The start of a wait for a sandbox or a snapshot (CP_PROVIDER_WAIT_MAX_MS). */
void cp_drv_wait_begin(struct cp_drv_op *op);
/* what is still in state: look again after CP_PROVIDER_POLL_MS, or fail op
 * once the wait is over. */
void cp_drv_wait_more(struct cp_drv_op *op, const char *what, const char *state, ev_timer_fn look);
/* env.create's (or env.fork's, when forked) sandbox runs: its result, then
 * the argv that starts the service's command in the background; NULL when
 * it has none and op is finished with the result. A caller that runs the
 * argv hands its exit code to cp_drv_command_started. */
struct json *cp_drv_up(struct cp_drv_op *op, bool forked, const char *egress, const char *sandbox);
/* The service's command ended its start with code: op is finished with
 * env.create's result, or failed when the command did not start. */
void cp_drv_command_started(struct cp_drv_op *op, int64_t code);
/* cmd (env.exec's, or a probe's) is a non-empty array of strings, or op failed. */
bool cp_drv_argv_ok(struct cp_drv_op *op, const struct json *cmd);
/* path (initialised by the caller) += route and file percent-encoded ('/' kept). */
void cp_drv_file_route(struct buf *path, const char *route, const char *file);
/* env.get's call, on the sandbox side, to route, the payload's path and tail
 * (NULL: none): op is finished with a tar of the bytes it answers. */
void cp_drv_get(struct cp_drv_op *op, const char *route, const char *tail);
/* env.snapshot is done: the snapshot (the payload's name) taken as how, the
 * provider's own name for it in provider_snapshot (NULL: none). */
void cp_drv_snapshot_done(struct cp_drv_op *op, const char *how, const char *provider_snapshot);
/* A rendered service env ({NAME: value} or ["NAME=value"]) as an object; never NULL. */
struct json *cp_drv_env_object(const struct json *env);
/* The argv that starts a service's command (string or array) detached from
 * the call that runs it; NULL when the service has no command. */
struct json *cp_drv_background_argv(const struct json *command);
/* b as a JSON string, each byte that is not valid UTF-8 as U+FFFD. */
struct json *cp_drv_text(const struct buf *b);
/* "STATUS Text[: the body's message]" in one line, for an error. */
void cp_drv_provider_says(const struct http_client_resp *resp, char *out, size_t n);
/* Split a tar into files under base (up to max; regular files and
 * directories only, provider names the API in the refusal). 0, or -1 with
 * msg; files[0..*nfiles) are filled either way: release them. */
int cp_drv_unpack(const struct buf *tar, const char *base, const char *provider, struct cp_drv_file *files,
		  size_t max, size_t *nfiles, char *msg, size_t n);
void cp_drv_files_release(struct cp_drv_file *files, size_t n);
/* The next of op's files to the driver's put, or op done once all are written. */
void cp_drv_put_next(struct cp_drv_op *op);
/* f as the one multipart/form-data part "file" (cp_drv_multipart), POSTed to
 * the sandbox side's path. */
void cp_drv_put_multipart(struct cp_drv_op *op, const struct cp_drv_file *f, const char *path);
/* The argv of a shell that prints what is at target: dir, file, missing
 * (its parent is a directory) or noparent. */
struct json *cp_drv_probe_argv(const char *target);
/* env.put by target (docker cp's rules): files split with base "" are moved
 * where docker cp would put them, given probe, the output of
 * cp_drv_probe_argv. 0, or -1 with msg when docker cp refuses it. */
int cp_drv_place(const char *target, const char *probe, struct cp_drv_file *files, size_t n, char *msg, size_t m);
/* env.put's start: its archive split into files. 0: by path, put them; 1:
 * by target, run cp_drv_probe_argv and hand its answer to cp_drv_probed;
 * -1: op is finished (failed). */
int cp_drv_put_begin(struct cp_drv_op *op, const struct buf *data);
/* The probe's exit code and output: 0, op's files are placed, put them; -1, op failed. */
int cp_drv_probed(struct cp_drv_op *op, int64_t code, const char *out);
/* env.put's result once its n files are written. */
struct json *cp_drv_put_result(const struct cp_drv_op *op, size_t n);
/* out (initialised here) = a tar of one file named path's last part. 0 or -1 with e. */
int cp_drv_tar_one(struct buf *out, const char *path, const void *data, size_t len, struct err *e);

/* ---- token checks at connect (token_check.c) ---- */

/* status 0: the provider accepted the token (error NULL); 400: it refused it;
 * 502: it could not be asked or answered something else. error is the
 * message for the caller ("e2b: token refused (401 Unauthorized: ...)"). */
typedef void (*cp_check_fn)(struct cp *cp, int status, const char *error, void *arg);
/* Whether provider has a token check (hetzner, e2b, daytona). */
bool cp_token_checkable(const char *provider);
/* Try config's token with the provider's cheapest authenticated read. fn is
 * called once, never from inside this call; at shutdown a check still in
 * flight is dropped and arg_free (may be NULL) gets arg instead. NULL with e
 * if the check cannot start, e->code the status to answer: 400 for no token
 * or one no header can carry, 502 for an API base that is not a URL. */
struct cp_check *cp_token_check(struct cp *cp, const char *provider, const struct json *config, cp_check_fn fn,
				void *arg, void (*arg_free)(void *arg), struct err *e);
/* The verdict on a provider's answer outside 2xx to the check what ("GET
 * <url>"): 400 when it refused the token (401, 403), else 502, with the
 * message in out, in the provider's own words where its body has them
 * (Hetzner's {error: {message}}, E2B's {message}, Daytona's {message, error}). */
int cp_token_verdict(const char *provider, const char *what, int status, const char *body, size_t len, char *out,
		     size_t n);
/* Drop every check in flight (shutdown). */
void cp_token_checks_free_all(struct cp *cp);

/* ---- TTLs (ttl.c) ---- */

#define CP_TTL_UNSET INT64_MIN

/* TTL fields of a request body: idle_ttl_sec, max_ttl_sec (CP_TTL_UNSET when
 * absent) and ttl_action (NULL when absent; a view into the body). */
struct cp_ttl_req {
	int64_t idle_s;
	int64_t max_s;
	const char *action;
};
/* 0, or -1 with e (the 400's message) for a value out of range or an action
 * other than destroy (pause says it arrives with pause/resume). */
int cp_ttl_check(const struct cp_ttl_req *t, struct err *e);
/* Read and check them; -1 after answering 400. */
int cp_ttl_read(struct http_req *req, const struct json *body, struct cp_ttl_req *out);
bool cp_ttl_given(const struct cp_ttl_req *t);
/* Set IdleTTLSec, MaxTTLSec, TTLAction on env: t's values where given, else
 * base's (NULL: none), else what env has (0, 0, destroy when nothing). */
void cp_ttl_apply(struct json *env, const struct cp_ttl_req *t, const struct cp_ttl_req *base);
/* The server's defaults for a sandbox (-sandbox-idle-ttl, -sandbox-max-ttl). */
void cp_ttl_sandbox_defaults(const struct cp *cp, struct cp_ttl_req *out);
/* What a fork inherits from its source environment. */
void cp_ttl_source(const struct json *env, struct cp_ttl_req *out);
enum cp_ttl_verdict { CP_TTL_KEEP, CP_TTL_IDLE, CP_TTL_MAX };
/* Is an environment created at created_ms and last active at last_ms due
 * at now_ms (all realtime ms; 0 s is no limit)? reason gets "ttl: idle N s
 * exceeded" or "ttl: max N s reached" ("" to keep). */
enum cp_ttl_verdict cp_ttl_due(int64_t created_ms, int64_t last_ms, int64_t idle_s, int64_t max_s, int64_t now_ms,
			       char *reason, size_t n);
/* Whether activity now should be written, the row holding written_ms. */
bool cp_ttl_write_due(int64_t written_ms, int64_t now_ms);
/* Activity on env_id: resets its idle clock (written at most once per
 * CP_TTL_ACTIVITY_WRITE_MS, from a later turn: row pointers stay valid). */
void cp_ttl_activity(struct cp *cp, const char *env_id);
/* resp.expires_at and resp.idle_expires_at (RFC 3339, or null). */
void cp_ttl_view(struct cp *cp, const struct json *env, struct json *resp);
/* The reaper's timer; cp_ttl_free writes pending activity and stops it. */
void cp_ttl_start(struct cp *cp);
void cp_ttl_free(struct cp *cp);
/* PATCH /v1/envs/{env} (TTL fields) and POST /v1/envs/{env}/touch. */
int cp_api_ttl(struct cp *cp);
/* ---- quotas (quota.c) and Idempotency-Key (idem.c) ---- */

enum cp_quota_kind { CP_QUOTA_ENVS, CP_QUOTA_SANDBOXES, CP_QUOTA_EXEC };
#define CP_QUOTA_KINDS 3

/* Parse the quota flags and -idempotency-ttl in c; -1 after printing why. */
int cp_policy_config(struct cp_config *c);
/* Room for one more of kind (environments, sandboxes) in team_id: 0, or -1
 * after answering 429 "quota exceeded: <what> <use> of <limit> (<source>)". */
int cp_quota_check(struct cp *cp, struct http_req *req, const char *team_id, enum cp_quota_kind kind);
/* Room for n more at once (a batch); the 429 adds ", <n> more asked". */
int cp_quota_check_n(struct cp *cp, struct http_req *req, const char *team_id, enum cp_quota_kind kind,
		     int64_t n);
/* Take one of team_id's exec slots (0), or answer 429 (-1). Every take is
 * matched by one put when the command ends, however it ends. */
int cp_quota_exec_take(struct cp *cp, struct http_req *req, const char *team_id);
void cp_quota_exec_put(struct cp *cp, const char *team_id);
/* Execs of team_id in flight now. */
int64_t cp_quota_exec_use(struct cp *cp, const char *team_id);
void cp_quota_free_all(struct cp *cp);
int cp_api_quotas(struct cp *cp);	/* GET, PUT /v1/teams/{team}/quotas */

/* Before a handler: a POST with Idempotency-Key is answered from the stored
 * first answer (1), refused (1: 400, 409, 422), or let through with its
 * answer recorded before it goes out (0). */
int cp_idem_begin(struct cp *cp, struct http_req *req);
/* Start-up: delete stored answers past their time. */
void cp_idem_sweep(struct cp *cp);
void cp_idem_free_all(struct cp *cp);

/* Servers the provision phase created that never joined (orch_place.c;
 * denv-cp(8), "Provisioned servers that never join"): at start-up, delete
 * those of a deployment that ended without success or whose join token
 * expired. */
void cp_orch_sweep_machines(struct cp *cp);

#endif
