/*
 * orch_deploy.c: the deploy kind's eleven phases (deployments.md, "deploy");
 * placement (place, provision, join) is in orch_place.c. Params: {spec, warm,
 * target?}. ctx carries: prev_version, prev_snapshot (the healthy version to
 * go back to), placed, endpoints, create (the env.create result), snapshot.
 */
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/str.h"
#include "cp/orch.h"

static const struct json *spec_of(const struct cp_run *r)
{
	return json_get(r->params, "spec");
}

static struct json *names_of(const struct json *list)
{
	struct json *a = json_new_array();

	for (size_t i = 0; i < json_len(list); i++) {
		const struct json *it = json_at(list, i);

		json_array_push(a, json_new_str(it->type == JSON_STRING ? it->u.str.s : json_get_str(it, "name")));
	}
	return a;
}

/* The compose keys denv does not act on (spec.h); a spec stored before
 * warnings existed has none. */
static struct json *warnings_of(const struct json *spec)
{
	const struct json *w = json_get(spec, "warnings");

	return w && w->type == JSON_ARRAY ? json_dup(w) : json_new_array();
}

static void resolve(struct cp_run *r)
{
	struct cp *cp = r->cp;
	const struct json *env = st_get(cp->db, "environments", r->env_id);
	const char *cur = json_get_str(env, "CurrentVersionID");
	const struct json *prev = cur && *cur ? st_get(cp->db, "versions", cur) : NULL;
	struct json *v, *ev;
	struct st_txn *txn;

	if (!spec_of(r)) {
		run_fail(r, NULL, "the deployment has no spec");
		return;
	}
	/* The version to go back to if this deploy fails. */
	if (prev && json_get_bool(prev, "Healthy", false) && *json_get_str(prev, "Snapshot")) {
		json_object_set_str(r->ctx, "prev_version", cur);
		json_object_set_str(r->ctx, "prev_snapshot", json_get_str(prev, "Snapshot"));
	}
	v = cp_version_new(cp, env, spec_of(r));
	str_copy(r->version_id, sizeof(r->version_id), json_get_str(v, "ID"));
	ev = cp_obj("version", json_new_str(r->version_id), "number", json_new_int(json_get_int(v, "Number", 0)),
		    "services", names_of(json_get(spec_of(r), "services")), "volumes",
		    names_of(json_get(spec_of(r), "volumes")), "warnings", warnings_of(spec_of(r)), NULL);
	txn = st_begin(cp->db);
	st_put(txn, "versions", r->version_id, v);
	cp_commit_quiet(txn, "version");
	cp_update(cp, "deployments", r->dep_id, cp_obj("VersionID", json_new_str(r->version_id), NULL));
	run_ok(r, ev);
}

/* ---- prepare, start, health ---- */

/* A step's duration from env.create's timings, never negative. */
static int64_t step_ms(const struct json *create, const char *key)
{
	int64_t ms = json_get_int(json_get(create, "timings"), key, 0);

	return ms > 0 ? ms : 0;
}

/* env.create does the work of prepare, start and health at once; its
 * timings say how long each step took, so each phase shows its own time:
 * prepare ends (and start begins) start_ms + health_ms before the result
 * came, start ends health_ms before it. A host without timings leaves all
 * the time in prepare, as before. */
static void lay_out_steps(struct cp_run *r, const struct json *create)
{
	int64_t now = clock_now_ns(), start = step_ms(create, "start_ms"), health = step_ms(create, "health_ms");

	if (!json_get(create, "timings"))
		return;
	json_object_set_int(r->ctx, "start_ends_ns", now - health * 1000000);
	run_handover(r, now - (start + health) * 1000000);
}

/* The version runs the images the host built, by id (as a pulled image is
 * pinned by digest): its Spec's built services name the image id and keep
 * it in build.image_id, so a fork or a rollback of this version starts
 * that image and never builds again. */
static void pin_builds(struct cp_run *r, const struct json *builds)
{
	struct json *spec, *services;

	if (!json_len(builds))
		return;
	spec = json_dup(spec_of(r));
	services = json_get(spec, "services");
	for (size_t i = 0; i < json_len(builds); i++) {
		const struct json *b = json_at(builds, i);
		const char *id = json_get_str(b, "image_id");

		for (size_t k = 0; id && *id && k < json_len(services); k++) {
			struct json *s = json_at(services, k);

			if (!str_eq(json_get_str(s, "name"), json_get_str(b, "service")) || !json_get(s, "build"))
				continue;
			json_object_set_str(s, "image", id);
			json_object_set_str(json_get(s, "build"), "image_id", id);
			json_object_set_str(json_get(s, "build"), "tag", json_get_str(b, "image"));
		}
	}
	cp_update(r->cp, "versions", r->version_id, cp_obj("Spec", json_dup(spec), NULL));
	json_object_set(r->params, "spec", spec);
}

static void prepared(struct cp_run *r, const struct cp_result *res)
{
	const struct json *p = res->payload;
	struct json *endpoints, *ev;

	if (!res->ok) {
		run_fail(r, NULL, "%s", res->error);
		return;
	}
	lay_out_steps(r, p);
	pin_builds(r, json_get(p, "builds"));
	json_object_set(r->ctx, "create", json_dup(p));
	endpoints = json_get(p, "endpoints") ? json_dup(json_get(p, "endpoints")) : json_new_object();
	json_object_set(r->ctx, "endpoints", json_dup(endpoints));
	run_env(r, cp_obj("Endpoints", json_dup(endpoints), NULL));
	ev = cp_obj("version", json_new_str(r->version_id), "endpoints", endpoints, NULL);
	/* concepts.md: the evidence says which digests were pinned and what the egress probe found. */
	if (json_get(p, "digests"))
		json_object_set(ev, "digests", json_dup(json_get(p, "digests")));
	if (json_get_str(p, "egress"))
		json_object_set_str(ev, "egress", json_get_str(p, "egress"));
	if (json_get(p, "timings"))
		json_object_set_int(ev, "prepared_in_ms", step_ms(p, "prepare_ms"));
	if (json_len(json_get(p, "builds")))
		json_object_set(ev, "builds", json_dup(json_get(p, "builds")));
	if (json_get(p, "clock"))
		json_object_set(ev, "clock", json_dup(json_get(p, "clock")));
	run_ok(r, ev);
}

static bool builds_any(const struct json *spec)
{
	for (size_t i = 0; i < json_len(json_get(spec, "services")); i++)
		if (json_get(json_at(json_get(spec, "services"), i), "build"))
			return true;
	return false;
}

static void create(struct cp_run *r)
{
	const struct json *spec = spec_of(r), *warm = json_get(r->params, "warm");
	const char *egress = json_get_str(spec, "egress");
	struct json *payload;

	payload = cp_obj("version", json_new_str(r->version_id), "services", json_dup(json_get(spec, "services")),
			 "volumes", json_dup(json_get(spec, "volumes")), "from_snapshot", json_new_str(""), "warm",
			 json_len(warm) ? json_dup(warm) : json_new_array(), "egress",
			 json_new_str(egress && *egress ? egress : "deny"), NULL);
	if (json_get(spec, "clock"))
		json_object_set(payload, "clock", json_dup(json_get(spec, "clock")));
	if (run_cmd(r, r->env_id, "env.create", payload, 0, prepared) == 0 && builds_any(spec)) {
		char subject[ID_MAX + 8];

		/* A build's output is prepare's progress: on dep:<id>, where --wait shows it. */
		snprintf(subject, sizeof(subject), "dep:%s", r->dep_id);
		cp_cmd_progress_also(r->cmd, subject);
	}
}

/* Build contexts first (orch_build.c): env.create builds from them. */
static void prepare(struct cp_run *r)
{
	run_ship_contexts(r, create);
}

/* started_in is the containers' start alone (the sidecar's create.c). */
static void start(struct cp_run *r)
{
	const struct json *create = json_get(r->ctx, "create");
	int64_t ends = json_get_int(r->ctx, "start_ends_ns", 0);

	if (ends)
		run_handover(r, ends);
	run_ok(r, cp_obj("started_in_ms", json_new_int(run_duration_ms(json_get(create, "started_in"), true)), NULL));
}

static struct json *endpoints_of(const struct cp_run *r)
{
	const struct json *e = json_get(r->ctx, "endpoints");

	return e ? json_dup(e) : json_new_object();
}

static void health(struct cp_run *r)
{
	const struct json *create = json_get(r->ctx, "create");
	struct json *ev = cp_obj("endpoints", endpoints_of(r), NULL);

	if (json_get(create, "timings"))
		json_object_set_int(ev, "healthy_in_ms", step_ms(create, "health_ms"));
	/* health.c's record: which test found each service ready, and when. */
	if (json_get(create, "readiness"))
		json_object_set(ev, "readiness", json_dup(json_get(create, "readiness")));
	run_ok(r, ev);
}

/* ---- warm, snapshot, ingress ---- */

/* The last CP_WARM_OUTPUT_TAIL bytes of s, from a line's start where one
 * begins inside them (never in the middle of a UTF-8 sequence); "..." first
 * when something was cut. */
static struct json *output_tail(const char *s)
{
	size_t len = s ? strlen(s) : 0, from;
	const char *nl;
	struct buf b = BUF_INIT;
	struct json *tail;

	if (len <= CP_WARM_OUTPUT_TAIL)
		return json_new_str(s ? s : "");
	from = len - CP_WARM_OUTPUT_TAIL;
	while (from < len && ((unsigned char)s[from] & 0xC0) == 0x80)
		from++;
	if ((nl = memchr(s + from, '\n', len - from)) && nl + 1 < s + len)
		from = (size_t)(nl + 1 - s);
	buf_adds(&b, "...\n");
	buf_add(&b, s + from, len - from);
	tail = json_new_strn(b.data, b.len);
	buf_release(&b);
	return tail;
}

/* The last line of s with text on it, as a view: *n bytes at the result. */
static const char *last_line(const char *s, size_t *n)
{
	size_t end = s ? strlen(s) : 0, start;

	while (end > 0 && (s[end - 1] == '\n' || s[end - 1] == '\r' || s[end - 1] == ' '))
		end--;
	start = end;
	while (start > 0 && s[start - 1] != '\n')
		start--;
	*n = end - start;
	return s ? s + start : "";
}

static void warmed(struct cp_run *r, const struct cp_result *res)
{
	int64_t code = json_get_int(res->payload, "exit_code", -1);
	const char *err = json_get_str(res->payload, "stderr"), *out = json_get_str(res->payload, "stdout");
	const char *line;
	struct json *ev;
	size_t n;

	if (!res->ok) {
		run_fail(r, NULL, "%s", res->error);
		return;
	}
	if (code == 0) {
		run_ok(r, cp_obj("exit", json_new_int(0), NULL));
		return;
	}
	/* What went wrong is usually the last thing the command said: the
	 * tail in the evidence, its last line in the error the CLI prints. A
	 * command that said nothing on stderr may have said it on stdout. */
	ev = cp_obj("exit", json_new_int(code), "stderr", output_tail(err), NULL);
	if ((!err || !*err) && out && *out)
		json_object_set(ev, "stdout", output_tail(out));
	line = last_line(err && *err ? err : out, &n);
	if (n > 0)
		run_fail(r, ev, "warm command exited %lld: %.*s", (long long)code,
			 (int)(n < CP_WARM_ERROR_LINE ? n : CP_WARM_ERROR_LINE), line);
	else
		run_fail(r, ev, "warm command exited %lld", (long long)code);
}

static void warm(struct cp_run *r)
{
	const struct json *w = json_get(r->params, "warm");
	const struct json *first = json_at(json_get(spec_of(r), "services"), 0);
	struct json *payload;

	if (!w || w->type != JSON_ARRAY || json_len(w) == 0) {
		run_skip(r, cp_obj("reason", json_new_str("no warm command"), NULL));
		return;
	}
	payload = cp_obj("service", json_new_str(json_get_str(first, "name")), "cmd", json_dup(w), "timeout_sec",
			 json_new_int(CP_WARM_TIMEOUT_S), NULL);
	run_cmd(r, r->env_id, "env.exec", payload, (int64_t)CP_WARM_TIMEOUT_S * 1000 + CP_EXEC_SLACK_MS, warmed);
}

/* The evidence of an env.snapshot result (shared with the snapshot and verify kinds). */
struct json *run_snapshot_evidence(const struct json *p, const char *fallback_name)
{
	const char *snap = json_get_str(p, "snapshot");
	const struct json *ds = json_get(p, "datasets"), *frozen = json_get(p, "frozen_for");

	return cp_obj("snapshot", json_new_str(snap && *snap ? snap : fallback_name), "datasets",
		      ds ? json_dup(ds) : json_new_array(), "frozen_for", frozen ? json_dup(frozen) : json_new_null(),
		      "consistent", json_new_bool(json_get_bool(p, "consistent", false)), NULL);
}

static void snapshotted(struct cp_run *r, const struct cp_result *res)
{
	struct json *ev;

	if (!res->ok) {
		run_fail(r, NULL, "%s", res->error);
		return;
	}
	ev = run_snapshot_evidence(res->payload, r->version_id);
	json_object_set_str(r->ctx, "snapshot", json_get_str(ev, "snapshot"));
	run_ok(r, ev);
}

/* The snapshot phase (shared with the snapshot kind): env.snapshot named after
 * the version; the name taken goes to ctx "snapshot". */
void run_snapshot(struct cp_run *r)
{
	run_cmd(r, r->env_id, "env.snapshot", cp_obj("name", json_new_str(r->version_id), NULL), 0, snapshotted);
}

/* ok with the names when the host has a name gateway (ingress_names.c),
 * or when denvd proxies the env's ports (egress denied: ingress.c in the
 * sidecar); skipped, with the evidence the spec gives, when neither. */
static void ingress(struct cp_run *r)
{
	const struct json *eps = json_get(r->ctx, "endpoints");
	struct json *unnamed = json_new_object();
	struct json *names = cp_ingress_names(r->cp, r->host_id, r->env_id, eps, unnamed);
	bool proxied = json_len(json_get(json_get(r->ctx, "create"), "ingress")) > 0;
	struct json *ev;

	if (!names && !proxied) {
		json_free(unnamed);
		run_skip(r, cp_obj("endpoints", endpoints_of(r), "names", json_new_str("pending ingress proxy"), "reason",
				   json_new_str("the host has no ingress domain (denvd --ingress-domain)"), NULL));
		return;
	}
	ev = cp_obj("endpoints", endpoints_of(r), NULL);
	if (proxied)
		json_object_set_str(ev, "proxy", "denvd");
	if (names) {
		run_env(r, cp_obj("Names", json_dup(names), NULL));
		json_object_set(ev, "names", names);
		json_object_set_str(ev, "tls", json_get_str(cp_host_ingress(r->cp, r->host_id), "issuer") ?: "");
	}
	if (json_len(unnamed))
		json_object_set(ev, "unnamed", unnamed);
	else
		json_free(unnamed);
	run_ok(r, ev);
}

/* ---- verdict ---- */

static void rolled_back(struct cp_run *r, const struct cp_result *res)
{
	const char *prev = json_get_str(r->ctx, "prev_version");
	const struct json *ep = json_get(res->payload, "endpoints");
	char msg[ERR_MSG_MAX];

	if (!res->ok) {
		snprintf(msg, sizeof(msg), "rollback failed: %.450s", res->error);
		run_env(r, cp_obj("Status", json_new_str("failed"), NULL));
		run_done(r, "failed", cp_obj("reverted", json_new_str(msg), NULL));
		return;
	}
	run_env(r, cp_obj("Status", json_new_str("running"), "CurrentVersionID", json_new_str(prev), "Endpoints",
			  ep ? json_dup(ep) : json_new_object(), NULL));
	run_done(r, "rolled_back", cp_obj("reverted_to", json_new_str(prev), NULL));
}

static void verdict(struct cp_run *r)
{
	const char *prev = json_get_str(r->ctx, "prev_version"), *snap = json_get_str(r->ctx, "snapshot");
	char msg[ERR_MSG_MAX];

	if (!r->failed) {
		cp_update(r->cp, "versions", r->version_id,
			  cp_obj("Healthy", json_new_bool(true), "Snapshot", json_new_str(snap), "SnapshotHosts",
				 run_snapshot_hosts(r), NULL));
		run_env(r, cp_obj("Status", json_new_str("running"), "CurrentVersionID", json_new_str(r->version_id),
				  NULL));
		cp_pool_version(r->cp, r->version_id);	/* its x-denv.pool, if any */
		run_done(r, "succeeded",
			 cp_obj("version", json_new_str(r->version_id), "snapshot", json_new_str(snap), "took_ms",
				json_new_int(run_took_ms(r)), NULL));
		return;
	}
	if (!prev) {
		run_env(r, cp_obj("Status", json_new_str("failed"), NULL));
		run_done(r, "failed", cp_obj("reverted", json_new_str("no previous version"), NULL));
		return;
	}
	if (!*r->host_id || !cp_host_connected(r->cp, r->host_id)) {
		snprintf(msg, sizeof(msg), "rollback failed: host %s is not connected", *r->host_id ? r->host_id : "(none)");
		run_env(r, cp_obj("Status", json_new_str("failed"), NULL));
		run_done(r, "failed", cp_obj("reverted", json_new_str(msg), NULL));
		return;
	}
	run_cmd(r, r->env_id, "env.rollback",
		cp_obj("snapshot", json_new_str(json_get_str(r->ctx, "prev_snapshot")), NULL), 0, rolled_back);
}

const struct run_kind cp_kind_deploy = {
	"deploy", "deploying",
	{ resolve, run_place, run_provision, run_join, prepare, start, health, warm, run_snapshot, ingress, verdict },
};
