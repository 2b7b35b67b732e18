/*
 * contexts.c: build contexts (compose build:), packed by the client as tar
 * archives and stored here by their sha256 before the deploy that uses them.
 *
 *   PUT /v1/contexts/{sha256}   body: the tar (at most CP_CONTEXT_MAX bytes);
 *                               201 {digest, bytes}; 400 when the body's
 *                               sha256 is not {sha256}
 *   GET /v1/contexts/{sha256}   200 {digest, bytes} when stored, else 404
 *
 * A context is the team's: <db>/contexts/<team>/<sha256>.tar, so one team
 * cannot learn whether another uploaded some content. The deploy names
 * them as {contexts: {service: sha256}}; cp_contexts_attach puts the digest
 * and size into the Spec's build, and the orchestrator sends the archive to
 * the placed host before env.create (orch_build.c).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/crypto.h"
#include "base/fs.h"
#include "base/str.h"
#include "cp/cp.h"

static bool is_digest(const char *s)
{
	size_t n = 0;

	for (; s && s[n]; n++)
		if (!isdigit((unsigned char)s[n]) && !(s[n] >= 'a' && s[n] <= 'f'))
			return false;
	return n == SHA256_HEX_LEN;
}

int cp_context_path(const struct cp *cp, const char *team_id, const char *digest, char *out, size_t n)
{
	if (!is_digest(digest) || !*team_id)
		return -1;
	if (snprintf(out, n, "%s/contexts/%s/%s.tar", cp->cfg.files_dir, team_id, digest) >= (int)n)
		return -1;
	return 0;
}

/* Size of the stored context, or -1 when there is none. */
static int64_t stored_bytes(const struct cp *cp, const char *team_id, const char *digest)
{
	char path[4096];
	struct stat st;

	if (cp_context_path(cp, team_id, digest, path, sizeof(path)) < 0 || stat(path, &st) < 0 ||
	    !S_ISREG(st.st_mode))
		return -1;
	return (int64_t)st.st_size;
}

static void h_context_put(struct cp *cp, struct http_req *req)
{
	const char *digest = http_req_param(req, "digest"), *body;
	char path[4096], dir[4096], sum[SHA256_HEX_LEN + 1];
	struct cp_caller who;
	struct err e;
	size_t len;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0)
		return;
	if (!is_digest(digest)) {
		http_respond_error(req, 400, "context digest must be 64 lowercase hex digits (the tar's sha256)");
		return;
	}
	body = http_req_body(req, &len);
	if (sha256_hex(body, len, sum) < 0 || !str_eq(sum, digest)) {
		cp_fail(req, 400, "context: the body's sha256 is %s, not %s", sum, digest);
		return;
	}
	snprintf(dir, sizeof(dir), "%s/contexts/%s", cp->cfg.files_dir, who.team_id);
	err_clear(&e);
	if (cp_context_path(cp, who.team_id, digest, path, sizeof(path)) < 0 || fs_mkdir_p(dir, 0700, &e) < 0 ||
	    fs_write_atomic(path, body, len, 0600, &e) < 0) {
		cp_fail(req, 500, "context: storing it failed: %s", e.msg);
		return;
	}
	cp_reply(req, 201, cp_obj("digest", json_new_str(digest), "bytes", json_new_int((int64_t)len), NULL));
}

static void h_context_get(struct cp *cp, struct http_req *req)
{
	const char *digest = http_req_param(req, "digest");
	struct cp_caller who;
	int64_t bytes;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0)
		return;
	if ((bytes = stored_bytes(cp, who.team_id, digest)) < 0) {
		http_respond_error(req, 404, "context not found");
		return;
	}
	cp_reply(req, 200, cp_obj("digest", json_new_str(digest), "bytes", json_new_int(bytes), NULL));
}

int cp_contexts_attach(struct cp *cp, const char *team_id, struct json *spec, const struct json *contexts,
		       struct err *e)
{
	struct json *services = json_get(spec, "services");

	for (size_t i = 0; i < json_len(services); i++) {
		struct json *s = json_at(services, i), *b = json_get(s, "build");
		const char *name = json_get_str(s, "name"), *digest = json_get_str(contexts, name);
		int64_t bytes;

		if (!b)
			continue;
		if (!digest || (bytes = stored_bytes(cp, team_id, digest)) < 0)
			return err_set(e, "compose: service \"%s\" builds from \"%.200s\" but its context was not sent "
				       "(denv deploy -f packs and uploads it; API clients PUT /v1/contexts/{sha256} and "
				       "name it in contexts)", name, json_get_str(b, "context"));
		if ((uint64_t)bytes > CP_CONTEXT_MAX)
			return err_set(e, "compose: service \"%s\" build context is %lld MiB, over the %zu MiB limit", name,
				       (long long)(bytes >> 20), CP_CONTEXT_MAX >> 20);
		json_object_set_str(b, "context_digest", digest);
		json_object_set_int(b, "context_bytes", bytes);
	}
	return 0;
}

int cp_api_contexts(struct cp *cp)
{
	if (cp_route(cp, "PUT", "/v1/contexts/{digest}", CP_CONTEXT_MAX, h_context_put) < 0 ||
	    cp_route(cp, "GET", "/v1/contexts/{digest}", 0, h_context_get) < 0)
		return -1;
	return 0;
}
