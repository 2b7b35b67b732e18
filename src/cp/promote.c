/* promote.c: gate.invariants' built-in checks, a pure comparison of the
 * version being promoted with the one the target runs (deployments.md,
 * promote; the blog: "nothing deleted, disabled, or silenced"). Each check
 * is {name, ok, detail}; a failed one's detail says what went, in words a
 * reviewer reads on the data sheet:
 *   deleted    a service, a volume, the verifier or a declared invariant
 *              the target has is gone
 *   disabled   egress denied became allowed; the agent's principal or a
 *              memory, pids or cpus cap the target has is gone
 *   silenced   a collect path is no longer collected; a health check is gone
 * Without a target version (a first promotion) nothing is compared and
 * every check passes with "no previous version". */
#include <stdio.h>
#include <string.h>

#include "base/str.h"
#include "cp/cp.h"

struct inv {
	struct json *checks;
	int failed;
	char detail[CP_PROMOTE_DETAIL_MAX];	/* the first finding of the check being run */
	int found;
};

/* Record a finding "<what> <how>" (the first one of a check is shown). */
static void finding(struct inv *iv, const char *what, const char *how)
{
	if (iv->found++ == 0)
		snprintf(iv->detail, sizeof(iv->detail), "%.170s %.80s", what, how);
}

static void finding_of(struct inv *iv, const char *kind, const char *name, const char *how)
{
	char what[CP_PROMOTE_DETAIL_MAX];

	snprintf(what, sizeof(what), "%.40s %.120s", kind, name);
	finding(iv, what, how);
}

static void finding_cap(struct inv *iv, const char *svc, const char *cap)
{
	char how[64];

	snprintf(how, sizeof(how), "lost its %s cap", cap);
	finding_of(iv, "service", svc, how);
}

static void check_end(struct inv *iv, const char *name, const char *fine)
{
	char shown[CP_PROMOTE_DETAIL_MAX + 32];

	if (iv->found > 1)
		snprintf(shown, sizeof(shown), "%.255s (and %d more)", iv->detail, iv->found - 1);
	else
		str_copy(shown, sizeof(shown), iv->found ? iv->detail : fine);
	json_array_push(iv->checks, cp_obj("name", json_new_str(name), "ok", json_new_bool(iv->found == 0),
					   "detail", json_new_str(shown), NULL));
	if (iv->found)
		iv->failed++;
	iv->found = 0;
	iv->detail[0] = '\0';
}

static bool has_str(const struct json *list, const char *s)
{
	for (size_t i = 0; i < json_len(list); i++)
		if (json_at(list, i)->type == JSON_STRING && str_eq(json_at(list, i)->u.str.s, s))
			return true;
	return false;
}

static const struct json *named(const struct json *list, const char *name)
{
	for (size_t i = 0; i < json_len(list); i++)
		if (str_eq(json_get_str(json_at(list, i), "name"), name))
			return json_at(list, i);
	return NULL;
}

static void deleted(struct inv *iv, const struct json *old, const struct json *new)
{
	const struct json *os = json_get(old, "services"), *ns = json_get(new, "services");
	const struct json *oi = json_get(json_get(old, "promote"), "invariants");

	for (size_t i = 0; i < json_len(os); i++) {
		const char *n = json_get_str(json_at(os, i), "name");

		if (!named(ns, n))
			finding_of(iv, "service", n, "was deleted");
	}
	for (size_t i = 0; i < json_len(json_get(old, "volumes")); i++) {
		const char *v = json_at(json_get(old, "volumes"), i)->u.str.s;

		if (!has_str(json_get(new, "volumes"), v))
			finding_of(iv, "volume", v, "was deleted");
	}
	if (json_get(old, "verifier") && !json_get(new, "verifier"))
		finding(iv, "the verifier", "was deleted");
	for (size_t i = 0; i < json_len(oi); i++) {
		const char *n = json_get_str(json_at(oi, i), "name");

		if (!named(json_get(json_get(new, "promote"), "invariants"), n))
			finding_of(iv, "invariant", n, "was deleted");
	}
	check_end(iv, "nothing deleted", "every service, volume, verifier and invariant is kept");
}

static const char *const cap_keys[] = { "memory_mb", "pids", "cpus" };

static double num(const struct json *o, const char *key)
{
	const struct json *v = json_get(o, key);

	return !v ? 0 : v->type == JSON_INT ? (double)v->u.i : v->type == JSON_DOUBLE ? v->u.d : 0;
}

static void disabled(struct inv *iv, const struct json *old, const struct json *new)
{
	const char *oa = json_get_str(json_get(old, "agent"), "service");
	const struct json *os = json_get(old, "services");

	if (str_eq(json_get_str(old, "egress"), "deny") && !str_eq(json_get_str(new, "egress"), "deny"))
		finding(iv, "egress", "was opened (deny to allow)");
	if (oa && *oa && !str_eq(json_get_str(json_get(new, "agent"), "service"), oa))
		finding_of(iv, "x-denv.agent.service", oa, "is no longer the agent");
	for (size_t i = 0; i < json_len(os); i++) {
		const char *n = json_get_str(json_at(os, i), "name");
		const struct json *ns = named(json_get(new, "services"), n);
		const struct json *ores = json_get(json_at(os, i), "resources"), *nres = json_get(ns, "resources");

		for (size_t k = 0; ns && k < sizeof(cap_keys) / sizeof(cap_keys[0]); k++)
			if (num(ores, cap_keys[k]) > 0 && num(nres, cap_keys[k]) <= 0)
				finding_cap(iv, n, cap_keys[k]);
	}
	check_end(iv, "nothing disabled", "egress, the agent's principal and every cap are kept");
}

static void silenced(struct inv *iv, const struct json *old, const struct json *new)
{
	const struct json *oc = json_get(json_get(old, "verifier"), "collect");
	const struct json *nc = json_get(json_get(new, "verifier"), "collect");
	const struct json *os = json_get(old, "services");

	for (size_t i = 0; json_get(new, "verifier") && i < json_len(oc); i++)
		if (!has_str(nc, json_at(oc, i)->u.str.s))
			finding(iv, json_at(oc, i)->u.str.s, "is no longer collected for the verifier");
	for (size_t i = 0; i < json_len(os); i++) {
		const char *n = json_get_str(json_at(os, i), "name");
		const struct json *ns = named(json_get(new, "services"), n);

		if (ns && json_get(json_at(os, i), "health") && !json_get(ns, "health"))
			finding_of(iv, "service", n, "lost its health check");
	}
	check_end(iv, "nothing silenced", "every collect path and health check is kept");
}

int cp_promote_invariants(const struct json *old_spec, const struct json *new_spec, struct json *checks)
{
	static const char *const names[] = { "nothing deleted", "nothing disabled", "nothing silenced" };
	struct inv iv = { checks, 0, "", 0 };

	if (!old_spec || old_spec->type != JSON_OBJECT) {
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			json_array_push(checks, cp_obj("name", json_new_str(names[i]), "ok", json_new_bool(true),
						       "detail", json_new_str("no previous version"), NULL));
		return 0;
	}
	deleted(&iv, old_spec, new_spec);
	disabled(&iv, old_spec, new_spec);
	silenced(&iv, old_spec, new_spec);
	return iv.failed;
}
