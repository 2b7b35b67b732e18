/* util.c: conversions the service and x-denv readers share. */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/str.h"
#include "spec/spec.h"

/* A scalar as the string a container sees: compose files write
 * `command: [sleep, 3600]` and `PORT: 5432`, which YAML types as numbers. */
int spec_scalar_string(const struct json *v, char *out, size_t n)
{
	switch (v ? v->type : JSON_NULL) {
	case JSON_STRING:
		if (v->u.str.len >= n || memchr(v->u.str.s, '\0', v->u.str.len))
			return -1;
		memcpy(out, v->u.str.s, v->u.str.len + 1);
		return 0;
	case JSON_INT:
		snprintf(out, n, "%" PRId64, v->u.i);
		return 0;
	case JSON_DOUBLE:
		snprintf(out, n, "%.17g", v->u.d);
		return 0;
	case JSON_BOOL:
		return str_copy(out, n, v->u.b ? "true" : "false");
	default:
		return -1;
	}
}

int spec_kv_list(const char *svc, const char *what, const struct json *v, struct json *out, struct err *e)
{
	char val[SPEC_MAX_STRING];

	if (v->type == JSON_OBJECT) {
		for (size_t i = 0; i < v->u.obj.n; i++) {
			const struct json_member *m = &v->u.obj.m[i];

			if (m->key_len == 0 || memchr(m->key, '\0', m->key_len) ||
			    spec_scalar_string(m->val, val, sizeof(val)) < 0)
				return err_set(e, "compose: service \"%s\" %s \"%.64s\" needs a value "
					       "(the deploying shell's environment is not passed in)", svc, what, m->key);
			json_object_setn(out, m->key, m->key_len, json_new_str(val));
		}
		return 0;
	}
	if (v->type != JSON_ARRAY)
		return err_set(e, "compose: service \"%s\" %s must be a map or a list of KEY=VALUE", svc, what);
	for (size_t i = 0; i < json_len(v); i++) {
		const struct json *item = json_at(v, i);
		const char *eq;

		if (item->type != JSON_STRING || item->u.str.len >= SPEC_MAX_STRING ||
		    memchr(item->u.str.s, '\0', item->u.str.len))
			return err_set(e, "compose: service \"%s\" %s must be a map or a list of KEY=VALUE", svc, what);
		eq = strchr(item->u.str.s, '=');
		if (!eq || eq == item->u.str.s)
			return err_set(e, "compose: service \"%s\" %s \"%.64s\" needs a value "
				       "(the deploying shell's environment is not passed in)", svc, what, item->u.str.s);
		json_object_setn(out, item->u.str.s, (size_t)(eq - item->u.str.s), json_new_str(eq + 1));
	}
	return 0;
}

/* A command: a string split on whitespace, or a list of scalars. */
struct json *spec_argv(const struct json *v, const char *what, struct err *e)
{
	struct json *argv = json_new_array();
	char s[SPEC_MAX_STRING];

	if (v->type == JSON_STRING) {
		size_t count;
		char **parts;
		if (v->u.str.len >= SPEC_MAX_STRING) {
			json_free(argv);
			err_set(e, "%s is longer than %d bytes", what, SPEC_MAX_STRING);
			return NULL;
		}
		parts = str_split(v->u.str.s, " \t\n\r", &count);
		for (size_t i = 0; i < count; i++)
			json_array_push(argv, json_new_str(parts[i]));
		str_list_free(parts);
		return argv;
	}
	if (v->type != JSON_ARRAY || json_len(v) > SPEC_MAX_LIST) {
		json_free(argv);
		err_set(e, "%s must be a string or a list of strings", what);
		return NULL;
	}
	for (size_t i = 0; i < json_len(v); i++) {
		if (spec_scalar_string(json_at(v, i), s, sizeof(s)) < 0) {
			json_free(argv);
			err_set(e, "%s must be a string or a list of strings", what);
			return NULL;
		}
		json_array_push(argv, json_new_str(s));
	}
	return argv;
}

/* Service and volume names: what Compose accepts, bounded. */
int spec_valid_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > SPEC_MAX_NAME || !isalnum((unsigned char)s[0]))
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (!isalnum(c) && c != '_' && c != '.' && c != '-')
			return 0;
	}
	return 1;
}
