/* verify.c: verify.collect and verify.run ([F8]). Until they land, each
 * answers that it is not implemented, as the dispatcher did before. */
#include "sidecar/sidecar.h"

int cmd_verify_collect(struct wk *w, const struct json *payload, struct json **result, struct err *e)
{
	return err_set(e, "verify.collect: not implemented yet");
}

int cmd_verify_run(struct wk *w, const struct json *payload, struct json **result, struct err *e)
{
	return err_set(e, "verify.run: not implemented yet");
}
