/*
 * pause.c: env.pause and env.resume (denvd(8)): `docker pause` / `docker
 * unpause` of every container of the environment, or of one service. A
 * paused container keeps its memory, processes and volumes; resuming is one
 * docker call (tens of milliseconds). The services paused this way are
 * listed in <data>/envs/<env>/paused (one name a line), so that
 *  - env.exec and env.put say the service is paused and how to resume it,
 *    not that verify froze it;
 *  - env.snapshot keeps them paused (its own freeze would resume them).
 * The list is the user's; verify's pause of the agent is not in it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/str.h"
#include "sidecar/sidecar.h"

/* <data>/envs/<env>/paused into out (FS_PATH_MAX bytes). */
static int list_path(const char *data, const char *env, char *out, struct err *e)
{
	return fs_path(out, FS_PATH_MAX, e, "%s/envs/%s/paused", data, env);
}

/* The services in the list (owned; free with str_list_free). */
static char **read_list(const char *data, const char *env, size_t *n)
{
	char path[FS_PATH_MAX];
	struct buf b = BUF_INIT;
	struct err e;
	char **list;

	buf_init(&b, SC_PAUSE_LIST_MAX);
	if (list_path(data, env, path, &e) < 0 || fs_read_file(path, &b, SC_PAUSE_LIST_MAX, &e) < 0)
		buf_reset(&b);
	list = str_split(b.len ? b.data : "", "\n", n);
	buf_release(&b);
	return list;
}

bool pause_marked(const char *data, const char *env, const char *svc)
{
	size_t n = 0;
	char **list = read_list(data, env, &n);
	bool hit = false;

	for (size_t i = 0; i < n && !hit; i++)
		hit = str_eq(list[i], svc);
	str_list_free(list);
	return hit;
}

static int write_list(const char *data, const char *env, const struct json *names, struct err *e)
{
	char path[FS_PATH_MAX];
	struct buf b = BUF_INIT;
	int rc;

	if (list_path(data, env, path, e) < 0)
		return -1;
	if (json_len(names) == 0)
		return unlink(path) < 0 && errno != ENOENT ? err_errno(e, "remove %s", path) : 0;
	for (size_t i = 0; i < json_len(names); i++)
		buf_addf(&b, "%s\n", json_at(names, i)->u.str.s);
	rc = fs_write_atomic(path, b.data, b.len, 0600, e);
	buf_release(&b);
	return rc;
}

static bool in_array(const struct json *a, const char *s)
{
	for (size_t i = 0; i < json_len(a); i++)
		if (str_eq(json_at(a, i)->u.str.s, s))
			return true;
	return false;
}

/* The environment's services (from spec.json, in its order), or only svc. */
static int services_of(struct wk *w, const char *svc, struct json **out, struct err *e)
{
	struct json *spec = NULL, *order;

	if (sc_spec_load(w->data, w->env, &spec, e) <= 0)
		return err_set(e, "environment %s is not on this host (no spec.json)", w->env);
	order = render_order(json_get(spec, "services"), e);
	json_free(spec);
	if (!order)
		return -1;
	*out = json_new_array();
	for (size_t i = 0; i < json_len(order); i++) {
		const char *name = json_get_str(json_at(order, i), "name");

		if (name && (!svc || !*svc || str_eq(name, svc)))
			json_array_push(*out, json_new_str(name));
	}
	json_free(order);
	if (json_len(*out) == 0) {
		json_free(*out);
		return err_set(e, "environment %s has no service \"%s\"", w->env, svc);
	}
	return 0;
}

static int pause_or_resume(struct wk *w, const struct json *payload, bool pause, struct json **result, struct err *e)
{
	const char *kind = pause ? "env.pause" : "env.resume", *svc = json_get_str(payload, "service");
	struct json *svcs = NULL, *changed = json_new_array(), *marked = json_new_array();
	char project[SC_ID_MAX], cname[SC_DOCKER_NAME_MAX];
	size_t n = 0;
	char **old;
	struct argv a;
	int rc = 0;

	if (!sc_safe_id(w->env) || (svc && *svc && !sc_safe_id(svc))) {
		json_free(changed);
		json_free(marked);
		return err_set(e, "%s: the command has no usable env_id or service", kind);
	}
	if (services_of(w, svc, &svcs, e) < 0) {
		json_free(changed);
		json_free(marked);
		return err_prefix(e, "%s", kind);
	}
	dk_project(w->env, project, sizeof(project));
	av_init(&a);
	av_add(&a, pause ? "pause" : "unpause");
	for (size_t i = 0; i < json_len(svcs); i++) {
		const char *name = json_at(svcs, i)->u.str.s;
		struct engine_ctr c;
		struct err ie;

		dk_container(project, name, cname, sizeof(cname));
		if (engine_container(cname, &c, &ie) <= 0 || !str_eq(c.env, w->env))
			continue;	/* a service that is not up has nothing to pause */
		if (str_eq(c.status, pause ? "running" : "paused")) {
			av_add(&a, cname);
			json_array_push(changed, json_new_str(name));
		}
	}
	if (json_len(changed))
		rc = dk_run(&a, SC_DOCKER_TIMEOUT_MS, NULL, e);
	av_release(&a);
	/* The new list: the old one, plus what was asked to pause, minus what was asked to resume. */
	old = read_list(w->data, w->env, &n);
	for (size_t i = 0; i < n; i++)
		if (!in_array(svcs, old[i]) || pause)
			json_array_push(marked, json_new_str(old[i]));
	str_list_free(old);
	for (size_t i = 0; pause && i < json_len(svcs); i++)
		if (!in_array(marked, json_at(svcs, i)->u.str.s))
			json_array_push(marked, json_new_str(json_at(svcs, i)->u.str.s));
	if (rc == 0)
		rc = write_list(w->data, w->env, marked, e);
	json_free(svcs);
	if (rc < 0) {
		json_free(changed);
		json_free(marked);
		return err_prefix(e, "%s", kind);
	}
	*result = json_new_object();
	json_object_set(*result, pause ? "paused" : "resumed", changed);
	json_object_set(*result, "paused_services", marked);
	return 0;
}

int cmd_env_pause(struct wk *w, const struct json *payload, struct json **result, struct err *e)
{
	return pause_or_resume(w, payload, true, result, e);
}

int cmd_env_resume(struct wk *w, const struct json *payload, struct json **result, struct err *e)
{
	return pause_or_resume(w, payload, false, result, e);
}
