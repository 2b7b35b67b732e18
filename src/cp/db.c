/* db.c: the control plane's tables and indexes, and the first team. */
#include <stdio.h>
#include <string.h>

#include "base/crypto.h"
#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"

struct table {
	const char *name;
	const char *index[5];
};

/* Every table and the fields looked up by exact value. Indexes are not in
 * the log, so they are declared on every start. */
static const struct table tables[] = {
	{ "teams", { NULL } },
	{ "users", { "Email", "GitHubID", NULL } },
	{ "members", { "UserID", "TeamID", NULL } },
	{ "keys", { "Hash", "TeamID", NULL } },
	{ "sessions", { "Hash", "UserID", NULL } },
	{ "projects", { "TeamID", NULL } },
	{ "sources", { "Repo", NULL } },
	/* Pool: pool.c's waiting sandboxes; HostID: lost.c's environments of a host */
	{ "environments", { "ProjectID", "TeamID", "Pool", "HostID", NULL } },
	{ "versions", { "EnvID", NULL } },
	{ "deployments", { "EnvID", "Status", NULL } },
	{ "phases", { "DeploymentID", NULL } },
	{ "commands", { "HostID", "Status", NULL } },
	{ "events", { "Subject", NULL } },
	{ "hosts", { "TeamID", "CloudID", NULL } },
	{ "join_tokens", { "Hash", NULL } },
	{ "clouds", { "TeamID", NULL } },
	{ "installations", { "TeamID", NULL } },
	{ "quotas", { NULL } },				/* quota.c: one row per team, id = team id */
	{ "idempotency", { "Lookup", "Scope", NULL } },	/* idem.c: first answers to Idempotency-Keys */
	{ "batches", { "TeamID", NULL } },		/* api_batch.c: one row per POST /v1/sandboxes/batch */
};

int cp_db_open(struct cp *cp, struct err *e)
{
	struct st_opts opts = { 0 };

	opts.ev = cp->ev;
	opts.repair = cp->cfg.db_repair;
	if (st_open(cp->cfg.db, &opts, &cp->db, e) < 0)
		return err_prefix(e, "store %s", cp->cfg.db_shown);
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++)
		if (st_table(cp->db, tables[i].name, tables[i].index, e) < 0)
			return err_prefix(e, "store table %s", tables[i].name);
	return 0;
}

struct boot {
	char team[CP_TEAM_NAME_MAX + 1];
	char key[CRYPTO_TOKEN_MAX];	/* printed only when we generated it */
};

static void boot_done(int status, struct err *e, void *arg)
{
	struct boot *b = arg;

	if (status != 0) {
		log_error("cp", "bootstrap: %s", e ? e->msg : "commit failed");
	} else if (*b->key) {
		/* The one time the key is shown: stderr, not the log's format. */
		fprintf(stderr, "denv-cp: created team \"%s\" with API key %s (shown once; keep it)\n",
			b->team, b->key);
	} else {
		log_info("cp", "created team \"%s\" with the key from DENV_BOOTSTRAP_KEY", b->team);
	}
	memset(b->key, 0, sizeof(b->key));
}

int cp_bootstrap(struct cp *cp, struct err *e)
{
	static struct boot b;
	char team_id[ID_MAX], key_id[ID_MAX], hash[SHA256_HEX_LEN + 1];
	const char *key = cp->cfg.bootstrap_key;
	struct json *team, *row;
	struct st_txn *txn;

	if (st_count(cp->db, "teams", NULL, NULL) > 0)
		return 0;
	memset(&b, 0, sizeof(b));
	str_copy(b.team, sizeof(b.team), cp->cfg.team_name);
	if (!key || !*key) {
		if (crypto_token("dak", CP_TOKEN_BYTES, b.key, sizeof(b.key), e) < 0)
			return err_prefix(e, "bootstrap key");
		key = b.key;
	}
	if (id_new("team", team_id) < 0 || id_new("key", key_id) < 0)
		return err_set(e, "bootstrap: cannot make ids");
	if (sha256_hex(key, strlen(key), hash) < 0)
		return err_set(e, "bootstrap: cannot hash the key");

	team = json_new_object();
	json_object_set_str(team, "ID", team_id);
	json_object_set_str(team, "Name", cp->cfg.team_name);
	json_object_set(team, "CreatedAt", cp_now_json());

	row = json_new_object();
	json_object_set_str(row, "ID", key_id);
	json_object_set_str(row, "TeamID", team_id);
	json_object_set_str(row, "Name", "bootstrap");
	json_object_set_str(row, "CreatedBy", "bootstrap");
	json_object_set(row, "CreatedAt", cp_now_json());
	json_object_set(row, "LastUsedAt", json_new_null());
	json_object_set(row, "RevokedAt", json_new_null());
	json_object_set_str(row, "Hash", hash);

	txn = st_begin(cp->db);
	st_put(txn, "teams", team_id, team);
	st_put(txn, "keys", key_id, row);
	if (st_commit(txn, boot_done, &b, e) < 0)
		return err_prefix(e, "bootstrap");
	return 0;
}
