/* main.c: denv-cp's flags and environment (config.md, denv-cp(8)), start-up,
 * and graceful shutdown on SIGINT/SIGTERM. */
#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>

#include "base/clock.h"
#include "base/buf.h"
#include "base/ev.h"
#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"

static const char usage_text[] =
	"usage: denv-cp [flags]\n"
	"\n"
	"The denv control plane: REST API, host hub and orchestrator.\n"
	"\n"
	"flags (each falls back to the environment variable shown):\n"
	"  -addr ADDR        listen address (DENV_ADDR; default :8080)\n"
	"  -db DIR|DSN       store directory, or postgres://user@host/db for PostgreSQL\n"
	"                    (DENV_DB, or DENV_DB_HOST and the other DENV_DB_*; default denv.db)\n"
	"                    a second denv-cp on the same PostgreSQL stands by (503) and\n"
	"                    takes over when the active one dies (denv-cp(8), STANDBY)\n"
	"  -db-copy FROM TO  copy every row of one store into another, empty one (each a\n"
	"                    directory or a DSN), check both hold the same, and exit\n"
	"  -db-repair        keep the good part of a corrupt store log, move the rest aside;\n"
	"                    open a log shorter than its mark, saying what is lost\n"
	"  -public-url URL   URL sidecars and browsers use to reach this server\n"
	"                    (DENV_PUBLIC_URL; default http://localhost:8080)\n"
	"  -denvd-url URL    where installers download denvd (DENV_DENVD_URL; default /denvd)\n"
	"  -tls-cert FILE    PEM certificate chain; with -tls-key, serve HTTPS\n"
	"  -tls-key FILE     PEM private key\n"
	"  -max-conns-per-addr N  connections one client address may hold (IPv6: one /64)\n"
	"                    (DENV_MAX_CONNS_PER_ADDR; default 64; 0: no cap, e.g. behind a proxy)\n"
	"  -sandbox-idle-ttl T  a sandbox without activity for T is destroyed: seconds or a\n"
	"                    duration like 30m (DENV_SANDBOX_IDLE_TTL; default 3600; 0: never)\n"
	"  -sandbox-max-ttl T   a sandbox is destroyed T after it was created, active or not\n"
	"                    (DENV_SANDBOX_MAX_TTL; default 0: never)\n"
	"  -max-envs N       live environments per team (DENV_MAX_ENVS; default 0: no limit)\n"
	"  -max-sandboxes N  live sandboxes per team (DENV_MAX_SANDBOXES; default 0: no limit)\n"
	"  -max-exec N       execs in flight per team (DENV_MAX_EXEC; default 0: no limit)\n"
	"                    (a team's own quotas: PUT /v1/teams/{team}/quotas)\n"
	"  -context-keep D   remove a stored build context no version names once unused\n"
	"                    for D: seconds or a duration like 168h (DENV_CONTEXT_KEEP;\n"
	"                    default 7 days; 0: never)\n"
	"  -idempotency-ttl D  how long an Idempotency-Key's answer is kept\n"
	"                    (DENV_IDEMPOTENCY_TTL; default 24h)\n"
	"  -sandbox-pool JSON  keep warm sandboxes: {\"image\":I, \"size\":N, \"team\":T, ...}\n"
	"                    or a list of them, each the body of POST /v1/sandboxes; a create\n"
	"                    with the same spec claims one (DENV_SANDBOX_POOL; default none)\n"
	"  -v                debug logging (one line per request)\n"
	"  -h, --help        this text\n"
	"\n"
	"environment: DENV_TEAM, DENV_BOOTSTRAP_KEY, DENV_CONSOLE_URL, DENV_DEV_LOGIN,\n"
	"DENV_RELEASES_DIR, DENV_GITHUB_CLIENT_ID, DENV_GITHUB_CLIENT_SECRET,\n"
	"DENV_GITHUB_APP_ID, DENV_GITHUB_APP_PRIVATE_KEY, DENV_GITHUB_WEBHOOK_SECRET,\n"
	"DENV_GITHUB_URL, DENV_GITHUB_API_URL, DENV_HETZNER_API_URL, DENV_E2B_API_URL,\n"
	"DENV_E2B_SANDBOX_URL, DENV_DAYTONA_API_URL, DENV_HOST_GRACE_SEC, DENV_COMMAND_TIMEOUT_SEC,\n"
	"DENV_HOST_LOST_SEC, DENV_JOIN_WAIT_SEC, DENV_DEVICE_TTL_SEC, DENV_OAUTH_STATE_TTL_SEC,\n"
	"DENV_SANDBOX_IDLE_TTL, DENV_SANDBOX_MAX_TTL, DENV_SANDBOX_POOL, DENV_CONTEXT_SWEEP_SEC, DENV_DB_HOST, DENV_DB_PORT,\n"
	"DENV_DB_NAME, DENV_DB_USER, DENV_DB_PASSWORD, DENV_DB_SSLMODE, DENV_FILES_DIR.\n"
	"See denv-cp(8).\n";

static const char *env_or(const char *name, const char *fallback)
{
	const char *v = getenv(name);

	return v && *v ? v : fallback;
}

/* A positive number of seconds from the environment, in ms; fallback_ms
 * when unset or not a positive number. Tests shorten waits with these. */
static int64_t seconds_env(const char *name, int64_t fallback_ms)
{
	const char *v = getenv(name);
	int64_t s;

	if (!v || !*v || str_to_i64(v, &s) < 0 || s <= 0 || s > 7 * 24 * 3600)
		return fallback_ms;
	return s * 1000;
}

/* Drop trailing slashes (so "URL" + "/path" joins cleanly); returns a copy. */
static const char *no_trailing_slash(const char *s)
{
	char *c;
	size_t n;

	if (!s)
		return NULL;
	c = xstrdup(s);
	n = strlen(c);
	while (n > 0 && c[n - 1] == '/')
		c[--n] = '\0';
	return c;
}

static void config_from_env(struct cp_config *c)
{
	c->addr = env_or("DENV_ADDR", ":8080");
	c->db = env_or("DENV_DB", NULL);
	c->public_url = env_or("DENV_PUBLIC_URL", NULL);
	c->denvd_url = env_or("DENV_DENVD_URL", "/denvd");
	c->team_name = env_or("DENV_TEAM", "default");
	c->bootstrap_key = env_or("DENV_BOOTSTRAP_KEY", NULL);
	c->console_url = env_or("DENV_CONSOLE_URL", NULL);
	c->dev_login = str_eq(getenv("DENV_DEV_LOGIN"), "1");
	c->gh_client_id = env_or("DENV_GITHUB_CLIENT_ID", NULL);
	c->gh_client_secret = env_or("DENV_GITHUB_CLIENT_SECRET", NULL);
	c->gh_app_id = env_or("DENV_GITHUB_APP_ID", NULL);
	c->gh_app_key = env_or("DENV_GITHUB_APP_PRIVATE_KEY", NULL);
	c->gh_webhook_secret = env_or("DENV_GITHUB_WEBHOOK_SECRET", NULL);
	c->gh_api_url = env_or("DENV_GITHUB_API_URL", "https://api.github.com");
	c->gh_url = env_or("DENV_GITHUB_URL", "https://github.com");
	c->releases_dir = env_or("DENV_RELEASES_DIR", "bin");
	c->host_grace_ms = seconds_env("DENV_HOST_GRACE_SEC", CP_HOST_GRACE_MS);
	c->host_lost_ms = seconds_env("DENV_HOST_LOST_SEC", CP_HOST_LOST_MS);
	c->command_timeout_ms = seconds_env("DENV_COMMAND_TIMEOUT_SEC", CP_COMMAND_TIMEOUT_MS);
	c->join_wait_ms = seconds_env("DENV_JOIN_WAIT_SEC", CP_JOIN_WAIT_MS);
	c->device_ttl_ms = seconds_env("DENV_DEVICE_TTL_SEC", (int64_t)CP_DEVICE_TTL_S * 1000);
	c->oauth_ttl_ms = seconds_env("DENV_OAUTH_STATE_TTL_SEC", (int64_t)CP_OAUTH_STATE_TTL_S * 1000);
	c->hetzner_api_url = env_or("DENV_HETZNER_API_URL", CP_HETZNER_API_URL);
	c->aws_ec2_url = env_or("DENV_AWS_EC2_URL", NULL);
	c->conns_per_addr = env_or("DENV_MAX_CONNS_PER_ADDR", NULL);
	c->e2b_api_url = env_or("DENV_E2B_API_URL", CP_E2B_API_URL);
	c->e2b_sandbox_url = env_or("DENV_E2B_SANDBOX_URL", NULL);
	c->daytona_api_url = env_or("DENV_DAYTONA_API_URL", CP_DAYTONA_API_URL);
	c->prime_api_url = env_or("DENV_PRIME_API_URL", CP_PRIME_API_URL);
	c->sandbox_idle_ttl = env_or("DENV_SANDBOX_IDLE_TTL", NULL);
	c->sandbox_max_ttl = env_or("DENV_SANDBOX_MAX_TTL", NULL);
	c->sandbox_pool = env_or("DENV_SANDBOX_POOL", NULL);
	c->context_keep = env_or("DENV_CONTEXT_KEEP", NULL);
	c->context_sweep_ms = seconds_env("DENV_CONTEXT_SWEEP_SEC", CP_CONTEXT_SWEEP_MS);
}

/* Go-style flags: -name value, -name=value, --name too. Returns 0, 1 (help
 * printed) or -1 (usage error, reported). */
static int parse_flags(int argc, char **argv, struct cp_config *c)
{
	static const struct {
		const char *name;
		size_t off;
	} strs[] = {
		{ "addr", offsetof(struct cp_config, addr) },
		{ "db", offsetof(struct cp_config, db) },
		{ "public-url", offsetof(struct cp_config, public_url) },
		{ "denvd-url", offsetof(struct cp_config, denvd_url) },
		{ "tls-cert", offsetof(struct cp_config, tls_cert) },
		{ "tls-key", offsetof(struct cp_config, tls_key) },
		{ "max-conns-per-addr", offsetof(struct cp_config, conns_per_addr) },
		{ "sandbox-idle-ttl", offsetof(struct cp_config, sandbox_idle_ttl) },
		{ "sandbox-max-ttl", offsetof(struct cp_config, sandbox_max_ttl) },
		{ "max-envs", offsetof(struct cp_config, quota_flag[CP_QUOTA_ENVS]) },
		{ "max-sandboxes", offsetof(struct cp_config, quota_flag[CP_QUOTA_SANDBOXES]) },
		{ "max-exec", offsetof(struct cp_config, quota_flag[CP_QUOTA_EXEC]) },
		{ "idempotency-ttl", offsetof(struct cp_config, idem_ttl_flag) },
		{ "context-keep", offsetof(struct cp_config, context_keep) },
		{ "sandbox-pool", offsetof(struct cp_config, sandbox_pool) },
	};

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = NULL;
		char name[64];
		size_t n;
		bool done = false;

		if (a[0] != '-' || !a[1]) {
			fprintf(stderr, "denv-cp: unexpected argument %s\n%s", a, usage_text);
			return -1;
		}
		a += a[1] == '-' ? 2 : 1;
		n = strcspn(a, "=");
		if (n >= sizeof(name)) {
			fprintf(stderr, "denv-cp: unknown flag %s\n%s", argv[i], usage_text);
			return -1;
		}
		memcpy(name, a, n);
		name[n] = '\0';
		if (a[n] == '=')
			val = a + n + 1;
		if (str_eq(name, "h") || str_eq(name, "help")) {
			fputs(usage_text, stdout);
			return 1;
		}
		if (str_eq(name, "v") || str_eq(name, "db-repair")) {
			bool on = !val || str_eq(val, "true") || str_eq(val, "1");

			*(str_eq(name, "v") ? &c->verbose : &c->db_repair) = on;
			continue;
		}
		for (size_t k = 0; k < sizeof(strs) / sizeof(strs[0]) && !done; k++) {
			if (!str_eq(name, strs[k].name))
				continue;
			if (!val && i + 1 >= argc) {
				fprintf(stderr, "denv-cp: flag needs an argument: -%s\n%s", name, usage_text);
				return -1;
			}
			*(const char **)((char *)c + strs[k].off) = val ? val : argv[++i];
			done = true;
		}
		if (!done) {
			fprintf(stderr, "denv-cp: unknown flag -%s\n%s", name, usage_text);
			return -1;
		}
	}
	return 0;
}

/* A TTL flag: whole seconds or a Go duration, 0 to CP_TTL_MAX_S; def when unset. */
static int ttl_flag(const char *name, const char *v, int64_t def, int64_t *out)
{
	int64_t n;

	*out = def;
	if (!v)
		return 0;
	if (str_to_i64(v, &n) < 0)
		n = clock_parse_duration(v, &n) == 0 ? n / 1000 : -1;
	if (n >= 0 && n <= CP_TTL_MAX_S) {
		*out = n;
		return 0;
	}
	fprintf(stderr, "denv-cp: -%s: want seconds or a duration (30m), 0 (never) to %d s, not %s\n", name,
		CP_TTL_MAX_S, v);
	return -1;
}

/* config.md: with DENV_DB unset and DENV_DB_HOST set, the DSN is built
 * from the DENV_DB_* variables (a host starting with / is a socket
 * directory). */
static const char *dsn_from_env(void)
{
	const char *pw = env_or("DENV_DB_PASSWORD", NULL);
	struct buf b = BUF_INIT;

	buf_adds(&b, "postgresql://");
	http_pct_encode(&b, env_or("DENV_DB_USER", "denv"), "");
	if (pw) {
		buf_addch(&b, ':');
		http_pct_encode(&b, pw, "");
	}
	buf_addch(&b, '@');
	http_pct_encode(&b, getenv("DENV_DB_HOST"), "");
	buf_addch(&b, ':');
	http_pct_encode(&b, env_or("DENV_DB_PORT", "5432"), "");
	buf_addch(&b, '/');
	http_pct_encode(&b, env_or("DENV_DB_NAME", "denv"), "");
	buf_adds(&b, "?sslmode=");
	http_pct_encode(&b, env_or("DENV_DB_SSLMODE", "require"), "");
	return buf_detach(&b, NULL);
}

static int check_db(struct cp_config *c)
{
	if (!c->db && getenv("DENV_DB_HOST") && *getenv("DENV_DB_HOST"))
		c->db = dsn_from_env();
	if (!c->db)
		c->db = "denv.db";
	c->db_shown = st_display_name(c->db);
	c->files_dir = c->db;
	if (st_is_remote(c->db))
		c->files_dir = env_or("DENV_FILES_DIR", "denv.files");
	if (c->bootstrap_key && !str_has_prefix(c->bootstrap_key, "dak_")) {
		fprintf(stderr, "denv-cp: DENV_BOOTSTRAP_KEY must start with dak_\n");
		return -1;
	}
	if (!c->tls_cert != !c->tls_key) {
		fprintf(stderr, "denv-cp: -tls-cert and -tls-key go together\n");
		return -1;
	}
	if (c->conns_per_addr) {
		int n;

		if (str_to_int(c->conns_per_addr, &n) < 0 || n < 0 || n > CP_MAX_CONNS_PER_ADDR_FLAG) {
			fprintf(stderr, "denv-cp: -max-conns-per-addr: want a number from 0 (no cap) to %d, not %s\n",
				CP_MAX_CONNS_PER_ADDR_FLAG, c->conns_per_addr);
			return -1;
		}
		c->max_conns_per_addr = n ? n : -1;
	}
	if (ttl_flag("sandbox-idle-ttl", c->sandbox_idle_ttl, CP_SANDBOX_IDLE_TTL_DEFAULT_S, &c->sandbox_idle_ttl_s) < 0 ||
	    ttl_flag("sandbox-max-ttl", c->sandbox_max_ttl, CP_SANDBOX_MAX_TTL_DEFAULT_S, &c->sandbox_max_ttl_s) < 0 ||
	    ttl_flag("context-keep", c->context_keep, CP_CONTEXT_KEEP_DEFAULT_S, &c->context_keep_s) < 0)
		return -1;
	return cp_policy_config(c);
}

/* Every connection is a file descriptor: take the hard limit, so that the
 * HTTP server's own limits (http.h), not EMFILE, decide who gets in. */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rlim_t was = rl.rlim_cur;

		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
			log_warn("cp", "cannot raise the open file limit: %s", strerror(errno));
			rl.rlim_cur = was;
		}
	}
	if (rl.rlim_cur < CP_MIN_FDS)
		log_warn("cp", "open file limit %llu is below %d: connections may be refused before "
			 "the HTTP limits apply", (unsigned long long)rl.rlim_cur, CP_MIN_FDS);
}

static void shutdown_done(struct http_server *srv, void *arg)
{
	ev_stop(((struct cp *)arg)->ev);
}

static void on_signal(struct ev *ev, int signo, void *arg)
{
	struct cp *cp = arg;

	if (!cp->srv) {		/* standing by: nothing to drain */
		cp->stopping = true;
		ev_stop(ev);
		return;
	}
	if (cp->stopping) {
		log_warn("cp", "second signal: stopping now");
		ev_stop(ev);
		return;
	}
	cp->stopping = true;
	cp_hub_shutdown(cp);
	cp_events_close_all(cp);
	cp_exec_streams_close_all(cp);
	log_info("cp", "signal %d: shutting down (waiting up to %d s for requests)", signo,
		 CP_SHUTDOWN_GRACE_MS / 1000);
	http_server_shutdown(cp->srv, CP_SHUTDOWN_GRACE_MS, shutdown_done, cp);
}

static int add_routes(struct cp *cp)
{
	int (*groups[])(struct cp *) = {
		cp_api_misc, cp_api_auth, cp_api_teams, cp_api_projects, cp_api_envs,
		cp_api_events, cp_api_hosts, cp_api_place, cp_api_github, cp_api_ops, cp_api_bg, cp_api_pause, cp_api_sandboxes,
		cp_api_batch, cp_api_pools, cp_api_observe, cp_api_promote,
		cp_api_contexts, cp_api_ttl, cp_api_quotas, cp_hub_routes, cp_web_device, cp_auth_github,
		cp_cors_routes,	/* last: its catch-alls must not shadow real routes */
	};

	for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++)
		if (groups[i](cp) < 0)
			return -1;
	return 0;
}

/* "127.0.0.1:0" -> "127.0.0.1:<port>", ":8080" -> "0.0.0.0:8080" for the log line. */
static void log_listening(const struct cp *cp)
{
	const char *addr = cp->cfg.addr;
	const char *colon = strrchr(addr, ':');
	int host_len = colon ? (int)(colon - addr) : 0;

	log_info("cp", "listening on %s://%.*s:%d (store %s)", cp->cfg.tls_cert ? "https" : "http",
		 host_len ? host_len : 7, host_len ? addr : "0.0.0.0", http_server_port(cp->srv), cp->cfg.db_shown);
}

static int run(struct cp *cp)
{
	struct http_server_opts hopts = { 0 };
	struct err e;

	cp->ev = ev_new();
	hopts.listen = cp->cfg.addr;
	hopts.tls_cert = cp->cfg.tls_cert;
	hopts.tls_key = cp->cfg.tls_key;
	hopts.max_conns_per_addr = cp->cfg.max_conns_per_addr;
	raise_fd_limit();
	ev_signal_add(cp->ev, SIGINT, on_signal, cp);
	ev_signal_add(cp->ev, SIGTERM, on_signal, cp);
	signal(SIGPIPE, SIG_IGN);
	if (cp_db_open_or_stand_by(cp, &hopts, &e) < 0 || cp_bootstrap(cp, &e) < 0) {
		if (cp->stopping) {
			log_info("cp", "stopped");
			return 0;
		}
		fprintf(stderr, "denv-cp: %s\n", e.msg);
		return 1;
	}
	cp_templates_check();
	cp->srv = http_server_new(cp->ev, &hopts, &e);
	if (!cp->srv) {
		fprintf(stderr, "denv-cp: listen %s: %s\n", cp->cfg.addr, e.msg);
		return 1;
	}
	if (add_routes(cp) < 0)
		return 1;
	/* What a previous run left: hosts marked connected, commands and
	 * deployments in flight. Then the queues start. */
	cp_hub_start(cp);
	cp_cmd_recover(cp);
	cp_orch_start(cp);
	cp_ttl_start(cp);
	cp_lost_start(cp);
	if (cp_pool_start(cp, &e) < 0) {
		fprintf(stderr, "denv-cp: %s\n", e.msg);
		return 1;
	}
	cp_contexts_start(cp);
	cp_idem_sweep(cp);
	cp_lease_watch(cp);
	if (cp->cfg.gh_app_id && !cp->cfg.gh_webhook_secret)
		log_warn("cp", "GitHub App configured without DENV_GITHUB_WEBHOOK_SECRET: webhooks are refused");
	log_listening(cp);
	if (ev_run(cp->ev) < 0) {
		log_error("cp", "event loop failed");
		return 1;
	}
	if (cp->lease_lost)
		return 1;
	log_info("cp", "stopped");
	return 0;
}

static void cleanup(struct cp *cp)
{
	/* Commits still queued call back into commands, runs and parked
	 * requests: let them land while all of those are alive. Then free
	 * runs and commands, and close the store last. */
	cp_ttl_free(cp);
	cp_lost_stop(cp);
	cp_pool_free(cp);
	if (cp->db)
		st_flush(cp->db);
	cp_orch_free_all(cp);
	cp_idem_free_all(cp);
	cp_quota_free_all(cp);
	cp_token_checks_free_all(cp);
	cp_exec_streams_close_all(cp);	/* before the commands they point at */
	/* Commands before the client: a driver's command cancels its call in flight. */
	cp_cmd_free_all(cp);
	cp_gh_app_free(cp);
	if (cp->aclient)
		http_aclient_free(cp->aclient);
	cp_hub_free_all(cp);
	cp_events_close_all(cp);
	st_close(cp->db);
	if (cp->srv)
		http_server_free(cp->srv);
	cp_routes_free(cp);
	while (cp->devices) {
		struct cp_device *d = cp->devices;

		cp->devices = d->next;
		free(d->api_key);
		free(d);
	}
	while (cp->oauth) {
		struct cp_oauth_state *s = cp->oauth;

		cp->oauth = s->next;
		free(s->ret);
		free(s);
	}
	if (cp->ev)
		ev_free(cp->ev);
	free((char *)cp->cfg.public_url);
	free((char *)cp->cfg.console_url);
	free((char *)cp->cfg.hetzner_api_url);
	free((char *)cp->cfg.aws_ec2_url);
	free((char *)cp->cfg.e2b_api_url);
	free((char *)cp->cfg.e2b_sandbox_url);
	free((char *)cp->cfg.daytona_api_url);
	free((char *)cp->cfg.prime_api_url);
	free((char *)cp->cfg.gh_api_url);
	free((char *)cp->cfg.gh_url);
	free((char *)cp->cfg.db_shown);
}

/* denv-cp -db-copy FROM TO: every row of one store into another, empty one
 * (directory or DSN either way), then both digested, TO after reopening
 * it, and compared. 0 when they match, 1 otherwise. */
static int db_copy(const char *from, const char *to)
{
	struct st_db *src = NULL, *dst = NULL;
	struct st_digest a, b;
	struct err e;
	char *from_shown = st_display_name(from), *to_shown = st_display_name(to);
	int rc = 1;

	if (st_open(from, NULL, &src, &e) < 0 || st_open(to, NULL, &dst, &e) < 0 || st_copy(src, dst, &e) < 0 ||
	    st_digest(src, &a, &e) < 0) {
		fprintf(stderr, "denv-cp: -db-copy %s %s: %s\n", from_shown, to_shown, e.msg);
		goto out;
	}
	st_close(dst);
	if (st_open(to, NULL, &dst, &e) < 0 || st_digest(dst, &b, &e) < 0) {
		fprintf(stderr, "denv-cp: -db-copy: reopening %s to check it: %s\n", to_shown, e.msg);
		goto out;
	}
	if (a.rows != b.rows || a.tables != b.tables || strcmp(a.sha256, b.sha256) != 0) {
		fprintf(stderr, "denv-cp: -db-copy: %s does not hold what %s holds: %llu rows in %zu tables, sha256 %s "
			"against %llu rows in %zu tables, sha256 %s\n", to_shown, from_shown,
			(unsigned long long)b.rows, b.tables, b.sha256, (unsigned long long)a.rows, a.tables, a.sha256);
		goto out;
	}
	printf("copied %llu rows in %zu tables from %s to %s; both hold sha256 %s\n", (unsigned long long)a.rows,
	       a.tables, from_shown, to_shown, a.sha256);
	rc = 0;
out:
	st_close(src);
	st_close(dst);
	free(from_shown);
	free(to_shown);
	return rc;
}

int main(int argc, char **argv)
{
	struct cp cp;
	int rc;

	if (argc > 1 && str_eq(argv[1], "-db-copy")) {
		if (argc != 4) {
			fprintf(stderr, "usage: denv-cp -db-copy FROM TO (each a store directory or a postgres:// DSN)\n");
			return 2;
		}
		return db_copy(argv[2], argv[3]);
	}
	memset(&cp, 0, sizeof(cp));
	config_from_env(&cp.cfg);
	rc = parse_flags(argc, argv, &cp.cfg);
	if (rc != 0)
		return rc > 0 ? 0 : 2;
	if (check_db(&cp.cfg) < 0)
		return 2;
	cp.cfg.public_url_given = cp.cfg.public_url != NULL;
	if (!cp.cfg.public_url)
		cp.cfg.public_url = CP_PUBLIC_URL_DEFAULT;
	cp.cfg.public_url = no_trailing_slash(cp.cfg.public_url);
	cp.cfg.console_url = no_trailing_slash(cp.cfg.console_url);
	cp.cfg.hetzner_api_url = no_trailing_slash(cp.cfg.hetzner_api_url);
	cp.cfg.aws_ec2_url = no_trailing_slash(cp.cfg.aws_ec2_url);
	cp.cfg.e2b_api_url = no_trailing_slash(cp.cfg.e2b_api_url);
	cp.cfg.e2b_sandbox_url = no_trailing_slash(cp.cfg.e2b_sandbox_url);
	cp.cfg.daytona_api_url = no_trailing_slash(cp.cfg.daytona_api_url);
	cp.cfg.prime_api_url = no_trailing_slash(cp.cfg.prime_api_url);
	cp.cfg.gh_api_url = no_trailing_slash(cp.cfg.gh_api_url);
	cp.cfg.gh_url = no_trailing_slash(cp.cfg.gh_url);
	log_set_level(cp.cfg.verbose ? LOG_DEBUG : LOG_INFO);
	rc = run(&cp);
	cleanup(&cp);
	return rc;
}
