/* caps.c: the resource caps of every service: memory, pids, cpus. */
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/str.h"
#include "spec/spec.h"

/* "2g", "512m", "1024k", "1.5g", "1073741824" or a YAML number of bytes.
 * Docker's units are powers of 1024. */
int spec_size_bytes(const struct json *v, double *bytes)
{
	static const struct { const char *unit; double mul; } units[] = {
		{ "", 1 }, { "b", 1 }, { "k", 1024.0 }, { "kb", 1024.0 },
		{ "m", 1048576.0 }, { "mb", 1048576.0 }, { "g", 1073741824.0 },
		{ "gb", 1073741824.0 }, { "t", 1099511627776.0 }, { "tb", 1099511627776.0 },
	};
	char num[64];
	const char *s, *unit;
	size_t i;
	double d;

	if (v->type == JSON_INT || v->type == JSON_DOUBLE) {
		*bytes = v->type == JSON_INT ? (double)v->u.i : v->u.d;
		return *bytes >= 0 && isfinite(*bytes) ? 0 : -1;
	}
	if (v->type != JSON_STRING)
		return -1;
	s = v->u.str.s;
	for (i = 0; s[i] && (isdigit((unsigned char)s[i]) || s[i] == '.'); i++)
		;
	if (i == 0 || i >= sizeof(num))
		return -1;
	memcpy(num, s, i);
	num[i] = '\0';
	unit = s + i;
	if (str_to_double(num, &d) < 0)
		return -1;
	for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
		if (strcasecmp(unit, units[u].unit) == 0) {
			*bytes = d * units[u].mul;
			return 0;
		}
	}
	return -1;
}

static int read_memory(const char *svc, const char *key, const struct json *v, int64_t *mb, struct err *e)
{
	double bytes;
	char shown[64];

	if (spec_scalar_string(v, shown, sizeof(shown)) < 0)
		str_copy(shown, sizeof(shown), "?");
	if (spec_size_bytes(v, &bytes) < 0)
		return err_set(e, "compose: service \"%s\" %s \"%s\" is not a size (use 512m, 2g or bytes)",
			       svc, key, shown);
	if (bytes > 0 && bytes < SPEC_MIN_MEMORY_MB * 1048576.0)
		return err_set(e, "compose: service \"%s\" %s \"%s\" is below the %d MiB minimum",
			       svc, key, shown, SPEC_MIN_MEMORY_MB);
	if (bytes / 1048576.0 > (double)INT32_MAX)
		return err_set(e, "compose: service \"%s\" %s \"%s\" is too large", svc, key, shown);
	*mb = (int64_t)(bytes / 1048576.0);
	return 0;
}

static int read_pids(const char *svc, const char *key, const struct json *v, int64_t *pids, struct err *e)
{
	/* -1 means unlimited to Docker; a cap is a protection, so we refuse it. */
	if (v->type != JSON_INT || v->u.i < 0 || v->u.i > INT32_MAX)
		return err_set(e, "compose: service \"%s\" %s must be a positive number of processes", svc, key);
	*pids = v->u.i;
	return 0;
}

static int read_cpus(const char *svc, const char *key, const struct json *v, double *cpus, struct err *e)
{
	double d = -1;

	if (v->type == JSON_INT)
		d = (double)v->u.i;
	else if (v->type == JSON_DOUBLE)
		d = v->u.d;
	else if (v->type == JSON_STRING && str_to_double(v->u.str.s, &d) < 0)
		d = -1;
	if (!(d >= 0 && d <= SPEC_MAX_CPUS))
		return err_set(e, "compose: service \"%s\" %s must be a number of CPUs between 0 and %d",
			       svc, key, SPEC_MAX_CPUS);
	*cpus = d;
	return 0;
}

/* The service's cap under its shorthand key, else deploy.resources.limits'
 * lkey (the shorthand wins; a null is absent); NULL when neither is set.
 * name (of size n) gets the key read, as an error names it. */
static const struct json *cap_of(const struct json *service, const char *key, const char *lkey, char *name, size_t n)
{
	const struct json *limits = json_get(json_get(json_get(service, "deploy"), "resources"), "limits");
	const struct json *v = json_get(service, key);

	if (v && v->type != JSON_NULL) {
		snprintf(name, n, "%s", key);
		return v;
	}
	v = json_get(limits, lkey);
	snprintf(name, n, "deploy.resources.limits.%s", lkey);
	return v && v->type != JSON_NULL ? v : NULL;
}

int spec_caps(const char *svc, const struct json *service, struct json **out, struct err *e)
{
	const struct json *v;
	char name[SPEC_CAP_KEY_MAX];
	int64_t memory_mb = 0, pids = 0;
	double cpus = 0;
	struct json *res;

	if ((v = cap_of(service, "mem_limit", "memory", name, sizeof(name))) && read_memory(svc, name, v, &memory_mb, e) < 0)
		return -1;
	if ((v = cap_of(service, "pids_limit", "pids", name, sizeof(name))) && read_pids(svc, name, v, &pids, e) < 0)
		return -1;
	if ((v = cap_of(service, "cpus", "cpus", name, sizeof(name))) && read_cpus(svc, name, v, &cpus, e) < 0)
		return -1;
	res = json_new_object();
	json_object_set_int(res, "memory_mb", memory_mb);
	json_object_set_int(res, "pids", pids);
	json_object_set(res, "cpus", json_new_double(cpus));
	*out = res;
	return 0;
}
