/* ref.c: "<project>/<env>" environment references. See cli.h. */
#include "cli/cli.h"

#include <string.h>

#include "base/str.h"

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
