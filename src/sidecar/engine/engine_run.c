/* engine_run.c: a service's `docker run -d` as two requests on dockerd's
 * socket, POST /containers/create?name= and POST /containers/<id>/start.
 * The docker CLI's own start is a large part of a one-container create
 * (a process, its config, a version handshake), and a sandbox's create to
 * first exec is one such create.
 *
 * The argv render_run_argv writes stays the one description of a
 * container: this file maps exactly its flags to the API's fields and
 * nothing else. Anything it does not map (a flag, a port range, a
 * duration it cannot read), no usable socket, or any refusal (no such
 * image, a name in use, a start that fails: the container is then removed)
 * is "run it with the CLI", which gives the messages users know. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/str.h"
#include "sidecar/sidecar.h"

/* A Go duration as the CLI takes for --health-interval ("1s", "1m30s",
 * "500ms") in nanoseconds; -1 for anything else. */
static int64_t go_duration(const char *s)
{
	static const struct {
		const char *unit;
		int64_t ns;
	} units[] = { { "ns", 1 }, { "us", 1000 }, { "ms", 1000000 }, { "s", 1000000000 },
		      { "m", 60000000000LL }, { "h", 3600000000000LL } };
	int64_t total = 0;

	if (!s || !*s)
		return -1;
	while (*s) {
		int64_t n = 0;
		size_t k, best = 0, bi = 0;

		if (*s < '0' || *s > '9')
			return -1;
		for (; *s >= '0' && *s <= '9'; s++) {
			if (n > INT64_MAX / 10 / 3600)
				return -1;
			n = n * 10 + (*s - '0');
		}
		for (k = 0; k < sizeof(units) / sizeof(units[0]); k++) {
			size_t l = strlen(units[k].unit);
			if (l > best && strncmp(s, units[k].unit, l) == 0) {
				best = l;
				bi = k;
			}
		}
		if (!best)
			return -1;
		total += n * units[bi].ns;
		s += best;
	}
	return total;
}

struct run_body {
	struct json *cfg, *host, *labels, *env, *binds, *hosts, *exposed, *portb, *cmd, *health;
	const char *name, *network, *alias;
};

static void body_init(struct run_body *b)
{
	memset(b, 0, sizeof(*b));
	b->cfg = json_new_object();
	b->host = json_new_object();
	b->labels = json_new_object();
	b->env = json_new_array();
	b->binds = json_new_array();
	b->hosts = json_new_array();
	b->exposed = json_new_object();
	b->portb = json_new_object();
	b->cmd = json_new_array();
}

static void body_free(struct run_body *b)
{
	json_free(b->cfg);
	json_free(b->host);
	json_free(b->labels);
	json_free(b->env);
	json_free(b->binds);
	json_free(b->hosts);
	json_free(b->exposed);
	json_free(b->portb);
	json_free(b->cmd);
	json_free(b->health);
}

/* "127.0.0.1::8080" or "127.0.0.1::8080/udp": the one -p form render writes. */
static int add_port(struct run_body *b, const char *spec)
{
	const char *p = str_has_prefix(spec, "127.0.0.1::") ? spec + 11 : NULL;
	struct json *bind, *list;
	char key[64];
	uint64_t port;
	const char *slash;
	char num[16];

	if (!p)
		return -1;
	slash = strchr(p, '/');
	if ((size_t)(slash ? slash - p : (long)strlen(p)) >= sizeof(num))
		return -1;
	snprintf(num, sizeof(num), "%.*s", (int)(slash ? slash - p : (long)strlen(p)), p);
	if (str_to_u64(num, &port) < 0 || port == 0 || port > 65535 ||
	    (slash && !str_eq(slash, "/tcp") && !str_eq(slash, "/udp")))
		return -1;
	snprintf(key, sizeof(key), "%llu%s", (unsigned long long)port, slash ? slash : "/tcp");
	json_object_set(b->exposed, key, json_new_object());
	bind = json_new_object();
	json_object_set_str(bind, "HostIp", "127.0.0.1");
	json_object_set_str(bind, "HostPort", "");
	list = json_new_array();
	json_array_push(list, bind);
	json_object_set(b->portb, key, list);
	return 0;
}

static int add_health(struct run_body *b, const char *flag, const char *v)
{
	if (!b->health)
		b->health = json_new_object();
	if (str_eq(flag, "--health-cmd")) {
		struct json *t = json_new_array();
		json_array_push(t, json_new_str("CMD-SHELL"));
		json_array_push(t, json_new_str(v));
		json_object_set(b->health, "Test", t);
	} else if (str_eq(flag, "--health-interval")) {
		int64_t ns = go_duration(v);
		if (ns <= 0)
			return -1;
		json_object_set_int(b->health, "Interval", ns);
	} else {
		uint64_t n;
		if (str_to_u64(v, &n) < 0 || n > 1000000)
			return -1;
		json_object_set_int(b->health, "Retries", (int64_t)n);
	}
	return 0;
}

/* One flag with its value. -1: not one render writes (the CLI runs it). */
static int add_flag(struct run_body *b, const char *f, const char *v)
{
	const char *eq;
	uint64_t n;
	double cpus;
	char *end;

	if (str_eq(f, "--name"))
		b->name = v;
	else if (str_eq(f, "--hostname"))
		json_object_set_str(b->cfg, "Hostname", v);
	else if (str_eq(f, "--network"))
		b->network = v;
	else if (str_eq(f, "--network-alias"))
		b->alias = v;
	else if (str_eq(f, "--add-host"))
		json_array_push(b->hosts, json_new_str(v));
	else if (str_eq(f, "--label") && (eq = strchr(v, '=')))
		json_object_setn(b->labels, v, (size_t)(eq - v), json_new_str(eq + 1));
	else if (str_eq(f, "--memory") && str_has_suffix(v, "m")) {
		char num[24];
		if (strlen(v) >= sizeof(num))
			return -1;
		snprintf(num, sizeof(num), "%.*s", (int)strlen(v) - 1, v);
		if (str_to_u64(num, &n) < 0 || n == 0 || n > ((uint64_t)1 << 30))
			return -1;
		json_object_set_int(b->host, "Memory", (int64_t)(n << 20));
	} else if (str_eq(f, "--pids-limit")) {
		if (str_to_u64(v, &n) < 0 || n > ((uint64_t)1 << 40))
			return -1;
		json_object_set_int(b->host, "PidsLimit", (int64_t)n);
	} else if (str_eq(f, "--cpus")) {
		cpus = strtod(v, &end);
		if (end == v || *end || !(cpus > 0) || cpus > 4096)
			return -1;
		json_object_set_int(b->host, "NanoCpus", (int64_t)(cpus * 1e9 + 0.5));
	} else if (str_eq(f, "--user"))
		json_object_set_str(b->cfg, "User", v);
	else if (str_eq(f, "-e"))
		json_array_push(b->env, json_new_str(v));
	else if (str_eq(f, "-v"))
		json_array_push(b->binds, json_new_str(v));
	else if (str_eq(f, "-p"))
		return add_port(b, v);
	else if (str_has_prefix(f, "--health-") &&
		 (str_eq(f, "--health-cmd") || str_eq(f, "--health-interval") || str_eq(f, "--health-retries")))
		return add_health(b, f, v);
	else
		return -1;
	return 0;
}

/* argv (run -d FLAGS... IMAGE CMD...) into b; -1 if any of it is not ours. */
static int parse_argv(const struct argv *a, struct run_body *b)
{
	size_t i = 2;

	if (a->n < 3 || !str_eq(a->v[0], "run") || !str_eq(a->v[1], "-d"))
		return -1;
	while (i < a->n && a->v[i][0] == '-') {
		if (i + 1 >= a->n || add_flag(b, a->v[i], a->v[i + 1]) < 0)
			return -1;
		i += 2;
	}
	if (i >= a->n || !b->name || !b->network)
		return -1;
	json_object_set_str(b->cfg, "Image", a->v[i++]);
	for (; i < a->n; i++)
		json_array_push(b->cmd, json_new_str(a->v[i]));
	return 0;
}

/* The create request's body (takes b's parts). */
static struct json *create_body(struct run_body *b)
{
	struct json *cfg = b->cfg;

	if (json_len(b->cmd))
		json_object_set(cfg, "Cmd", b->cmd);
	else
		json_free(b->cmd);
	json_object_set(cfg, "Env", b->env);
	json_object_set(cfg, "Labels", b->labels);
	json_object_set(cfg, "ExposedPorts", b->exposed);
	if (b->health)
		json_object_set(cfg, "Healthcheck", b->health);
	json_object_set_str(b->host, "NetworkMode", b->network);
	json_object_set(b->host, "Binds", b->binds);
	json_object_set(b->host, "ExtraHosts", b->hosts);
	json_object_set(b->host, "PortBindings", b->portb);
	json_object_set(cfg, "HostConfig", b->host);
	if (b->alias) {
		struct json *nc = json_new_object(), *eps = json_new_object(), *ep = json_new_object();
		struct json *al = json_new_array();
		json_array_push(al, json_new_str(b->alias));
		json_object_set(ep, "Aliases", al);
		json_object_set(eps, b->network, ep);
		json_object_set(nc, "EndpointsConfig", eps);
		json_object_set(cfg, "NetworkingConfig", nc);
	}
	memset(b, 0, sizeof(*b));
	return cfg;
}

int engine_run(const struct argv *a)
{
	struct run_body b;
	struct json *body = NULL, *res = NULL;
	char path[SC_RUN_PATH_MAX], id[80];
	int status = 0, rc = 0;
	struct err e;

	body_init(&b);
	if (!engine_socket() || parse_argv(a, &b) < 0 || !sc_safe_id(b.name)) {
		body_free(&b);
		return 0;
	}
	snprintf(path, sizeof(path), "/containers/create?name=%s", b.name);
	body = create_body(&b);
	if (engine_api("POST", path, body, (int)SC_DOCKER_QUICK_MS, &status, &res, &e) < 0 || status != 201 ||
	    !json_get_str(res, "Id") || strlen(json_get_str(res, "Id")) >= sizeof(id)) {
		log_debug("engine", "create %s through the API: %s; the CLI runs it",
			  json_get_str(body, "Hostname") ? json_get_str(body, "Hostname") : "?",
			  status ? e.msg : "no answer");
		goto out;
	}
	str_copy(id, sizeof(id), json_get_str(res, "Id"));
	snprintf(path, sizeof(path), "/containers/%s/start", id);
	if (engine_api("POST", path, NULL, (int)SC_DOCKER_TIMEOUT_MS, &status, NULL, &e) == 0 && status == 204) {
		rc = 1;
		goto out;
	}
	/* Not started: leave nothing behind, so the CLI's run starts afresh
	 * and says why it fails, if it does. */
	log_debug("engine", "start %s through the API: %s; the CLI runs it", id, status ? e.msg : "no answer");
	snprintf(path, sizeof(path), "/containers/%s?force=1&v=1", id);
	if (engine_api("DELETE", path, NULL, (int)SC_DOCKER_QUICK_MS, &status, NULL, &e) < 0 || status / 100 != 2)
		log_warn("engine", "removing %s after a failed start: %s", id, e.msg);
out:
	json_free(body);
	json_free(res);
	return rc;
}
