/*
 * ingress/ingress.h: the ingress wing of denvd: the port proxies of
 * egress-denied environments (ingress*.c) and the host's name gateway
 * (names*.c). A part of sidecar.h, which includes it where it stood:
 * include sidecar/sidecar.h, not this.
 */
#ifndef DENV_SIDECAR_INGRESS_H
#define DENV_SIDECAR_INGRESS_H

/* ingress*.c: an egress-denied environment's ports published on 127.0.0.1
 * by a proxy process of denvd's own ("denvd __ingress", one per service
 * with ports): it binds its listeners in the host's network namespace, then
 * enters the container's (setns) and connects to 127.0.0.1:<port> there.
 * Connections only ever go host -> container. Files, per service, under
 * <data>/envs/<env>/ingress/: <svc>.json (what to serve), <svc>.pid, <svc>.log. */
#define IG_MAX_PORTS 1024		/* ports of one service (SPEC_MAX_LIST) */
#define IG_MAX_CONNS 256		/* connections at once per service; accept pauses beyond */
#define IG_BUF_BYTES ((size_t)64 << 10)	/* per direction per connection */
#define IG_CONNECT_MS 10000		/* connect to the container port */
#define IG_WATCH_MS 1000		/* is the container (its netns) still there? */
#define IG_CONFIG_MAX ((size_t)256 << 10)
#define IG_START_MS 15000		/* the __ingress launcher: bound and detached */
#define IG_STOP_MS 3000			/* SIGTERM, then SIGKILL */
#define IG_PORT_TRIES 8			/* host ports tried when another process took ours */
#define IG_EXIT_BIND 3			/* __ingress exit code: a host port was taken */
struct ig_port {
	int container;			/* port inside the container */
	int host;			/* 127.0.0.1:<host> on the host */
};
struct ig_config {
	char env[SC_ID_MAX];
	char service[SC_ID_MAX];
	char container[300];
	struct ig_port ports[IG_MAX_PORTS];
	size_t nports;
};
/* ingress_cfg.c (pure) */
int ig_config_parse(const char *text, size_t len, struct ig_config *c, struct err *e);
char *ig_config_format(const struct ig_config *c);	/* caller frees */
int ig_port_parse(const char *s, int *port);		/* "5000" -> 5000; -1 if not 1..65535 */
/* One direction of a proxied connection: bytes read from one socket wait
 * here until written to the other. Reads stop while it is full
 * (backpressure); the source's EOF becomes shutdown(SHUT_WR) on the
 * destination once everything before it has been written. */
struct ig_dir {
	char *buf;
	size_t cap, off, len;		/* pending bytes are buf[off .. off+len) */
	bool eof;			/* the source has no more */
	bool shut;			/* the destination was shut down for writing */
};
void ig_dir_init(struct ig_dir *d, char *buf, size_t cap);
char *ig_dir_space(struct ig_dir *d, size_t *n);	/* where to read into, *n bytes free */
void ig_dir_filled(struct ig_dir *d, size_t n);
const char *ig_dir_pending(const struct ig_dir *d, size_t *n);
void ig_dir_drained(struct ig_dir *d, size_t n);
bool ig_dir_want_read(const struct ig_dir *d);
bool ig_dir_want_write(const struct ig_dir *d);
bool ig_dir_need_shut(const struct ig_dir *d);	/* eof, nothing pending, not yet shut */
/* ingress.c: the __ingress verb; ig_daemonize, its detach, shared with
 * __names: the launcher writes pidfile, prints the pid and returns 1 with
 * *exit_code 0; the daemon returns 0 in its own session, stderr to logpath. */
int ingress_main(int argc, char **argv);
int ig_daemonize(const char *who, const char *pidfile, const char *logpath, int *exit_code);
/* ---- ingress names (names*.c): one gateway per host, "denvd __names",
 * serving https://<service>--<env>.<domain> (spec_ingress_name) with TLS
 * and relaying to the service's first published port on 127.0.0.1.
 * Files under <data>/names: key.pem, cert.pem, names.pid, names.log; each
 * env's <data>/envs/<env>/endpoints.json is what its last create wrote. */
#define NM_MAX_CONNS 512		/* connections at once; accept waits beyond */
#define NM_BACKLOG 128
#define NM_WATCH_MS 1000		/* is names.pid still this gateway's? */
#define NM_HANDSHAKE_MS 10000		/* TLS handshake, and an answer's write */
#define NM_IDLE_MS (10 * 60 * 1000)	/* a relay with nothing either way this long ends */
#define NM_RELAY_CHUNK 16384		/* one TLS record's worth */
#define NM_WHY_MAX 512			/* a refusal's text */
#define NM_ENDPOINTS_MAX ((size_t)1 << 20)	/* endpoints.json */
#define NM_LISTEN_DEFAULT "0.0.0.0:443"
#define NT_DAYS_DEFAULT 30		/* a certificate's validity */
#define NT_DAYS_MAX 825			/* what clients accept of a server certificate */
#define NT_RENEW_PARTS 3		/* issued again with a third of the validity left */
#define NT_BACKDATE_S 3600		/* notBefore an hour back: clocks differ */
#define NT_CURVE "P-256"
struct nt_config {
	const char *dir;		/* <data>/names */
	const char *domain;
	const char *ca_cert, *ca_key;	/* both or neither */
	int days;
};
struct nt_state {
	bool issued;			/* nt_ensure issued a new one */
	int64_t not_before, not_after;	/* epoch seconds */
};
/* names_tls.c */
/* Due: less than days / NT_RENEW_PARTS of validity left at now. */
bool nt_due(int64_t not_after, int64_t now, int days);
int nt_paths(const char *dir, char *key, char *cert, struct err *e);	/* FS_PATH_MAX each */
/* Keep the certificate in c->dir when it fits and is not due, else issue
 * one (a new key too): 0 with st, -1 with e (a CA that cannot be read). */
int nt_ensure(const struct nt_config *c, int64_t now, struct nt_state *st, struct err *e);
/* A TLS server context (SSL_CTX *) with dir's key and chain, or NULL. */
struct ssl_ctx_st *nt_server_context(const char *dir, struct err *e);
/* names_route.c */
struct nm_route {
	char env[SC_ID_MAX], service[SC_ID_MAX];
	int port;			/* on 127.0.0.1 */
	int status;			/* refused: the HTTP status to answer */
	char why[NM_WHY_MAX];
};
/* Where host (the TLS server name) goes: 0 with r's env, service, port;
 * -1 with r's status and why. */
int nm_route(const char *data, const char *domain, const char *host, struct nm_route *r);
/* endpoints (the create result's) as the env's endpoints.json. */
int nm_record(const char *data, const char *env, const struct json *endpoints, struct err *e);
/* names.c: the __names verb. */
int names_main(int argc, char **argv);
/* names_ctl.c */
int nm_files_dir(const char *data, char *out, struct err *e);	/* made when missing */
/* "HOST:PORT" or ":PORT" (all addresses): 0, or -1 when it is neither. */
int nm_listen_parse(const char *addr, char *host, size_t n, int *port);
/* denvd's flags checked: 0, or -1 with e saying which is wrong. */
int nm_config_check(const struct sc_config *c, struct err *e);
/* Start the gateway (stopping one an earlier denvd left): 0 / -1 with e. */
int nm_start(const struct sc_config *c, struct err *e);
/* Start it again when it is no longer running (the agent's sweep). */
void nm_keep(const struct sc_config *c);
/* {domain, port} for the hello's capabilities, or NULL without a domain. */
struct json *nm_capabilities(const struct sc_config *c);

/* ingress_ctl.c: starting and stopping them. */
/* <data>/envs/<env>/ingress into out (FS_PATH_MAX bytes). 0 / -1 with e. */
int ig_files_dir(const char *data, const char *env, char *out, struct err *e);
/* Worker: for each service with ports, choose host ports (the previous
 * ones first), write the config, start its proxy; endpoints and the
 * result's "ingress" object ({svc: {port: "127.0.0.1:N"}}) filled in. */
int ig_publish(const char *data, const char *env, const char *project, const struct json *order,
	       struct json *endpoints, struct json *ingress, struct err *e);
/* The pid a pid file holds; 0 when none can be read. */
int ig_read_pid(const char *pidfile);
/* Whether pid is "denvd <verb_name> --data data [--env env --service svc]"
 * (env, svc NULL: not checked), read from its /proc cmdline. */
bool ig_pid_runs(int pid, const char *verb_name, const char *data, const char *env, const char *svc);
/* Start (or keep, when it runs) the proxy of one service from its config. */
int ig_start(const char *data, const char *env, const char *svc, struct err *e);
/* Stop every proxy of env (pid checked to be ours); configs are kept. */
void ig_stop_env(const char *data, const char *env);
/* Agent start-up: restart the proxies of envs whose configs exist and whose
 * containers run. */
void ig_restore_all(const char *data);

#endif
