/* api_misc.c: /health and the denvd downloads from DENV_RELEASES_DIR. */
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>

#include "base/buf.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"

static void h_health(struct cp *cp, struct http_req *req)
{
	struct json *v = json_new_object();

	json_object_set_str(v, "status", "ok");
	cp_reply(req, 200, v);
}

/* This machine's architecture in Go's names, or "". */
static const char *local_arch(void)
{
	struct utsname u;

	if (uname(&u) < 0)
		return "";
	if (str_eq(u.machine, "x86_64"))
		return "amd64";
	if (str_eq(u.machine, "aarch64") || str_eq(u.machine, "arm64"))
		return "arm64";
	return "";
}

/* Serve denvd for linux/arch: "denvd-linux-<arch>" from the releases
 * directory, or plain "denvd" (what `make` builds) when arch is this
 * machine's. */
static void serve_denvd(struct cp *cp, struct http_req *req, const char *arch)
{
	char path[FS_PATH_MAX], name[64];
	struct buf body = BUF_INIT;
	struct err e;

	if (fs_path(path, sizeof(path), &e, "%s/denvd-linux-%s", cp->cfg.releases_dir, arch) < 0) {
		cp_fail(req, 400, "denvd for linux/%.32s: %s", arch, e.msg);
		return;
	}
	if (!fs_exists(path) && str_eq(arch, local_arch()) &&
	    fs_path(path, sizeof(path), &e, "%s/denvd", cp->cfg.releases_dir) < 0) {
		cp_fail(req, 500, "denvd: %s", e.msg);
		return;
	}
	if (!fs_exists(path)) {
		cp_fail(req, 404, "denvd for linux/%s is not on this server", arch);
		return;
	}
	if (fs_read_file(path, &body, CP_RELEASE_MAX, &e) < 0) {
		log_error("cp", "denvd download: %s", e.msg);
		cp_fail(req, 500, "cannot read denvd: %s", e.msg);
		return;
	}
	snprintf(name, sizeof(name), "attachment; filename=\"denvd-linux-%s\"", arch);
	http_resp_header(req, "Content-Disposition", name);
	http_respond(req, 200, "application/octet-stream", body.data, body.len);
	buf_release(&body);
}

static void h_denvd(struct cp *cp, struct http_req *req)
{
	const char *arch = http_req_query(req, "arch");

	if (!arch || !*arch)
		arch = "amd64";
	if (!str_eq(arch, "amd64") && !str_eq(arch, "arm64")) {
		http_respond_error(req, 400, "arch must be amd64 or arm64");
		return;
	}
	serve_denvd(cp, req, arch);
}

static void h_denvd_amd64(struct cp *cp, struct http_req *req)
{
	serve_denvd(cp, req, "amd64");
}

static void h_denvd_arm64(struct cp *cp, struct http_req *req)
{
	serve_denvd(cp, req, "arm64");
}

int cp_api_misc(struct cp *cp)
{
	if (cp_route(cp, "GET", "/health", 0, h_health) < 0 || cp_route(cp, "GET", "/denvd", 0, h_denvd) < 0 ||
	    cp_route(cp, "GET", "/denvd-linux-amd64", 0, h_denvd_amd64) < 0 ||
	    cp_route(cp, "GET", "/denvd-linux-arm64", 0, h_denvd_arm64) < 0)
		return -1;
	return 0;
}
