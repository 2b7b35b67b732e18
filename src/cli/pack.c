/*
 * pack.c: the build contexts of a deploy (compose build:). Each service's
 * context directory, relative to the compose file's directory as docker
 * compose resolves it, is packed into a tar the way `docker build` would
 * send it: .dockerignore honoured (tar/ignore.c), the Dockerfile and the
 * .dockerignore always kept (the builder needs them), owners and times
 * left out so that an unchanged directory packs to the same bytes and
 * therefore the same sha256. The archive goes to PUT /v1/contexts/{sha256}
 * unless the server already has it, and the deploy names it in contexts.
 */
#include "cli/cli.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/crypto.h"
#include "base/fs.h"
#include "base/str.h"
#include "base/sys.h"
#include "json/json.h"
#include "spec/spec.h"
#include "tar/tar.h"

struct pack {
	struct tar_ignore *ig;
	const char *dockerfile;
};

static bool skip(void *arg, const char *path, bool is_dir, bool *descend)
{
	struct pack *p = arg;

	if (str_eq(path, p->dockerfile) || str_eq(path, ".dockerignore") || !tar_ignore_match(p->ig, path))
		return false;
	/* An exception may bring back something below an excluded directory;
	 * Docker walks into it then, and so does this. The Dockerfile's own
	 * directory too, so the Dockerfile is found. */
	*descend = is_dir && (tar_ignore_has_exceptions(p->ig) ||
			      (str_has_prefix(p->dockerfile, path) && p->dockerfile[strlen(path)] == '/'));
	return true;
}

/* The context directory: relative to the compose file's directory. */
static int context_dir(const char *compose_file, const char *context, struct buf *out)
{
	const char *slash = strrchr(compose_file, '/');

	buf_reset(out);
	while (context[0] == '.' && context[1] == '/')
		context += 2;
	if (!context[0])
		context = ".";
	if (context[0] == '/')
		return buf_adds(out, context);
	if (slash)
		buf_add(out, compose_file, (size_t)(slash - compose_file + 1));
	return buf_adds(out, context);
}

static int write_context(const char *dir, struct pack *p, struct tar_writer *w, uint64_t max_bytes, struct err *e)
{
	struct tar_limits lim = { 0, max_bytes, 0, 0 };

	if (tar_write_tree_filtered(dir, "", w, &lim, TAR_W_STABLE | TAR_W_REFUSE_SPECIAL, skip, p, e) < 0)
		return -1;
	return tar_writer_finish(w, e);
}

/* How large the archive would be, for the message that refuses it. */
static uint64_t measure(const char *dir, struct pack *p)
{
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	struct tar_writer *w;
	struct err e;
	uint64_t n = 0;

	if (fd < 0)
		return 0;
	w = tar_writer_new_fd(fd);
	if (write_context(dir, p, w, UINT64_MAX >> 1, &e) == 0)
		n = tar_writer_offset(w);
	tar_writer_free(w);
	sys_close(fd);
	return n;
}

static int read_ignore(const char *dir, struct tar_ignore **ig, struct err *e)
{
	struct buf path = BUF_INIT, text = BUF_INIT;
	int rc = 0;

	buf_addf(&path, "%s/.dockerignore", dir);
	if (fs_exists(path.data))
		rc = fs_read_file(path.data, &text, TAR_IGNORE_MAX_BYTES, e);
	if (rc == 0)
		rc = tar_ignore_parse(text.data ? text.data : "", text.len, ig, e);
	buf_release(&path);
	buf_release(&text);
	return rc;
}

int cli_pack_context(const char *compose_file, const char *svc, const struct json *build, struct buf *tar,
		     struct err *e)
{
	const char *context = json_get_str(build, "context"), *dockerfile = json_get_str(build, "dockerfile");
	struct buf dir = BUF_INIT, df = BUF_INIT;
	struct pack p = { NULL, dockerfile };
	struct tar_writer *w;
	int rc = -1;

	context_dir(compose_file, context ? context : ".", &dir);
	buf_addf(&df, "%s/%s", dir.data, dockerfile ? dockerfile : "Dockerfile");
	if (!fs_exists(dir.data)) {
		err_set(e, "service \"%s\": build context %s is not a directory here", svc, dir.data);
		goto out;
	}
	if (!fs_exists(df.data)) {
		err_set(e, "service \"%s\": %s: no such Dockerfile", svc, df.data);
		goto out;
	}
	if (read_ignore(dir.data, &p.ig, e) < 0) {
		err_prefix(e, "service \"%s\": %s", svc, dir.data);
		goto out;
	}
	buf_init(tar, CLI_CONTEXT_MAX);
	w = tar_writer_new_buf(tar);
	rc = write_context(dir.data, &p, w, CLI_CONTEXT_MAX, e);
	tar_writer_free(w);
	if (rc < 0 && (tar->len + TAR_BLOCK_SIZE * 2 >= tar->max || strstr(e->msg, "files total more than"))) {
		uint64_t n = measure(dir.data, &p);

		err_set(e, "service \"%s\": build context %s is %.1f MiB packed, over the %zu MiB limit (leave files "
			"out with .dockerignore)", svc, dir.data, (double)n / (1 << 20), CLI_CONTEXT_MAX >> 20);
	} else if (rc < 0) {
		err_prefix(e, "service \"%s\": packing %s", svc, dir.data);
	}
out:
	tar_ignore_free(p.ig);
	buf_release(&dir);
	buf_release(&df);
	return rc;
}

/* Upload tar unless the server has it already; digest gets its sha256. */
static int upload(struct cli *c, const struct buf *tar, char digest[SHA256_HEX_LEN + 1], bool *sent, struct err *e)
{
	struct buf path = BUF_INIT, resp = BUF_INIT;
	struct json *doc = NULL;
	int rc;

	*sent = false;
	if (sha256_hex(tar->data ? tar->data : "", tar->len, digest) < 0)
		return err_set(e, "sha256 failed");
	buf_addf(&path, "/v1/contexts/%s", digest);
	rc = cli_call(c, "GET", path.data, NULL, &doc, e);
	json_free(doc);
	if (rc < 0 && e->code == 404) {
		err_clear(e);
		rc = cli_call_raw(c, "PUT", path.data, "application/x-tar", tar->data ? tar->data : "", tar->len, &resp, e);
		*sent = rc == 0;
	}
	buf_release(&path);
	buf_release(&resp);
	return rc;
}

int cli_pack_contexts(struct cli *c, const char *compose_file, const char *text, size_t len, struct json *body,
		      struct err *e)
{
	struct json *spec = NULL, *contexts;
	const struct json *services;
	struct err pe;
	int rc = 0;

	/* A file the server will refuse is sent as it is: its answer names the reason. */
	if (spec_parse_compose(text, len, &spec, &pe) < 0)
		return 0;
	services = json_get(spec, "services");
	contexts = json_new_object();
	for (size_t i = 0; i < json_len(services) && rc == 0; i++) {
		const struct json *s = json_at(services, i), *b = json_get(s, "build");
		const char *name = json_get_str(s, "name");
		char digest[SHA256_HEX_LEN + 1];
		struct buf tar = BUF_INIT;
		bool sent;

		if (!b)
			continue;
		rc = cli_pack_context(compose_file, name, b, &tar, e);
		if (rc == 0 && (rc = upload(c, &tar, digest, &sent, e)) < 0)
			err_prefix(e, "service \"%s\": uploading its build context", name);
		if (rc == 0) {
			fprintf(stderr, "build: service %s: context %s packed (%zu bytes, sha256 %.12s), %s\n", name,
				json_get_str(b, "context"), tar.len, digest, sent ? "uploaded" : "already on the server");
			json_object_set_str(contexts, name, digest);
		}
		buf_release(&tar);
	}
	if (rc == 0 && json_len(contexts))
		json_object_set(body, "contexts", contexts);
	else
		json_free(contexts);
	json_free(spec);
	return rc;
}
