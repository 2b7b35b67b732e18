/* ingress_cfg.c: the pure parts of the ingress proxy (sidecar.h): its
 * config file and the buffer of one direction of a connection. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/str.h"
#include "sidecar/sidecar.h"

int ig_port_parse(const char *s, int *port)
{
	int v;

	if (!s || !*s || strlen(s) > 5)
		return -1;
	for (const char *p = s; *p; p++)
		if (*p < '0' || *p > '9')
			return -1;
	if (str_to_int(s, &v) < 0 || v < 1 || v > 65535)
		return -1;
	*port = v;
	return 0;
}

static int int_port(const struct json *o, const char *key, int *out)
{
	const struct json *v = json_get(o, key);

	if (!v || v->type != JSON_INT || v->u.i < 1 || v->u.i > 65535)
		return -1;
	*out = (int)v->u.i;
	return 0;
}

static int copy_field(const struct json *root, const char *key, char *out, size_t n, struct err *e)
{
	const char *s = json_get_str(root, key);

	if (!s || !*s)
		return err_set(e, "ingress config: \"%s\" missing", key);
	if (str_copy(out, n, s) < 0)
		return err_set(e, "ingress config: \"%s\" too long", key);
	return 0;
}

int ig_config_parse(const char *text, size_t len, struct ig_config *c, struct err *e)
{
	struct json *root = NULL;
	const struct json *ports;
	int rc = -1;

	memset(c, 0, sizeof(*c));
	if (len > IG_CONFIG_MAX)
		return err_set(e, "ingress config: over %zu bytes", IG_CONFIG_MAX);
	if (json_parse(text, len, NULL, &root, e) < 0)
		return err_prefix(e, "ingress config");
	if (root->type != JSON_OBJECT) {
		err_set(e, "ingress config: not an object");
		goto out;
	}
	if (copy_field(root, "env", c->env, sizeof(c->env), e) < 0 ||
	    copy_field(root, "service", c->service, sizeof(c->service), e) < 0 ||
	    copy_field(root, "container", c->container, sizeof(c->container), e) < 0)
		goto out;
	ports = json_get(root, "ports");
	if (!ports || ports->type != JSON_ARRAY || json_len(ports) == 0) {
		err_set(e, "ingress config: \"ports\" must be a non-empty list");
		goto out;
	}
	if (json_len(ports) > IG_MAX_PORTS) {
		err_set(e, "ingress config: more than %d ports", IG_MAX_PORTS);
		goto out;
	}
	for (size_t i = 0; i < json_len(ports); i++) {
		struct ig_port *p = &c->ports[i];

		if (int_port(json_at(ports, i), "container", &p->container) < 0 ||
		    int_port(json_at(ports, i), "host", &p->host) < 0) {
			err_set(e, "ingress config: ports[%zu] needs \"container\" and \"host\" in 1..65535", i);
			goto out;
		}
		for (size_t k = 0; k < i; k++)
			if (c->ports[k].host == p->host || c->ports[k].container == p->container) {
				err_set(e, "ingress config: ports[%zu] repeats a port", i);
				goto out;
			}
		c->nports++;
	}
	rc = 0;
out:
	json_free(root);
	return rc;
}

char *ig_config_format(const struct ig_config *c)
{
	struct json *o = json_new_object(), *ports = json_new_array();
	char *text;

	json_object_set_str(o, "env", c->env);
	json_object_set_str(o, "service", c->service);
	json_object_set_str(o, "container", c->container);
	for (size_t i = 0; i < c->nports; i++) {
		struct json *p = json_new_object();

		json_object_set_int(p, "container", c->ports[i].container);
		json_object_set_int(p, "host", c->ports[i].host);
		json_array_push(ports, p);
	}
	json_object_set(o, "ports", ports);
	text = json_to_string(o, JSON_PRETTY);
	json_free(o);
	return text;
}

void ig_dir_init(struct ig_dir *d, char *buf, size_t cap)
{
	memset(d, 0, sizeof(*d));
	d->buf = buf;
	d->cap = cap;
}

char *ig_dir_space(struct ig_dir *d, size_t *n)
{
	/* Move what is pending to the front once the tail has no room left. */
	if (d->off > 0 && d->off + d->len == d->cap) {
		memmove(d->buf, d->buf + d->off, d->len);
		d->off = 0;
	}
	*n = d->cap - d->off - d->len;
	return d->buf + d->off + d->len;
}

void ig_dir_filled(struct ig_dir *d, size_t n)
{
	d->len += n;
}

const char *ig_dir_pending(const struct ig_dir *d, size_t *n)
{
	*n = d->len;
	return d->buf + d->off;
}

void ig_dir_drained(struct ig_dir *d, size_t n)
{
	if (n > d->len)
		n = d->len;
	d->len -= n;
	d->off = d->len ? d->off + n : 0;
}

bool ig_dir_want_read(const struct ig_dir *d)
{
	return !d->eof && !d->shut && d->len < d->cap;
}

bool ig_dir_want_write(const struct ig_dir *d)
{
	return d->len > 0 && !d->shut;
}

bool ig_dir_need_shut(const struct ig_dir *d)
{
	return d->eof && d->len == 0 && !d->shut;
}
