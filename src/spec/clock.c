/* clock.c: x-denv.clock, the wall clock the stack's programs read.
 *
 *   clock: real                                    (or absent) the host's clock
 *   clock: frozen                                  frozen at the deploy's instant
 *   clock: {mode: frozen, at: "2026-01-01T00:00:00Z"}
 *   clock: {mode: offset, offset: "-24h"}          real time shifted by a duration
 *
 * A bare `frozen` takes now_ns (the control plane passes the time of the
 * deploy), so the instant is written into the version's Spec: every fork
 * and every grader of that version then starts from the same instant,
 * which is the point of freezing. The sidecar (fakeclock.c) is what makes
 * programs see it; instants and offsets are whole seconds because that is
 * what it can hand on. Real is returned as NULL: no "clock" in the Spec. */
#include <stdint.h>
#include <string.h>

#include "base/clock.h"
#include "base/str.h"
#include "spec/spec.h"

#define NS_PER_SEC 1000000000LL

static int shown(const struct json *v, char *out, size_t n)
{
	if (spec_scalar_string(v, out, n) < 0)
		str_copy(out, n, "?");
	return 0;
}

static struct json *frozen_at(int64_t at_ns)
{
	struct json *c = json_new_object();
	char ts[CLOCK_RFC3339_MAX];

	clock_format_rfc3339(at_ns - at_ns % NS_PER_SEC, ts);
	json_object_set_str(c, "mode", "frozen");
	json_object_set_str(c, "at", ts);
	return c;
}

static int read_at(const struct json *at, int64_t now_ns, struct json **out, struct err *e)
{
	char s[SPEC_MAX_STRING];
	int64_t ns;

	if (!at || at->type == JSON_NULL) {
		*out = frozen_at(now_ns);
		return 0;
	}
	shown(at, s, sizeof(s));
	if (at->type != JSON_STRING || clock_parse_rfc3339(at->u.str.s, &ns) < 0)
		return err_set(e, "compose: x-denv.clock.at must be an RFC 3339 time like "
			       "2026-01-01T00:00:00Z, got \"%s\"", s);
	if (ns < 0 || ns % NS_PER_SEC)
		return err_set(e, "compose: x-denv.clock.at must be a whole second after 1970, got \"%s\"", s);
	*out = frozen_at(ns);
	return 0;
}

static int read_offset(const struct json *off, struct json **out, struct err *e)
{
	char s[SPEC_MAX_STRING], dur[CLOCK_DURATION_MAX + 1];
	const char *text;
	int64_t ms;
	bool neg;

	if (!off || off->type == JSON_NULL)
		return err_set(e, "compose: x-denv.clock.offset is required with mode offset (e.g. \"-24h\")");
	shown(off, s, sizeof(s));
	text = off->type == JSON_STRING ? off->u.str.s : "";
	neg = text[0] == '-';
	if (off->type != JSON_STRING || clock_parse_duration(text + neg, &ms) < 0 || text[neg] == '-')
		return err_set(e, "compose: x-denv.clock.offset must be a duration like \"-24h\" or \"90m\", got \"%s\"", s);
	if (ms % 1000 || ms / 1000 > SPEC_CLOCK_OFFSET_MAX_SEC)
		return err_set(e, "compose: x-denv.clock.offset must be whole seconds, at most %lld days, got \"%s\"",
			       (long long)SPEC_CLOCK_OFFSET_MAX_SEC / 86400, s);
	*out = json_new_object();
	json_object_set_str(*out, "mode", "offset");
	dur[0] = '-';
	clock_format_duration(ms, dur + neg, sizeof(dur) - 1);
	json_object_set_str(*out, "offset", ms ? dur : "0s");
	json_object_set_int(*out, "offset_sec", neg ? -(ms / 1000) : ms / 1000);
	return 0;
}

int spec_clock(const struct json *v, int64_t now_ns, struct json **out, struct err *e)
{
	const struct json *mode = v && v->type == JSON_OBJECT ? json_get(v, "mode") : v;
	char s[SPEC_MAX_STRING];

	*out = NULL;
	if (v && v->type == JSON_OBJECT && !mode)
		return err_set(e, "compose: x-denv.clock.mode is required (real, frozen or offset)");
	if (!mode || mode->type == JSON_NULL)
		return 0;
	shown(mode, s, sizeof(s));
	if (mode->type != JSON_STRING)
		return err_set(e, "compose: x-denv.clock must be real, frozen or offset, got \"%s\"", s);
	if (str_eq(s, "real"))
		return 0;
	if (str_eq(s, "frozen"))
		return read_at(v->type == JSON_OBJECT ? json_get(v, "at") : NULL, now_ns, out, e);
	if (str_eq(s, "offset") && v->type == JSON_OBJECT)
		return read_offset(json_get(v, "offset"), out, e);
	if (str_eq(s, "offset"))
		return err_set(e, "compose: x-denv.clock offset needs the duration: clock: {mode: offset, offset: \"-24h\"}");
	return err_set(e, "compose: x-denv.clock must be real, frozen or offset, got \"%s\"", s);
}
