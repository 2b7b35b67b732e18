/* build.c: a service's `build:` into the Spec's build object.
 *
 * Compose writes it two ways: a string (the context directory) or a map
 * with context, dockerfile, args and target. denv reads those four; the
 * context is a local directory that the client packs (a URL or a git
 * repository would need the host to fetch it, which a denied egress
 * forbids), and the Dockerfile must lie inside it, since only the context
 * travels. The Spec keeps the context as written (the client resolves it
 * against the compose file's directory); the control plane adds
 * context_digest when the packed context arrives (api_projects.c). */
#include <string.h>

#include "base/str.h"
#include "spec/spec.h"

#define BUILD_DEFAULT_DOCKERFILE "Dockerfile"

static bool is_url(const char *s)
{
	return strstr(s, "://") || str_has_prefix(s, "git@") || str_has_prefix(s, "github.com/");
}

/* A relative path that stays inside the context: no "/", no ".." step. */
static bool inside(const char *path)
{
	const char *p = path;

	if (!*path || path[0] == '/')
		return false;
	while (*p) {
		size_t n = strcspn(p, "/");

		if (n == 2 && p[0] == '.' && p[1] == '.')
			return false;
		p += n;
		p += *p == '/';
	}
	return true;
}

static int read_string(const char *svc, const struct json *v, const char *key, char *out, size_t n, struct err *e)
{
	if (!v || v->type == JSON_NULL) {
		out[0] = '\0';
		return 0;
	}
	if (v->type != JSON_STRING || v->u.str.len >= n || memchr(v->u.str.s, '\0', v->u.str.len))
		return err_set(e, "compose: service \"%s\" build.%s must be a string of at most %zu bytes", svc, key,
			       n - 1);
	memcpy(out, v->u.str.s, v->u.str.len + 1);
	return 0;
}

/* args: {K: V} or ["K=V"]; a value taken from the deploying shell (null, or
 * "K" alone) is refused, as for environment. */
static int read_args(const char *svc, const struct json *v, struct json *args, struct err *e)
{
	if (!v || v->type == JSON_NULL)
		return 0;
	if (json_len(v) > SPEC_MAX_LIST)
		return err_set(e, "compose: service \"%s\" build.args has more than %d entries", svc, SPEC_MAX_LIST);
	return spec_kv_list(svc, "build.args", v, args, e);
}

static int read_map(const char *svc, const struct json *v, char *context, char *dockerfile, char *target,
		    struct json *args, struct err *e)
{
	if (read_string(svc, json_get(v, "context"), "context", context, SPEC_MAX_STRING, e) < 0 ||
	    read_string(svc, json_get(v, "dockerfile"), "dockerfile", dockerfile, SPEC_MAX_STRING, e) < 0 ||
	    read_string(svc, json_get(v, "target"), "target", target, SPEC_MAX_NAME * 4, e) < 0)
		return -1;
	if (json_get(v, "dockerfile_inline"))
		return err_set(e, "compose: service \"%s\" build.dockerfile_inline is not supported; "
			       "put the Dockerfile in the context", svc);
	return read_args(svc, json_get(v, "args"), args, e);
}

int spec_build(const char *svc, const struct json *v, struct json **out, struct err *e)
{
	char context[SPEC_MAX_STRING] = "", dockerfile[SPEC_MAX_STRING] = "", target[SPEC_MAX_NAME * 4] = "";
	struct json *args = json_new_object(), *b;

	*out = NULL;
	if (v->type == JSON_STRING) {
		if (read_string(svc, v, "context", context, sizeof(context), e) < 0)
			goto bad;
	} else if (v->type == JSON_OBJECT) {
		if (read_map(svc, v, context, dockerfile, target, args, e) < 0)
			goto bad;
	} else {
		err_set(e, "compose: service \"%s\" build must be a directory or a map with context", svc);
		goto bad;
	}
	if (!context[0])
		str_copy(context, sizeof(context), ".");	/* Compose's default */
	if (is_url(context)) {
		err_set(e, "compose: service \"%s\" build.context \"%.200s\" is a URL; only a local directory is "
			"supported (it is packed and sent with the deploy)", svc, context);
		goto bad;
	}
	if (!dockerfile[0])
		str_copy(dockerfile, sizeof(dockerfile), BUILD_DEFAULT_DOCKERFILE);
	if (!inside(dockerfile)) {
		err_set(e, "compose: service \"%s\" build.dockerfile \"%.200s\" must be a relative path inside the "
			"context (only the context is sent)", svc, dockerfile);
		goto bad;
	}
	b = json_new_object();
	json_object_set_str(b, "context", context);
	json_object_set_str(b, "dockerfile", dockerfile);
	json_object_set(b, "args", args);
	json_object_set_str(b, "target", target);
	*out = b;
	return 0;
bad:
	json_free(args);
	return -1;
}
