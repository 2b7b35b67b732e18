/*
 * api_batch.c: POST /v1/sandboxes/batch makes count sandboxes in one call,
 * from one image or as forks of one healthy version, named <name_prefix><i>.
 * The answer (202) comes as soon as every member's environment and
 * deployment are stored; GET /v1/batches/{id} then reports each member's
 * state as its own deployment goes on (pending, healthy, failed, destroyed),
 * so one member's failure never hides the others. With ?wait_sec=N the GET
 * is held until a pending member's deployment ends (or N seconds), so a
 * client sees each member as it becomes healthy without polling. The members' deployments
 * also emit the usual events on the live stream.
 *
 * Image members are deployed with spread: each goes to the connected host
 * with the most room (orch_place.c). Fork members go where their version's
 * snapshot is, as every fork does.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/str.h"
#include "cp/cp.h"

struct batch_in {
	const char *image, *vid, *prefix;
	int64_t count;
	struct cp_ttl_req ttl;
};

static int read_in(struct http_req *req, const struct json *body, struct batch_in *in)
{
	memset(in, 0, sizeof(*in));
	if (cp_opt_str(req, body, "image", &in->image) < 0 || cp_opt_str(req, body, "from_version", &in->vid) < 0 ||
	    cp_opt_str(req, body, "name_prefix", &in->prefix) < 0 || cp_opt_int(req, body, "count", &in->count) < 0 ||
	    cp_ttl_read(req, body, &in->ttl) < 0)
		return -1;
	if ((!in->image || !*in->image) == (!in->vid || !*in->vid)) {
		http_respond_error(req, 400, "one of image or from_version is required");
		return -1;
	}
	if (in->count < 1 || in->count > CP_BATCH_MAX) {
		cp_fail(req, 400, "count must be 1 to %d", CP_BATCH_MAX);
		return -1;
	}
	return 0;
}

/* Member i's name: prefix and index. */
static void member_name(const char *prefix, int64_t i, char *out, size_t n)
{
	if ((size_t)snprintf(out, n, "%s%" PRId64, prefix, i) >= n)
		out[0] = '\0';	/* too long: refused as an invalid name */
}

/* Every member's name valid and free in project_id (NULL: a project made
 * now, so nothing in it yet); -1 after answering 400 or 409. */
static int check_names(struct cp *cp, struct http_req *req, const char *project_id, const struct batch_in *in)
{
	char name[CP_NAME_MAX + 2];

	for (int64_t i = 0; i < in->count; i++) {
		member_name(in->prefix, i, name, sizeof(name));
		if (!cp_valid_name(name)) {
			cp_fail(req, 400, "name_prefix \"%s\" with %" PRId64 " members makes invalid names (1 to %d "
				"letters, digits, '.', '_' or '-')", in->prefix, in->count, CP_NAME_MAX);
			return -1;
		}
		if (project_id && cp_find(cp, "environments", "ProjectID", project_id, "Name", name)) {
			cp_fail(req, 409, "environment \"%s\" already exists", name);
			return -1;
		}
	}
	return 0;
}

typedef void (*member_put_fn)(struct cp *cp, struct st_txn *txn, const struct cp_sandbox_new *n, const void *src,
			      const char *project_id, char env_id[ID_MAX], char dep_id[ID_MAX]);

static void put_image(struct cp *cp, struct st_txn *txn, const struct cp_sandbox_new *n, const void *spec,
		      const char *project_id, char env_id[ID_MAX], char dep_id[ID_MAX])
{
	cp_sandbox_image_put(cp, txn, n, spec, project_id, env_id, dep_id);
}

static void put_fork(struct cp *cp, struct st_txn *txn, const struct cp_sandbox_new *n, const void *version,
		     const char *project_id, char env_id[ID_MAX], char dep_id[ID_MAX])
{
	(void)project_id;
	cp_sandbox_fork_put(cp, txn, n, version, env_id, dep_id);
}

/* Every member into txn; their rows into the batch's Members. */
static void put_members(struct cp *cp, struct st_txn *txn, const char *team_id, const struct batch_in *in,
			member_put_fn put, bool spread, const void *src, const char *project_id, struct json *members)
{
	char name[CP_NAME_MAX + 2], env_id[ID_MAX], dep_id[ID_MAX];
	struct cp_sandbox_new n = { team_id, name, &in->ttl, NULL, spread, NULL };

	for (int64_t i = 0; i < in->count; i++) {
		member_name(in->prefix, i, name, sizeof(name));
		put(cp, txn, &n, src, project_id, env_id, dep_id);
		json_array_push(members, cp_obj("Name", json_new_str(name), "EnvID", json_new_str(env_id),
						"DeploymentID", json_new_str(dep_id), NULL));
	}
}

/* ---- the view: each member's state from its deployment ---- */

static const char *member_state(const struct json *env, const struct json *dep)
{
	const char *es = json_get_str(env, "Status"), *ds = json_get_str(dep, "Status");

	if (!env || str_eq(es, "destroyed") || str_eq(es, "destroying"))
		return "destroyed";
	if (str_eq(ds, "succeeded"))
		return "healthy";
	if (str_eq(ds, "failed") || str_eq(ds, "rolled_back"))
		return "failed";
	return "pending";
}

/* stored: the members' rows are committed (else they are all pending). */
static struct json *batch_view(struct cp *cp, const struct json *row, bool stored)
{
	const struct json *ms = json_get(row, "Members");
	struct json *members = json_new_array(), *counts = json_new_object(), *pub = cp_public(row, "batches"), *out;
	int64_t healthy = 0, failed = 0, pending = 0, destroyed = 0;

	for (size_t i = 0; i < json_len(ms); i++) {
		const struct json *m = json_at(ms, i);
		const struct json *env = st_get(cp->db, "environments", json_get_str(m, "EnvID"));
		const struct json *dep = st_get(cp->db, "deployments", json_get_str(m, "DeploymentID"));
		const char *state = stored ? member_state(env, dep) : "pending", *error = json_get_str(dep, "Error");
		struct json *o = cp_obj("index", json_new_int((int64_t)i), "name", json_new_str(json_get_str(m, "Name")),
					"environment", json_new_str(json_get_str(m, "EnvID")), "deployment",
					json_new_str(json_get_str(m, "DeploymentID")), "state", json_new_str(state), NULL);

		if (str_eq(state, "failed"))
			json_object_set_str(o, "error", error && *error ? error : json_get_str(dep, "Status"));
		if (str_eq(state, "healthy"))
			json_object_set(o, "endpoints", json_dup(json_get(env, "Endpoints")));
		healthy += str_eq(state, "healthy");
		failed += str_eq(state, "failed");
		pending += str_eq(state, "pending");
		destroyed += str_eq(state, "destroyed");
		json_array_push(members, o);
	}
	json_object_set_int(counts, "healthy", healthy);
	json_object_set_int(counts, "failed", failed);
	json_object_set_int(counts, "pending", pending);
	json_object_set_int(counts, "destroyed", destroyed);
	json_object_del(pub, "Members");	/* they are in members, with their state */
	out = cp_obj("batch", pub, "members", members, "counts", counts, NULL);
	json_object_set_bool(out, "done", pending == 0);
	return out;
}

/* After the commit: every member's deployment starts. */
static void kick_members(struct cp *cp, bool ok, void *arg)
{
	char *id = arg;
	const struct json *ms = json_get(st_get(cp->db, "batches", id), "Members");

	for (size_t i = 0; ok && i < json_len(ms); i++)
		cp_orch_kick(cp, json_get_str(json_at(ms, i), "EnvID"));
	free(id);
}

/* The members of an image batch or a fork batch into txn; -1 after answering. */
static int batch_members(struct cp *cp, struct http_req *req, const char *team_id, const struct json *body,
			 const struct batch_in *in, struct st_txn *txn, struct json *row)
{
	struct json *members = json_new_array(), *spec = NULL;
	const struct json *v;
	const char *project;
	char pid[ID_MAX];
	int rc = -1;

	if (in->image && *in->image) {
		if (cp_sandbox_image_spec(req, body, in->image, &spec, &project) < 0)
			goto out;
		const struct json *p = cp_find(cp, "projects", "TeamID", team_id, "Name", project);

		if (check_names(cp, req, p ? json_get_str(p, "ID") : NULL, in) < 0)
			goto out;
		cp_sandbox_project(cp, txn, team_id, project, pid);
		put_members(cp, txn, team_id, in, put_image, true, spec, pid, members);
		json_object_set_str(row, "Image", in->image);
	} else {
		if (!(v = cp_sandbox_version(cp, req, team_id, in->vid)) ||
		    check_names(cp, req, json_get_str(v, "ProjectID"), in) < 0)
			goto out;
		str_copy(pid, sizeof(pid), json_get_str(v, "ProjectID"));
		put_members(cp, txn, team_id, in, put_fork, false, v, pid, members);
		json_object_set_str(row, "FromVersion", in->vid);
	}
	json_object_set_str(row, "ProjectID", pid);
	json_object_set(row, "Members", members);
	members = NULL;
	rc = 0;
out:
	json_free(members);
	json_free(spec);
	return rc;
}

static void h_batch(struct cp *cp, struct http_req *req)
{
	struct cp_caller who;
	struct json *body = NULL, *row;
	struct batch_in in;
	struct st_txn *txn;
	char id[ID_MAX], prefix[CP_NAME_MAX + 2], rnd[CP_NAME_MAX + 1];

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0 || cp_body(req, &body) < 0)
		return;
	if (read_in(req, body, &in) < 0 ||
	    cp_quota_check_n(cp, req, who.team_id, CP_QUOTA_ENVS, in.count) < 0 ||
	    cp_quota_check_n(cp, req, who.team_id, CP_QUOTA_SANDBOXES, in.count) < 0)
		goto out;
	if (!in.prefix || !*in.prefix) {
		cp_short_name("b-", rnd, sizeof(rnd));
		snprintf(prefix, sizeof(prefix), "%s-", rnd);
		in.prefix = prefix;
	}
	id_new("bat", id);
	row = cp_obj("ID", json_new_str(id), "TeamID", json_new_str(who.team_id), "Count", json_new_int(in.count),
		     "NamePrefix", json_new_str(in.prefix), "CreatedAt", cp_now_json(), NULL);
	txn = st_begin(cp->db);
	if (batch_members(cp, req, who.team_id, body, &in, txn, row) < 0) {
		st_abort(txn);
		json_free(row);
		goto out;
	}
	st_put(txn, "batches", id, row);
	cp_commit_reply(cp, txn, req, 202, batch_view(cp, row, false), kick_members, xstrdup(id));
out:
	json_free(body);
}

/* ---- GET with wait_sec: answered when a member's deployment ends ---- */

struct bwait {
	struct cp *cp;
	struct http_req *req;		/* NULL once the client went away */
	struct ev_timer timer;
	char id[ID_MAX];
	size_t n;
	struct cp_watch *w[CP_BATCH_MAX];	/* NULL once fired (the orchestrator frees it) */
	char dep[CP_BATCH_MAX][ID_MAX];
	bool deferred;			/* the answer is due at the end of this turn */
};

static void bwait_free(struct bwait *b)
{
	for (size_t i = 0; i < b->n; i++)
		if (b->w[i])
			cp_orch_unwatch(b->cp, b->w[i]);
	ev_timer_stop(b->cp->ev, &b->timer);
	free(b);
}

/* At the end of the turn (never inside the orchestrator's walk of its
 * watches, which unwatching would change under it), or when wait_sec ran out. */
static void bwait_answer(struct ev *ev, void *arg)
{
	struct bwait *b = arg;
	const struct json *row = st_get(b->cp->db, "batches", b->id);

	(void)ev;
	if (b->req) {
		http_req_on_gone(b->req, NULL, NULL);
		if (row)
			cp_reply(b->req, 200, batch_view(b->cp, row, true));
		else
			http_respond_error(b->req, 404, "batch not found");
	}
	bwait_free(b);
}

static void bwait_fired(struct cp *cp, const struct json *dep, void *arg)
{
	struct bwait *b = arg;

	for (size_t i = 0; i < b->n; i++)
		if (b->w[i] && str_eq(b->dep[i], json_get_str(dep, "ID")))
			b->w[i] = NULL;
	if (!b->deferred) {
		b->deferred = true;
		ev_timer_stop(cp->ev, &b->timer);
		ev_defer(cp->ev, bwait_answer, b);
	}
}

static void bwait_gone(struct http_req *req, void *arg)
{
	struct bwait *b = arg;

	http_respond_error(req, 504, "client went away");
	b->req = NULL;
	if (!b->deferred)	/* else the deferred answer frees it */
		bwait_free(b);
}

/* Park the request until one of the pending members' deployments ends, or wait_s. */
static void batch_wait(struct cp *cp, struct http_req *req, const struct json *row, int64_t wait_s)
{
	const struct json *ms = json_get(row, "Members");
	struct bwait *b = xcalloc(1, sizeof(*b));

	b->cp = cp;
	b->req = req;
	str_copy(b->id, sizeof(b->id), json_get_str(row, "ID"));
	for (size_t i = 0; i < json_len(ms) && b->n < CP_BATCH_MAX; i++) {
		const char *dep_id = json_get_str(json_at(ms, i), "DeploymentID");
		const struct json *dep = st_get(cp->db, "deployments", dep_id);
		const struct json *env = st_get(cp->db, "environments", json_get_str(json_at(ms, i), "EnvID"));

		if (!str_eq(member_state(env, dep), "pending"))
			continue;
		str_copy(b->dep[b->n], sizeof(b->dep[b->n]), dep_id);
		b->w[b->n] = cp_orch_watch(cp, dep_id, bwait_fired, b);
		b->n++;
	}
	ev_timer_start(cp->ev, &b->timer, wait_s * 1000, bwait_answer, b);
	http_req_on_gone(req, bwait_gone, b);
}

static void h_batch_get(struct cp *cp, struct http_req *req)
{
	struct cp_caller who;
	const struct json *row;
	const char *wait = http_req_query(req, "wait_sec");
	int64_t wait_s = 0;
	struct json *view;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0 ||
	    !(row = cp_team_row(cp, req, "batches", who.team_id, http_req_param(req, "id"), "batch")))
		return;
	if (wait && *wait && (str_to_i64(wait, &wait_s) < 0 || wait_s < 0 || wait_s > CP_BATCH_WAIT_MAX_S)) {
		cp_fail(req, 400, "wait_sec must be 0 to %d", CP_BATCH_WAIT_MAX_S);
		return;
	}
	view = batch_view(cp, row, true);
	if (wait_s == 0 || json_get_bool(view, "done", false)) {
		cp_reply(req, 200, view);
		return;
	}
	json_free(view);
	batch_wait(cp, req, row, wait_s);
}

int cp_api_batch(struct cp *cp)
{
	if (cp_route(cp, "POST", "/v1/sandboxes/batch", CP_BODY_JSON, h_batch) < 0 ||
	    cp_route(cp, "GET", "/v1/batches/{id}", 0, h_batch_get) < 0)
		return -1;
	return 0;
}
