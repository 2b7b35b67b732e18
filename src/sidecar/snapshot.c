/* snapshot.c: env.snapshot, env.fork and env.rollback ([F7]). Until the
 * storage backends land, each answers that it is not implemented, as the
 * dispatcher did before (a result, never a silent drop). */
#include "sidecar/sidecar.h"

int cmd_env_snapshot(struct wk *w, const struct json *payload, struct json **result, struct err *e)
{
	return err_set(e, "env.snapshot: not implemented yet");
}

int cmd_env_fork(struct wk *w, const struct json *payload, struct json **result, struct err *e)
{
	return err_set(e, "env.fork: not implemented yet");
}

int cmd_env_rollback(struct wk *w, const struct json *payload, struct json **result, struct err *e)
{
	return err_set(e, "env.rollback: not implemented yet");
}
