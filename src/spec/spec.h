/*
 * spec.h: the compose subset denv accepts, resolved into a Spec.
 *
 * An environment is a Docker Compose file plus an x-denv block. The control
 * plane parses it when a deploy arrives, refuses anything outside the subset
 * with the reason (the messages are part of the API contract), and stores the
 * result as the version's Spec; the sidecar renders containers from the Spec,
 * never from the user's file. The Spec is JSON so that it can be stored and
 * sent as it is:
 *
 *   {"kind": "rl-environment", "egress": "deny",
 *    "services": [ {"name", "image", "env": {K: V}, "ports": ["80"],
 *                   "build": {"context": "./app", "dockerfile": "Dockerfile",
 *                             "args": {K: V}, "target": ""},   (only with build:)
 *                   "volumes": ["pg:/var/lib/postgresql/data"],
 *                   "health": {"test": ["CMD", ...], "interval": "2s", "retries": 15},
 *                   "depends_on": ["db"], "command": ["sleep", "infinity"],
 *                   "user": "1000:1000", "runtime": "gvisor",  (runtime: only when declared)
 *                   "resources": {"memory_mb": 2048, "pids": 512, "cpus": 0}} ...],
 *    "volumes": ["home", "pg"],
 *    "warm": ["psql", "-f", "/seed.sql"],   (or ["sh", "-c", "..."]: spec_warm)
 *    "agent": {"service": "box"},
 *    "verifier": {"image": "...", "service": "", "command": [...],
 *                 "collect": ["/home/agent/answer.txt"], "timeout_sec": 600},
 *    "disk_mb": 2048,   (x-denv.disk; absent: the host's default cap)
 *    "clock": {"mode": "frozen", "at": "2026-01-01T00:00:00Z"}   (absent: real time;
 *             or {"mode": "offset", "offset": "-24h0m0s", "offset_sec": -86400}: spec_clock)
 *    "promote": {"replays": 3, "soak_sec": 30,     (only with x-denv.promote: spec_promote)
 *                "invariants": [{"name", "service", "command": [...]}]}
 *    "warnings": ["services.box.comand: unknown key (did you mean command?)",
 *                 "services.db.restart: ignored by denv"]}
 *
 * Services and volumes are sorted by name; the "first service" (where warm
 * runs) is services[0]. Zero resources mean the sidecar's defaults.
 *
 * warnings name every key denv does not act on (keys.c): unknown ones with
 * the nearest known key, Compose keys denv ignores, x-denv keys this version
 * does not implement. They never refuse a file; the control plane shows them
 * in the resolve phase's evidence.
 */
#ifndef DENV_SPEC_H
#define DENV_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "json/json.h"

#define SPEC_MAX_SERVICES 64
#define SPEC_MAX_VOLUMES 128
#define SPEC_MAX_LIST 1024		/* argv, env entries, ports, collect paths */
#define SPEC_MAX_STRING 4096		/* any single string value */
#define SPEC_MAX_NAME 63		/* service and volume names */
#define SPEC_MAX_POOL 256		/* x-denv.pool: warm forks kept of a version */
#define SPEC_MAX_COMPOSE_BYTES ((size_t)1 << 20)
#define SPEC_MIN_MEMORY_MB 6		/* Docker refuses less */
#define SPEC_MAX_CPUS 1024
#define SPEC_CAP_KEY_MAX 48		/* a cap's key as errors name it (deploy.resources.limits.memory) */
#define SPEC_VERIFIER_TIMEOUT_DEFAULT 600
#define SPEC_VERIFIER_TIMEOUT_MAX 86400
#define SPEC_MAX_WARNINGS 32		/* then one line counts the rest */
#define SPEC_WARNING_MAX 256		/* bytes of one warning, NUL included */
#define SPEC_WARNING_KEY_SHOWN 64	/* bytes of a key a warning quotes */
#define SPEC_SUGGEST_DISTANCE 2		/* edits between a typo and the key suggested */
#define SPEC_KEY_COMPARE_MAX 64		/* longer keys are never "near" anything */
#define SPEC_CLOCK_OFFSET_MAX_SEC (3650LL * 86400)	/* x-denv.clock.offset: ten years either way */
#define SPEC_MIN_DISK_MB 16		/* x-denv.disk: an ext4 image smaller than this has no room for a journal */
#define SPEC_MAX_DISK_MB (16LL << 20)	/* x-denv.disk: 16 TiB */
#define SPEC_PROMOTE_REPLAYS_DEFAULT 3	/* x-denv.promote.replays when not declared */
#define SPEC_PROMOTE_REPLAYS_MAX 20	/* each replay is a collect and a verifier run */
#define SPEC_PROMOTE_SOAK_MAX_SEC 86400	/* x-denv.promote.soak: a day */
#define SPEC_PROMOTE_INVARIANTS_MAX 64

/* Resolve a parsed compose document (from yaml_parse) into a Spec.
 * On refusal returns -1 with e->msg the contract's message ("compose: ..."). */
int spec_from_compose(const struct json *compose, struct json **spec, struct err *e);

/* Parse compose text (YAML) and resolve it. YAML errors read "compose: line:col: reason". */
int spec_parse_compose(const char *text, size_t len, struct json **spec, struct err *e);

/* A warm command as written (x-denv.warm, or the API's warm) into the argv
 * that runs (warm.c): a string, or a list of one string with whitespace,
 * becomes ["sh", "-c", it]; any other list is the argv; null, [] or a blank
 * string is [] (none). NULL with e ("<what> must be ...") when it is neither
 * a string nor a list of scalars. */
struct json *spec_warm(const struct json *v, const char *what, struct err *e);

/* x-denv.clock (clock.c) into the Spec's "clock": NULL for real time (absent,
 * null or "real"), {mode: frozen, at} with at defaulting to now_ns (whole
 * seconds, UTC), or {mode: offset, offset, offset_sec}. -1 with e
 * ("compose: x-denv.clock...") for anything else. */
int spec_clock(const struct json *v, int64_t now_ns, struct json **out, struct err *e);

/* x-denv.runtime and services.<s>.x-denv.runtime (runtime.c) into each
 * Spec service's "runtime" ("runc" or "gvisor"; absent: the host's
 * default). -1 with e ("compose: ... must be runc or gvisor") otherwise. */
int spec_runtimes(const struct json *compose, struct json *spec, struct err *e);

/* x-denv.disk (runtime.c), a size like "2g", into the Spec's "disk_mb";
 * absent or null: none (the host's default). */
int spec_disk(const struct json *v, struct json *spec, struct err *e);

/* "2g", "512m", "1024k", "1.5g" or a number of bytes (caps.c); powers of 1024. */
int spec_size_bytes(const struct json *v, double *bytes);
/* x-denv.promote (promote.c) into the Spec's "promote": {replays,
 * soak_sec, invariants: [{name, service, command}]}; nothing when v is
 * absent or null. -1 with e ("compose: x-denv.promote...") otherwise. */
int spec_promote(const struct json *v, struct json *spec, struct err *e);

/* A service's build: (a context string, or a map of context, dockerfile,
 * args, target) into {context, dockerfile, args, target} (build.c); the
 * dockerfile defaults to "Dockerfile", the context to ".". -1 with e
 * ("compose: service ...") for a URL context, a Dockerfile outside the
 * context, or an arg without a value. */
int spec_build(const char *svc, const struct json *v, struct json **out, struct err *e);

/* The Spec's service named name, or NULL. */
const struct json *spec_service(const struct json *spec, const char *name);

/* How denv treats a key of one level of the file (keys.c). */
enum spec_key_how {
	SPEC_KEY_READ,		/* acted on */
	SPEC_KEY_IGNORED,	/* valid Compose that denv does not apply */
	SPEC_KEY_UNSUPPORTED,	/* an x-denv key this version does not implement */
};

struct spec_key {
	const char *name;	/* NULL ends a table */
	enum spec_key_how how;
	const char *note;	/* why it is ignored, or NULL */
};

/* Damerau-Levenshtein distance (adjacent swaps count one) between a and b;
 * SIZE_MAX when either is longer than SPEC_KEY_COMPARE_MAX bytes. */
size_t spec_edit_distance(const char *a, const char *b);

/* The name in keys nearest to word, when it is within a third of word's
 * length and SPEC_SUGGEST_DISTANCE edits; the first such name on a tie; else NULL. */
const char *spec_nearest_key(const char *word, const struct spec_key *keys);

/* Append to warnings (a JSON array) one line per key of compose that denv
 * does not act on, in the order of spec's services and volumes; bounded by
 * SPEC_MAX_WARNINGS lines and one line that counts the rest. */
void spec_check_keys(const struct json *compose, const struct json *spec, struct json *warnings);

/* Internal, shared by the readers: caps.c, util.c, service.c. */
int spec_caps(const char *svc, const struct json *service, struct json **out, struct err *e);
struct json *spec_service_resolve(const char *name, const struct json *service,
				  const struct json *declared_volumes, struct err *e);
struct json *spec_argv(const struct json *v, const char *what, struct err *e);
int spec_scalar_string(const struct json *v, char *out, size_t n);
/* A map, or a list of KEY=VALUE (compose's environment, build.args), into
 * the object out; what names the field in errors. Every key needs a value:
 * the deploying shell's environment is not passed in. 0 / -1. */
int spec_kv_list(const char *svc, const char *what, const struct json *v, struct json *out, struct err *e);
int spec_valid_name(const char *s);

/* ingress_name.c: the stable DNS name of an environment's published service,
 * <service>--<env>.<domain> (denvd(8), "INGRESS NAMES"). Each part in its
 * DNS label form: lower case, '_' and '.' as '-'. The env id is the label's
 * last "--"-separated part (an id's form never has "--"). */
#define SPEC_DNS_LABEL_MAX 63		/* RFC 1035 */
#define SPEC_DNS_NAME_MAX 253		/* without the root's dot */
/* s as a label into out (n >= SPEC_DNS_LABEL_MAX + 1): 0, or -1 when s is
 * empty, too long, or has a byte no label may hold. */
int spec_dns_label(const char *s, char *out, size_t n);
/* A domain the names may live under: labels of [a-z0-9-], not starting or
 * ending with '-', at least two of them. */
bool spec_ingress_domain_ok(const char *domain);
/* The name of service in env under domain into out: 0, or -1 with e (a
 * part that has no label form, or a name past the limits). */
int spec_ingress_name(const char *service, const char *env, const char *domain, char *out, size_t n,
		      struct err *e);
/* A name asked for (a TLS server name, any case) split into its service and
 * env labels (each SPEC_DNS_LABEL_MAX + 1 bytes): 0, or -1 when it is not
 * <service>--<env>.<domain>. */
int spec_ingress_split(const char *host, const char *domain, char *svc_label, char *env_label);

#endif
