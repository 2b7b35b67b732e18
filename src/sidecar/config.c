/* config.c: denvd's flags, their environment fallbacks, --env-file, and the
 * state file (identity: server, host_id, secret, data_dir, zfs_pool; 0600).
 * Precedence: a flag, then the saved state (server, data_dir, zfs_pool), then
 * the environment, then the default. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/fs.h"
#include "base/str.h"
#include "sidecar/sidecar.h"
#include "spec/spec.h"

struct flag {
	const char *name;
	size_t off;
	bool *given;
};

static bool flag_given_dummy;

bool sc_safe_id(const char *s)
{
	size_t n = 0;

	if (!s || !*s)
		return false;
	for (; s[n]; n++)
		if (!isalnum((unsigned char)s[n]) && s[n] != '_' && s[n] != '-')
			return false;
	return n < SC_ID_MAX;
}

static const char *own(struct sc_config *c, char *s);

/* "a" and "b" as "a,b", the list form of --server. */
static const char *join_servers(struct sc_config *c, const char *a, const char *b)
{
	struct buf j = BUF_INIT;

	buf_addf(&j, "%s,%s", a, b);
	return own(c, buf_detach(&j, NULL));
}

int sc_config_parse(int argc, char **argv, struct sc_config *c, struct err *e)
{
	const struct flag flags[] = {
		{ "server", offsetof(struct sc_config, server), &c->server_flag },
		{ "token", offsetof(struct sc_config, token), NULL },
		{ "state", offsetof(struct sc_config, state_path), NULL },
		{ "data", offsetof(struct sc_config, data_dir), &c->data_flag },
		{ "zfs-pool", offsetof(struct sc_config, zfs_pool), &c->zfs_flag },
		{ "btrfs-root", offsetof(struct sc_config, btrfs_root), NULL },
		{ "env-file", offsetof(struct sc_config, env_file), NULL },
		{ "probe-image", offsetof(struct sc_config, probe_image), NULL },
		{ "probe-url", offsetof(struct sc_config, probe_url), NULL },
		{ "probe-mode", offsetof(struct sc_config, probe_mode), NULL },
		{ "runtime", offsetof(struct sc_config, runtime), NULL },
		{ "disk-limit", offsetof(struct sc_config, disk_limit), NULL },
		{ "root", offsetof(struct sc_config, root), NULL },
		{ "ingress-domain", offsetof(struct sc_config, ingress_domain), NULL },
		{ "ingress-listen", offsetof(struct sc_config, ingress_listen), NULL },
		{ "ingress-ca-cert", offsetof(struct sc_config, ingress_ca_cert), NULL },
		{ "ingress-ca-key", offsetof(struct sc_config, ingress_ca_key), NULL },
		{ "ingress-cert-days", offsetof(struct sc_config, ingress_cert_days), NULL },
	};

	for (int i = 2; i < argc; i++) {
		const char *a = argv[i], *val = NULL;
		char name[64];
		size_t n;
		bool done = false;

		if (a[0] != '-' || !a[1])
			return err_set(e, "unexpected argument %s", a);
		a += a[1] == '-' ? 2 : 1;
		n = strcspn(a, "=");
		if (n >= sizeof(name))
			return err_set(e, "unknown flag %s", argv[i]);
		memcpy(name, a, n);
		name[n] = '\0';
		if (a[n] == '=')
			val = a + n + 1;
		if (str_eq(name, "v")) {
			c->verbose = true;
			continue;
		}
		if (str_eq(name, "test-leaky-network")) {	/* tests only: see denvd(8) */
			c->leaky_network = true;
			continue;
		}
		for (size_t k = 0; k < sizeof(flags) / sizeof(flags[0]) && !done; k++) {
			if (!str_eq(name, flags[k].name))
				continue;
			if (!val && i + 1 >= argc)
				return err_set(e, "flag needs an argument: --%s", name);
			if (!val)
				val = argv[++i];
			if (flags[k].given == &c->server_flag && c->server_flag)
				val = join_servers(c, c->server, val);	/* --server again: one more to try */
			*(const char **)((char *)c + flags[k].off) = val;
			*(flags[k].given ? flags[k].given : &flag_given_dummy) = true;
			done = true;
		}
		if (!done)
			return err_set(e, "unknown flag --%s", name);
	}
	return 0;
}

/* KEY=VALUE lines into the environment; blank lines and #comments skipped;
 * optional surrounding quotes removed. Variables already set are replaced,
 * as cloud-init's file is meant to be the source. */
int sc_env_file_load(const char *path, struct err *e)
{
	struct buf b = BUF_INIT;
	char *line, *save = NULL;

	if (fs_read_file(path, &b, SC_ENV_FILE_MAX, e) < 0)
		return err_prefix(e, "--env-file");
	for (line = b.data; line && *line; line = save) {
		char *nl = strchr(line, '\n'), *eq, *val;
		size_t vl;

		save = nl ? nl + 1 : NULL;
		if (nl)
			*nl = '\0';
		str_trim(line);
		if (!*line || *line == '#')
			continue;
		if (str_has_prefix(line, "export "))
			line += 7;
		if (!(eq = strchr(line, '=')) || eq == line) {
			err_set(e, "--env-file %s: not KEY=VALUE: %.60s", path, line);
			buf_release(&b);
			return -1;
		}
		*eq = '\0';
		val = eq + 1;
		vl = strlen(val);
		if (vl >= 2 && (val[0] == '"' || val[0] == '\'') && val[vl - 1] == val[0]) {
			val[vl - 1] = '\0';
			val++;
		}
		if (setenv(str_trim(line), val, 1) < 0) {
			buf_release(&b);
			return err_errno(e, "--env-file %s: setenv", path);
		}
	}
	buf_release(&b);
	return 0;
}

static const char *env_or(const char *name, const char *fallback)
{
	const char *v = getenv(name);

	return v && *v ? v : fallback;
}

/* Strings the config owns (read from the state file or built here). */
static const char *own(struct sc_config *c, char *s)
{
	if (c->nown < sizeof(c->own) / sizeof(c->own[0]))
		c->own[c->nown++] = s;
	return s;	/* past the table (never: 8 slots, 5 users) it lives as long as the process */
}

void sc_config_release(struct sc_config *c)
{
	for (size_t i = 0; i < c->nown; i++)
		free(c->own[i]);
	c->nown = 0;
}

static const char *home_path(struct sc_config *c, const char *rel)
{
	const char *home = env_or("HOME", "/tmp");
	size_t n = strlen(home) + strlen(rel) + 2;
	char *p = xmalloc(n);

	snprintf(p, n, "%s/%s", home, rel);
	return own(c, p);
}

/* Fill what flags did not give from the environment; data/zfs only after the
 * state file has had its say (sc_state_load), server likewise. */
void sc_config_defaults(struct sc_config *c)
{
	bool root = geteuid() == 0;

	if (!c->token)
		c->token = env_or("DENV_JOIN_TOKEN", NULL);
	if (!c->state_path)
		c->state_path = root ? "/etc/denv/host.json" : home_path(c, ".denv/host.json");
	if (!c->probe_image)
		c->probe_image = env_or("DENV_PROBE_IMAGE", SC_PROBE_IMAGE_DEFAULT);
	if (!c->probe_url)
		c->probe_url = env_or("DENV_PROBE_URL", SC_PROBE_URL_DEFAULT);
	if (!c->probe_mode)
		c->probe_mode = env_or("DENV_PROBE_MODE", "auto");
	if (!c->runtime)
		c->runtime = env_or("DENV_RUNTIME", "runc");
	if (!c->disk_limit)
		c->disk_limit = env_or("DENV_DISK_LIMIT", "");
	if (!c->ingress_domain)
		c->ingress_domain = env_or("DENV_INGRESS_DOMAIN", NULL);
	if (!c->ingress_listen)
		c->ingress_listen = env_or("DENV_INGRESS_LISTEN", NM_LISTEN_DEFAULT);
	if (!c->ingress_ca_cert)
		c->ingress_ca_cert = env_or("DENV_INGRESS_CA_CERT", NULL);
	if (!c->ingress_ca_key)
		c->ingress_ca_key = env_or("DENV_INGRESS_CA_KEY", NULL);
	if (!c->ingress_cert_days)
		c->ingress_cert_days = env_or("DENV_INGRESS_CERT_DAYS", "30");
}

int sc_parse_disk_mb(const char *s, int64_t *mb)
{
	struct json *v = json_new_str(s ? s : "");
	double bytes = 0;
	int rc = spec_size_bytes(v, &bytes);

	json_free(v);
	if (rc < 0 || bytes < SPEC_MIN_DISK_MB * 1048576.0 || bytes / 1048576.0 > (double)SPEC_MAX_DISK_MB)
		return -1;
	*mb = (int64_t)(bytes / 1048576.0);
	return 0;
}

bool sc_probe_mode_ok(const char *mode)
{
	return str_eq(mode, "auto") || str_eq(mode, "netns") || str_eq(mode, "container");
}

static void fill_from_env(struct sc_config *c)
{
	bool root = geteuid() == 0;

	if (!c->server)
		c->server = env_or("DENV_SERVER", NULL);
	if (!c->data_dir)
		c->data_dir = env_or("DENV_DATA_DIR", root ? "/var/lib/denv" : home_path(c, ".denv/data"));
	if (!c->zfs_pool)
		c->zfs_pool = env_or("DENV_ZFS_POOL", NULL);
	if (!c->btrfs_root)
		c->btrfs_root = env_or("DENV_BTRFS_ROOT", NULL);
}

static const char *keep(struct sc_config *c, const char *s)
{
	return s && *s ? own(c, xstrdup(s)) : NULL;
}

/* Read the state file if there is one. A missing file is not an error. */
int sc_state_load(struct sc_config *c, struct err *e)
{
	struct json *j = NULL;
	const char *s;

	if (!fs_exists(c->state_path)) {
		fill_from_env(c);
		return 0;
	}
	if (json_parse_file(c->state_path, SC_STATE_FILE_MAX, &j, e) < 0 || j->type != JSON_OBJECT) {
		json_free(j);
		if (!e->msg[0])
			err_set(e, "not a JSON object");
		return err_prefix(e, "state file %s", c->state_path);
	}
	if (!c->server_flag && (s = json_get_str(j, "server")) && *s)
		c->server = keep(c, s);
	if (!c->data_flag && (s = json_get_str(j, "data_dir")) && *s)
		c->data_dir = keep(c, s);
	if (!c->zfs_flag && (s = json_get_str(j, "zfs_pool")) && *s)
		c->zfs_pool = keep(c, s);
	if ((s = json_get_str(j, "host_id")))
		str_copy(c->host_id, sizeof(c->host_id), s);
	if ((s = json_get_str(j, "secret")))
		str_copy(c->secret, sizeof(c->secret), s);
	json_free(j);
	fill_from_env(c);
	return 0;
}

int sc_state_save(const struct sc_config *c, struct err *e)
{
	struct json *j = json_new_object();
	char dir[SC_STATE_DIR_MAX], *slash;
	char *text;
	int rc;

	if (str_copy(dir, sizeof(dir), c->state_path) < 0)
		return err_set(e, "state file path too long");
	if ((slash = strrchr(dir, '/')) && slash != dir) {
		*slash = '\0';
		if (fs_mkdir_p(dir, 0700, e) < 0)
			return err_prefix(e, "state file");
	}
	json_object_set_str(j, "server", c->server ? c->server : "");
	json_object_set_str(j, "host_id", c->host_id);
	json_object_set_str(j, "secret", c->secret);
	json_object_set_str(j, "data_dir", c->data_dir ? c->data_dir : "");
	json_object_set_str(j, "zfs_pool", c->zfs_pool ? c->zfs_pool : "");
	text = json_to_string(j, JSON_PRETTY);
	json_free(j);
	rc = fs_write_atomic(c->state_path, text, strlen(text), 0600, e);
	memset(text, 0, strlen(text));	/* it held the secret */
	free(text);
	return rc < 0 ? err_prefix(e, "state file %s", c->state_path) : 0;
}

/* "URL[,URL...]": each URL's stream URL into out[0..*n). */
int sc_stream_urls(const char *servers, char out[][SC_URL_MAX], size_t max, size_t *n, struct err *e)
{
	const char *p = servers;

	*n = 0;
	if (!servers || !*servers)
		return sc_stream_url(servers, out[0], SC_URL_MAX, e);
	for (;;) {
		size_t len = strcspn(p, ",");
		char one[SC_URL_MAX], *u;

		if (*n == max)
			return err_set(e, "--server: more than %zu control plane URLs", max);
		if (len >= sizeof(one))
			return err_set(e, "--server: URL too long");
		memcpy(one, p, len);
		one[len] = '\0';
		u = str_trim(one);
		if (!*u)
			return err_set(e, "--server %s: an empty URL in the list", servers);
		if (sc_stream_url(u, out[*n], SC_URL_MAX, e) < 0)
			return -1;
		(*n)++;
		if (!p[len])
			return 0;
		p += len + 1;
	}
}

/* http://h[:p][/base] -> ws://h[:p][/base]/v1/hosts/stream (https -> wss). */
int sc_stream_url(const char *server, char *out, size_t n, struct err *e)
{
	const char *rest, *scheme;
	size_t len;
	int w;

	if (!server || !*server)
		return err_set(e, "no control plane URL: give --server or DENV_SERVER");
	if (str_has_prefix(server, "http://")) {
		scheme = "ws://";
		rest = server + 7;
	} else if (str_has_prefix(server, "https://")) {
		scheme = "wss://";
		rest = server + 8;
	} else {
		return err_set(e, "--server %s: must start with http:// or https://", server);
	}
	len = strlen(rest);
	while (len > 0 && rest[len - 1] == '/')
		len--;
	if (len == 0)
		return err_set(e, "--server %s: no host", server);
	w = snprintf(out, n, "%s%.*s/v1/hosts/stream", scheme, (int)len, rest);
	if (w < 0 || (size_t)w >= n)
		return err_set(e, "--server: URL too long");
	return 0;
}
