/*
 * cmd_files.c: files put (tar a local file or directory and upload it) and
 * files get (download a tar and extract it with the library's safe
 * extraction: nothing lands outside the target, no link escapes it).
 */
#include "cli/cli.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fs.h"
#include "base/str.h"
#include "http/http.h"
#include "json/json.h"
#include "tar/tar.h"

int cli_files_extract(const void *p, size_t len, const char *dir, uint64_t *written, struct err *e)
{
	struct tar_stats st = { 0 };

	*written = 0;
	if (fs_mkdir_p(dir, 0755, e) < 0)
		return -1;
	/* Devices and FIFOs cannot be useful here and need root: skip them.
	 * Absolute paths, "..", escaping symlinks and foreign hard links are
	 * refused by the extraction itself. */
	if (tar_extract_mem(p, len, dir, NULL, TAR_X_SKIP_SPECIAL, &st, e) < 0)
		return -1;
	*written = st.files + st.hardlinks + st.symlinks;
	return 0;
}

/* The name the upload is stored under: the local path's last component. */
static int upload_name(const char *local, char *name, size_t size, struct err *e)
{
	char *copy = xstrdup(local), *base;
	size_t n = strlen(copy);
	int rc = 0;

	while (n > 1 && copy[n - 1] == '/')
		copy[--n] = '\0';
	base = strrchr(copy, '/') ? strrchr(copy, '/') + 1 : copy;
	if (!*base || str_eq(base, ".") || str_eq(base, "..")) {
		/* "." or "dir/..": name it after what it really is. */
		char real[PATH_MAX];

		if (!realpath(local, real) || str_eq(real, "/"))
			rc = err_set(e, "%s: give a file or directory with a name", local);
		else
			str_copy(name, size, strrchr(real, '/') + 1);
	} else if (str_copy(name, size, base) < 0) {
		rc = err_set(e, "%s: name too long", local);
	}
	free(copy);
	return rc;
}

/* "/v1/envs/<id>/files?service=S&<key>=P" */
static int files_path(struct cli *c, const char *ref, const char *service, const char *key, const char *remote,
		      struct buf *path, struct err *e)
{
	if (cli_env_path(c, ref, "/files?service=", path, e) < 0)
		return -1;
	http_pct_encode(path, service, "");
	buf_addf(path, "&%s=", key);
	http_pct_encode(path, remote, "");
	return 0;
}

static int build_archive(const char *local, struct buf *tar, struct err *e)
{
	char name[256];
	struct tar_writer *w;
	int rc;

	if (!fs_exists(local))
		return err_set(e, "%s: no such file or directory", local);
	if (upload_name(local, name, sizeof(name), e) < 0)
		return -1;
	w = tar_writer_new_buf(tar);
	rc = tar_write_tree(local, name, w, NULL, TAR_W_REFUSE_SPECIAL, e);
	if (rc == 0)
		rc = tar_writer_finish(w, e);
	tar_writer_free(w);
	if (rc < 0 && tar->len + TAR_BLOCK_SIZE * 2 >= tar->max)
		return err_set(e, "%s: the archive is larger than the %zu MiB limit", local, CLI_FILES_MAX >> 20);
	return rc;
}

static int run_put(struct cli *c, const struct cli_args *a, struct err *e)
{
	const char *service = cli_flag_str(a, "service"), *owner = cli_flag_str(a, "owner");
	struct buf tar, path = BUF_INIT, resp = BUF_INIT;
	struct json *doc = NULL;
	int rc = -1;

	if (!service || !*service)
		return err_set(e, "files put: --service is required"), CLI_USAGE;
	if (owner && !*owner)
		return err_set(e, "files put: --owner needs user[:group]"), CLI_USAGE;
	if (a->pos[2][0] != '/')
		return err_set(e, "files put: the remote path must be absolute"), CLI_USAGE;
	buf_init(&tar, CLI_FILES_MAX);
	/* target: the server applies docker cp's rules to where it lands. */
	if (build_archive(a->pos[1], &tar, e) < 0 ||
	    files_path(c, a->pos[0], service, "target", a->pos[2], &path, e) < 0)
		goto out;
	if (owner) {
		buf_adds(&path, "&owner=");
		http_pct_encode(&path, owner, "");
	}
	if (cli_call_raw(c, "PUT", path.data, "application/x-tar", tar.data, tar.len, &resp, e) < 0)
		goto out;
	if (json_parse(resp.data, resp.len, NULL, &doc, e) < 0) {
		err_prefix(e, "files put: bad JSON from the server");
		goto out;
	}
	rc = cli_print_json(doc, e);
out:
	json_free(doc);
	buf_release(&tar);
	buf_release(&path);
	buf_release(&resp);
	return rc;
}

static int run_get(struct cli *c, const struct cli_args *a, struct err *e)
{
	const char *service = cli_flag_str(a, "service"), *dir = a->pos[2];
	struct buf path = BUF_INIT, tar;
	uint64_t n;
	int rc = -1;

	if (!service || !*service)
		return err_set(e, "files get: --service is required"), CLI_USAGE;
	buf_init(&tar, CLI_MAX_RESPONSE);
	if (files_path(c, a->pos[0], service, "path", a->pos[1], &path, e) < 0 ||
	    cli_call_raw(c, "GET", path.data, NULL, NULL, 0, &tar, e) < 0)
		goto out;
	if (cli_files_extract(tar.data, tar.len, dir, &n, e) < 0) {
		err_prefix(e, "files get %s", a->pos[1]);
		goto out;
	}
	printf("%llu files written under %s\n", (unsigned long long)n, dir);
	rc = 0;
out:
	buf_release(&path);
	buf_release(&tar);
	return rc;
}

static const struct cli_flag files_flags[] = {
	{ "service", 0, CLI_STR, "S", "service of the environment (required)" },
	{ 0 },
};

static const struct cli_flag put_flags[] = {
	{ "service", 0, CLI_STR, "S", "service of the environment (required)" },
	{ "owner", 0, CLI_STR, "USER[:GROUP]",
	  "owner of what is written, names or ids (default: the owner of the directory it lands in)" },
	{ 0 },
};

static const struct cli_cmd files_subs[] = {
	{ .name = "put", .args = "<env> <local-path> <remote-path>",
	  .summary = "upload a file or directory into a service, by docker cp's rules",
	  .notes = "Like docker cp: into an existing directory, the upload goes inside it under its\n"
		   "own name; a missing remote path (whose parent exists) becomes the upload; a\n"
		   "file replaces an existing file. New files belong to the owner of the directory\n"
		   "they land in unless --owner says otherwise.\n",
	  .flags = put_flags, .min_pos = 3, .max_pos = 3, .run = run_put },
	{ .name = "get", .args = "<env> <remote-path> <local-dir>",
	  .summary = "download a path of a service and extract it safely under a local directory",
	  .flags = files_flags, .min_pos = 3, .max_pos = 3, .run = run_get },
	{ 0 },
};

const struct cli_cmd cli_cmd_files = {
	.name = "files", .summary = "copy files into and out of a service", .subs = files_subs,
};
