/* cp-ttl.c: the pure parts of the TTL policy (src/cp/ttl.c): which values
 * a request may set, when an environment is due and why, when activity is
 * written, and how a body's TTLs, a base (server defaults or a fork's
 * source) and the row's own values combine. */
#include <string.h>

#include "cp/cp.h"
#include "tap.h"

#define U CP_TTL_UNSET

static const struct {
	int64_t idle, max;
	const char *action;
	int want;
	const char *msg;
} checks[] = {
	{ U, U, NULL, 0, "" },
	{ 0, 0, "destroy", 0, "" },
	{ 2, 3600, NULL, 0, "" },
	{ CP_TTL_MAX_S, CP_TTL_MAX_S, NULL, 0, "" },
	{ -1, U, NULL, -1, "idle_ttl_sec must be 0 (none) to 2592000, got -1" },
	{ U, -5, NULL, -1, "max_ttl_sec must be 0 (none) to 2592000, got -5" },
	{ CP_TTL_MAX_S + 1, U, NULL, -1, "idle_ttl_sec must be 0 (none) to 2592000, got 2592001" },
	{ U, U, "pause", 0, "" },
	{ U, U, "stop", -1, "ttl_action must be destroy or pause, got \"stop\"" },
	{ U, U, "", -1, "ttl_action must be destroy or pause, got \"\"" },
};

static const struct {
	int64_t created, last, idle, max, now;
	enum cp_ttl_verdict want;
	const char *reason;
} dues[] = {
	{ 0, 0, 0, 0, 1000000, CP_TTL_KEEP, "" },		/* no limits */
	{ 0, 5000, 2, 0, 6999, CP_TTL_KEEP, "" },		/* idle: 1.999 s */
	{ 0, 5000, 2, 0, 7000, CP_TTL_IDLE, "ttl: idle 2 s exceeded" },
	{ 0, 5000, 300, 0, 400000, CP_TTL_IDLE, "ttl: idle 300 s exceeded" },
	{ 1000, 1000, 0, 3600, 3600999, CP_TTL_KEEP, "" },
	{ 1000, 1000, 0, 3600, 3601000, CP_TTL_MAX, "ttl: max 3600 s reached" },
	/* Active a moment ago: the max TTL still applies. */
	{ 0, 9999, 60, 10, 10000, CP_TTL_MAX, "ttl: max 10 s reached" },
	/* Both due: max is named (activity could not have moved it). */
	{ 0, 0, 2, 4, 10000, CP_TTL_MAX, "ttl: max 4 s reached" },
};

static void test_apply(void)
{
	struct json *env = json_new_object();
	struct cp_ttl_req none = { U, U, NULL }, body = { 30, U, NULL }, base = { 3600, 7200, "destroy" };

	cp_ttl_apply(env, &none, NULL);
	ok(json_get_int(env, "IdleTTLSec", -1) == 0 && json_get_int(env, "MaxTTLSec", -1) == 0 &&
		   strcmp(json_get_str(env, "TTLAction"), "destroy") == 0,
	   "nothing given, no base: no limits, destroy");
	cp_ttl_apply(env, &body, &base);
	is_int(json_get_int(env, "IdleTTLSec", -1), 30, "the body's idle_ttl_sec wins over the base");
	is_int(json_get_int(env, "MaxTTLSec", -1), 7200, "the base fills max_ttl_sec");
	body.idle_s = U;
	body.max_s = 0;
	cp_ttl_apply(env, &body, NULL);
	is_int(json_get_int(env, "IdleTTLSec", -1), 30, "no base: the row keeps what it had (PATCH)");
	is_int(json_get_int(env, "MaxTTLSec", -1), 0, "and 0 turns a limit off");
	json_free(env);
}

int main(void)
{
	struct err e;
	char reason[96];

	for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
		struct cp_ttl_req t = { checks[i].idle, checks[i].max, checks[i].action };

		e.msg[0] = '\0';
		is_int(cp_ttl_check(&t, &e), checks[i].want, checks[i].want ? checks[i].msg : "accepted");
		is_str(checks[i].want ? e.msg : "", checks[i].msg, "  and its message");
	}
	for (size_t i = 0; i < sizeof(dues) / sizeof(dues[0]); i++) {
		enum cp_ttl_verdict v = cp_ttl_due(dues[i].created, dues[i].last, dues[i].idle, dues[i].max,
						   dues[i].now, reason, sizeof(reason));

		is_int(v, dues[i].want, *dues[i].reason ? dues[i].reason : "kept");
		is_str(reason, dues[i].reason, "  and the reason");
	}
	ok(!cp_ttl_write_due(100000, 100000 + CP_TTL_ACTIVITY_WRITE_MS - 1), "activity inside the interval is not written");
	ok(cp_ttl_write_due(100000, 100000 + CP_TTL_ACTIVITY_WRITE_MS), "activity one interval later is");
	ok(cp_ttl_write_due(0, 100000), "the first activity of a row never written is");
	test_apply();
	return tap_done();
}
