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
 *
 * Collection: a context no version's Spec names (services[].build.
 * context_digest) and that nobody has sent, asked about (GET) or deployed
 * for -context-keep is removed by a sweep every CP_CONTEXT_SWEEP_MS. Each
 * of those uses sets the file's mtime, so the age is the time since its
 * last use, and a deploy between its GET and its version is never robbed.
 * A version keeps its contexts for as long as it exists: a rebuild of it
 * (another host, an image removed) still has what it needs.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/crypto.h"
#include "base/fs.h"
#include "base/log.h"
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
	return str_fmt(out, n, "%s/contexts/%s/%s.tar", cp->cfg.files_dir, team_id, digest);
}

/* Size of the stored context, or -1 when there is none. A use: its mtime
 * becomes now, which is what the sweep measures. */
static int64_t stored_bytes(const struct cp *cp, const char *team_id, const char *digest)
{
	char path[FS_PATH_MAX];
	struct stat st;

	if (cp_context_path(cp, team_id, digest, path, sizeof(path)) < 0 || stat(path, &st) < 0 ||
	    !S_ISREG(st.st_mode))
		return -1;
	(void)utimensat(AT_FDCWD, path, NULL, 0);
	return (int64_t)st.st_size;
}

static void h_context_put(struct cp *cp, struct http_req *req)
{
	const char *digest = http_req_param(req, "digest"), *body;
	char path[FS_PATH_MAX], dir[FS_PATH_MAX], sum[SHA256_HEX_LEN + 1];
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
	err_clear(&e);
	if (fs_path(dir, sizeof(dir), &e, "%s/contexts/%s", cp->cfg.files_dir, who.team_id) < 0 ||
	    cp_context_path(cp, who.team_id, digest, path, sizeof(path)) < 0 || fs_mkdir_p(dir, 0700, &e) < 0 ||
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

/* ---- collection ---- */

struct named {
	char (*digest)[SHA256_HEX_LEN + 1];
	size_t n, cap;
};

static int collect_version(const char *id, const struct json *row, void *arg)
{
	struct named *nd = arg;
	const struct json *services = json_get(json_get(row, "Spec"), "services");

	(void)id;
	for (size_t i = 0; i < json_len(services); i++) {
		const char *d = json_get_str(json_get(json_at(services, i), "build"), "context_digest");

		if (!is_digest(d))
			continue;
		if (nd->n == nd->cap) {
			nd->cap = nd->cap ? nd->cap * 2 : 64;
			nd->digest = xrealloc(nd->digest, nd->cap * sizeof(*nd->digest));
		}
		str_copy(nd->digest[nd->n++], sizeof(*nd->digest), d);
	}
	return 0;
}

static bool is_named(const struct named *nd, const char *digest)
{
	for (size_t i = 0; i < nd->n; i++)
		if (str_eq(nd->digest[i], digest))
			return true;
	return false;
}

/* One team's directory: its old, unnamed contexts go (at most *budget). */
static int sweep_team(const char *dir, const struct named *nd, int64_t cutoff_s, int *budget)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return 0;
	while (*budget > 0 && (de = readdir(d))) {
		char path[FS_PATH_MAX], digest[SHA256_HEX_LEN + 1];
		struct stat st;
		size_t len = strlen(de->d_name);

		if (len != SHA256_HEX_LEN + 4 || !str_has_suffix(de->d_name, ".tar"))
			continue;
		memcpy(digest, de->d_name, SHA256_HEX_LEN);
		digest[SHA256_HEX_LEN] = '\0';
		if (!is_digest(digest) || is_named(nd, digest))
			continue;
		if (str_fmt(path, sizeof(path), "%s/%s", dir, de->d_name) < 0)
			continue;
		if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode) || (int64_t)st.st_mtime > cutoff_s)
			continue;
		if (unlink(path) == 0) {
			n++;
			(*budget)--;
		}
	}
	closedir(d);
	return n;
}

int cp_contexts_sweep(struct cp *cp, int64_t now_s)
{
	struct named nd = { NULL, 0, 0 };
	char root[FS_PATH_MAX];
	struct err e;
	DIR *d;
	struct dirent *de;
	int n = 0, budget = CP_CONTEXT_SWEEP_MAX;

	if (cp->cfg.context_keep_s <= 0)
		return 0;
	if (fs_path(root, sizeof(root), &e, "%s/contexts", cp->cfg.files_dir) < 0 || !(d = opendir(root)))
		return 0;
	/* Every version row is read: a sweep is rare (CP_CONTEXT_SWEEP_MS). */
	err_clear(&e);
	if (st_scan(cp->db, "versions", NULL, NULL, NULL, collect_version, &nd, &e) < 0) {
		log_warn("cp", "contexts: not swept: reading versions: %s", e.msg);
		closedir(d);
		free(nd.digest);
		return 0;
	}
	while ((de = readdir(d))) {
		char dir[FS_PATH_MAX];

		if (de->d_name[0] == '.' || str_fmt(dir, sizeof(dir), "%s/%s", root, de->d_name) < 0)
			continue;
		n += sweep_team(dir, &nd, now_s - cp->cfg.context_keep_s, &budget);
	}
	closedir(d);
	free(nd.digest);
	return n;
}

static void on_context_sweep(struct ev *ev, void *arg)
{
	struct cp *cp = arg;
	int n = cp_contexts_sweep(cp, clock_now_ms() / 1000);

	if (n > 0)
		log_info("cp", "contexts: %d stored build context(s) no version names removed", n);
	ev_timer_start(ev, &cp->context_sweep, cp->cfg.context_sweep_ms, on_context_sweep, cp);
}

void cp_contexts_start(struct cp *cp)
{
	if (cp->cfg.context_keep_s > 0)
		ev_timer_start(cp->ev, &cp->context_sweep, cp->cfg.context_sweep_ms, on_context_sweep, cp);
}

int cp_api_contexts(struct cp *cp)
{
	if (cp_route(cp, "PUT", "/v1/contexts/{digest}", CP_CONTEXT_MAX, h_context_put) < 0 ||
	    cp_route(cp, "GET", "/v1/contexts/{digest}", 0, h_context_get) < 0)
		return -1;
	return 0;
}
