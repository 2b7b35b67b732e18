/* cp-place.c: the arithmetic of placement (src/cp/place_fit.c): what a
 * Spec reserves, what a host's report offers, whether one fits, the free
 * share, and which host spread and pack pick, from tables of cases. */
#include <string.h>

#include "cp/cp.h"
#include "tap.h"

#define UNK CP_CAP_UNKNOWN

static struct json *parse(const char *text)
{
	struct json *j = NULL;
	struct err e;

	if (json_parse(text, strlen(text), NULL, &j, &e) < 0)
		return NULL;
	return j;
}

static const struct {
	const char *spec;
	int64_t millicpus, memory_mb, disk_mb;
	const char *name;
} needs[] = {
	{ "{\"services\":[{\"resources\":{\"cpus\":0.5,\"memory_mb\":64}}],\"disk_mb\":2048}", 500, 64, 2048,
	  "caps given: counted as given" },
	{ "{\"services\":[{\"resources\":{\"cpus\":0,\"memory_mb\":0}}]}", CP_PLACE_UNCAPPED_MILLICPUS,
	  CP_PLACE_UNCAPPED_MEMORY_MB, CP_PLACE_UNCAPPED_DISK_MB, "uncapped: the named defaults" },
	{ "{\"services\":[{\"resources\":{\"cpus\":1.5}},{\"resources\":{\"memory_mb\":512}}]}",
	  1500 + CP_PLACE_UNCAPPED_MILLICPUS, CP_PLACE_UNCAPPED_MEMORY_MB + 512, CP_PLACE_UNCAPPED_DISK_MB,
	  "two services: summed, each cap or its default" },
	{ "{\"services\":[{\"resources\":{\"cpus\":0.0001}}]}", 1, CP_PLACE_UNCAPPED_MEMORY_MB,
	  CP_PLACE_UNCAPPED_DISK_MB, "a sliver of a CPU rounds up to one millicpu" },
	{ "{\"services\":[{\"resources\":{\"cpus\":-3,\"memory_mb\":-1}}],\"disk_mb\":-5}",
	  CP_PLACE_UNCAPPED_MILLICPUS, CP_PLACE_UNCAPPED_MEMORY_MB, CP_PLACE_UNCAPPED_DISK_MB,
	  "negative figures: treated as uncapped" },
	{ "{}", CP_PLACE_UNCAPPED_MILLICPUS, CP_PLACE_UNCAPPED_MEMORY_MB, CP_PLACE_UNCAPPED_DISK_MB,
	  "no services: one slot's worth" },
	{ "null", CP_PLACE_UNCAPPED_MILLICPUS, CP_PLACE_UNCAPPED_MEMORY_MB, CP_PLACE_UNCAPPED_DISK_MB,
	  "no Spec at all: one slot's worth" },
};

static void test_need(void)
{
	for (size_t i = 0; i < sizeof(needs) / sizeof(needs[0]); i++) {
		struct json *spec = parse(needs[i].spec);
		struct cp_capacity n;

		cp_place_need(spec, &n);
		ok(n.millicpus == needs[i].millicpus && n.memory_mb == needs[i].memory_mb &&
			   n.disk_mb == needs[i].disk_mb,
		   "need: %s (%lld/%lld/%lld)", needs[i].name, (long long)n.millicpus, (long long)n.memory_mb,
		   (long long)n.disk_mb);
		json_free(spec);
	}
}

static const struct {
	const char *caps;
	int64_t millicpus, memory_mb, disk_mb;
	const char *name;
} hosts[] = {
	{ "{\"cpus\":4,\"memory_mb\":8192,\"disk_gb\":10}", 4000, 8192, 10240, "a full report" },
	{ "{\"storage\":\"dir\"}", UNK, UNK, UNK, "no figures: all unknown" },
	{ "{\"cpus\":0,\"memory_mb\":-4,\"disk_gb\":\"x\"}", UNK, UNK, UNK, "zero, negative, a string: unknown" },
	{ "{\"cpus\":9223372036854775807}", UNK, UNK, UNK, "a figure that would overflow: unknown" },
};

static void test_host_capacity(void)
{
	for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
		struct json *caps = parse(hosts[i].caps);
		struct cp_capacity c;

		cp_place_host_capacity(caps, &c);
		ok(c.millicpus == hosts[i].millicpus && c.memory_mb == hosts[i].memory_mb &&
			   c.disk_mb == hosts[i].disk_mb,
		   "host: %s", hosts[i].name);
		json_free(caps);
	}
}

static void test_reservation_json(void)
{
	struct cp_capacity in = { 250, 64, 1024 }, out;
	struct json *j = cp_capacity_json(&in), *bad = parse("{\"millicpus\":1}");

	ok(cp_capacity_from_json(j, &out) && memcmp(&in, &out, sizeof(in)) == 0, "a reservation reads back");
	ok(!cp_capacity_from_json(bad, &out), "a partial reservation reads as none");
	ok(!cp_capacity_from_json(NULL, &out), "no reservation reads as none");
	json_free(j);
	json_free(bad);
}

/* Three hosts of 2 CPUs and 4096 MB; used per case. */
static void three(struct cp_place_host h[3], int64_t used_cpu0, int64_t used_cpu1, int64_t used_cpu2)
{
	static const char *ids[] = { "a", "b", "c" };
	int64_t used[] = { used_cpu0, used_cpu1, used_cpu2 };

	for (int i = 0; i < 3; i++) {
		memset(&h[i], 0, sizeof(h[i]));
		h[i].id = ids[i];
		h[i].cap = (struct cp_capacity){ 2000, 4096, 10240 };
		h[i].used = (struct cp_capacity){ used[i], 0, 0 };
	}
}

static const struct {
	int64_t used[3];
	int64_t need_cpu;
	enum cp_place_policy policy;
	int want;
	const char *name;
} picks[] = {
	{ { 0, 0, 0 }, 500, CP_PLACE_SPREAD, 0, "spread, all equal: the first" },
	{ { 500, 0, 0 }, 500, CP_PLACE_SPREAD, 1, "spread: the next emptiest" },
	{ { 500, 500, 0 }, 500, CP_PLACE_SPREAD, 2, "spread: the third host" },
	{ { 0, 0, 0 }, 500, CP_PLACE_PACK, 0, "pack, all equal: the first" },
	{ { 500, 0, 0 }, 500, CP_PLACE_PACK, 0, "pack: the fullest that fits" },
	{ { 1500, 1000, 0 }, 1000, CP_PLACE_PACK, 1, "pack: the fullest cannot take it, the next can" },
	{ { 2000, 2000, 2000 }, 100, CP_PLACE_SPREAD, -1, "all full: none" },
	{ { 0, 0, 0 }, 2001, CP_PLACE_PACK, -1, "more than any host has: none" },
	{ { 0, 0, 0 }, 2000, CP_PLACE_SPREAD, 0, "exactly a whole host: fits" },
};

static void test_choose(void)
{
	struct cp_place_host h[3];

	for (size_t i = 0; i < sizeof(picks) / sizeof(picks[0]); i++) {
		struct cp_capacity need = { picks[i].need_cpu, 64, 128 };

		three(h, picks[i].used[0], picks[i].used[1], picks[i].used[2]);
		is_int(cp_place_choose(h, 3, &need, picks[i].policy), picks[i].want, picks[i].name);
	}
	is_int(cp_place_choose(h, 0, &(struct cp_capacity){ 1, 1, 1 }, CP_PLACE_SPREAD), -1, "no hosts: none");
}

static void test_share_and_fit(void)
{
	struct cp_place_host h = { "x", { 2000, 4096, UNK }, { 500, 3072, 0 }, 2 };
	struct cp_place_host blind = { "y", { UNK, UNK, UNK }, { 900, 9000, 9000 }, 3 };
	struct cp_capacity huge = { 1, 1, INT64_MAX / 2 };

	is_int(cp_place_share(&h), 250, "share: the scarcer resource (memory, 25 percent free) decides");
	ok(cp_place_fits(&h, &huge), "unknown disk is not checked");
	h.used.memory_mb = 5000;
	is_int(cp_place_share(&h), 0, "overcommitted: share 0, not negative");
	ok(!cp_place_fits(&h, &(struct cp_capacity){ 1, 1, 1 }), "overcommitted: nothing fits");
	is_int(cp_place_share(&blind), 250, "no figures: 1000 / (1 + environments)");
	ok(cp_place_fits(&blind, &huge), "no figures: anything fits");
}

static void test_policy_names(void)
{
	enum cp_place_policy p = CP_PLACE_SPREAD;

	ok(cp_place_policy_parse("pack", &p) == 0 && p == CP_PLACE_PACK, "\"pack\" parses");
	ok(cp_place_policy_parse("spread", &p) == 0 && p == CP_PLACE_SPREAD, "\"spread\" parses");
	ok(cp_place_policy_parse("Pack", &p) < 0 && cp_place_policy_parse("", &p) < 0 &&
		   cp_place_policy_parse(NULL, &p) < 0,
	   "anything else is refused");
	ok(strcmp(cp_place_policy_name(CP_PLACE_PACK), "pack") == 0 &&
		   strcmp(cp_place_policy_name(CP_PLACE_SPREAD), "spread") == 0,
	   "names round-trip");
}

int main(void)
{
	test_need();
	test_host_capacity();
	test_reservation_json();
	test_choose();
	test_share_and_fit();
	test_policy_names();
	return tap_done();
}
