/* render.c: from the Spec's services to what Docker runs: the start order
 * (depends_on first, otherwise by name), one `docker run` argument vector per
 * service with its caps, user, env, command, healthcheck and Compose labels,
 * and the equivalent compose.yaml written beside spec.json for people to
 * read (or run). Every scalar in the YAML is a JSON string, which YAML reads
 * as a double-quoted scalar, so no user value can change its structure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/str.h"
#include "sidecar/sidecar.h"
#include "spec/spec.h"

static const struct json *find_service(const struct json *services, const char *name)
{
	for (size_t i = 0; i < json_len(services); i++)
		if (str_eq(json_get_str(json_at(services, i), "name"), name))
			return json_at(services, i);
	return NULL;
}

/* Depth-first: dependencies before the service; a cycle is refused. */
static int visit(const struct json *services, const struct json *s, char *state, struct json *order,
		 struct err *e)
{
	size_t idx = 0;
	const struct json *deps = json_get(s, "depends_on");

	while (json_at(services, idx) != s)
		idx++;
	if (state[idx] == 2)
		return 0;
	if (state[idx] == 1)
		return err_set(e, "depends_on: cycle through service \"%s\"", json_get_str(s, "name"));
	state[idx] = 1;
	for (size_t i = 0; i < json_len(deps); i++) {
		const char *dn = json_at(deps, i)->type == JSON_STRING ? json_at(deps, i)->u.str.s : "";
		const struct json *d = find_service(services, dn);

		if (!d)
			return err_set(e, "service \"%s\" depends on unknown service \"%s\"",
				       json_get_str(s, "name"), dn);
		if (visit(services, d, state, order, e) < 0)
			return -1;
	}
	state[idx] = 2;
	json_array_push(order, json_dup(s));
	return 0;
}

struct json *render_order(const struct json *services, struct err *e)
{
	size_t n = json_len(services);
	char *state = xcalloc(n ? n : 1, 1);
	struct json *order = json_new_array();

	if (!services || services->type != JSON_ARRAY || n == 0) {
		free(state);
		json_free(order);
		err_set(e, "no services");
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		const struct json *s = json_at(services, i);
		const char *name = json_get_str(s, "name"), *image = json_get_str(s, "image");

		if (!name || !spec_valid_name(name) || !image || !*image) {
			free(state);
			json_free(order);
			err_set(e, "service %zu: needs a name ([a-z0-9_-]) and an image", i);
			return NULL;
		}
	}
	for (size_t i = 0; i < n; i++)
		if (visit(services, json_at(services, i), state, order, e) < 0) {
			free(state);
			json_free(order);
			return NULL;
		}
	free(state);
	return order;
}

/* "uid[:gid]" in numbers; 0 and the ids, or -1 for a name or empty. The
 * image-less case of pw_resolve, so the two never disagree. */
int render_user(const char *user, long *uid, long *gid)
{
	struct err e;

	if (!user || !*user)
		return -1;
	return pw_resolve(user, NULL, uid, gid, &e);
}

/* What both renderings of a service start from: its container's name and
 * its caps, the host's defaults where the spec leaves one out. */
struct svc_run {
	char cname[SC_DOCKER_NAME_MAX];
	int64_t mem, pids;
	double cpus;
};

static void svc_run_of(const char *project, const struct json *svc, struct svc_run *r)
{
	const struct json *res = json_get(svc, "resources");

	dk_container(project, json_get_str(svc, "name"), r->cname, sizeof(r->cname));
	r->mem = json_get_int(res, "memory_mb", 0);
	r->pids = json_get_int(res, "pids", 0);
	r->cpus = json_get_double(res, "cpus", 0);
	if (r->mem <= 0)
		r->mem = SC_DEFAULT_MEMORY_MB;
	if (r->pids <= 0)
		r->pids = SC_DEFAULT_PIDS;
	if (str_eq(json_get_str(svc, "runtime"), "gvisor"))
		r->pids = RT_GVISOR_PIDS_BASE + r->pids * RT_GVISOR_PIDS_EACH;
	if (r->cpus <= 0)
		r->cpus = SC_DEFAULT_CPUS;
}

/* Docker's CLI takes a healthcheck as one shell string: CMD-SHELL as it is,
 * CMD as its arguments quoted (so the image needs /bin/sh either way). */
static void health_args(const struct json *h, struct argv *a)
{
	const struct json *test = json_get(h, "test");
	const char *kind = json_len(test) ? json_at(test, 0)->u.str.s : "";
	const char *iv = json_get_str(h, "interval");
	int64_t retries = json_get_int(h, "retries", 0);
	struct buf cmd = BUF_INIT;

	if (str_eq(kind, "CMD-SHELL") && json_len(test) >= 2) {
		buf_adds(&cmd, json_at(test, 1)->u.str.s);
	} else {
		for (size_t i = 1; i < json_len(test); i++) {
			if (i > 1)
				buf_addch(&cmd, ' ');
			buf_add_shell_word(&cmd, json_at(test, i)->u.str.s);
		}
	}
	av_add(a, "--health-cmd");
	av_add(a, cmd.data);
	buf_release(&cmd);
	if (iv && *iv) {
		av_add(a, "--health-interval");
		av_add(a, iv);
	}
	if (retries > 0) {
		av_add(a, "--health-retries");
		av_addf(a, "%lld", (long long)retries);
	}
}

static int volume_args(const struct json *svc, const char *voldir, struct argv *a, struct err *e)
{
	const struct json *vols = json_get(svc, "volumes");

	for (size_t i = 0; i < json_len(vols); i++) {
		const struct json *v = json_at(vols, i);
		const char *spec = v->type == JSON_STRING ? v->u.str.s : "", *colon = strchr(spec, ':');
		char name[SC_ID_MAX];

		if (!colon || colon == spec || (size_t)(colon - spec) >= sizeof(name) || colon[1] != '/')
			return err_set(e, "service \"%s\": volume \"%s\" must be name:/path",
				       json_get_str(svc, "name"), spec);
		memcpy(name, spec, (size_t)(colon - spec));
		name[colon - spec] = '\0';
		if (!spec_valid_name(name))
			return err_set(e, "service \"%s\": bad volume name \"%s\"", json_get_str(svc, "name"), name);
		av_add(a, "-v");
		av_addf(a, "%s/%s:%s", voldir, name, colon + 1);
	}
	return 0;
}

bool render_networkless(const struct json *spec, bool leaky)
{
	return !str_eq(json_get_str(spec, "egress"), "allow") && !leaky && json_len(json_get(spec, "services")) == 1;
}

int render_run_argv(const char *project, const char *env, const struct json *svc,
		    const char *voldir, bool networkless, bool publish, struct argv *a, struct err *e)
{
	const char *name = json_get_str(svc, "name"), *user = json_get_str(svc, "user");
	const struct json *envs = json_get(svc, "env"), *ports = json_get(svc, "ports");
	const struct json *cmd = json_get(svc, "command"), *h = json_get(svc, "health");
	struct svc_run r;

	svc_run_of(project, svc, &r);
	av_add(a, "run");
	av_add(a, "-d");
	av_add(a, "--name");
	av_add(a, r.cname);
	av_add(a, "--hostname");
	av_add(a, name);
	av_add(a, "--network");
	if (networkless) {
		/* Loopback only; its own name still resolves, for it and for a
		 * verifier that joins its namespace (verify.c). */
		av_add(a, "none");
		av_add(a, "--add-host");
		av_addf(a, "%s:127.0.0.1", name);
	} else {
		av_addf(a, "%s_default", project);
		av_add(a, "--network-alias");
		av_add(a, name);
	}
	av_add(a, "--label");
	av_addf(a, "com.docker.compose.project=%s", project);
	av_add(a, "--label");
	av_addf(a, "com.docker.compose.service=%s", name);
	av_add(a, "--label");
	av_add(a, "com.docker.compose.container-number=1");
	av_add(a, "--label");
	av_addf(a, "ai.denv.env=%s", env);
	av_add(a, "--memory");
	av_addf(a, "%lldm", (long long)r.mem);
	av_add(a, "--pids-limit");
	av_addf(a, "%lld", (long long)r.pids);
	av_add(a, "--cpus");
	av_addf(a, "%.3f", r.cpus);
	if (user && *user) {
		av_add(a, "--user");
		av_add(a, user);
	}
	for (size_t i = 0; envs && envs->type == JSON_OBJECT && i < envs->u.obj.n; i++) {
		const struct json *v = envs->u.obj.m[i].val;

		av_add(a, "-e");
		av_addf(a, "%s=%s", envs->u.obj.m[i].key, v->type == JSON_STRING ? v->u.str.s : "");
	}
	fc_run_args(svc, a);	/* after env: its LD_PRELOAD is the one that holds */
	rt_run_args(svc, a);
	if (volume_args(svc, voldir, a, e) < 0)
		return -1;
	for (size_t i = 0; publish && i < json_len(ports); i++) {
		const struct json *p = json_at(ports, i);

		av_add(a, "-p");
		av_addf(a, "127.0.0.1::%s", p->type == JSON_STRING ? p->u.str.s : "");
	}
	if (h && json_len(json_get(h, "test")) >= 2)
		health_args(h, a);
	av_add(a, json_get_str(svc, "image"));
	for (size_t i = 0; i < json_len(cmd); i++)
		av_add(a, json_at(cmd, i)->type == JSON_STRING ? json_at(cmd, i)->u.str.s : "");
	return 0;
}

/* ---- compose.yaml ---- */

static void y_str(struct buf *b, const char *s)
{
	json_write_string(b, s ? s : "", s ? strlen(s) : 0);
}

static void y_list(struct buf *b, const struct json *arr)
{
	buf_addch(b, '[');
	for (size_t i = 0; i < json_len(arr); i++) {
		const struct json *v = json_at(arr, i);

		if (i)
			buf_adds(b, ", ");
		y_str(b, v->type == JSON_STRING ? v->u.str.s : "");
	}
	buf_addch(b, ']');
}

static void y_service(struct buf *b, const char *project, const char *env, const struct json *s,
		      const char *voldir, bool publish, bool networkless)
{
	const struct json *envs = json_get(s, "env"), *h = json_get(s, "health");
	const struct json *vols = json_get(s, "volumes"), *ports = json_get(s, "ports");
	const char *name = json_get_str(s, "name"), *user = json_get_str(s, "user");
	struct svc_run r;

	svc_run_of(project, s, &r);
	buf_adds(b, "  ");
	y_str(b, name);
	buf_adds(b, ":\n    image: ");
	y_str(b, json_get_str(s, "image"));
	buf_adds(b, "\n    container_name: ");
	y_str(b, r.cname);
	if (str_eq(json_get_str(s, "runtime"), "gvisor"))
		buf_adds(b, "\n    runtime: " RT_RUNSC_DOCKER_NAME);
	if (user && *user) {
		buf_adds(b, "\n    user: ");
		y_str(b, user);
	}
	if (json_len(json_get(s, "command"))) {
		buf_adds(b, "\n    command: ");
		y_list(b, json_get(s, "command"));
	}
	if (envs && envs->type == JSON_OBJECT && envs->u.obj.n) {
		buf_adds(b, "\n    environment:");
		for (size_t i = 0; i < envs->u.obj.n; i++) {
			const struct json *v = envs->u.obj.m[i].val;

			buf_adds(b, "\n      ");
			y_str(b, envs->u.obj.m[i].key);
			buf_adds(b, ": ");
			y_str(b, v->type == JSON_STRING ? v->u.str.s : "");
		}
	}
	if (json_len(vols)) {
		buf_adds(b, "\n    volumes:");
		for (size_t i = 0; i < json_len(vols); i++) {
			const char *spec = json_at(vols, i)->u.str.s;
			struct buf full = BUF_INIT;

			buf_adds(b, "\n      - ");
			buf_addf(&full, "%s/%s", voldir, spec);
			y_str(b, full.data);
			buf_release(&full);
		}
	}
	if (publish && json_len(ports)) {
		buf_adds(b, "\n    ports:");
		for (size_t i = 0; i < json_len(ports); i++) {
			char p[128];

			snprintf(p, sizeof(p), "127.0.0.1::%s", json_at(ports, i)->u.str.s);
			buf_adds(b, "\n      - ");
			y_str(b, p);
		}
	}
	if (h && json_len(json_get(h, "test")) >= 2) {
		buf_adds(b, "\n    healthcheck:\n      test: ");
		y_list(b, json_get(h, "test"));
		if (json_get_str(h, "interval") && *json_get_str(h, "interval")) {
			buf_adds(b, "\n      interval: ");
			y_str(b, json_get_str(h, "interval"));
		}
		if (json_get_int(h, "retries", 0) > 0)
			buf_addf(b, "\n      retries: %lld", (long long)json_get_int(h, "retries", 0));
	}
	if (json_len(json_get(s, "depends_on"))) {
		buf_adds(b, "\n    depends_on: ");
		y_list(b, json_get(s, "depends_on"));
	}
	buf_addf(b, "\n    mem_limit: %lldm\n    pids_limit: %lld\n    cpus: %.3f", (long long)r.mem,
		 (long long)r.pids, r.cpus);
	buf_adds(b, "\n    labels:\n      ai.denv.env: ");
	y_str(b, env);
	if (networkless) {
		buf_adds(b, "\n    network_mode: none\n    extra_hosts: [");
		{
			char self[SC_ID_MAX + 16];

			snprintf(self, sizeof(self), "%s:127.0.0.1", json_get_str(s, "name"));
			y_str(b, self);
		}
		buf_adds(b, "]\n");
	} else {
		buf_adds(b, "\n    networks: [\"default\"]\n");
	}
}

int render_compose(const char *project, const char *env, const struct json *spec,
		   const char *voldir, bool internal, struct buf *out, struct err *e)
{
	const struct json *services = json_get(spec, "services");
	bool publish = str_eq(json_get_str(spec, "egress"), "allow");
	/* internal is "egress denied and not the leaky test mode" (create.c). */
	bool networkless = internal && json_len(services) == 1;
	char net[SC_DOCKER_NAME_MAX];

	snprintf(net, sizeof(net), "%s_default", project);
	buf_adds(out, "# Rendered by denvd from spec.json: the stack as denvd runs it with the docker CLI.\n");
	buf_adds(out, "# Volumes are host directories under the data dir.\nname: ");
	y_str(out, project);
	buf_adds(out, "\nservices:\n");
	for (size_t i = 0; i < json_len(services); i++)
		y_service(out, project, env, json_at(services, i), voldir, publish, networkless);
	if (!networkless) {
		buf_adds(out, "networks:\n  default:\n    name: ");
		y_str(out, net);
		buf_addf(out, "\n    internal: %s\n", internal ? "true" : "false");
	}
	if (out->len >= out->max)
		return err_set(e, "compose.yaml too large");
	return 0;
}
