/* ref.c: "<project>/<env>" environment references. See cli.h. */
#include "cli/cli.h"

#include <string.h>

#include "base/str.h"
#include "json/json.h"

int cli_ref_split(const char *ref, char *project, size_t psize, char *env, size_t esize, struct err *e)
{
	const char *slash = strchr(ref, '/');
	size_t plen;

	if (!*ref)
		return err_set(e, "empty environment reference");
	if (!slash)
		return 0;
	plen = (size_t)(slash - ref);
	if (plen == 0 || !slash[1] || strchr(slash + 1, '/'))
		return err_set(e, "environment \"%s\": expected an id (env_...) or <project>/<env>", ref);
	if (plen >= psize || plen >= CLI_NAME_MAX || strlen(slash + 1) >= esize ||
	    strlen(slash + 1) >= CLI_NAME_MAX)
		return err_set(e, "environment \"%s\": name too long", ref);
	memcpy(project, ref, plen);
	project[plen] = '\0';
	str_copy(env, esize, slash + 1);
	return 1;
}

bool cli_ref_is_id(const char *ref)
{
	return str_has_prefix(ref, CLI_ENV_ID_PREFIX);
}

/* "a/x, b/x, c/x (and 4 more)": at most CLI_CANDIDATES_MAX of them. */
static void list_candidates(struct buf *b, const struct json *envs, bool live_only)
{
	size_t shown = 0, more = 0;

	for (size_t i = 0; i < json_len(envs); i++) {
		const struct json *env = json_at(envs, i);

		if (live_only && str_eq(json_get_str(env, "Status"), "destroyed"))
			continue;
		if (shown == CLI_CANDIDATES_MAX) {
			more++;
			continue;
		}
		buf_addf(b, "%s%s/%s", shown ? ", " : "", json_get_str(env, "project") ? json_get_str(env, "project") : "?",
			 json_get_str(env, "Name") ? json_get_str(env, "Name") : "?");
		shown++;
	}
	if (more)
		buf_addf(b, " (and %zu more)", more);
}

/* How many environments of envs are named name (live ones only when live). */
static size_t count_named(const struct json *envs, const char *name, bool live, const struct json **last)
{
	size_t n = 0;

	for (size_t i = 0; i < json_len(envs); i++) {
		const struct json *env = json_at(envs, i);

		if (!str_eq(json_get_str(env, "Name"), name) || !json_get_str(env, "ID"))
			continue;
		if (live && str_eq(json_get_str(env, "Status"), "destroyed"))
			continue;
		n++;
		*last = env;
	}
	return n;
}

int cli_ref_pick(const char *name, const struct json *envs, char *id, size_t size, struct err *e)
{
	const struct json *hit = NULL;
	struct json *matches;
	struct buf b = BUF_INIT;
	size_t live = count_named(envs, name, true, &hit);
	int rc;

	/* A destroyed namesake never makes a live one ambiguous; with no live
	 * one, a single destroyed one is still the answer (env get shows it). */
	if (live == 0 && count_named(envs, name, false, &hit) != 1)
		hit = NULL;
	if (live <= 1 && hit)
		return str_copy(id, size, json_get_str(hit, "ID")) < 0 ? err_set(e, "environment id too long") : 0;
	matches = json_new_array();
	for (size_t i = 0; i < json_len(envs); i++)
		if (str_eq(json_get_str(json_at(envs, i), "Name"), name))
			json_array_push(matches, json_dup(json_at(envs, i)));
	if (json_len(matches) > 0) {
		list_candidates(&b, matches, live > 0);
		rc = err_set(e, "environment \"%s\" is in more than one project; use <project>/<env>: %s", name, b.data);
	} else if (json_len(envs) > 0) {
		list_candidates(&b, envs, true);
		rc = err_set(e, "no environment named \"%s\"; use <project>/<env> or an id (env_...); there are: %s",
			     name, b.len ? b.data : "only destroyed ones");
	} else {
		rc = err_set(e, "no environment named \"%s\"; use <project>/<env> or an id (env_...); this team has none",
			     name);
	}
	json_free(matches);
	buf_release(&b);
	return rc;
}
