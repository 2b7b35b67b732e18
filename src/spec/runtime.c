/* runtime.c: x-denv.runtime, the container runtime a service runs under,
 * and x-denv.disk, the environment's disk cap.
 *
 *   x-denv: {runtime: gvisor}                 every service under gVisor (runsc)
 *   services: {box: {x-denv: {runtime: runc}}} one service's own choice
 *
 * A service's own x-denv.runtime wins over the file's; a service that
 * declares neither has no "runtime" in the Spec and gets the host's default
 * (denvd --runtime). The sidecar maps the names to Docker runtimes, so a
 * Spec never names a host's binary. */
#include <stdio.h>
#include <string.h>

#include "base/str.h"
#include "spec/spec.h"

static int runtime_name(const struct json *v, const char *where, const char **out, struct err *e)
{
	char shown[64];

	*out = NULL;
	if (!v || v->type == JSON_NULL)
		return 0;
	if (v->type == JSON_STRING && (str_eq(v->u.str.s, "runc") || str_eq(v->u.str.s, "gvisor"))) {
		*out = v->u.str.s;
		return 0;
	}
	if (spec_scalar_string(v, shown, sizeof(shown)) < 0)
		str_copy(shown, sizeof(shown), "?");
	return err_set(e, "compose: %s must be runc or gvisor, got \"%s\"", where, shown);
}

int spec_runtimes(const struct json *compose, struct json *spec, struct err *e)
{
	const struct json *services = json_get(spec, "services");
	const char *all, *own;
	char where[SPEC_MAX_NAME + 40];

	if (runtime_name(json_get(json_get(compose, "x-denv"), "runtime"), "x-denv.runtime", &all, e) < 0)
		return -1;
	for (size_t i = 0; i < json_len(services); i++) {
		struct json *svc = json_at(services, i);
		const char *name = json_get_str(svc, "name");
		const struct json *x = json_get(json_get(json_get(compose, "services"), name), "x-denv");

		if (x && x->type != JSON_OBJECT && x->type != JSON_NULL)
			return err_set(e, "compose: services.%s.x-denv must be a map", name);
		snprintf(where, sizeof(where), "services.%s.x-denv.runtime", name);
		if (runtime_name(json_get(x, "runtime"), where, &own, e) < 0)
			return -1;
		if (own || all)
			json_object_set_str(svc, "runtime", own ? own : all);
	}
	return 0;
}

int spec_disk(const struct json *v, struct json *spec, struct err *e)
{
	double bytes;
	char shown[64];

	if (!v || v->type == JSON_NULL)
		return 0;
	if (spec_scalar_string(v, shown, sizeof(shown)) < 0)
		str_copy(shown, sizeof(shown), "?");
	if (spec_size_bytes(v, &bytes) < 0 || bytes <= 0)
		return err_set(e, "compose: x-denv.disk \"%s\" is not a size (use 512m, 10g or bytes)", shown);
	if (bytes < SPEC_MIN_DISK_MB * 1048576.0)
		return err_set(e, "compose: x-denv.disk \"%s\" is below the %d MiB minimum", shown, SPEC_MIN_DISK_MB);
	if (bytes / 1048576.0 > (double)SPEC_MAX_DISK_MB)
		return err_set(e, "compose: x-denv.disk \"%s\" is above the %lld MiB maximum", shown,
			       (long long)SPEC_MAX_DISK_MB);
	json_object_set_int(spec, "disk_mb", (int64_t)(bytes / 1048576.0));
	return 0;
}
