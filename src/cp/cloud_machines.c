/*
 * cloud_machines.c: the clouds that create machines, behind one interface
 * (struct cp_cloud_ops) for the provision phase, the join timeout and the
 * start-up sweep (orch_place.c): create, delete and find by name, each a
 * call on the loop whose outcome comes back through a cp_machine_fn.
 */
#include <stdlib.h>

#include "base/str.h"
#include "cp/cloud.h"

static const struct cp_cloud_ops clouds[] = {
	{ "hetzner", cp_hetzner_create, cp_hetzner_delete, cp_hetzner_find },
	{ "aws", cp_aws_create, cp_aws_delete, cp_aws_find },
};

const struct cp_cloud_ops *cp_cloud_ops(const char *provider)
{
	for (size_t i = 0; i < sizeof(clouds) / sizeof(clouds[0]); i++)
		if (str_eq(clouds[i].provider, provider))
			return &clouds[i];
	return NULL;
}

struct http_aclient *cp_aclient(struct cp *cp)
{
	if (!cp->aclient)
		cp->aclient = http_aclient_new(cp->ev);
	return cp->aclient;
}

const char *cp_cloud_cfg(const struct json *config, const char *key, const char *fallback)
{
	const char *v = json_get_str(config, key);

	return v && *v ? v : fallback;
}

struct cp_machine_call *cp_machine_call_new(struct cp *cp, enum cp_machine_op op, cp_machine_fn fn, void *arg)
{
	struct cp_machine_call *c = xcalloc(1, sizeof(*c));

	c->cp = cp;
	c->op = op;
	c->fn = fn;
	c->arg = arg;
	return c;
}

void cp_machine_call_end(struct cp_machine_call *c, const struct cp_machine *m, const char *error)
{
	c->call = NULL;
	c->fn(c->cp, m, error, c->arg);
	free(c);
}

void cp_machine_cancel(struct cp_machine_call *c)
{
	if (!c)
		return;
	if (c->call)
		http_acall_cancel(c->call);
	free(c);
}
