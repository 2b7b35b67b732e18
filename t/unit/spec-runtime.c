/* Unit tests: x-denv.runtime (file-wide and per service) and x-denv.disk into the Spec. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json/json.h"
#include "spec/spec.h"
#include "tap.h"

struct rt_case {
	const char *what, *yaml;
	const char *want;	/* "a=R,b=R" per service ("-" for none), or the refusal */
};

static const struct rt_case cases[] = {
	{ "no runtime anywhere: the host's default", "services: {a: {image: x}, b: {image: x}}", "a=-,b=-" },
	{ "file-wide gvisor", "x-denv: {runtime: gvisor}\nservices: {a: {image: x}, b: {image: x}}", "a=gvisor,b=gvisor" },
	{ "one service's own", "services: {a: {image: x, x-denv: {runtime: gvisor}}, b: {image: x}}", "a=gvisor,b=-" },
	{ "a service's own wins over the file's",
	  "x-denv: {runtime: gvisor}\nservices: {a: {image: x, x-denv: {runtime: runc}}, b: {image: x}}",
	  "a=runc,b=gvisor" },
	{ "null is no choice", "x-denv: {runtime: null}\nservices: {a: {image: x}}", "a=-" },
	{ "an unknown runtime", "x-denv: {runtime: kata}\nservices: {a: {image: x}}",
	  "compose: x-denv.runtime must be runc or gvisor, got \"kata\"" },
	{ "Docker's name is not ours", "services: {a: {image: x, x-denv: {runtime: runsc}}}",
	  "compose: services.a.x-denv.runtime must be runc or gvisor, got \"runsc\"" },
	{ "a list", "x-denv: {runtime: [gvisor]}\nservices: {a: {image: x}}",
	  "compose: x-denv.runtime must be runc or gvisor, got \"?\"" },
	{ "a service's x-denv that is not a map", "services: {a: {image: x, x-denv: gvisor}}",
	  "compose: services.a.x-denv must be a map" },
};

static void runtimes_of(const struct json *spec, char *out, size_t n)
{
	const struct json *services = json_get(spec, "services");
	size_t used = 0;

	out[0] = '\0';
	for (size_t i = 0; i < json_len(services) && used < n; i++) {
		const struct json *s = json_at(services, i);
		const char *rt = json_get_str(s, "runtime");
		int w = snprintf(out + used, n - used, "%s%s=%s", i ? "," : "", json_get_str(s, "name"), rt ? rt : "-");
		used += w > 0 ? (size_t)w : 0;
	}
}

static void test_runtime(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct rt_case *c = &cases[i];
		struct json *spec = NULL;
		struct err e;
		char got[256];

		e.msg[0] = '\0';
		if (spec_parse_compose(c->yaml, strlen(c->yaml), &spec, &e) < 0) {
			is_str(e.msg, c->want, c->what);
			continue;
		}
		runtimes_of(spec, got, sizeof(got));
		is_str(got, c->want, c->what);
		ok(json_len(json_get(spec, "warnings")) == 0, "%s: no warnings", c->what);
		json_free(spec);
	}
}

static void test_warnings(void)
{
	static const char typo[] = "services: {a: {image: x, runtime: runsc, x-denv: {runtme: gvisor}}}";
	struct json *spec = NULL;
	struct err e;
	const struct json *w;

	ok(spec_parse_compose(typo, strlen(typo), &spec, &e) == 0, "a typo in a service's x-denv is not a refusal");
	w = json_get(spec, "warnings");
	is_int(json_len(w), 2, "two warnings");
	is_str(json_len(w) > 0 ? json_at(w, 0)->u.str.s : "",
	       "services.a.runtime: ignored by denv (use x-denv.runtime: runc or gvisor)", "Compose's runtime: points at ours");
	is_str(json_len(w) > 1 ? json_at(w, 1)->u.str.s : "",
	       "services.a.x-denv.runtme: unknown key (did you mean runtime?)", "the typo gets its suggestion");
	json_free(spec);
}

struct disk_case {
	const char *what, *value;
	const char *want;	/* disk_mb as a number, "-" for none, or the refusal */
};

static const struct disk_case disks[] = {
	{ "absent", "~", "-" },
	{ "gigabytes", "2g", "2048" },
	{ "megabytes", "512m", "512" },
	{ "a fraction", "1.5g", "1536" },
	{ "bytes", "1073741824", "1024" },
	{ "below the minimum", "1m", "compose: x-denv.disk \"1m\" is below the 16 MiB minimum" },
	{ "zero", "0", "compose: x-denv.disk \"0\" is not a size (use 512m, 10g or bytes)" },
	{ "not a size", "lots", "compose: x-denv.disk \"lots\" is not a size (use 512m, 10g or bytes)" },
	{ "above the maximum", "17t", "compose: x-denv.disk \"17t\" is above the 16777216 MiB maximum" },
};

static void test_disk(void)
{
	for (size_t i = 0; i < sizeof(disks) / sizeof(disks[0]); i++) {
		const struct disk_case *c = &disks[i];
		char yaml[256], got[64];
		struct json *spec = NULL;
		struct err e;

		snprintf(yaml, sizeof(yaml), "x-denv: {disk: %s}\nservices: {a: {image: x}}", c->value);
		e.msg[0] = '\0';
		if (spec_parse_compose(yaml, strlen(yaml), &spec, &e) < 0) {
			is_str(e.msg, c->want, c->what);
			continue;
		}
		if (json_get(spec, "disk_mb"))
			snprintf(got, sizeof(got), "%lld", (long long)json_get_int(spec, "disk_mb", 0));
		else
			snprintf(got, sizeof(got), "-");
		is_str(got, c->want, c->what);
		json_free(spec);
	}
}

int main(void)
{
	test_runtime();
	test_warnings();
	test_disk();
	return tap_done();
}
