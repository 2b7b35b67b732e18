/* snaprec.c: snapshot records, <data>/snaps/<env>/<name>/snapshot.json:
 * where they live, reading and writing them, and finding one by name (names
 * are version ids, unique on a host) for whatever clones or restores from it
 * (env.create from_snapshot, env.fork, env.rollback, env.digest). The
 * snapshots themselves are snapshot.c's. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fs.h"
#include "base/str.h"
#include "sidecar/sidecar.h"
#include "sidecar/storage/storage.h"

void snap_dir(const char *data, const char *env, const char *name, char *out, size_t n)
{
	snprintf(out, n, "%s/snaps/%s/%s", data, env, name);
}

int snap_read_json(const char *path, struct json **out, struct err *e)
{
	return json_parse_file(path, SC_SNAP_RECORD_MAX, out, e) < 0 ? err_prefix(e, "%s", path) : 0;
}

int snap_write_json(const char *path, const struct json *j, struct err *e)
{
	char *text = json_to_string(j, JSON_PRETTY);
	int rc = fs_write_atomic(path, text, strlen(text), 0600, e);

	free(text);
	return rc;
}

int snap_record_load(const char *data, const char *env, const char *name, struct json **rec, struct err *e)
{
	char path[STG_PATH_MAX];

	snprintf(path, sizeof(path), "%s/snaps/%s/%s/snapshot.json", data, env, name);
	if (!fs_exists(path))
		return 0;
	return snap_read_json(path, rec, e) < 0 ? -1 : 1;
}

int snap_find(const struct wk *w, const char *hint_env, const char *name, char *env_out, size_t n,
	      struct json **rec, struct err *e)
{
	const char *first[2] = { hint_env, w->env };
	char dir[STG_PATH_MAX];
	DIR *d;
	struct dirent *de;
	int rc;

	if (!sc_safe_id(name))
		return err_set(e, "\"%s\" is not a snapshot name", name ? name : "");
	for (int i = 0; i < 2; i++) {
		if (!first[i] || !sc_safe_id(first[i]))
			continue;
		if ((rc = snap_record_load(w->data, first[i], name, rec, e)) != 0) {
			if (rc > 0)
				str_copy(env_out, n, first[i]);
			return rc > 0 ? 0 : -1;
		}
	}
	snprintf(dir, sizeof(dir), "%s/snaps", w->data);
	if ((d = opendir(dir))) {
		while ((de = readdir(d))) {
			if (!sc_safe_id(de->d_name))
				continue;
			if ((rc = snap_record_load(w->data, de->d_name, name, rec, e)) != 0) {
				if (rc > 0)
					str_copy(env_out, n, de->d_name);
				closedir(d);
				return rc > 0 ? 0 : -1;
			}
		}
		closedir(d);
	}
	return err_set(e, "snapshot %s not found on this host", name);
}

int snap_from(const struct wk *w, const char *hint_env, const char *name, struct create_from *from, char *env_out,
	      size_t n, struct json **rec, struct err *e)
{
	if (snap_find(w, hint_env, name, env_out, n, rec, e) < 0)
		return -1;
	memset(from, 0, sizeof(*from));
	from->env = env_out;
	from->name = name;
	from->storage = json_get_str(*rec, "storage");
	return 0;
}
