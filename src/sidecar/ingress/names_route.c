/* names_route.c: which address a name asked of the gateway (names.c) goes
 * to. <service>--<env>.<domain> names the env whose id has that label form
 * (a directory under <data>/envs) and, in the endpoints.json its last
 * create, fork or rollback wrote (nm_record), the service whose name has
 * that form: its first published port, on 127.0.0.1. A refusal carries the
 * HTTP status the gateway answers with and why. */
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fs.h"
#include "base/str.h"
#include "sidecar/sidecar.h"
#include "spec/spec.h"

static int refuse(struct nm_route *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int refuse(struct nm_route *r, int status, const char *fmt, ...)
{
	va_list ap;

	r->status = status;
	va_start(ap, fmt);
	vsnprintf(r->why, sizeof(r->why), fmt, ap);
	va_end(ap);
	return -1;
}

/* The env directory whose name has label as its form, into r->env. */
static int find_env(const char *data, const char *label, struct nm_route *r)
{
	char dir[FS_PATH_MAX], form[SPEC_DNS_LABEL_MAX + 1];
	struct dirent *de;
	struct err e;
	DIR *d;

	if (fs_path(dir, sizeof(dir), &e, "%s/envs", data) < 0 || !(d = opendir(dir)))
		return refuse(r, 404, "no environment %s on this host", label);
	while ((de = readdir(d))) {
		if (sc_safe_id(de->d_name) && spec_dns_label(de->d_name, form, sizeof(form)) == 0 &&
		    strcmp(form, label) == 0) {
			str_copy(r->env, sizeof(r->env), de->d_name);
			closedir(d);
			return 0;
		}
	}
	closedir(d);
	return refuse(r, 404, "no environment %s on this host", label);
}

/* "127.0.0.1:N" (or "0.0.0.0:N", Docker's way of saying all) to N. */
static int port_of(const char *addr)
{
	const char *colon = addr ? strrchr(addr, ':') : NULL;
	int port;

	if (!colon || ig_port_parse(colon + 1, &port) < 0)
		return -1;
	return port;
}

int nm_route(const char *data, const char *domain, const char *host, struct nm_route *r)
{
	char svc_label[SPEC_DNS_LABEL_MAX + 1], env_label[SPEC_DNS_LABEL_MAX + 1], path[FS_PATH_MAX];
	char form[SPEC_DNS_LABEL_MAX + 1];
	struct json *eps = NULL;
	struct err e;
	int found = 0;

	memset(r, 0, sizeof(*r));
	if (!host || !*host)
		return refuse(r, 421, "ask by name: <service>--<env>.%s (the TLS server name was missing)", domain);
	if (spec_ingress_split(host, domain, svc_label, env_label) < 0)
		return refuse(r, 421, "%s is not a name of this gateway (<service>--<env>.%s)", host, domain);
	if (find_env(data, env_label, r) < 0)
		return -1;
	if (fs_path(path, sizeof(path), &e, "%s/envs/%s/endpoints.json", data, r->env) < 0 ||
	    json_parse_file(path, NM_ENDPOINTS_MAX, &eps, &e) < 0) {
		return refuse(r, 503, "environment %s has published nothing yet", r->env);
	}
	for (size_t i = 0; eps->type == JSON_OBJECT && i < eps->u.obj.n; i++) {
		const char *key = eps->u.obj.m[i].key;
		const struct json *v = eps->u.obj.m[i].val;

		/* "svc:port" keys are a service's further ports. */
		if (strchr(key, ':') || spec_dns_label(key, form, sizeof(form)) < 0 || strcmp(form, svc_label) != 0)
			continue;
		if (found++) {
			json_free(eps);
			return refuse(r, 409, "two services of %s have the label %s", r->env, svc_label);
		}
		str_copy(r->service, sizeof(r->service), key);
		r->port = v->type == JSON_STRING ? port_of(v->u.str.s) : -1;
	}
	json_free(eps);
	if (!found)
		return refuse(r, 404, "environment %s publishes no service %s", r->env, svc_label);
	if (r->port < 0)
		return refuse(r, 502, "service %s of %s has no usable address", r->service, r->env);
	return 0;
}

int nm_record(const char *data, const char *env, const struct json *endpoints, struct err *e)
{
	char path[FS_PATH_MAX];
	char *text;
	int rc;

	if (fs_path(path, sizeof(path), e, "%s/envs/%s/endpoints.json", data, env) < 0)
		return -1;
	text = json_to_string(endpoints, 0);
	rc = fs_write_atomic(path, text, strlen(text), 0644, e);
	free(text);
	return rc;
}
