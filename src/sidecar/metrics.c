/* metrics.c: env.metrics: what each service's container uses now, read from
 * its cgroups (v1: cpuacct, memory, pids controllers; v2: the unified
 * cgroup's cpu.stat, memory.current and pids.current), and the bytes each
 * volume takes on the storage backend, with the disk cap they count
 * against. A read, so it runs beside anything else on the environment
 * (dispatch.c). A service whose container is not
 * running reports its status and no figures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fs.h"
#include "base/str.h"
#include "sidecar/sidecar.h"
#include "sidecar/storage/storage.h"

/* The first number of a cgroup file, or after key in one of "key value" lines;
 * -1 when absent or "max" (no limit). */
static int64_t read_num(const char *dir, const char *file, const char *key)
{
	char path[FS_PATH_MAX];
	struct buf b = BUF_INIT;
	struct err e;
	int64_t v = -1;
	const char *p;

	if (fs_path(path, sizeof(path), &e, "%s/%s", dir, file) < 0 ||
	    fs_read_file(path, &b, SC_METRICS_FILE_MAX, &e) < 0 || !b.data) {
		buf_release(&b);
		return -1;
	}
	p = b.data;
	if (key) {
		size_t kl = strlen(key);

		for (p = b.data; p && strncmp(p, key, kl) != 0; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
			;
		p = p ? p + kl : NULL;
	}
	if (p) {
		char num[32];
		size_t k = 0;

		while (*p == ' ')
			p++;
		while (k + 1 < sizeof(num) && p[k] >= '0' && p[k] <= '9') {
			num[k] = p[k];
			k++;
		}
		num[k] = '\0';
		if (k == 0 || str_to_i64(num, &v) < 0)
			v = -1;
	}
	buf_release(&b);
	return v;
}

/* One figure from the cgroup of want (key_v2: its line in the v2 file);
 * -1 when it cannot be read. *version (may be NULL) says which cgroup. */
static int64_t cg_value(const struct fz_sys *sys, long pid, const struct fz_want *want, const char *key_v2,
			int *version)
{
	struct fz_cg cg;
	struct err e;

	if (fz_cgroup_dir(sys, pid, want, NULL, &cg, &e) < 0)
		return -1;
	if (version)
		*version = cg.version;
	return read_num(cg.dir, cg.version == 1 ? want->file_v1 : want->file_v2, cg.version == 1 ? NULL : key_v2);
}

static void set_num(struct json *o, const char *key, int64_t v)
{
	json_object_set(o, key, v >= 0 ? json_new_int(v) : json_new_null());
}

/* {service, status, cpu_usec, memory_bytes, memory_limit_bytes, pids}. */
static struct json *service_metrics(struct wk *w, const struct fz_sys *sys, const char *svc)
{
	static const struct fz_want cpu = { "cpuacct", "cpuacct.usage", "cpu.stat", R_OK };
	static const struct fz_want mem = { "memory", "memory.usage_in_bytes", "memory.current", R_OK };
	static const struct fz_want lim = { "memory", "memory.limit_in_bytes", "memory.max", R_OK };
	static const struct fz_want pids = { "pids", "pids.current", "pids.current", R_OK };
	char project[SC_ID_MAX + 8], cname[SC_DOCKER_NAME_MAX];
	struct engine_ctr c;
	struct err e;
	struct json *o = json_new_object();
	int found, version = 0;
	int64_t v;

	json_object_set_str(o, "service", svc);
	dk_project(w->env, project, sizeof(project));
	dk_container(project, svc, cname, sizeof(cname));
	found = engine_container(cname, &c, &e);
	json_object_set_str(o, "status", found == 1 ? c.status : found == 0 ? "absent" : "unknown");
	if (found != 1 || c.pid <= 0) {
		if (found < 0)
			json_object_set_str(o, "error", e.msg);
		return o;
	}
	/* v1 cpuacct.usage is in ns, v2 cpu.stat's usage_usec in µs. */
	v = cg_value(sys, c.pid, &cpu, "usage_usec", &version);
	set_num(o, "cpu_usec", v >= 0 && version == 1 ? v / 1000 : v);
	set_num(o, "memory_bytes", cg_value(sys, c.pid, &mem, NULL, NULL));
	v = cg_value(sys, c.pid, &lim, NULL, NULL);
	/* v1 says "no limit" with a huge page-rounded number. */
	set_num(o, "memory_limit_bytes", v >= ((int64_t)1 << 62) ? -1 : v);
	set_num(o, "pids", cg_value(sys, c.pid, &pids, NULL, NULL));
	return o;
}

/* {name, bytes} of every volume of the spec; the backend's name in storage. */
static struct json *volume_metrics(struct wk *w, const struct json *spec, const char **storage, struct err *e)
{
	const struct json *vols = json_get(spec, "volumes");
	struct json *out = json_new_array();
	struct stg stg;

	if (stg_for_env(&stg, w, w->env, e) < 0) {
		json_free(out);
		return NULL;
	}
	for (size_t i = 0; i < json_len(vols); i++) {
		const struct json *v = json_at(vols, i);
		const char *name = v->type == JSON_STRING ? v->u.str.s : json_get_str(v, "name");
		int64_t bytes = -1;
		struct err ve;
		struct json *o;

		if (!name || !sc_safe_id(name))
			continue;
		o = json_new_object();
		json_object_set_str(o, "name", name);
		if (stg.ops->usage(&stg, w->env, name, &bytes, &ve) < 0)
			json_object_set_str(o, "error", ve.msg);
		set_num(o, "bytes", bytes);
		json_array_push(out, o);
	}
	*storage = stg.ops->name;
	return out;
}

/* {limit_mb (null: no cap), used_bytes (what the volumes take; null when
 * one could not be read)}: the disk cap beside what fills it. */
static struct json *disk_metrics(const struct wk *w, const struct json *spec, const struct json *vols)
{
	struct json *o = json_new_object();
	int64_t used = 0;

	set_num(o, "limit_mb", disk_cap_mb(w, spec) > 0 ? disk_cap_mb(w, spec) : -1);
	for (size_t i = 0; i < json_len(vols) && used >= 0; i++) {
		int64_t b = json_get_int(json_at(vols, i), "bytes", -1);

		used = b >= 0 ? used + b : -1;
	}
	set_num(o, "used_bytes", used);
	return o;
}

int cmd_env_metrics(struct wk *w, const struct json *payload, struct json **result, struct err *e)
{
	struct json *spec = NULL, *order = NULL, *svcs, *vols;
	const char *storage = "";
	struct fz_sys sys;

	(void)payload;
	if (create_read_spec(w, w->env, &spec, e) < 0)
		return err_prefix(e, "env.metrics");
	if (!(order = render_order(json_get(spec, "services"), e))) {
		json_free(spec);
		return err_prefix(e, "env.metrics");
	}
	fz_sys_default(&sys);
	svcs = json_new_array();
	for (size_t i = 0; i < json_len(order); i++)
		json_array_push(svcs, service_metrics(w, &sys, json_get_str(json_at(order, i), "name")));
	if (!(vols = volume_metrics(w, spec, &storage, e))) {
		json_free(svcs);
		json_free(order);
		json_free(spec);
		return err_prefix(e, "env.metrics");
	}
	*result = json_new_object();
	json_object_set(*result, "services", svcs);
	json_object_set(*result, "disk", disk_metrics(w, spec, vols));
	json_object_set(*result, "volumes", vols);
	json_object_set_str(*result, "storage", storage);
	json_object_set_int(*result, "sampled_at_ms", clock_now_ms());
	json_free(order);
	json_free(spec);
	return 0;
}
