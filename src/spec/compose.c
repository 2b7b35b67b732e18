/* compose.c: a compose document into a Spec: services, volumes, x-denv. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/str.h"
#include "spec/spec.h"
#include "yaml/yaml.h"

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Names of an object's members, sorted: services are processed in name order. */
static const char **sorted_keys(const struct json *obj, size_t *n)
{
	const char **keys = xcalloc(json_len(obj) + 1, sizeof(*keys));

	*n = json_len(obj);
	for (size_t i = 0; i < *n; i++)
		keys[i] = obj->u.obj.m[i].key;
	qsort(keys, *n, sizeof(*keys), cmp_str);
	return keys;
}

static int read_volumes(const struct json *v, struct json *spec, struct err *e)
{
	struct json *list = json_new_array();
	const char **names;
	size_t n;

	json_object_set(spec, "volumes", list);
	if (!v || v->type == JSON_NULL)
		return 0;
	if (v->type != JSON_OBJECT)
		return err_set(e, "compose: top-level volumes must be a map of names");
	if (json_len(v) > SPEC_MAX_VOLUMES)
		return err_set(e, "compose: more than %d volumes", SPEC_MAX_VOLUMES);
	names = sorted_keys(v, &n);
	for (size_t i = 0; i < n; i++) {
		const struct json *def = json_get(v, names[i]);
		if (!spec_valid_name(names[i])) {
			err_set(e, "compose: volume name \"%s\" is not valid", names[i]);
			free(names);
			return -1;
		}
		if (json_get_bool(def, "external", false)) {
			err_set(e, "compose: volume \"%s\" is external; only volumes denv creates are forkable", names[i]);
			free(names);
			return -1;
		}
		json_array_push(list, json_new_str(names[i]));
	}
	free(names);
	return 0;
}

/* depends_on must name services, and must not loop (we start in that order). */
static int check_depends(const struct json *services, struct err *e)
{
	size_t n = json_len(services);
	int *state = xcalloc(n, sizeof(*state));	/* 0 new, 1 on the path, 2 done */
	size_t *stack = xcalloc(n + 1, sizeof(*stack)), *next = xcalloc(n + 1, sizeof(*next));
	int rc = 0;

	for (size_t s = 0; s < n && rc == 0; s++) {
		size_t depth = 0;
		if (state[s])
			continue;
		stack[0] = s;
		next[0] = 0;
		state[s] = 1;
		while (depth != (size_t)-1 && rc == 0) {
			const struct json *svc = json_at(services, stack[depth]);
			const struct json *deps = json_get(svc, "depends_on");
			size_t k;
			if (next[depth] >= json_len(deps)) {
				state[stack[depth]] = 2;
				depth--;
				continue;
			}
			const char *dep = json_at(deps, next[depth]++)->u.str.s;
			for (k = 0; k < n; k++)
				if (!strcmp(json_get_str(json_at(services, k), "name"), dep))
					break;
			if (k == n) {
				rc = err_set(e, "compose: service \"%s\" depends on unknown service \"%s\"",
					     json_get_str(svc, "name"), dep);
			} else if (state[k] == 1) {
				rc = err_set(e, "compose: depends_on has a cycle through service \"%s\"", dep);
			} else if (state[k] == 0) {
				state[k] = 1;
				stack[++depth] = k;
				next[depth] = 0;
			}
		}
	}
	free(state);
	free(stack);
	free(next);
	return rc;
}

static int read_services(const struct json *compose, struct json *spec, struct err *e)
{
	const struct json *services = json_get(compose, "services");
	const struct json *declared = json_get(compose, "volumes");
	struct json *list = json_new_array();
	const char **names;
	size_t n;
	int rc = 0;

	json_object_set(spec, "services", list);
	if (!services || services->type != JSON_OBJECT || json_len(services) == 0)
		return err_set(e, "compose: no services");
	if (json_len(services) > SPEC_MAX_SERVICES)
		return err_set(e, "compose: more than %d services", SPEC_MAX_SERVICES);
	names = sorted_keys(services, &n);
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct json *svc;
		if (!spec_valid_name(names[i])) {
			rc = err_set(e, "compose: service name \"%s\" is not valid (letters, digits, _ . -)", names[i]);
			break;
		}
		svc = spec_service_resolve(names[i], json_get(services, names[i]), declared, e);
		if (!svc)
			rc = -1;
		else
			json_array_push(list, svc);
	}
	free(names);
	if (rc == 0)
		rc = check_depends(list, e);
	return rc;
}

static int read_agent(const struct json *x, struct json *spec, struct err *e)
{
	const struct json *agent = json_get(x, "agent");
	const char *svc_name, *user;
	const struct json *svc;
	struct json *out;

	if (!agent || agent->type == JSON_NULL)
		return 0;
	svc_name = json_get_str(agent, "service");
	if (!svc_name)
		return err_set(e, "compose: x-denv.agent.service is required when x-denv.agent is set");
	svc = spec_service(spec, svc_name);
	if (!svc)
		return err_set(e, "compose: x-denv.agent.service \"%s\" is not a service", svc_name);
	user = json_get_str(svc, "user");
	/* An empty user runs as the image's user, which is root unless proven otherwise. */
	if (!user || !*user || !strcmp(user, "0") || !strcmp(user, "root") ||
	    str_has_prefix(user, "0:") || str_has_prefix(user, "root:"))
		return err_set(e, "compose: x-denv.agent.service \"%s\" must set a non-root user "
			       "(user: \"1000:1000\"); the agent is never root", svc_name);
	out = json_new_object();
	json_object_set_str(out, "service", svc_name);
	json_object_set(spec, "agent", out);
	return 0;
}

static int read_collect(const struct json *v, struct json *verifier, struct err *e)
{
	struct json *list = json_new_array();

	json_object_set(verifier, "collect", list);
	if (!v || v->type == JSON_NULL)
		return 0;
	if (v->type != JSON_ARRAY || json_len(v) > SPEC_MAX_LIST)
		return err_set(e, "compose: x-denv.verifier.collect must be a list of absolute paths");
	for (size_t i = 0; i < json_len(v); i++) {
		const struct json *p = json_at(v, i);
		if (p->type != JSON_STRING || p->u.str.len >= SPEC_MAX_STRING)
			return err_set(e, "compose: x-denv.verifier.collect must be a list of absolute paths");
		if (p->u.str.s[0] != '/')
			return err_set(e, "compose: x-denv.verifier.collect path \"%s\" must be absolute", p->u.str.s);
		json_array_push(list, json_new_str(p->u.str.s));
	}
	return 0;
}

static int read_verifier(const struct json *x, struct json *spec, struct err *e)
{
	const struct json *v = json_get(x, "verifier"), *cmd, *timeout;
	const char *image, *service;
	struct json *out, *argv;

	if (!v || v->type == JSON_NULL)
		return 0;
	image = json_get_str(v, "image");
	service = json_get_str(v, "service");
	if ((image && *image) == (service && *service))
		return err_set(e, "compose: x-denv.verifier needs exactly one of image or service");
	cmd = json_get(v, "command");
	if (!cmd || cmd->type == JSON_NULL)
		return err_set(e, "compose: x-denv.verifier.command is required");
	if (!json_get(spec, "agent"))
		return err_set(e, "compose: x-denv.verifier requires x-denv.agent.service, the service whose paths are collected");
	if (service && !spec_service(spec, service))
		return err_set(e, "compose: x-denv.verifier.service \"%s\" is not a service", service);
	if (!(argv = spec_argv(cmd, "compose: x-denv.verifier.command", e)))
		return -1;
	if (json_len(argv) == 0) {
		json_free(argv);
		return err_set(e, "compose: x-denv.verifier.command is required");
	}
	out = json_new_object();
	json_object_set(spec, "verifier", out);
	json_object_set_str(out, "image", image ? image : "");
	json_object_set_str(out, "service", service ? service : "");
	json_object_set(out, "command", argv);
	if (read_collect(json_get(v, "collect"), out, e) < 0)
		return -1;
	timeout = json_get(v, "timeout_sec");
	if (timeout && timeout->type != JSON_NULL &&
	    (timeout->type != JSON_INT || timeout->u.i <= 0 || timeout->u.i > SPEC_VERIFIER_TIMEOUT_MAX))
		return err_set(e, "compose: x-denv.verifier.timeout_sec must be between 1 and %d",
			       SPEC_VERIFIER_TIMEOUT_MAX);
	json_object_set_int(out, "timeout_sec",
			    timeout && timeout->type == JSON_INT ? timeout->u.i : SPEC_VERIFIER_TIMEOUT_DEFAULT);
	return 0;
}

/* The deploy's instant is now: the Spec is made when the deploy arrives.
 * The sidecar sets LD_PRELOAD and FAKETIME* itself (fakeclock.c), so a
 * service's own would be overridden: refused rather than dropped. */
static int read_clock(const struct json *v, struct json *spec, struct err *e)
{
	const struct json *services = json_get(spec, "services");
	struct json *clock;

	if (spec_clock(v, clock_now_ns(), &clock, e) < 0)
		return -1;
	if (!clock)
		return 0;
	json_object_set(spec, "clock", clock);
	for (size_t i = 0; i < json_len(services); i++) {
		const struct json *env = json_get(json_at(services, i), "env");

		for (size_t k = 0; env && env->type == JSON_OBJECT && k < env->u.obj.n; k++) {
			const char *key = env->u.obj.m[k].key;

			if (str_eq(key, "LD_PRELOAD") || !strncmp(key, "FAKETIME", strlen("FAKETIME")))
				return err_set(e, "compose: service \"%s\" sets %s, which x-denv.clock sets itself "
					       "(libfaketime); remove it or use clock: real",
					       json_get_str(json_at(services, i), "name"), key);
		}
	}
	return 0;
}

/* x-denv.pool: how many forks of each healthy version the control plane
 * keeps warm for from_version sandboxes. Absent or 0 leaves no "pool". */
static int read_pool(const struct json *v, struct json *spec, struct err *e)
{
	if (!v || v->type == JSON_NULL)
		return 0;
	if (v->type != JSON_INT || v->u.i < 0 || v->u.i > SPEC_MAX_POOL)
		return err_set(e, "compose: x-denv.pool must be a whole number from 0 to %d", SPEC_MAX_POOL);
	if (v->u.i > 0)
		json_object_set_int(spec, "pool", v->u.i);
	return 0;
}

static int read_xdenv(const struct json *x, struct json *spec, struct err *e)
{
	const struct json *egress = json_get(x, "egress"), *warm = json_get(x, "warm");
	char shown[SPEC_MAX_STRING];
	struct json *argv;

	if (x && x->type != JSON_OBJECT && x->type != JSON_NULL)
		return err_set(e, "compose: x-denv must be a map");
	json_object_set_str(spec, "kind", json_get_str(x, "kind") ? json_get_str(x, "kind") : "");
	if (egress && egress->type != JSON_NULL) {
		if (egress->type != JSON_STRING ||
		    (strcmp(egress->u.str.s, "deny") && strcmp(egress->u.str.s, "allow"))) {
			if (spec_scalar_string(egress, shown, sizeof(shown)) < 0)
				str_copy(shown, sizeof(shown), "?");
			return err_set(e, "compose: x-denv.egress must be deny or allow, got \"%s\"", shown);
		}
		json_object_set_str(spec, "egress", egress->u.str.s);
	} else {
		json_object_set_str(spec, "egress", "deny");
	}
	/* A string, or the blog's one-string list, runs under sh -c (warm.c). */
	if (!(argv = spec_warm(warm, "compose: x-denv.warm", e)))
		return -1;
	json_object_set(spec, "warm", argv);
	if (read_clock(json_get(x, "clock"), spec, e) < 0 || spec_disk(json_get(x, "disk"), spec, e) < 0 ||
	    read_agent(x, spec, e) < 0 || read_verifier(x, spec, e) < 0 ||
	    read_pool(json_get(x, "pool"), spec, e) < 0)
		return -1;
	return spec_promote(json_get(x, "promote"), spec, e);
}

int spec_from_compose(const struct json *compose, struct json **out, struct err *e)
{
	struct json *spec = json_new_object(), *warnings = json_new_array();

	if (!compose || compose->type != JSON_OBJECT) {
		json_free(spec);
		json_free(warnings);
		return err_set(e, "compose: no services");
	}
	/* kind and egress go first so the stored spec reads top-down; x-denv
	 * fills them in place after the services it refers to are read. */
	json_object_set_str(spec, "kind", "");
	json_object_set_str(spec, "egress", "deny");
	if (read_services(compose, spec, e) < 0 ||
	    read_volumes(json_get(compose, "volumes"), spec, e) < 0 ||
	    read_xdenv(json_get(compose, "x-denv"), spec, e) < 0 || spec_runtimes(compose, spec, e) < 0) {
		json_free(spec);
		json_free(warnings);
		return -1;
	}
	spec_check_keys(compose, spec, warnings);
	json_object_set(spec, "warnings", warnings);
	*out = spec;
	return 0;
}

int spec_parse_compose(const char *text, size_t len, struct json **out, struct err *e)
{
	struct json *doc;
	int rc;

	if (len > SPEC_MAX_COMPOSE_BYTES)
		return err_set(e, "compose: file is larger than %zu bytes", SPEC_MAX_COMPOSE_BYTES);
	if (yaml_parse(text, len, NULL, &doc, e) < 0)
		return err_prefix(e, "compose");
	rc = spec_from_compose(doc, out, e);
	json_free(doc);
	return rc;
}

const struct json *spec_service(const struct json *spec, const char *name)
{
	const struct json *services = json_get(spec, "services");

	for (size_t i = 0; i < json_len(services); i++)
		if (str_eq(json_get_str(json_at(services, i), "name"), name))
			return json_at(services, i);
	return NULL;
}
