/* promote.c: x-denv.promote, what a promotion's gates check
 * (deployments.md, promote; denv-compose(5)):
 *   replays     how many times gate.replay runs the verifier (default
 *               SPEC_PROMOTE_REPLAYS_DEFAULT; 0 skips the gate)
 *   soak        how long gate.soak keeps the fresh fork running before it
 *               must still answer: a duration ("30s") or seconds; 0 skips
 *   invariants  declared checks, each {name, service, command}, run in the
 *               fresh fork; each must exit 0
 * Into the Spec's "promote": {replays, soak_sec, invariants: [{name,
 * service, command}]}, present only when the file declares x-denv.promote
 * (the control plane applies the defaults otherwise). */
#include <string.h>

#include "base/clock.h"
#include "base/str.h"
#include "spec/spec.h"

static int read_replays(const struct json *v, struct json *out, struct err *e)
{
	if (!v || v->type == JSON_NULL) {
		json_object_set_int(out, "replays", SPEC_PROMOTE_REPLAYS_DEFAULT);
		return 0;
	}
	if (v->type != JSON_INT || v->u.i < 0 || v->u.i > SPEC_PROMOTE_REPLAYS_MAX)
		return err_set(e, "compose: x-denv.promote.replays must be between 0 and %d", SPEC_PROMOTE_REPLAYS_MAX);
	json_object_set_int(out, "replays", v->u.i);
	return 0;
}

static int read_soak(const struct json *v, struct json *out, struct err *e)
{
	int64_t ms = 0;

	if (v && v->type == JSON_INT)
		ms = v->u.i * 1000;
	else if (v && v->type == JSON_STRING && clock_parse_duration(v->u.str.s, &ms) < 0)
		ms = -1;
	else if (v && v->type != JSON_NULL && v->type != JSON_STRING)
		ms = -1;
	if (ms < 0 || ms > (int64_t)SPEC_PROMOTE_SOAK_MAX_SEC * 1000)
		return err_set(e, "compose: x-denv.promote.soak must be a duration between 0s and %ds (\"30s\")",
			       SPEC_PROMOTE_SOAK_MAX_SEC);
	/* Whole seconds: the gate's timer and the evidence count in seconds. */
	json_object_set_int(out, "soak_sec", (ms + 999) / 1000);
	return 0;
}

static int read_invariant(const struct json *spec, const struct json *v, size_t i, struct json *list,
			  struct err *e)
{
	const char *name = json_get_str(v, "name"), *svc = json_get_str(v, "service");
	struct json *one, *argv;

	if (!v || v->type != JSON_OBJECT)
		return err_set(e, "compose: x-denv.promote.invariants[%zu] must be a map of name, service and command", i);
	if (!name || !spec_valid_name(name))
		return err_set(e, "compose: x-denv.promote.invariants[%zu].name must be a name (letters, digits, ., - and _)", i);
	for (size_t k = 0; k < json_len(list); k++)
		if (str_eq(json_get_str(json_at(list, k), "name"), name))
			return err_set(e, "compose: x-denv.promote.invariants: \"%s\" is declared twice", name);
	if (!svc || !spec_service(spec, svc))
		return err_set(e, "compose: x-denv.promote.invariants \"%s\": service \"%s\" is not a service", name,
			       svc ? svc : "");
	if (!(argv = spec_warm(json_get(v, "command"), "compose: x-denv.promote.invariants command", e)))
		return -1;
	if (json_len(argv) == 0) {
		json_free(argv);
		return err_set(e, "compose: x-denv.promote.invariants \"%s\": command is required", name);
	}
	one = json_new_object();
	json_object_set_str(one, "name", name);
	json_object_set_str(one, "service", svc);
	json_object_set(one, "command", argv);
	json_array_push(list, one);
	return 0;
}

int spec_promote(const struct json *v, struct json *spec, struct err *e)
{
	const struct json *inv;
	struct json *out, *list;

	if (!v || v->type == JSON_NULL)
		return 0;
	if (v->type != JSON_OBJECT)
		return err_set(e, "compose: x-denv.promote must be a map (replays, soak, invariants)");
	out = json_new_object();
	json_object_set(spec, "promote", out);
	if (read_replays(json_get(v, "replays"), out, e) < 0 || read_soak(json_get(v, "soak"), out, e) < 0)
		return -1;
	list = json_new_array();
	json_object_set(out, "invariants", list);
	inv = json_get(v, "invariants");
	if (!inv || inv->type == JSON_NULL)
		return 0;
	if (inv->type != JSON_ARRAY || json_len(inv) > SPEC_PROMOTE_INVARIANTS_MAX)
		return err_set(e, "compose: x-denv.promote.invariants must be a list of at most %d checks",
			       SPEC_PROMOTE_INVARIANTS_MAX);
	for (size_t i = 0; i < json_len(inv); i++)
		if (read_invariant(spec, json_at(inv, i), i, list, e) < 0)
			return -1;
	return 0;
}
