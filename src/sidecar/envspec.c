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

	*spec = NULL;
	if (fs_path(path, sizeof(path), e, "%s/envs/%s/spec.json", data, env) < 0)
		return err_prefix(e, "the spec.json of environment %.64s", env);
	if (!fs_exists(path))
		return 0;
	if (json_parse_file(path, SC_SPEC_FILE_MAX, spec, e) < 0)
		return err_prefix(e, "%s", path);
	return 1;
}
