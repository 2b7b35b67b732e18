/* worker.c: one command, start to finish, in its own process (sidecar.h).
 * stdin is the locked <id>.cmd file holding the command frame; stdout
 * carries progress lines to the agent; the result goes into the command log
 * before the process exits, so the agent (this one or the next) can send it. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/str.h"
#include "base/sys.h"
#include "sidecar/sidecar.h"

static const struct {
	const char *kind;
	wk_fn fn;
} kinds[] = {
	{ "host.report", cmd_host_report },
	{ "env.create", cmd_env_create },
	{ "env.exec", cmd_env_exec },
	{ "env.bg.start", cmd_env_bg_start },
	{ "env.bg.list", cmd_env_bg_list },
	{ "env.bg.get", cmd_env_bg_get },
	{ "env.bg.signal", cmd_env_bg_signal },
	{ "env.pause", cmd_env_pause },
	{ "env.resume", cmd_env_resume },
	{ "env.put", cmd_env_put },
	{ "env.context", cmd_env_context },
	{ "env.get", cmd_env_get },
	{ "env.metrics", cmd_env_metrics },
	{ "env.logs", cmd_env_logs },
	{ "env.destroy", cmd_env_destroy },
	{ "env.snapshot", cmd_env_snapshot },
	{ "env.fork", cmd_env_fork },
	{ "env.rollback", cmd_env_rollback },
	{ "env.digest", cmd_env_digest },
	{ "snap.export", cmd_snap_export },
	{ "snap.read", cmd_snap_read },
	{ "snap.write", cmd_snap_write },
	{ "snap.import", cmd_snap_import },
	{ "verify.collect", cmd_verify_collect },
	{ "verify.run", cmd_verify_run },
};

static int read_input(struct json **out, struct err *e)
{
	struct buf b = BUF_INIT;
	char tmp[65536];
	ssize_t n;

	buf_init(&b, SC_WORKER_INPUT_MAX);
	while ((n = sys_read(0, tmp, sizeof(tmp))) > 0)
		if (buf_add(&b, tmp, (size_t)n) < 0) {
			buf_release(&b);
			return err_set(e, "command frame too large");
		}
	if (n < 0 || json_parse(b.data, b.len, NULL, out, e) < 0) {
		buf_release(&b);
		return n < 0 ? err_errno(e, "read command") : err_prefix(e, "command frame");
	}
	buf_release(&b);
	return 0;
}

static int parse_args(int argc, char **argv, struct wk *w)
{
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (str_eq(a, "--test-leaky-network")) {
			w->leaky_network = true;
			continue;
		}
		if (str_eq(a, "-v")) {
			log_set_level(LOG_DEBUG);
			continue;
		}
		if (!v)
			return -1;
		if (str_eq(a, "--data"))
			w->data = v;
		else if (str_eq(a, "--probe-image"))
			w->probe_image = v;
		else if (str_eq(a, "--probe-url"))
			w->probe_url = v;
		else if (str_eq(a, "--probe-mode"))
			w->probe_mode = v;
		else if (str_eq(a, "--runtime"))
			w->runtime = v;
		else if (str_eq(a, "--disk-limit")) {
			if (sc_parse_disk_mb(v, &w->disk_limit_mb) < 0)
				return -1;
		}
		else if (str_eq(a, "--zfs-pool"))
			w->zfs_pool = v;
		else if (str_eq(a, "--btrfs-root"))
			w->btrfs_root = v;
		else
			return -1;
		i++;
	}
	return w->data ? 0 : -1;
}

static int run_kind(struct wk *w, const struct json *payload, struct json **result, struct err *e)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (str_eq(w->kind, kinds[i].kind))
			return kinds[i].fn(w, payload, result, e);
	return err_set(e, "unknown command kind %s", w->kind);
}

int worker_main(int argc, char **argv)
{
	struct wk w;
	struct json *result = NULL;
	struct err e;
	const struct json *payload;
	int rc;

	signal(SIGPIPE, SIG_IGN);
	memset(&w, 0, sizeof(w));
	err_clear(&e);
	w.probe_image = SC_PROBE_IMAGE_DEFAULT;
	w.probe_url = SC_PROBE_URL_DEFAULT;
	w.probe_mode = "auto";
	w.runtime = "runc";
	if (parse_args(argc, argv, &w) < 0) {
		fprintf(stderr, "denvd __worker: bad arguments (this verb is for denvd itself)\n");
		return 2;
	}
	if (read_input(&w.cmd, &e) < 0) {
		log_error("worker", "%s", e.msg);
		return 1;
	}
	w.id = json_get_str(w.cmd, "command_id");
	w.kind = json_get_str(w.cmd, "kind");
	w.env = json_get_str(w.cmd, "env_id");
	w.kind = w.kind ? w.kind : "";
	w.env = w.env ? w.env : "";
	if (!sc_safe_id(w.id)) {
		log_error("worker", "command frame without a usable command_id");
		json_free(w.cmd);
		return 1;
	}
	payload = json_get(w.cmd, "payload");
	/* A snapshot's worker killed inside its freeze left containers frozen (freeze.c). */
	if (sc_safe_id(w.env) && fz_recover_env(w.data, w.env, &e) < 0)
		log_warn("worker", "thawing what a killed snapshot left frozen: %s", e.msg);
	err_clear(&e);
	rc = run_kind(&w, payload, &result, &e);
	if (rc < 0)
		log_info("worker", "command %s (%s) failed: %s", w.id, w.kind, e.msg);
	{
		struct err we;

		if (cmdlog_write(w.data, w.id, w.kind, w.env, rc == 0, rc == 0 ? result : NULL,
				 rc == 0 ? NULL : e.msg, &we) < 0) {
			log_error("worker", "command %s: cannot record the result: %s", w.id, we.msg);
			json_free(w.cmd);
			return 1;
		}
	}
	if (rc < 0)
		json_free(result);
	json_free(w.cmd);
	return 0;
}
