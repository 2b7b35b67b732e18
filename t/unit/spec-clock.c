/* Unit tests: x-denv.clock into the Spec's clock (spec_clock), and through a whole compose file. */
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "json/json.h"
#include "spec/spec.h"
#include "yaml/yaml.h"
#include "tap.h"

#define NOW_NS (1798761600LL * 1000000000LL + 250000000LL)	/* 2027-01-01T00:00:00.25Z */

struct clock_case {
	const char *what, *yaml;	/* the value of x-denv.clock */
	const char *want;		/* the Spec's clock as JSON, "null" for real, or the refusal */
};

static const struct clock_case cases[] = {
	{ "absent is real", "~", "null" },
	{ "real", "real", "null" },
	{ "real as a map", "{mode: real}", "null" },
	{ "frozen: the deploy's instant, whole seconds", "frozen",
	  "{\"mode\":\"frozen\",\"at\":\"2027-01-01T00:00:00Z\"}" },
	{ "frozen at a declared instant", "{mode: frozen, at: \"2026-01-01T00:00:00Z\"}",
	  "{\"mode\":\"frozen\",\"at\":\"2026-01-01T00:00:00Z\"}" },
	{ "frozen at an instant with an offset is kept in UTC", "{mode: frozen, at: \"2026-01-01T02:00:00+02:00\"}",
	  "{\"mode\":\"frozen\",\"at\":\"2026-01-01T00:00:00Z\"}" },
	{ "offset back a day", "{mode: offset, offset: \"-24h\"}",
	  "{\"mode\":\"offset\",\"offset\":\"-24h0m0s\",\"offset_sec\":-86400}" },
	{ "offset forward", "{mode: offset, offset: 90m}",
	  "{\"mode\":\"offset\",\"offset\":\"1h30m0s\",\"offset_sec\":5400}" },
	{ "offset with a plus", "{mode: offset, offset: \"+1s\"}",
	  "{\"mode\":\"offset\",\"offset\":\"1s\",\"offset_sec\":1}" },
	{ "a zero offset", "{mode: offset, offset: \"0\"}", "{\"mode\":\"offset\",\"offset\":\"0s\",\"offset_sec\":0}" },
	{ "an unknown mode", "paused", "compose: x-denv.clock must be real, frozen or offset, got \"paused\"" },
	{ "a number", "5", "compose: x-denv.clock must be real, frozen or offset, got \"5\"" },
	{ "a list", "[frozen]", "compose: x-denv.clock must be real, frozen or offset, got \"?\"" },
	{ "a map without mode", "{at: \"2026-01-01T00:00:00Z\"}",
	  "compose: x-denv.clock.mode is required (real, frozen or offset)" },
	{ "offset without its duration", "offset",
	  "compose: x-denv.clock offset needs the duration: clock: {mode: offset, offset: \"-24h\"}" },
	{ "offset map without offset", "{mode: offset}",
	  "compose: x-denv.clock.offset is required with mode offset (e.g. \"-24h\")" },
	{ "offset without a unit", "{mode: offset, offset: \"60\"}",
	  "compose: x-denv.clock.offset must be a duration like \"-24h\" or \"90m\", got \"60\"" },
	{ "offset with two signs", "{mode: offset, offset: \"--1h\"}",
	  "compose: x-denv.clock.offset must be a duration like \"-24h\" or \"90m\", got \"--1h\"" },
	{ "offset below a second", "{mode: offset, offset: 1500ms}",
	  "compose: x-denv.clock.offset must be whole seconds, at most 3650 days, got \"1500ms\"" },
	{ "offset past ten years", "{mode: offset, offset: 87601h}",
	  "compose: x-denv.clock.offset must be whole seconds, at most 3650 days, got \"87601h\"" },
	{ "at that is not RFC 3339", "{mode: frozen, at: \"2026-01-01 00:00:00\"}",
	  "compose: x-denv.clock.at must be an RFC 3339 time like 2026-01-01T00:00:00Z, got \"2026-01-01 00:00:00\"" },
	{ "at with a fraction", "{mode: frozen, at: \"2026-01-01T00:00:00.5Z\"}",
	  "compose: x-denv.clock.at must be a whole second after 1970, got \"2026-01-01T00:00:00.5Z\"" },
	{ "at before 1970", "{mode: frozen, at: \"1969-12-31T23:59:59Z\"}",
	  "compose: x-denv.clock.at must be a whole second after 1970, got \"1969-12-31T23:59:59Z\"" },
};

static void test_cases(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct clock_case *c = &cases[i];
		struct json *v = NULL, *out = NULL;
		struct err e;
		char *got;

		e.msg[0] = '\0';
		if (yaml_parse(c->yaml, strlen(c->yaml), NULL, &v, &e) < 0) {
			ok(0, "%s: the test's YAML parses (%s)", c->what, e.msg);
			continue;
		}
		if (spec_clock(v, NOW_NS, &out, &e) < 0) {
			is_str(e.msg, c->want, c->what);
			ok(out == NULL, "%s: nothing is returned with a refusal", c->what);
		} else {
			got = out ? json_to_string(out, 0) : NULL;
			is_str(got ? got : "null", c->want, c->what);
			free(got);
		}
		json_free(out);
		json_free(v);
	}
}

/* Through the whole compose reader: the Spec carries the clock, stamped now. */
static void test_compose(void)
{
	static const char frozen[] = "x-denv: {clock: frozen}\nservices:\n  a: {image: x}\n";
	static const char real[] = "services:\n  a: {image: x}\n";
	static const char bad[] = "x-denv: {clock: {mode: frozen, at: yesterday}}\nservices:\n  a: {image: x}\n";
	struct json *spec = NULL;
	struct err e;
	int64_t before = clock_now_ns(), at = 0;

	ok(spec_parse_compose(frozen, strlen(frozen), &spec, &e) == 0, "a frozen clock is accepted");
	is_str(json_get_str(json_get(spec, "clock"), "mode"), "frozen", "the Spec says frozen");
	ok(clock_parse_rfc3339(json_get_str(json_get(spec, "clock"), "at") ? json_get_str(json_get(spec, "clock"), "at")
									    : "", &at) == 0 &&
	   at <= clock_now_ns() && at > before - 1000000000LL,
	   "a bare frozen is the deploy's instant, recorded in the Spec");
	is_int(json_len(json_get(spec, "warnings")), 0, "x-denv.clock is no longer warned about");
	json_free(spec);
	spec = NULL;
	ok(spec_parse_compose(real, strlen(real), &spec, &e) == 0 && !json_get(spec, "clock"),
	   "without x-denv.clock the Spec has no clock (real time)");
	json_free(spec);
	spec = NULL;
	ok(spec_parse_compose(bad, strlen(bad), &spec, &e) < 0, "a bad clock refuses the file");
	is_str(e.msg, "compose: x-denv.clock.at must be an RFC 3339 time like 2026-01-01T00:00:00Z, got \"yesterday\"",
	       "with the reason");
}

/* The sidecar's LD_PRELOAD and FAKETIME would override a service's own. */
static void test_preload(void)
{
	static const char preload[] = "x-denv: {clock: frozen}\nservices:\n  a: {image: x, environment: {LD_PRELOAD: /x.so}}\n";
	static const char fake[] = "x-denv: {clock: {mode: offset, offset: 1h}}\n"
				   "services:\n  a: {image: x, environment: [FAKETIME_NO_CACHE=1]}\n";
	static const char real[] = "services:\n  a: {image: x, environment: {LD_PRELOAD: /x.so}}\n";
	struct json *spec = NULL;
	struct err e;

	ok(spec_parse_compose(preload, strlen(preload), &spec, &e) < 0, "LD_PRELOAD with a frozen clock is refused");
	is_str(e.msg, "compose: service \"a\" sets LD_PRELOAD, which x-denv.clock sets itself (libfaketime); "
	       "remove it or use clock: real", "naming the service and the variable");
	ok(spec_parse_compose(fake, strlen(fake), &spec, &e) < 0 && strstr(e.msg, "sets FAKETIME_NO_CACHE") != NULL,
	   "a FAKETIME variable with an offset clock is refused");
	ok(spec_parse_compose(real, strlen(real), &spec, &e) == 0, "LD_PRELOAD on the real clock is the service's own");
	json_free(spec);
}

int main(void)
{
	test_cases();
	test_compose();
	test_preload();
	return tap_done();
}
