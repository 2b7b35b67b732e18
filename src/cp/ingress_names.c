/* ingress_names.c: the names an environment's published services answer to
 * through its host's name gateway (denvd --ingress-domain; denv-cp(8),
 * "INGRESS NAMES"): https://<service>--<env>.<domain>, with the port when
 * it is not 443, for each service that has a first port in the endpoints.
 * The host says in its hello whether it has a gateway, under which domain
 * and on which port (Capabilities.ingress). */
#include <string.h>

#include "base/str.h"
#include "cp/cp.h"
#include "spec/spec.h"
#include "store/store.h"

const struct json *cp_host_ingress(struct cp *cp, const char *host_id)
{
	return json_get(json_get(st_get(cp->db, "hosts", host_id), "Capabilities"), "ingress");
}

struct json *cp_ingress_names(struct cp *cp, const char *host_id, const char *env_id, const struct json *endpoints,
			      struct json *unnamed)
{
	const struct json *ing = cp_host_ingress(cp, host_id);
	const char *domain = json_get_str(ing, "domain");
	int64_t port = json_get_int(ing, "port", 443);
	struct json *names;

	if (!domain || !endpoints || endpoints->type != JSON_OBJECT)
		return NULL;
	names = json_new_object();
	for (size_t i = 0; i < endpoints->u.obj.n; i++) {
		const char *svc = endpoints->u.obj.m[i].key;
		char name[SPEC_DNS_NAME_MAX + 1], url[SPEC_DNS_NAME_MAX + 32];
		struct err e;

		if (strchr(svc, ':'))
			continue;	/* "svc:port": a further port, served by address only */
		if (spec_ingress_name(svc, env_id, domain, name, sizeof(name), &e) < 0) {
			if (unnamed)
				json_object_set_str(unnamed, svc, e.msg);
			continue;
		}
		if (port == 443)
			str_fmt(url, sizeof(url), "https://%s", name);
		else
			str_fmt(url, sizeof(url), "https://%s:%lld", name, (long long)port);
		json_object_set_str(names, svc, url);
	}
	return names;
}
