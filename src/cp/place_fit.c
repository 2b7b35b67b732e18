/*
 * place_fit.c: the arithmetic of placement (denv-cp(8), "PLACEMENT"): what
 * an environment reserves, what a host has, whether one fits in the other,
 * and which host a policy picks. No store and no loop here, so that unit
 * tests can drive it with tables (t/unit/cp-place.c); orch_place.c gathers
 * the hosts and their reservations and calls in.
 */
#include <string.h>

#include "base/str.h"
#include "cp/cp.h"
#include "spec/spec.h"

/* A cap of 0 (or absent) means "the sidecar's default limit": placement
 * counts the named UNCAPPED amount instead. */
static int64_t or_uncapped(int64_t v, int64_t uncapped)
{
	return v > 0 ? v : uncapped;
}

void cp_place_need(const struct json *spec, struct cp_capacity *need)
{
	const struct json *services = json_get(spec, "services");

	memset(need, 0, sizeof(*need));
	for (size_t i = 0; i < json_len(services); i++) {
		const struct json *res = json_get(json_at(services, i), "resources");
		double cpus = json_get_double(res, "cpus", 0);
		int64_t milli = cpus > 0 && cpus <= SPEC_MAX_CPUS ? (int64_t)(cpus * 1000 + 0.999) : 0;

		need->millicpus += or_uncapped(milli, CP_PLACE_UNCAPPED_MILLICPUS);
		need->memory_mb += or_uncapped(json_get_int(res, "memory_mb", 0), CP_PLACE_UNCAPPED_MEMORY_MB);
	}
	/* A Spec always has a service; an empty one still takes a slot's worth. */
	if (json_len(services) == 0) {
		need->millicpus = CP_PLACE_UNCAPPED_MILLICPUS;
		need->memory_mb = CP_PLACE_UNCAPPED_MEMORY_MB;
	}
	need->disk_mb = or_uncapped(json_get_int(spec, "disk_mb", 0), CP_PLACE_UNCAPPED_DISK_MB);
}

/* A reported figure, or unknown when absent or not positive. */
static int64_t reported(const struct json *caps, const char *key, int64_t scale)
{
	int64_t v = json_get_int(caps, key, 0);

	return v > 0 && v <= INT64_MAX / scale ? v * scale : CP_CAP_UNKNOWN;
}

void cp_place_host_capacity(const struct json *caps, struct cp_capacity *cap)
{
	cap->millicpus = reported(caps, "cpus", 1000);
	cap->memory_mb = reported(caps, "memory_mb", 1);
	cap->disk_mb = reported(caps, "disk_gb", 1024);
}

struct json *cp_capacity_json(const struct cp_capacity *c)
{
	struct json *j = json_new_object();

	json_object_set_int(j, "millicpus", c->millicpus);
	json_object_set_int(j, "memory_mb", c->memory_mb);
	json_object_set_int(j, "disk_mb", c->disk_mb);
	return j;
}

bool cp_capacity_from_json(const struct json *j, struct cp_capacity *c)
{
	if (!j || j->type != JSON_OBJECT)
		return false;
	c->millicpus = json_get_int(j, "millicpus", -1);
	c->memory_mb = json_get_int(j, "memory_mb", -1);
	c->disk_mb = json_get_int(j, "disk_mb", -1);
	return c->millicpus >= 0 && c->memory_mb >= 0 && c->disk_mb >= 0;
}

void cp_capacity_add(struct cp_capacity *sum, const struct cp_capacity *c)
{
	sum->millicpus += c->millicpus;
	sum->memory_mb += c->memory_mb;
	sum->disk_mb += c->disk_mb;
}

static int64_t free_of(int64_t cap, int64_t used)
{
	return cap == CP_CAP_UNKNOWN ? CP_CAP_UNKNOWN : cap - used;
}

void cp_place_free(const struct cp_place_host *h, struct cp_capacity *out)
{
	out->millicpus = free_of(h->cap.millicpus, h->used.millicpus);
	out->memory_mb = free_of(h->cap.memory_mb, h->used.memory_mb);
	out->disk_mb = free_of(h->cap.disk_mb, h->used.disk_mb);
}

static bool fits_one(int64_t free, int64_t need)
{
	return free == CP_CAP_UNKNOWN || need <= free;
}

bool cp_place_fits(const struct cp_place_host *h, const struct cp_capacity *need)
{
	struct cp_capacity f;

	cp_place_free(h, &f);
	return fits_one(f.millicpus, need->millicpus) && fits_one(f.memory_mb, need->memory_mb) &&
	       fits_one(f.disk_mb, need->disk_mb);
}

/* free/cap in permille, clamped to 0..1000; -1 when cap is unknown. */
static int64_t permille(int64_t cap, int64_t used)
{
	int64_t free = cap - used;

	if (cap == CP_CAP_UNKNOWN || cap <= 0)
		return -1;
	if (free <= 0)
		return 0;
	return free >= cap ? 1000 : free * 1000 / cap;
}

int64_t cp_place_share(const struct cp_place_host *h)
{
	int64_t cpu = permille(h->cap.millicpus, h->used.millicpus);
	int64_t mem = permille(h->cap.memory_mb, h->used.memory_mb);

	/* Disk is left out: hosts report what is free, not the whole. */
	if (cpu < 0 && mem < 0)
		return 1000 / (1 + (h->live > 0 ? h->live : 0));
	if (cpu < 0)
		return mem;
	if (mem < 0)
		return cpu;
	return cpu < mem ? cpu : mem;
}

int cp_place_choose(const struct cp_place_host *hosts, size_t n, const struct cp_capacity *need,
		    enum cp_place_policy policy)
{
	int best = -1;
	int64_t best_share = 0;

	for (size_t i = 0; i < n; i++) {
		int64_t share;

		if (!cp_place_fits(&hosts[i], need))
			continue;
		share = cp_place_share(&hosts[i]);
		if (best < 0 || (policy == CP_PLACE_PACK ? share < best_share : share > best_share)) {
			best = (int)i;
			best_share = share;
		}
	}
	return best;
}

int cp_place_policy_parse(const char *s, enum cp_place_policy *out)
{
	if (str_eq(s, "spread"))
		*out = CP_PLACE_SPREAD;
	else if (str_eq(s, "pack"))
		*out = CP_PLACE_PACK;
	else
		return -1;
	return 0;
}

const char *cp_place_policy_name(enum cp_place_policy p)
{
	return p == CP_PLACE_PACK ? "pack" : "spread";
}
