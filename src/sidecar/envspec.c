/*
 * envspec.c: the one reader of an environment's spec.json
 * (<data>/envs/<env>/spec.json, written by env.create), so that its cap and
 * its errors are the same for every command that looks at it.
 */
#include <stdio.h>

#include "base/fs.h"
#include "sidecar/sidecar.h"

int sc_spec_load(const char *data, const char *env, struct json **spec, struct err *e)
{
	char path[SC_SPEC_PATH_MAX];
	int n = snprintf(path, sizeof(path), "%s/envs/%s/spec.json", data, env);

	*spec = NULL;
	if (n < 0 || (size_t)n >= sizeof(path))
		return err_set(e, "the path of the spec.json of environment %.64s is over %d bytes", env,
			       SC_SPEC_PATH_MAX - 1);
	if (!fs_exists(path))
		return 0;
	if (json_parse_file(path, SC_SPEC_FILE_MAX, spec, e) < 0)
		return err_prefix(e, "%s", path);
	return 1;
}
