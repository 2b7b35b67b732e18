/* destroy.c: env.destroy: the environment's ingress proxies, every
 * container and the network of the environment's project, then its volumes and snapshots through its storage
 * backend (snapshot.c keeps any snapshot a live fork depends on), then its
 * data directory (spec, compose file). Only this environment's label and
 * directories are touched. */
#include <stdio.h>
#include <stdlib.h>

#include "base/fs.h"
#include "sidecar/sidecar.h"
#include "sidecar/storage/storage.h"

int cmd_env_destroy(struct wk *w, const struct json *payload, struct json **result, struct err *e)
{
	char project[SC_ID_MAX], dir[FS_PATH_MAX];

	if (!sc_safe_id(w->env))
		return err_set(e, "env.destroy: the command has no usable env_id");
	dk_project(w->env, project, sizeof(project));
	wk_progress("removing containers and network of %s", project);
	ig_stop_env(w->data, w->env);
	if (dk_project_down(project, e) < 0)
		return err_prefix(e, "env.destroy");
	if (fs_path(dir, sizeof(dir), e, "%s/envs/%s", w->data, w->env) < 0)
		return err_prefix(e, "env.destroy");
	if (snap_destroy_env(w, w->env, e) < 0)
		return err_prefix(e, "env.destroy");
	wk_progress("removing %s", dir);
	if (fs_remove_all(dir, e) < 0)
		return err_prefix(e, "env.destroy");
	*result = json_new_object();
	json_object_set_str(*result, "destroyed", w->env);
	return 0;
}
