/* create.c: env.create (protocol.md), and the same path for env.fork and
 * env.rollback (snapshot.c). In order: build the services with a build
 * (build.c: cached by the context's digest, or pinned by id); make sure every service's image is
 * here (images.c: pulled if missing; one that cannot be had stops the
 * create before anything is made); remove what an earlier attempt of
 * this environment left in Docker (nothing to do on a first create); choose
 * the storage backend (the env's own, or its snapshot's for a fork); write
 * spec.json; clone or restore the volumes from a snapshot when asked;
 * fill the volumes still missing; create the network
 * (internal when egress is denied; none at all for one service with egress
 * denied: render_networkless); start the containers in depends_on order,
 * each after its dependencies are healthy, independent ones at once; wait for health; report image
 * digests and, with egress allowed, the published ports; with egress denied
 * run the probe, then publish the ports through denvd's own proxy
 * (ingress.c: one process per service with ports). Any failure stops the stack (the data dir stays for a
 * destroy). The result times the three steps the control plane shows as
 * phases: prepare (images, volumes, network), start (the containers, each
 * wave after its dependencies are healthy) and health (the last health
 * wait, digests, the probe, the ports). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/fs.h"
#include "base/str.h"
#include "sidecar/sidecar.h"
#include "sidecar/storage/storage.h"

#define EGRESS_LEAK_MSG "egress is denied but the stack reached the internet"

struct create {
	struct wk *w;
	const struct create_from *from;
	struct stg stg;
	char project[SC_ID_MAX], net[SC_ID_MAX + 16];
	char envdir[4096], voldir[4200];
	struct json *spec, *order;
	struct json *images;	/* image ref -> {id, digest} of those present locally */
	struct json *readiness;	/* health.c's evidence: which test found each service ready, when */
	bool deny, internal, networkless;
	bool fresh;		/* no earlier attempt of this env on this host */
	int64_t t_begin, t_prepared, t_started;	/* ev_mono_ms at each step's end */
};

static int write_files(struct create *c, struct err *e)
{
	char path[4300];
	struct buf b = BUF_INIT;
	char *text;
	int rc;

	if (fs_mkdir_p(c->envdir, 0700, e) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/spec.json", c->envdir);
	text = json_to_string(c->spec, JSON_PRETTY);
	rc = fs_write_atomic(path, text, strlen(text), 0600, e);
	free(text);
	if (rc < 0)
		return -1;
	buf_init(&b, (size_t)4 << 20);
	if (render_compose(c->project, c->w->env, c->spec, c->voldir, c->internal, &b, e) < 0) {
		buf_release(&b);
		return -1;
	}
	snprintf(path, sizeof(path), "%s/compose.yaml", c->envdir);
	rc = fs_write_atomic(path, b.data, b.len, 0644, e);
	buf_release(&b);
	return rc;
}

static int create_network(struct create *c, const char *subnet, struct err *e)
{
	char bridge[HW_BRIDGE_MAX];
	struct argv a;
	int rc;

	hw_bridge_name(c->project, bridge);
	av_init(&a);
	av_add(&a, "network");
	av_add(&a, "create");
	if (c->internal)
		av_add(&a, "--internal");
	av_add(&a, "--subnet");
	av_add(&a, subnet);
	/* A bridge name we know, for the host wall's INPUT rule. */
	av_add(&a, "-o");
	av_addf(&a, "com.docker.network.bridge.name=%s", bridge);
	av_add(&a, "--label");
	av_addf(&a, "com.docker.compose.project=%s", c->project);
	av_add(&a, "--label");
	av_add(&a, "com.docker.compose.network=default");
	av_add(&a, "--label");
	av_addf(&a, "ai.denv.env=%s", c->w->env);
	av_add(&a, c->net);
	rc = dk_run(&a, SC_DOCKER_TIMEOUT_MS, NULL, e);
	av_release(&a);
	return rc;
}

static int make_network(struct create *c, struct err *e)
{
	struct subnet_pool pool;
	char subnet[SUBNET_CIDR_MAX];
	uint32_t first;

	if (subnet_pool(&pool, e) < 0)
		return -1;
	first = subnet_first(&pool, c->project);
	for (uint32_t k = 0; k < SUBNET_TRIES && k < pool.blocks; k++) {
		subnet_block(&pool, first + k, subnet);
		if (create_network(c, subnet, e) == 0)
			/* Fail closed: no container starts on a network that can reach the host. */
			return hw_isolate(c->project, e);
		if (!strstr(e->msg, "overlap"))
			return -1;
	}
	return err_set(e, "no free /%d in the subnet pool after %d tries (set DENV_SUBNET_POOL to a larger range)",
		       SUBNET_BLOCK_PREFIX, SUBNET_TRIES);
}

static bool all_started(const struct json *deps, const struct json *order, const bool *started)
{
	for (size_t k = 0; k < json_len(deps); k++) {
		const char *dn = json_at(deps, k)->u.str.s;

		for (size_t i = 0; i < json_len(order); i++)
			if (str_eq(json_get_str(json_at(order, i), "name"), dn) && !started[i])
				return false;
	}
	return true;
}

/* Wait until the dependencies of the wave's services are healthy, each once. */
static int wait_deps(struct create *c, const bool *wave, struct err *e)
{
	struct json *waited = json_new_object();
	int rc = 0;

	for (size_t i = 0; i < json_len(c->order) && rc == 0; i++) {
		const struct json *s = json_at(c->order, i), *deps = json_get(s, "depends_on");

		for (size_t k = 0; wave[i] && k < json_len(deps) && rc == 0; k++) {
			const char *dn = json_at(deps, k)->u.str.s;

			if (json_get(waited, dn))
				continue;
			json_object_set_bool(waited, dn, true);
			wk_progress("waiting for %s before starting %s", dn, json_get_str(s, "name"));
			rc = health_wait(c->project, c->order, dn, c->readiness, e);
		}
	}
	json_free(waited);
	return rc;
}

/* Start the services in waves: every service whose dependencies have
 * started (and, before it starts, are healthy) is in the next wave, and a
 * wave's containers start at once, as docker compose does. */
static int start_services(struct create *c, struct err *e)
{
	size_t n = json_len(c->order), left = n;
	bool *started = xcalloc(n ? n : 1, sizeof(bool)), *wave = xcalloc(n ? n : 1, sizeof(bool));
	struct argv *cmds = xcalloc(n ? n : 1, sizeof(struct argv));
	size_t *who = xcalloc(n ? n : 1, sizeof(size_t));
	int rc = 0;

	while (left > 0 && rc == 0) {
		size_t k = 0, bad = 0;

		for (size_t i = 0; i < n; i++)
			wave[i] = !started[i] && all_started(json_get(json_at(c->order, i), "depends_on"), c->order,
							     started);
		if ((rc = wait_deps(c, wave, e)) < 0)
			break;
		for (size_t i = 0; i < n && rc == 0; i++) {
			const struct json *s = json_at(c->order, i);

			if (!wave[i])
				continue;
			av_init(&cmds[k]);
			who[k] = i;
			if (render_run_argv(c->project, c->w->env, s, c->voldir, c->networkless, !c->deny, &cmds[k++],
					    e) < 0)
				rc = -1;
			else
				wk_progress("starting %s (%s)", json_get_str(s, "name"), json_get_str(s, "image"));
		}
		if (rc == 0 && k == 0)
			rc = err_set(e, "services wait on each other in a cycle");	/* render_order refuses these */
		/* One container (a sandbox, the last of a chain) is created and
		 * started on the Engine API's socket, without a CLI process; a
		 * wave of several stays parallel CLI runs. */
		if (rc == 0 && !(k == 1 && engine_run(&cmds[0]) == 1) &&
		    dk_run_many(cmds, k, SC_DOCKER_TIMEOUT_MS, &bad, e) < 0)
			rc = err_prefix(e, "service \"%s\"", json_get_str(json_at(c->order, who[bad]), "name"));
		for (size_t j = 0; j < k; j++) {
			started[who[j]] = true;
			av_release(&cmds[j]);
		}
		left -= k;
	}
	free(started);
	free(wave);
	free(cmds);
	free(who);
	return rc;
}

/* service -> repo@sha256:... (the first registry digest), or image@<id> for
 * a local image that has only its id. */
static struct json *read_digests(struct create *c, struct err *e)
{
	struct json *d = json_new_object();

	for (size_t i = 0; i < json_len(c->order); i++) {
		const struct json *s = json_at(c->order, i), *known;
		const char *image = json_get_str(s, "image");
		struct engine_img im;
		char ref[700];

		if ((known = json_get(c->images, image))) {
			str_copy(im.id, sizeof(im.id), json_get_str(known, "id"));
			str_copy(im.digest, sizeof(im.digest), json_get_str(known, "digest"));
		} else if (engine_image(image, &im, e) <= 0) {
			json_free(d);
			if (!e->msg[0])
				err_set(e, "image %s: not on this host after the start", image);
			return NULL;
		}
		if (im.digest[0]) {
			json_object_set_str(d, json_get_str(s, "name"), im.digest);
		} else {
			const char *tag = json_get_str(json_get(s, "build"), "tag");

			/* A built image runs by its id: name it by its tag. */
			snprintf(ref, sizeof(ref), "%s@%s", tag && *tag ? tag : image, im.id);
			json_object_set_str(d, json_get_str(s, "name"), ref);
		}
	}
	return d;
}

/* service -> "127.0.0.1:port" for its first port; further ports as "svc:port". */
static struct json *read_endpoints(struct create *c, struct err *e)
{
	struct json *eps = json_new_object();

	for (size_t i = 0; i < json_len(c->order); i++) {
		const struct json *s = json_at(c->order, i), *ports = json_get(s, "ports");
		const char *name = json_get_str(s, "name");
		char cname[300];

		dk_container(c->project, name, cname, sizeof(cname));
		for (size_t k = 0; k < json_len(ports); k++) {
			const char *port = json_at(ports, k)->u.str.s;
			struct buf out = BUF_INIT;
			char line[200], key[200];

			if (dk(&out, SC_DOCKER_QUICK_MS, e, "port", cname, port, NULL) < 0) {
				buf_release(&out);
				json_free(eps);
				return NULL;
			}
			dk_first_line(out.data, line, sizeof(line));
			buf_release(&out);
			if (k == 0)
				str_copy(key, sizeof(key), name);
			else
				snprintf(key, sizeof(key), "%s:%s", name, port);
			json_object_set_str(eps, key, line);
		}
	}
	return eps;
}

/* The volumes the snapshot has, cloned (fork) or restored (rollback). A
 * fork first records its origin, so that destroying the source can never
 * remove the snapshot under it (snapshot.c). */
static int from_snapshot(struct create *c, struct err *e)
{
	const struct json *vols = json_get(c->spec, "volumes");
	struct json *rec = NULL;
	char src_env[SC_ID_MAX];
	const struct json *have;

	if (snap_find(c->w, c->from->env, c->from->name, src_env, sizeof(src_env), &rec, e) < 0)
		return -1;
	have = json_get(rec, "volumes");
	if (!c->from->restore) {
		struct json *o = json_new_object();
		char path[4300], *text;
		int rc;

		json_object_set_str(o, "env", src_env);
		json_object_set_str(o, "snapshot", c->from->name);
		json_object_set_str(o, "storage", c->stg.ops->name);
		text = json_to_string(o, JSON_PRETTY);
		json_free(o);
		snprintf(path, sizeof(path), "%s/origin.json", c->envdir);
		rc = fs_write_atomic(path, text, strlen(text), 0600, e);
		free(text);
		if (rc < 0) {
			json_free(rec);
			return -1;
		}
	}
	for (size_t i = 0; i < json_len(vols); i++) {
		const char *vol = json_at(vols, i)->type == JSON_STRING ? json_at(vols, i)->u.str.s : "";
		bool found = false;
		int rc;

		for (size_t k = 0; k < json_len(have) && !found; k++)
			found = str_eq(json_at(have, k)->u.str.s, vol);
		if (!found) {
			wk_progress("volume %s is not in snapshot %s: it starts fresh", vol, c->from->name);
			continue;
		}
		rc = c->from->restore ? c->stg.ops->restore(&c->stg, src_env, c->from->name, c->w->env, vol, e)
				      : c->stg.ops->clone(&c->stg, src_env, c->from->name, c->w->env, vol, e);
		if (rc < 0) {
			json_free(rec);
			return err_prefix(e, "volume \"%s\" from snapshot %s", vol, c->from->name);
		}
		wk_progress("volume %s %s from snapshot %s (%s)", vol, c->from->restore ? "restored" : "cloned",
			    c->from->name, c->stg.ops->name);
	}
	json_free(rec);
	return 0;
}

static int run(struct create *c, struct json *res, struct err *e)
{
	struct json *digests, *eps;
	struct probe_result pr;
	char first[300];

	/* Images first: a missing one fails before anything is made, and
	 * before an earlier attempt's stack is taken down. */
	if (rt_prepare(c->w, c->spec, c->order, res, e) < 0 || disk_reserve_check(c->w->data, e) < 0)
		return -1;
	wk_progress("checking the image(s) of %zu service(s)", json_len(c->order));
	if (images_ensure(c->order, &c->images, e) < 0)
		return -1;
	/* Docker objects of an env exist only after its directory does (and a
	 * destroy removes them first), so a first create skips the clean-up. */
	if (!c->fresh)
		ig_stop_env(c->w->data, c->w->env);
	if (!c->fresh && dk_project_down(c->project, e) < 0)
		return err_prefix(e, "removing an earlier attempt");
	if (c->stg.ops->env_prepare(&c->stg, c->w->env, c->voldir, sizeof(c->voldir), e) < 0 ||
	    disk_prepare(c->w, &c->stg, c->w->env, c->voldir, disk_cap_mb(c->w, c->spec),
			 json_get_int(c->spec, "disk_mb", 0) > 0, res, e) < 0 ||
	    write_files(c, e) < 0)
		return -1;
	if (c->from && from_snapshot(c, e) < 0)
		return -1;
	if (c->from)
		pgf_prepare(c->order, c->voldir, res);
	wk_progress("preparing %zu volume(s) (storage %s)", json_len(json_get(c->spec, "volumes")),
		    c->stg.ops->name);
	if (storage_fill_with(&c->stg, c->project, c->w->env, c->voldir, c->spec, c->images, e) < 0)
		return -1;
	if (c->networkless)
		wk_progress("no network: egress denied and one service (loopback only)");
	else
		wk_progress("creating network %s%s", c->net, c->internal ? " (internal: egress denied)" : "");
	if (!c->networkless && make_network(c, e) < 0)
		return -1;
	c->t_prepared = ev_mono_ms();
	if (start_services(c, e) < 0)
		return -1;
	c->t_started = ev_mono_ms();
	wk_progress("waiting for health");
	if (health_wait(c->project, c->order, NULL, c->readiness, e) < 0 ||
	    fc_check(c->project, json_get(c->spec, "clock"), c->order, res, e) < 0)
		return -1;
	if (!(digests = read_digests(c, e)))
		return -1;
	json_object_set(res, "digests", digests);
	if (!(eps = c->deny ? json_new_object() : read_endpoints(c, e)))
		return -1;
	json_object_set(res, "endpoints", eps);
	if (!c->deny) {
		json_object_set_str(res, "egress", "allowed");
		wk_progress("healthy; egress allowed");
		return 0;
	}
	dk_container(c->project, json_get_str(json_at(c->order, 0), "name"), first, sizeof(first));
	wk_progress("probing egress (%s)", c->w->probe_url);
	{
		char shared[320];

		/* Without a network of its own, a probe container joins the service's. */
		snprintf(shared, sizeof(shared), "container:%s", first);
		if (probe_egress(c->w, c->project, c->networkless ? shared : c->net, first, &pr, e) < 0)
			return -1;
	}
	{
		struct json *ev = json_new_object();

		json_object_set_str(ev, "method", pr.method);
		json_object_set_str(ev, "url", c->w->probe_url);
		json_object_set_str(ev, "result", pr.reached ? "reached" : "BLOCKED");
		json_object_set_str(ev, "detail", pr.detail);
		json_object_set(res, "egress_probe", ev);
	}
	if (pr.reached) {
		wk_progress("egress probe (%s) reached %s: %s", pr.method, c->w->probe_url, pr.detail);
		return err_set(e, EGRESS_LEAK_MSG);
	}
	json_object_set_str(res, "egress", "denied (verified)");
	wk_progress("healthy; egress denied (verified) by the %s probe", pr.method);
	/* Only now, with the probe passed: ports through denvd's own proxy (ingress.c). */
	{
		struct json *ing = json_new_object();

		if (ig_publish(c->w->data, c->w->env, c->project, c->order, eps, ing, e) < 0) {
			json_free(ing);
			return err_prefix(e, "publishing ports");
		}
		if (json_len(ing)) {
			wk_progress("ports published on 127.0.0.1 through denvd's ingress proxy");
			json_object_set(res, "ingress", ing);
		} else {
			json_free(ing);
		}
	}
	return 0;
}

/* started_in (protocol.md) is the start step's duration, the containers
 * only; timings has all three steps in ms, for the control plane's phases. */
static void timings(const struct create *c, struct json *res)
{
	char dur[CLOCK_DURATION_MAX];
	struct json *t = json_new_object();

	clock_format_duration(c->t_started - c->t_prepared, dur, sizeof(dur));
	json_object_set_str(res, "started_in", dur);
	json_object_set_int(t, "prepare_ms", c->t_prepared - c->t_begin);
	json_object_set_int(t, "start_ms", c->t_started - c->t_prepared);
	json_object_set_int(t, "health_ms", ev_mono_ms() - c->t_started);
	json_object_set(res, "timings", t);
}

int create_stack(struct wk *w, const char *kind, const struct json *payload, const struct create_from *from,
		 struct json **result, struct err *e)
{
	struct create c;
	const char *egress = json_get_str(payload, "egress");
	struct json *res, *builds = NULL;
	int rc;

	memset(&c, 0, sizeof(c));
	c.t_begin = ev_mono_ms();
	c.w = w;
	c.from = from;
	if (!sc_safe_id(w->env))
		return err_set(e, "%s: the command has no usable env_id", kind);
	if (egress && *egress && !str_eq(egress, "deny") && !str_eq(egress, "allow"))
		return err_set(e, "%s: egress must be deny or allow, got \"%s\"", kind, egress);
	if (!payload || payload->type != JSON_OBJECT)
		return err_set(e, "%s: payload must be an object", kind);
	/* A fork uses its snapshot's backend; anything else the env's own. */
	if ((from && !from->restore ? stg_open(&c.stg, w, from->storage, e) : stg_for_env(&c.stg, w, w->env, e)) < 0)
		return err_prefix(e, "%s", kind);
	c.stg.disk_mb = disk_cap_mb(w, payload);
	c.deny = !str_eq(egress, "allow");
	c.internal = c.deny && !w->leaky_network;
	if (c.deny && w->leaky_network)
		wk_progress("TEST MODE: egress is denied but the network is NOT internal (--test-leaky-network)");
	dk_project(w->env, c.project, sizeof(c.project));
	snprintf(c.net, sizeof(c.net), "%s_default", c.project);
	snprintf(c.envdir, sizeof(c.envdir), "%s/envs/%s", w->data, w->env);
	c.fresh = !fs_exists(c.envdir);
	c.spec = json_dup(payload);
	json_object_set_str(c.spec, "env_id", w->env);
	json_object_set_str(c.spec, "egress", c.deny ? "deny" : "allow");
	json_object_set_str(c.spec, "storage", c.stg.ops->name);
	json_object_del(c.spec, "from_env");
	json_object_del(c.spec, "from_snapshot");
	c.networkless = render_networkless(c.spec, w->leaky_network);
	/* Builds first (build.c): they set each built service's image to the
	 * built id, which everything after (images, spec.json) then uses. */
	if (builds_ensure(w, json_get(c.spec, "services"), &builds, e) < 0 ||
	    !(c.order = render_order(json_get(c.spec, "services"), e)) ||
	    fc_prepare(json_get(c.spec, "clock"), c.order, e) < 0) {
		json_free(c.spec);
		json_free(c.order);
		json_free(builds);
		return err_prefix(e, "%s", kind);
	}
	res = json_new_object();
	c.readiness = json_new_array();
	json_object_set(res, "readiness", c.readiness);	/* res owns it; health.c fills it */
	if (json_len(builds))
		json_object_set(res, "builds", builds);
	else
		json_free(builds);
	rc = run(&c, res, e);
	if (rc < 0) {
		struct err e2;

		ig_stop_env(w->data, w->env);
		if (dk_project_down(c.project, &e2) < 0)
			wk_progress("stopping the stack after the failure: %s", e2.msg);
		json_free(res);
	} else {
		struct err e2;

		timings(&c, res);
		json_object_set_str(res, "storage", c.stg.ops->name);
		/* What the name gateway routes by (names_route.c). */
		if (nm_record(w->data, w->env, json_get(res, "endpoints"), &e2) < 0)
			wk_progress("recording the endpoints for ingress names: %s", e2.msg);
		*result = res;
	}
	json_free(c.spec);
	json_free(c.order);
	json_free(c.images);
	return rc;
}

int create_read_spec(const struct wk *w, const char *env, struct json **spec, struct err *e)
{
	int rc = sc_spec_load(w->data, env, spec, e);

	if (rc == 0)
		return err_set(e, "environment %s does not exist on this host", env);
	return rc < 0 ? -1 : 0;
}

int cmd_env_create(struct wk *w, const struct json *payload, struct json **result, struct err *e)
{
	const char *snap = json_get_str(payload, "from_snapshot");
	struct create_from from;
	struct json *rec = NULL;
	char src_env[SC_ID_MAX];
	int rc;

	if (!snap || !*snap)
		return create_stack(w, "env.create", payload, NULL, result, e);
	/* env.create with from_snapshot is a fork whose source env is not named. */
	if (!sc_safe_id(snap))
		return err_set(e, "env.create: from_snapshot \"%s\" is not a snapshot name", snap);
	if (snap_from(w, NULL, snap, &from, src_env, sizeof(src_env), &rec, e) < 0)
		return err_prefix(e, "env.create");
	rc = create_stack(w, "env.create", payload, &from, result, e);
	json_free(rec);
	return rc;
}
