/* files.c: env.put and env.get, tar archives moved with `docker cp`
 * (doc/host-stream-chunks.md for how they travel). put: the archive was
 * spooled by the agent from chunk frames; it is checked (chunks, bytes,
 * sha256) before anything touches the container. get: the archive is kept as
 * <data>/commands/<id>.tar so a re-delivered command can be answered again. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/crypto.h"
#include "base/fs.h"
#include "base/proc.h"
#include "base/str.h"
#include "base/sys.h"
#include "sidecar/sidecar.h"

int sc_file_sha256(const char *path, char hex[SHA256_HEX_LEN + 1], struct err *e)
{
	struct sha256_ctx c = SHA256_CTX_INIT;
	uint8_t d[SHA256_LEN], tmp[65536];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return err_errno(e, "open %s", path);
	sha256_init(&c);
	while ((n = sys_read(fd, tmp, sizeof(tmp))) > 0)
		sha256_update(&c, tmp, (size_t)n);
	sys_close(fd);
	if (n < 0 || sha256_final(&c, d) < 0) {
		sha256_release(&c);
		return err_set(e, "reading %s failed", path);
	}
	for (size_t i = 0; i < SHA256_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
	return 0;
}

int sc_spool_check(const char *kind, const struct json *p, const struct json *sp, struct err *e)
{
	int64_t want = json_get_int(p, "tar_bytes", -1), got = json_get_int(sp, "bytes", 0);
	int64_t chunks = json_get_int(p, "tar_chunks", -1);
	const char *sha = json_get_str(p, "tar_sha256"), *path = json_get_str(sp, "path");
	char hex[SHA256_HEX_LEN + 1];

	if (!sp || !json_get_bool(sp, "complete", false) || !path || !*path || got != want ||
	    json_get_int(sp, "chunks", 0) != chunks)
		return err_set(e, "%s: archive incomplete: got %lld of %lld bytes", kind, (long long)got,
			       (long long)want);
	if (!sha || sc_file_sha256(path, hex, e) < 0 || !str_eq(hex, sha))
		return err_set(e, "%s: archive incomplete: sha256 mismatch", kind);
	return 0;
}

int cmd_env_put(struct wk *w, const struct json *payload, struct json **result, struct err *e)
{
	const struct json *sp = json_get(w->cmd, "_spool");
	const char *path = json_get_str(payload, "path"), *spool = json_get_str(sp, "path");
	char cname[300], dst[4400];
	const char *argv[] = { "docker", "cp", "-", dst, NULL };
	struct proc_spec s;
	struct proc_result r;
	int fd = -1, rc = -1;

	if (json_get_int(payload, "tar_bytes", 0) > (int64_t)SC_ARCHIVE_MAX) {
		err_set(e, "env.put: archive larger than 32 MiB");
		goto out;
	}
	if (sc_spool_check("env.put", payload, sp, e) < 0 ||
	    wk_container(w, "env.put", json_get_str(payload, "service"), cname, sizeof(cname), e) < 0)
		goto out;
	if (!path || path[0] != '/' || strlen(path) > 4000) {
		err_set(e, "env.put: payload.path must be an absolute path");
		goto out;
	}
	if (dk(NULL, SC_DOCKER_TIMEOUT_MS, e, "exec", "-u", "0", cname, "mkdir", "-p", "--", path, NULL) < 0) {
		err_prefix(e, "env.put: creating %s", path);
		goto out;
	}
	snprintf(dst, sizeof(dst), "%s:%s", cname, path);
	if ((fd = open(spool, O_RDONLY | O_CLOEXEC)) < 0) {
		err_errno(e, "env.put: %s", spool);
		goto out;
	}
	proc_spec_init(&s, argv);
	s.in.mode = PROC_FD;
	s.in.fd = fd;
	s.timeout_ms = SC_DOCKER_TIMEOUT_MS;
	s.out_max = s.err_max = 65536;
	if (proc_run(&s, NULL, 0, &r, e) < 0) {
		err_prefix(e, "env.put");
		goto out;
	}
	if (r.exit_code != 0 || r.timed_out) {
		char line[300];

		dk_first_line(r.err.data, line, sizeof(line));
		err_set(e, "env.put: docker cp: %s", r.timed_out ? "timed out" : line);
	} else {
		*result = json_new_object();
		json_object_set_str(*result, "path", path);
		rc = 0;
	}
	proc_result_release(&r);
out:
	if (fd >= 0)
		sys_close(fd);
	if (spool && *spool)
		unlink(spool);
	return rc;
}

int cmd_env_get(struct wk *w, const struct json *payload, struct json **result, struct err *e)
{
	const char *path = json_get_str(payload, "path");
	char cname[300], src[4400], tarpath[4096], hex[SHA256_HEX_LEN + 1];
	const char *argv[] = { "docker", "cp", src, "-", NULL };
	struct proc_spec s;
	struct proc_result r;
	int rc;

	if (wk_container(w, "env.get", json_get_str(payload, "service"), cname, sizeof(cname), e) < 0)
		return -1;
	if (!path || path[0] != '/' || strlen(path) > 4000)
		return err_set(e, "env.get: payload.path must be an absolute path");
	if (cmdlog_path(w->data, w->id, ".tar", tarpath, sizeof(tarpath)) < 0)
		return err_set(e, "env.get: bad command id");
	snprintf(src, sizeof(src), "%s:%s", cname, path);
	proc_spec_init(&s, argv);
	s.timeout_ms = SC_DOCKER_TIMEOUT_MS;
	s.out_max = (size_t)SC_ARCHIVE_MAX;
	s.err_max = 65536;
	if (proc_run(&s, NULL, 0, &r, e) < 0)
		return err_prefix(e, "env.get");
	if (r.out_truncated) {
		proc_result_release(&r);
		return err_set(e, "env.get: archive larger than 32 MiB");
	}
	if (r.exit_code != 0 || r.timed_out) {
		char line[300];

		dk_first_line(r.err.data, line, sizeof(line));
		proc_result_release(&r);
		return err_set(e, "env.get: docker cp %s: %s", path, r.timed_out ? "timed out" : line);
	}
	rc = fs_write_atomic(tarpath, r.out.data, r.out.len, 0600, e);
	if (rc == 0 && sha256_hex(r.out.data, r.out.len, hex) < 0)
		rc = err_set(e, "env.get: sha256 failed");
	if (rc == 0) {
		*result = json_new_object();
		json_object_set_int(*result, "tar_bytes", (int64_t)r.out.len);
		json_object_set_str(*result, "tar_sha256", hex);
		json_object_set_int(*result, "tar_chunks",
				    r.out.len ? (int64_t)((r.out.len + SC_CHUNK_BYTES - 1) / SC_CHUNK_BYTES) : 1);
	}
	proc_result_release(&r);
	return rc;
}
