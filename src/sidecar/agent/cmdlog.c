/* cmdlog.c: the command log, <data>/commands/<id>.json: every result is
 * written here (atomically) before it is sent, and a command id seen again
 * is answered from it. Beside it: <id>.cmd, the command frame a worker runs
 * (locked while it runs), and <id>.tar, an env.get archive kept for
 * re-delivery. */
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fs.h"
#include "base/str.h"
#include "sidecar/sidecar.h"

int cmdlog_path(const char *data, const char *id, const char *ext, char *out, size_t n)
{
	if (!sc_safe_id(id))
		return -1;
	return str_fmt(out, n, "%s/commands/%s%s", data, id, ext);
}

int cmdlog_read(const char *data, const char *id, struct json **res, struct err *e)
{
	char path[FS_PATH_MAX];

	*res = NULL;
	if (cmdlog_path(data, id, ".json", path, sizeof(path)) < 0)
		return err_set(e, "bad command id");
	if (!fs_exists(path))
		return 0;
	if (json_parse_file(path, SC_RESULT_FILE_MAX, res, e) < 0)
		return err_prefix(e, "command log %s", path);
	return 1;
}

int cmdlog_write(const char *data, const char *id, const char *kind, const char *env,
		 bool ok, struct json *payload, const char *error, struct err *e)
{
	struct json *j = json_new_object();
	char path[FS_PATH_MAX], dir[FS_PATH_MAX], ts[CLOCK_RFC3339_MAX];
	char *text;
	int rc;

	if (cmdlog_path(data, id, ".json", path, sizeof(path)) < 0) {
		json_free(payload);
		json_free(j);
		return err_set(e, "bad command id");
	}
	if (fs_path(dir, sizeof(dir), e, "%s/commands", data) < 0 || fs_mkdir_p(dir, 0700, e) < 0) {
		json_free(payload);
		json_free(j);
		return -1;
	}
	clock_format_rfc3339(clock_now_ns(), ts);
	json_object_set_str(j, "command_id", id);
	json_object_set_str(j, "kind", kind ? kind : "");
	json_object_set_str(j, "env_id", env ? env : "");
	json_object_set_bool(j, "ok", ok);
	if (ok)
		json_object_set(j, "payload", payload ? payload : json_new_object());
	else {
		json_free(payload);
		json_object_set_str(j, "error", error ? error : "failed");
	}
	json_object_set_str(j, "finished_at", ts);
	text = json_to_string(j, JSON_COMPACT);
	json_free(j);
	rc = fs_write_atomic(path, text, strlen(text), 0600, e);
	free(text);
	return rc;
}

struct json *cmdlog_frame(const struct json *res)
{
	struct json *f = json_new_object();
	bool ok = json_get_bool(res, "ok", false);

	json_object_set_str(f, "type", "result");
	json_object_set_str(f, "command_id", json_get_str(res, "command_id"));
	json_object_set_str(f, "kind", json_get_str(res, "kind"));
	if (json_get_str(res, "env_id") && *json_get_str(res, "env_id"))
		json_object_set_str(f, "env_id", json_get_str(res, "env_id"));
	json_object_set_bool(f, "ok", ok);
	if (ok)
		json_object_set(f, "payload", json_dup(json_get(res, "payload")));
	else
		json_object_set_str(f, "error", json_get_str(res, "error"));
	return f;
}

/* Keep the log from growing without end: env.get archives go after a day,
 * results after a week (the control plane gives up on a command long before:
 * its phases time out at 15 minutes). Running commands (.cmd) are never
 * touched. Returns how many files were removed. */
static int64_t cmdlog_keep(const char *name)
{
	if (str_has_suffix(name, ".tar"))
		return SC_CMDLOG_TAR_KEEP_S;
	if (str_has_suffix(name, ".json"))
		return SC_CMDLOG_RESULT_KEEP_S;
	return -1;
}

int cmdlog_prune(const char *data, int64_t now_s)
{
	return fs_prune_under(data, "commands", now_s, cmdlog_keep);
}
