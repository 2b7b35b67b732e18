/* service.c: one compose service into one Spec service, or the refusal. */
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/str.h"
#include "spec/spec.h"

static int refuse_unsafe(const char *name, const struct json *svc, struct err *e)
{
	const struct json *v = json_get(svc, "network_mode");
	const struct json *priv = json_get(svc, "privileged");
	const struct json *caps = json_get(svc, "cap_add");

	if (v && v->type == JSON_STRING && !strcmp(v->u.str.s, "host"))
		return err_set(e, "compose: service \"%s\" uses network_mode: host, which cannot be forked", name);
	if ((priv && !(priv->type == JSON_BOOL && !priv->u.b) && priv->type != JSON_NULL) ||
	    (caps && caps->type != JSON_NULL && !(caps->type == JSON_ARRAY && json_len(caps) == 0)))
		return err_set(e, "compose: service \"%s\" asks for privileged or cap_add, which is refused", name);
	return 0;
}

static int read_env(const char *name, const struct json *v, struct json *env, struct err *e)
{
	if (json_len(v) > SPEC_MAX_LIST)
		return err_set(e, "compose: service \"%s\" has more than %d environment entries", name, SPEC_MAX_LIST);
	return spec_kv_list(name, "environment", v, env, e);
}

/* "8080:80" -> "80", "127.0.0.1:8080:80/tcp" -> "80", 80 -> "80", {target: 80} -> "80".
 * Host ports are dropped: forks of one environment run side by side. */
static int read_port(const char *name, const struct json *v, char *out, size_t n, struct err *e)
{
	char s[128], *colon, *slash;
	uint64_t port;

	if (v->type == JSON_OBJECT)
		v = json_get(v, "target");
	if (!v || spec_scalar_string(v, s, sizeof(s)) < 0)
		return err_set(e, "compose: service \"%s\" has a port that is not a number or \"host:container\"", name);
	colon = strrchr(s, ':');
	if (colon)
		memmove(s, colon + 1, strlen(colon + 1) + 1);
	slash = strchr(s, '/');
	if (slash) {
		if (strcmp(slash, "/tcp") != 0)
			return err_set(e, "compose: service \"%s\" port \"%s\": only tcp ports are supported", name, s);
		*slash = '\0';
	}
	if (str_to_u64(s, &port) < 0 || port == 0 || port > 65535)
		return err_set(e, "compose: service \"%s\" port \"%s\" is not a port number (ranges are not supported)",
			       name, s);
	snprintf(out, n, "%u", (unsigned)port);
	return 0;
}

static int read_ports(const char *name, const struct json *v, struct json *ports, struct err *e)
{
	char port[16];

	if (v->type != JSON_ARRAY || json_len(v) > SPEC_MAX_LIST)
		return err_set(e, "compose: service \"%s\" ports must be a list", name);
	for (size_t i = 0; i < json_len(v); i++) {
		int dup = 0;
		if (read_port(name, json_at(v, i), port, sizeof(port), e) < 0)
			return -1;
		for (size_t j = 0; j < json_len(ports); j++)
			dup |= !strcmp(json_at(ports, j)->u.str.s, port);
		if (!dup)
			json_array_push(ports, json_new_str(port));
	}
	return 0;
}

/* "vol:/path" or "vol:/path:ro", or the long form {type: volume, source, target, read_only}. */
static int read_mount(const char *name, const struct json *v, const struct json *declared,
		      struct json *mounts, struct err *e)
{
	char spec[SPEC_MAX_STRING], src[SPEC_MAX_STRING], *path, *mode;
	int ro = 0;

	if (v->type == JSON_OBJECT) {
		const char *type = json_get_str(v, "type");
		const char *source = json_get_str(v, "source");
		const char *target = json_get_str(v, "target");
		if (type && !strcmp(type, "bind"))
			return err_set(e, "compose: service \"%s\" bind-mounts \"%s\"; only named volumes are forkable",
				       name, source ? source : "?");
		if (!source || !target || (type && strcmp(type, "volume")))
			return err_set(e, "compose: service \"%s\" volume \"%s\" must be <volume>:<path>",
				       name, source ? source : target ? target : "?");
		ro = json_get_bool(v, "read_only", false);
		if (snprintf(spec, sizeof(spec), "%s:%s", source, target) >= (int)sizeof(spec))
			return err_set(e, "compose: service \"%s\" volume \"%s\" is too long", name, source);
	} else if (v->type != JSON_STRING || v->u.str.len >= sizeof(spec)) {
		return err_set(e, "compose: service \"%s\" volumes must be strings <volume>:<path>", name);
	} else {
		memcpy(spec, v->u.str.s, v->u.str.len + 1);
	}
	str_copy(src, sizeof(src), spec);
	path = strchr(src, ':');
	if (path)
		*path++ = '\0';
	if (src[0] == '/' || src[0] == '.' || src[0] == '~') {
		if (!path)	/* "/data" alone: an anonymous volume, not a bind */
			return err_set(e, "compose: service \"%s\" volume \"%s\" must be <volume>:<path>", name, src);
		return err_set(e, "compose: service \"%s\" bind-mounts \"%s\"; only named volumes are forkable", name, src);
	}
	if (!path || path[0] != '/')
		return err_set(e, "compose: service \"%s\" volume \"%s\" must be <volume>:<path>", name, src);
	mode = strchr(path, ':');
	if (mode) {
		*mode++ = '\0';
		if (!strcmp(mode, "ro"))
			ro = 1;
		else if (strcmp(mode, "rw"))
			return err_set(e, "compose: service \"%s\" volume \"%s\" mode \"%s\" is not ro or rw", name, src, mode);
	}
	if (!json_get(declared, src))
		return err_set(e, "compose: service \"%s\" uses undeclared volume \"%s\"", name, src);
	/* src and path are pieces of one string shorter than SPEC_MAX_STRING. */
	if (snprintf(spec, sizeof(spec), "%s:%s%s", src, path, ro ? ":ro" : "") >= (int)sizeof(spec))
		return err_set(e, "compose: service \"%s\" volume \"%s\" is too long", name, src);
	json_array_push(mounts, json_new_str(spec));
	return 0;
}

static int read_depends(const char *name, const struct json *v, struct json *deps, struct err *e)
{
	if (v->type == JSON_OBJECT) {	/* conditions are ignored: we wait for health anyway */
		for (size_t i = 0; i < v->u.obj.n; i++)
			json_array_push(deps, json_new_str(v->u.obj.m[i].key));
		return 0;
	}
	if (v->type != JSON_ARRAY)
		return err_set(e, "compose: service \"%s\" depends_on must be a list or a map", name);
	for (size_t i = 0; i < json_len(v); i++) {
		const struct json *d = json_at(v, i);
		if (d->type != JSON_STRING)
			return err_set(e, "compose: service \"%s\" depends_on must name services", name);
		json_array_push(deps, json_new_str(d->u.str.s));
	}
	return 0;
}

static int read_health(const char *name, const struct json *v, struct json **out, struct err *e)
{
	const struct json *test = json_get(v, "test"), *iv = json_get(v, "interval");
	const struct json *retries = json_get(v, "retries");
	struct json *h, *argv;
	const char *first;
	int64_t ms;

	*out = NULL;
	if (v->type != JSON_OBJECT)
		return err_set(e, "compose: service \"%s\" healthcheck must be a map", name);
	if (json_get_bool(v, "disable", false) || !test)
		return 0;
	if (test->type == JSON_STRING) {	/* a string runs through the shell */
		argv = json_new_array();
		json_array_push(argv, json_new_str("CMD-SHELL"));
		json_array_push(argv, json_new_str(test->u.str.s));
	} else {
		char what[128];
		snprintf(what, sizeof(what), "compose: service \"%s\" healthcheck.test", name);
		if (!(argv = spec_argv(test, what, e)))
			return -1;
	}
	first = json_len(argv) ? json_at(argv, 0)->u.str.s : "";
	if (!strcmp(first, "NONE")) {
		json_free(argv);
		return 0;
	}
	if ((strcmp(first, "CMD") && strcmp(first, "CMD-SHELL")) || json_len(argv) < 2) {
		json_free(argv);
		return err_set(e, "compose: service \"%s\" healthcheck.test must start with CMD, CMD-SHELL or NONE", name);
	}
	h = json_new_object();
	json_object_set(h, "test", argv);
	if (iv && (iv->type != JSON_STRING || clock_parse_duration(iv->u.str.s, &ms) < 0 || ms <= 0)) {
		json_free(h);
		return err_set(e, "compose: service \"%s\" healthcheck.interval must be a duration such as 2s", name);
	}
	json_object_set_str(h, "interval", iv ? iv->u.str.s : "");
	if (retries && (retries->type != JSON_INT || retries->u.i < 0 || retries->u.i > 100000)) {
		json_free(h);
		return err_set(e, "compose: service \"%s\" healthcheck.retries must be a non-negative number", name);
	}
	json_object_set_int(h, "retries", retries ? retries->u.i : 0);
	*out = h;
	return 0;
}

static int read_user(const char *name, const struct json *v, char *out, size_t n, struct err *e)
{
	if (spec_scalar_string(v, out, n) < 0 || strchr(out, ' '))
		return err_set(e, "compose: service \"%s\" user must be a user[:group] (names or ids)", name);
	return 0;
}

static int resolve_fields(const char *name, const struct json *svc, const struct json *declared,
			  struct json *out, struct err *e)
{
	const struct json *v;
	struct json *list, *health, *caps;
	char s[SPEC_MAX_STRING];

	if ((v = json_get(svc, "environment")) && v->type != JSON_NULL) {
		list = json_new_object();
		json_object_set(out, "env", list);
		if (read_env(name, v, list, e) < 0)
			return -1;
	} else {
		json_object_set(out, "env", json_new_object());
	}
	list = json_new_array();
	json_object_set(out, "ports", list);
	if ((v = json_get(svc, "ports")) && v->type != JSON_NULL && read_ports(name, v, list, e) < 0)
		return -1;
	list = json_new_array();
	json_object_set(out, "volumes", list);
	if ((v = json_get(svc, "volumes")) && v->type != JSON_NULL) {
		if (v->type != JSON_ARRAY || json_len(v) > SPEC_MAX_LIST)
			return err_set(e, "compose: service \"%s\" volumes must be a list", name);
		for (size_t i = 0; i < json_len(v); i++)
			if (read_mount(name, json_at(v, i), declared, list, e) < 0)
				return -1;
	}
	if ((v = json_get(svc, "healthcheck")) && v->type != JSON_NULL) {
		if (read_health(name, v, &health, e) < 0)
			return -1;
		if (health)
			json_object_set(out, "health", health);
	}
	list = json_new_array();
	json_object_set(out, "depends_on", list);
	if ((v = json_get(svc, "depends_on")) && v->type != JSON_NULL && read_depends(name, v, list, e) < 0)
		return -1;
	if ((v = json_get(svc, "command")) && v->type != JSON_NULL) {
		snprintf(s, sizeof(s), "compose: service \"%s\" command", name);
		if (!(list = spec_argv(v, s, e)))
			return -1;
		json_object_set(out, "command", list);
	} else {
		json_object_set(out, "command", json_new_array());
	}
	s[0] = '\0';
	if ((v = json_get(svc, "user")) && v->type != JSON_NULL && read_user(name, v, s, sizeof(s), e) < 0)
		return -1;
	json_object_set_str(out, "user", s);
	if (spec_caps(name, svc, &caps, e) < 0)
		return -1;
	json_object_set(out, "resources", caps);
	return 0;
}

struct json *spec_service_resolve(const char *name, const struct json *svc,
				  const struct json *declared, struct err *e)
{
	const char *image = json_get_str(svc, "image");
	const struct json *v;
	struct json *out, *build = NULL;

	if (svc->type != JSON_OBJECT) {
		err_set(e, "compose: service \"%s\" must be a map", name);
		return NULL;
	}
	if (refuse_unsafe(name, svc, e) < 0)
		return NULL;
	if ((v = json_get(svc, "build")) && v->type != JSON_NULL && spec_build(name, v, &build, e) < 0)
		return NULL;
	if ((!image || !*image) && !build) {
		err_set(e, "compose: service \"%s\" has no image and nothing to build (set image: or build:)", name);
		return NULL;
	}
	if (image && strlen(image) >= SPEC_MAX_STRING) {
		json_free(build);
		err_set(e, "compose: service \"%s\" image name is too long", name);
		return NULL;
	}
	out = json_new_object();
	json_object_set_str(out, "name", name);
	/* With build, image (may be "") is the tag the built image also gets. */
	json_object_set_str(out, "image", image ? image : "");
	if (build)
		json_object_set(out, "build", build);
	if (resolve_fields(name, svc, declared, out, e) < 0) {
		json_free(out);
		return NULL;
	}
	return out;
}
