/* install.c: `denvd install` (denvd.md "install", "systemd unit"): copy this
 * binary to /usr/local/bin/denvd, write /etc/denv/denvd.env (0600) and the
 * systemd unit, then daemon-reload and enable --now. Root only. The hidden
 * --root DIR puts every path under DIR and skips systemctl, so tests never
 * touch the real system.
 *
 * Every flag of join/run reaches the installed service: --server, --token,
 * --data, --zfs-pool, --btrfs-root, --probe-image, --probe-url, --probe-mode, --runtime,
 * --disk-limit
 * (and DENV_SUBNET_POOL) as lines of denvd.env; --state and -v on the unit's
 * ExecStart; --env-file is read now, so what it set is saved like the rest.
 * --root and --test-leaky-network are not for a service: not saved.
 * With runsc installed, gVisor is registered with Docker (runtime.c). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/proc.h"
#include "base/str.h"
#include "sidecar/sidecar.h"

/* %s: the state file, then " -v" or "". */
static const char unit_fmt[] =
	"[Unit]\n"
	"Description=denv sidecar\n"
	"After=network-online.target docker.service\n"
	"Wants=network-online.target\n"
	"\n"
	"[Service]\n"
	"EnvironmentFile=/etc/denv/denvd.env\n"
	"ExecStart=/usr/local/bin/denvd join --state %s%s\n"
	"Restart=always\n"
	"RestartSec=3\n"
	"LimitNOFILE=1048576\n"
	"\n"
	"[Install]\n"
	"WantedBy=multi-user.target\n";

/* Write b's bytes to the file name (mode) in the directory dir under
 * --root, made with dir_mode if new; atomically, as fs_write_atomic. */
static int install_file(const struct sc_config *c, const char *dir, mode_t dir_mode, const char *name,
			const struct buf *b, mode_t mode, struct err *e)
{
	const char *root = c->root ? c->root : "";
	char path[FS_PATH_MAX];

	if (fs_path(path, sizeof(path), e, "%s%s", root, dir) < 0 || fs_mkdir_p(path, dir_mode, e) < 0 ||
	    fs_path(path, sizeof(path), e, "%s%s/%s", root, dir, name) < 0)
		return -1;
	return fs_write_atomic(path, b->data, b->len, mode, e);
}

/* A value goes on one KEY=VALUE line: a newline would smuggle in another. */
static int env_line(struct buf *b, const char *key, const char *val, struct err *e)
{
	if (val && strpbrk(val, "\r\n"))
		return err_set(e, "%s must be one line", key);
	buf_addf(b, "%s=%s\n", key, val ? val : "");
	return 0;
}

static int write_env(const struct sc_config *c, struct err *e)
{
	struct buf b = BUF_INIT;
	int rc;

	if (env_line(&b, "DENV_SERVER", c->server, e) < 0 || env_line(&b, "DENV_JOIN_TOKEN", c->token, e) < 0 ||
	    env_line(&b, "DENV_DATA_DIR", c->data_dir, e) < 0 || env_line(&b, "DENV_ZFS_POOL", c->zfs_pool, e) < 0 ||
	    env_line(&b, "DENV_BTRFS_ROOT", c->btrfs_root, e) < 0 ||
	    /* Defaults are left out, so that a newer denvd's defaults apply. */
	    (!str_eq(c->probe_image, SC_PROBE_IMAGE_DEFAULT) &&
	     env_line(&b, "DENV_PROBE_IMAGE", c->probe_image, e) < 0) ||
	    (!str_eq(c->probe_url, SC_PROBE_URL_DEFAULT) && env_line(&b, "DENV_PROBE_URL", c->probe_url, e) < 0) ||
	    (!str_eq(c->probe_mode, "auto") && env_line(&b, "DENV_PROBE_MODE", c->probe_mode, e) < 0) ||
	    (!str_eq(c->runtime, "runc") && env_line(&b, "DENV_RUNTIME", c->runtime, e) < 0) ||
	    (c->disk_limit && *c->disk_limit && env_line(&b, "DENV_DISK_LIMIT", c->disk_limit, e) < 0) ||
	    (getenv("DENV_SUBNET_POOL") && *getenv("DENV_SUBNET_POOL") &&
	     env_line(&b, "DENV_SUBNET_POOL", getenv("DENV_SUBNET_POOL"), e) < 0)) {
		memset(b.data, 0, b.len);
		buf_release(&b);
		return -1;
	}
	rc = install_file(c, "/etc/denv", 0700, "denvd.env", &b, 0600, e);
	memset(b.data, 0, b.len);	/* it held the join token */
	buf_release(&b);
	return rc;
}

static int copy_self(const struct sc_config *c, const char *self, struct err *e)
{
	struct buf bin = BUF_INIT;
	int rc;

	if (fs_read_file(self, &bin, SC_INSTALL_BIN_MAX, e) < 0) {
		buf_release(&bin);
		return err_prefix(e, "reading this binary");
	}
	rc = install_file(c, "/usr/local/bin", 0755, "denvd", &bin, 0755, e);
	buf_release(&bin);
	return rc;
}

static int systemctl(const char *a, const char *b, const char *c3, struct err *e)
{
	const char *argv[] = { "systemctl", a, b, c3, NULL };
	struct proc_spec s;
	struct proc_result r;
	char line[SC_DOCKER_LINE_MAX];
	int rc = 0;

	proc_spec_init(&s, argv);
	s.timeout_ms = 60000;
	if (proc_run(&s, NULL, 0, &r, e) < 0)
		return err_prefix(e, "systemctl (start denvd yourself: denvd join --state /etc/denv/host.json)");
	if (r.exit_code != 0) {
		dk_first_line(r.err.data, line, sizeof(line));
		rc = err_set(e, "systemctl %s: %s", a, line);
	}
	proc_result_release(&r);
	return rc;
}

/* An absolute path that goes on the unit's ExecStart line as it is: nothing
 * systemd would split, unquote, expand or specifier-substitute. */
static int unit_path(const char *flag, const char *p, struct err *e)
{
	if (!p || p[0] != '/')
		return err_set(e, "--%s must be an absolute path", flag);
	if (strpbrk(p, " \t\r\n\"'\\%$;"))
		return err_set(e, "--%s %s: blanks, quotes, \\, %%, $ and ; cannot go on the unit's ExecStart line",
			       flag, p);
	return 0;
}

static int write_unit(const struct sc_config *c, struct err *e)
{
	struct buf b = BUF_INIT;
	int rc;

	buf_addf(&b, unit_fmt, c->state_path, c->verbose ? " -v" : "");
	rc = install_file(c, "/etc/systemd/system", 0755, "denvd.service", &b, 0644, e);
	buf_release(&b);
	return rc;
}

int install_run(struct sc_config *c, const char *self, struct err *e)
{
	if (geteuid() != 0)
		return err_set(e, "must run as root (it writes /etc/denv and a systemd unit)");
	if (!c->server)
		c->server = getenv("DENV_SERVER");
	if (!c->data_dir)
		c->data_dir = getenv("DENV_DATA_DIR");
	if (!c->zfs_pool)
		c->zfs_pool = getenv("DENV_ZFS_POOL");
	if (!c->btrfs_root)
		c->btrfs_root = getenv("DENV_BTRFS_ROOT");
	if (!c->server || !*c->server)
		return err_set(e, "--server (or DENV_SERVER) is required");
	if (!str_has_prefix(c->server, "http://") && !str_has_prefix(c->server, "https://"))
		return err_set(e, "--server %s: must start with http:// or https://", c->server);
	if (c->root && c->root[0] != '/')
		return err_set(e, "--root must be an absolute path");
	if (c->btrfs_root && *c->btrfs_root && c->btrfs_root[0] != '/')
		return err_set(e, "--btrfs-root must be an absolute path");
	if (c->data_dir && *c->data_dir && c->data_dir[0] != '/')
		return err_set(e, "--data must be an absolute path");
	if (!sc_probe_mode_ok(c->probe_mode))
		return err_set(e, "--probe-mode %s: must be auto, netns or container", c->probe_mode);
	if (unit_path("state", c->state_path, e) < 0)
		return -1;
	if (copy_self(c, self, e) < 0 || write_env(c, e) < 0 || write_unit(c, e) < 0)
		return -1;
	switch (rt_register(c->root, e)) {
	case 1:
		printf("registered gVisor (runsc) with Docker%s\n", c->root ? " (daemon.json only)" : "");
		break;
	case -1:
		fprintf(stderr, "denvd install: gVisor not registered: %s\n", e->msg);
		break;
	}
	if (c->root) {
		printf("installed under %s (systemctl skipped)\n", c->root);
		return 0;
	}
	if (systemctl("daemon-reload", NULL, NULL, e) < 0 || systemctl("enable", "--now", "denvd", e) < 0)
		return -1;
	printf("denvd installed and started (systemctl status denvd)\n");
	return 0;
}
