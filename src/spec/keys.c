/*
 * keys.c: the warnings for compose keys denv does not act on.
 *
 * A key denv does not read changes nothing in the environment, so a typo
 * (`comand:`) used to surface phases later as a puzzling failure. Every
 * level of the file that denv reads has a table here: the keys it reads,
 * the keys the Compose specification defines that denv ignores (the file is
 * valid Compose, but the key changes nothing here), and, in x-denv, keys the
 * documentation describes that this version does not implement. Any other
 * key is unknown, and the nearest key of its level is suggested when it is
 * close enough to be a typo. Warnings never refuse a file: the refusals are
 * the readers' (compose.c, service.c).
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/str.h"
#include "spec/spec.h"

#define R SPEC_KEY_READ
#define I SPEC_KEY_IGNORED
#define U SPEC_KEY_UNSUPPORTED

static const struct spec_key top_keys[] = {
	{ "services", R, NULL }, { "volumes", R, NULL }, { "x-denv", R, NULL },
	{ "configs", I, NULL }, { "include", I, "included files are not read" }, { "models", I, NULL },
	{ "name", I, "the project name comes from denv" },
	{ "networks", I, "every environment gets one network of its own" }, { "secrets", I, NULL },
	{ "version", I, "obsolete; Compose ignores it too" }, { NULL, R, NULL },
};

/* The Compose specification's service keys (schema/compose-spec.json). */
static const struct spec_key service_keys[] = {
	{ "image", R, NULL }, { "environment", R, NULL }, { "ports", R, NULL }, { "volumes", R, NULL },
	{ "depends_on", R, NULL }, { "command", R, NULL }, { "healthcheck", R, NULL }, { "user", R, NULL },
	{ "mem_limit", R, NULL }, { "pids_limit", R, NULL }, { "cpus", R, NULL }, { "deploy", R, NULL },
	/* read to refuse them when they would break isolation or forking */
	{ "network_mode", R, NULL }, { "privileged", R, NULL }, { "cap_add", R, NULL },
	{ "x-denv", R, NULL },
	{ "annotations", I, NULL }, { "attach", I, NULL }, { "blkio_config", I, NULL },
	{ "build", R, NULL }, { "cap_drop", I, NULL },
	{ "cgroup", I, NULL }, { "cgroup_parent", I, NULL },
	{ "configs", I, NULL }, { "container_name", I, "every fork names its own containers" },
	{ "cpu_count", I, NULL }, { "cpu_percent", I, NULL }, { "cpu_period", I, NULL },
	{ "cpu_quota", I, NULL }, { "cpu_rt_period", I, NULL }, { "cpu_rt_runtime", I, NULL },
	{ "cpu_shares", I, NULL }, { "cpuset", I, NULL }, { "credential_spec", I, NULL },
	{ "develop", I, NULL }, { "device_cgroup_rules", I, NULL }, { "devices", I, NULL },
	{ "dns", I, NULL }, { "dns_opt", I, NULL }, { "dns_search", I, NULL }, { "domainname", I, NULL },
	{ "entrypoint", I, "put the program in command" }, { "env_file", I, "put the values in environment" },
	{ "expose", I, NULL }, { "extends", I, NULL }, { "external_links", I, NULL },
	{ "extra_hosts", I, NULL }, { "gpus", I, NULL }, { "group_add", I, NULL }, { "hostname", I, NULL },
	{ "init", I, NULL }, { "ipc", I, NULL }, { "isolation", I, NULL }, { "label_file", I, NULL },
	{ "labels", I, NULL }, { "links", I, NULL }, { "logging", I, NULL }, { "mac_address", I, NULL },
	{ "mem_reservation", I, NULL }, { "mem_swappiness", I, NULL }, { "memswap_limit", I, NULL },
	{ "models", I, NULL }, { "networks", I, "every environment gets one network of its own" },
	{ "oom_kill_disable", I, NULL }, { "oom_score_adj", I, NULL }, { "pid", I, NULL },
	{ "platform", I, NULL }, { "post_start", I, NULL }, { "pre_stop", I, NULL }, { "profiles", I, NULL },
	{ "provider", I, NULL }, { "pull_policy", I, NULL }, { "pull_refresh_after", I, NULL },
	{ "read_only", I, NULL }, { "restart", I, NULL }, { "runtime", I, "use x-denv.runtime: runc or gvisor" }, { "scale", I, NULL },
	{ "secrets", I, NULL }, { "security_opt", I, NULL }, { "shm_size", I, NULL },
	{ "stdin_open", I, NULL }, { "stop_grace_period", I, NULL }, { "stop_signal", I, NULL },
	{ "storage_opt", I, NULL }, { "sysctls", I, NULL }, { "tmpfs", I, NULL }, { "tty", I, NULL },
	{ "ulimits", I, NULL }, { "use_api_socket", I, NULL }, { "userns_mode", I, NULL }, { "uts", I, NULL },
	{ "volumes_from", I, NULL }, { "working_dir", I, NULL }, { NULL, R, NULL },
};

static const struct spec_key health_keys[] = {
	{ "test", R, NULL }, { "interval", R, NULL }, { "retries", R, NULL }, { "disable", R, NULL },
	{ "start_interval", I, NULL }, { "start_period", I, NULL }, { "timeout", I, NULL }, { NULL, R, NULL },
};

/* build: denv reads these four; the rest tune a builder it does not run. */
static const struct spec_key build_keys[] = {
	{ "context", R, NULL }, { "dockerfile", R, NULL }, { "args", R, NULL }, { "target", R, NULL },
	{ "dockerfile_inline", R, NULL },	/* read to refuse it */
	{ "additional_contexts", I, "only the one context is sent" }, { "cache_from", I, NULL },
	{ "cache_to", I, NULL }, { "entitlements", I, NULL }, { "extra_hosts", I, NULL }, { "isolation", I, NULL },
	{ "labels", I, NULL }, { "network", I, NULL }, { "no_cache", I, "the host caches by the context's digest" },
	{ "platforms", I, NULL }, { "privileged", I, NULL }, { "provenance", I, NULL }, { "pull", I, NULL },
	{ "sbom", I, NULL }, { "secrets", I, NULL }, { "shm_size", I, NULL }, { "ssh", I, NULL },
	{ "tags", I, "the image is tagged denv-build/<service>:<digest> and image:" }, { "ulimits", I, NULL },
	{ NULL, R, NULL },
};

static const struct spec_key deploy_keys[] = {
	{ "resources", R, NULL }, { "endpoint_mode", I, NULL }, { "labels", I, NULL }, { "mode", I, NULL },
	{ "placement", I, NULL }, { "replicas", I, NULL }, { "restart_policy", I, NULL },
	{ "rollback_config", I, NULL }, { "update_config", I, NULL }, { NULL, R, NULL },
};

static const struct spec_key resources_keys[] = {
	{ "limits", R, NULL }, { "reservations", I, NULL }, { NULL, R, NULL },
};

static const struct spec_key limits_keys[] = {
	{ "memory", R, NULL }, { "cpus", R, NULL }, { "pids", R, NULL }, { NULL, R, NULL },
};

/* external is read (and refused); the rest configure a volume driver denv does not use. */
static const struct spec_key volume_keys[] = {
	{ "external", R, NULL }, { "driver", I, NULL }, { "driver_opts", I, NULL }, { "labels", I, NULL },
	{ "name", I, NULL }, { NULL, R, NULL },
};

static const struct spec_key xdenv_keys[] = {
	{ "kind", R, NULL }, { "egress", R, NULL }, { "warm", R, NULL }, { "agent", R, NULL },
	{ "verifier", R, NULL }, { "clock", R, NULL }, { "runtime", R, NULL }, { "disk", R, NULL },
	{ "promote", R, NULL }, { "pool", R, NULL }, { NULL, R, NULL },
};

static const struct spec_key promote_keys[] = {
	{ "replays", R, NULL }, { "soak", R, NULL }, { "invariants", R, NULL }, { NULL, R, NULL },
};

/* A service's own x-denv block. */
static const struct spec_key service_xdenv_keys[] = { { "runtime", R, NULL }, { NULL, R, NULL } };

static const struct spec_key clock_keys[] = {
	{ "mode", R, NULL }, { "at", R, NULL }, { "offset", R, NULL }, { NULL, R, NULL },
};

static const struct spec_key agent_keys[] = { { "service", R, NULL }, { NULL, R, NULL } };

static const struct spec_key verifier_keys[] = {
	{ "image", R, NULL }, { "service", R, NULL }, { "command", R, NULL }, { "collect", R, NULL },
	{ "timeout_sec", R, NULL }, { NULL, R, NULL },
};

#undef R
#undef I
#undef U

static size_t min3(size_t a, size_t b, size_t c)
{
	size_t m = a < b ? a : b;

	return m < c ? m : c;
}

size_t spec_edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t rows[3][SPEC_KEY_COMPARE_MAX + 1];
	size_t *before = rows[0], *prev = rows[1], *cur = rows[2], *t;

	if (la > SPEC_KEY_COMPARE_MAX || lb > SPEC_KEY_COMPARE_MAX)
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		prev[j] = j;
	for (size_t i = 1; i <= la; i++) {
		cur[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			cur[j] = min3(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]));
			/* Two neighbours swapped ("imgae") is one slip, not two. */
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && before[j - 2] + 1 < cur[j])
				cur[j] = before[j - 2] + 1;
		}
		t = before;
		before = prev;
		prev = cur;
		cur = t;
	}
	return prev[lb];
}

const char *spec_nearest_key(const char *word, const struct spec_key *keys)
{
	/* A third of the word, at most SPEC_SUGGEST_DISTANCE: "usr" may be
	 * "user", but "foo" is not "pid". */
	size_t len = strlen(word), limit = (len + 2) / 3, best_d = SIZE_MAX;
	const char *best = NULL;

	if (limit > SPEC_SUGGEST_DISTANCE)
		limit = SPEC_SUGGEST_DISTANCE;
	for (size_t i = 0; keys[i].name; i++) {
		size_t n = strlen(keys[i].name), d;
		if ((n > len ? n - len : len - n) > limit)	/* the distance is at least that */
			continue;
		d = spec_edit_distance(word, keys[i].name);
		if (d <= limit && d < best_d) {
			best_d = d;
			best = keys[i].name;
		}
	}
	return best;
}

/* The Spec's warnings as they are gathered: at most SPEC_MAX_WARNINGS lines,
 * then a count of the rest. */
struct spec_warnings {
	struct json *list;
	size_t dropped;
};

static void spec_warn(struct spec_warnings *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void spec_warn(struct spec_warnings *w, const char *fmt, ...)
{
	char line[SPEC_WARNING_MAX];
	va_list ap;

	if (json_len(w->list) >= SPEC_MAX_WARNINGS) {
		w->dropped++;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);	/* a longer warning is cut: the key is shown first */
	va_end(ap);
	json_array_push(w->list, json_new_str(line));
}

/* A key as a warning shows it: printable ASCII only (the CLI prints it to
 * a terminal), at most SPEC_WARNING_KEY_SHOWN bytes. */
static void shown_key(const struct json_member *m, char out[SPEC_WARNING_KEY_SHOWN + 4])
{
	size_t n = m->key_len < SPEC_WARNING_KEY_SHOWN ? m->key_len : SPEC_WARNING_KEY_SHOWN;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)m->key[i];
		out[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	memcpy(out + n, m->key_len > n ? "..." : "", m->key_len > n ? 4 : 1);
}

/* By length too: a key with a NUL inside is not the key before the NUL. */
static const struct spec_key *find_key(const struct spec_key *keys, const struct json_member *m)
{
	for (size_t i = 0; keys[i].name; i++)
		if (strlen(keys[i].name) == m->key_len && !memcmp(keys[i].name, m->key, m->key_len))
			return &keys[i];
	return NULL;
}

/* Warn about the members of obj (at path, "" for the top) that keys does not
 * read. Compose's extension fields (x-...) are for anchors and other tools,
 * so they are warned about only where they look like a typo of an x- key. */
static void check_level(struct spec_warnings *w, const struct json *obj, const char *path,
			const struct spec_key *keys, bool extensions)
{
	char key[SPEC_WARNING_KEY_SHOWN + 4];
	const char *dot = *path ? "." : "";

	for (size_t i = 0; obj && obj->type == JSON_OBJECT && i < obj->u.obj.n; i++) {
		const struct json_member *m = &obj->u.obj.m[i];
		const struct spec_key *k = find_key(keys, m);
		const char *near;

		if (k && k->how == SPEC_KEY_READ)
			continue;
		/* Past the cap a key is only counted: not worth a search. */
		if (json_len(w->list) >= SPEC_MAX_WARNINGS) {
			w->dropped += !(extensions && str_has_prefix(m->key, "x-"));
			continue;
		}
		shown_key(m, key);
		if (k && k->how == SPEC_KEY_IGNORED) {
			spec_warn(w, "%s%s%s: ignored by denv%s%s%s", path, dot, key, k->note ? " (" : "",
				  k->note ? k->note : "", k->note ? ")" : "");
			continue;
		}
		if (k) {
			spec_warn(w, "%s%s%s: not supported by this version of denv", path, dot, key);
			continue;
		}
		near = spec_nearest_key(m->key, keys);
		/* x-tty is an extension field, not a typo of tty; x-denf is one of x-denv. */
		if (extensions && str_has_prefix(m->key, "x-") && !(near && str_has_prefix(near, "x-")))
			continue;
		if (near)
			spec_warn(w, "%s%s%s: unknown key (did you mean %s?)", path, dot, key, near);
		else
			spec_warn(w, "%s%s%s: unknown key", path, dot, key);
	}
}

static void check_service(struct spec_warnings *w, const char *name, const struct json *svc)
{
	const struct json *deploy = json_get(svc, "deploy"), *res = json_get(deploy, "resources");
	char path[SPEC_MAX_NAME + 64];

	snprintf(path, sizeof(path), "services.%s", name);
	check_level(w, svc, path, service_keys, true);
	snprintf(path, sizeof(path), "services.%s.x-denv", name);
	check_level(w, json_get(svc, "x-denv"), path, service_xdenv_keys, false);
	snprintf(path, sizeof(path), "services.%s.healthcheck", name);
	check_level(w, json_get(svc, "healthcheck"), path, health_keys, true);
	snprintf(path, sizeof(path), "services.%s.build", name);
	check_level(w, json_get(svc, "build"), path, build_keys, true);
	snprintf(path, sizeof(path), "services.%s.deploy", name);
	check_level(w, deploy, path, deploy_keys, true);
	snprintf(path, sizeof(path), "services.%s.deploy.resources", name);
	check_level(w, res, path, resources_keys, true);
	snprintf(path, sizeof(path), "services.%s.deploy.resources.limits", name);
	check_level(w, json_get(res, "limits"), path, limits_keys, true);
}

void spec_check_keys(const struct json *compose, const struct json *spec, struct json *warnings)
{
	const struct json *services = json_get(spec, "services"), *volumes = json_get(spec, "volumes");
	const struct json *x = json_get(compose, "x-denv");
	struct spec_warnings w = { warnings, 0 };
	char path[SPEC_MAX_NAME + 16];

	/* The order is the Spec's (services and volumes by name), so the same
	 * file always gives the same list. */
	check_level(&w, compose, "", top_keys, true);
	for (size_t i = 0; i < json_len(services); i++) {
		const char *name = json_get_str(json_at(services, i), "name");
		check_service(&w, name, json_get(json_get(compose, "services"), name));
	}
	for (size_t i = 0; i < json_len(volumes); i++) {
		const char *name = json_at(volumes, i)->u.str.s;
		snprintf(path, sizeof(path), "volumes.%s", name);
		check_level(&w, json_get(json_get(compose, "volumes"), name), path, volume_keys, true);
	}
	/* x-denv is denv's own namespace: no extension fields inside it. */
	check_level(&w, x, "x-denv", xdenv_keys, false);
	check_level(&w, json_get(x, "agent"), "x-denv.agent", agent_keys, false);
	check_level(&w, json_get(x, "clock"), "x-denv.clock", clock_keys, false);
	check_level(&w, json_get(x, "verifier"), "x-denv.verifier", verifier_keys, false);
	check_level(&w, json_get(x, "promote"), "x-denv.promote", promote_keys, false);
	if (w.dropped) {
		char line[SPEC_WARNING_MAX];
		snprintf(line, sizeof(line), "%zu more warnings not shown", w.dropped);
		json_array_push(warnings, json_new_str(line));
	}
}
