/* Unit tests: the CLI's configuration (file location, precedence, saving)
 * and <project>/<env> references. Everything lives under tap_tmpdir(). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/buf.h"
#include "base/fs.h"
#include "base/str.h"
#include "cli/cli.h"
#include "tap.h"

static char home[1024], xdg[1024];

static void write_file(const char *path, const char *text)
{
	struct err e;
	char dir[1100];

	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0';
	fs_mkdir_p(dir, 0700, &e);
	fs_write_atomic(path, text, strlen(text), 0600, &e);
}

static void paths(void)
{
	struct cli_env env = { 0 };
	struct buf p = BUF_INIT;
	struct err e;

	env.home = home;
	ok(cli_config_path(&env, &p, &e) == 0 && str_has_suffix(p.data, "/home/.config/denv/config.json"),
	   "HOME: ~/.config/denv/config.json (%s)", p.data);
	buf_reset(&p);
	env.xdg_config_home = xdg;
	ok(cli_config_path(&env, &p, &e) == 0 && str_has_suffix(p.data, "/xdg/denv/config.json") &&
		   str_has_prefix(p.data, xdg),
	   "XDG_CONFIG_HOME wins: %s", p.data);
	buf_reset(&p);
	env.xdg_config_home = "relative/dir";
	ok(cli_config_path(&env, &p, &e) == 0 && str_has_suffix(p.data, "/home/.config/denv/config.json"),
	   "a relative XDG_CONFIG_HOME is ignored");
	buf_reset(&p);
	env.xdg_config_home = "";
	ok(cli_config_path(&env, &p, &e) == 0 && str_has_prefix(p.data, home), "an empty XDG_CONFIG_HOME is ignored");
	buf_reset(&p);
	env.home = NULL;
	env.xdg_config_home = NULL;
	ok(cli_config_path(&env, &p, &e) < 0, "neither: an error (%s)", e.msg);
	buf_release(&p);
}

struct case_ {
	const char *name;
	const char *flag_server, *env_key, *env_server;
	const char *want_server, *want_key;
};

static void precedence(void)
{
	static const struct case_ cases[] = {
		{ "file only", NULL, NULL, NULL, "http://file:1", "dak_file" },
		{ "DENV_SERVER over the file's server", NULL, NULL, "http://env:2", "http://env:2", "dak_file" },
		{ "DENV_API_KEY: the file is not read", NULL, "dak_env", NULL, CLI_DEFAULT_SERVER, "dak_env" },
		{ "both variables", NULL, "dak_env", "http://env:2", "http://env:2", "dak_env" },
		{ "--server over DENV_SERVER", "http://flag:3", NULL, "http://env:2", "http://flag:3", "dak_file" },
		{ "--server over the file", "http://flag:3", NULL, NULL, "http://flag:3", "dak_file" },
		{ "--server with DENV_API_KEY", "http://flag:3/", "dak_env", "http://env:2", "http://flag:3", "dak_env" },
		{ "empty variables count as unset", NULL, "", "", "http://file:1", "dak_file" },
	};
	char path[1100];
	struct cli_config cfg;
	struct err e;

	snprintf(path, sizeof(path), "%s/denv/config.json", xdg);
	write_file(path, "{\"server\":\"http://file:1/\",\"api_key\":\"dak_file\",\"team\":\"team_1\"}");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct case_ *c = &cases[i];
		struct cli_env env = { c->flag_server, c->env_key, c->env_server, xdg, home };

		if (!ok(cli_config_resolve(&env, &cfg, &e) == 0, "%s: resolves", c->name)) {
			tap_diag("%s", e.msg);
			continue;
		}
		is_str(cfg.server, c->want_server, c->name);
		is_str(cfg.api_key, c->want_key, c->name);
		cli_config_release(&cfg);
	}
	{
		struct cli_env env = { NULL, NULL, NULL, xdg, home };

		cli_config_resolve(&env, &cfg, &e);
		is_str(cfg.team, "team_1", "team from the file");
		is_str(cfg.key_source, "config file", "key source: the file");
		cli_config_release(&cfg);
	}

	/* No file, no variables: not signed in, default server. */
	{
		char other[1100];
		struct cli_env env = { NULL, NULL, NULL, NULL, other };
		struct cli c;

		snprintf(other, sizeof(other), "%s/nobody", home);
		ok(cli_config_resolve(&env, &c.cfg, &e) == 0 && !c.cfg.api_key && str_eq(c.cfg.server, CLI_DEFAULT_SERVER),
		   "no file: no key, default server");
		ok(cli_need_key(&c, &e) < 0, "cli_need_key refuses");
		is_str(e.msg, "not signed in: run `denv login` or set DENV_API_KEY", "the exact message");
		cli_config_release(&c.cfg);
	}

	/* A malformed file is an error naming the file, unless DENV_API_KEY is set. */
	write_file(path, "{\"server\": ");
	{
		struct cli_env env = { NULL, NULL, NULL, xdg, home };

		ok(cli_config_resolve(&env, &cfg, &e) < 0 && strstr(e.msg, "config.json"), "malformed file: %s", e.msg);
		env.api_key = "dak_env";
		ok(cli_config_resolve(&env, &cfg, &e) == 0 && str_eq(cfg.api_key, "dak_env"),
		   "malformed file is not read when DENV_API_KEY is set");
		cli_config_release(&cfg);
	}
}

static void saving(void)
{
	char dir[1100], path[1200];
	struct cli_env env = { NULL, NULL, NULL, NULL, NULL };
	struct cli_config cfg;
	struct stat st;
	struct err e;
	struct buf text = BUF_INIT;

	snprintf(dir, sizeof(dir), "%s/save/denv", tap_tmpdir());
	snprintf(path, sizeof(path), "%s/config.json", dir);
	ok(cli_config_save(path, "http://s:9", "dak_secret", "team_9", &e) == 0, "save");
	ok(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "file mode 0600 (%o)", st.st_mode & 0777);
	ok(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700, "directory mode 0700 (%o)", st.st_mode & 0777);
	ok(cli_config_save(path, "http://s:10", "dak_second", "team_9", &e) == 0 && stat(path, &st) == 0 &&
		   (st.st_mode & 0777) == 0600,
	   "overwrite keeps 0600");
	fs_read_file(path, &text, 4096, &e);
	ok(strstr(text.data, "\"server\": \"http://s:10\"") && strstr(text.data, "\"api_key\": \"dak_second\"") &&
		   strstr(text.data, "\"team\": \"team_9\""),
	   "three keys written");
	env.xdg_config_home = NULL;
	{
		char x[1100];

		snprintf(x, sizeof(x), "%s/save", tap_tmpdir());
		env.xdg_config_home = x;
		ok(cli_config_resolve(&env, &cfg, &e) == 0 && str_eq(cfg.api_key, "dak_second") &&
			   str_eq(cfg.server, "http://s:10"),
		   "saved file reads back");
		cli_config_release(&cfg);
	}
	buf_release(&text);
}

static void refs(void)
{
	char p[CLI_NAME_MAX], n[CLI_NAME_MAX];
	struct err e;
	static const char *const bad[] = { "a/", "/b", "a/b/c", "", "/" };

	ok(cli_ref_split("quickstart/alpha", p, sizeof(p), n, sizeof(n), &e) == 1 && str_eq(p, "quickstart") &&
		   str_eq(n, "alpha"),
	   "project/env splits");
	ok(cli_ref_split("env_01ABC", p, sizeof(p), n, sizeof(n), &e) == 0, "an id is not split");
	ok(cli_ref_split("prj_1/branch-1", p, sizeof(p), n, sizeof(n), &e) == 1 && str_eq(p, "prj_1"),
	   "project id/env name");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(cli_ref_split(bad[i], p, sizeof(p), n, sizeof(n), &e) < 0, "\"%s\" is refused (%s)", bad[i], e.msg);
	{
		char longname[200];

		memset(longname, 'x', sizeof(longname) - 1);
		longname[sizeof(longname) - 1] = '\0';
		longname[3] = '/';
		ok(cli_ref_split(longname, p, sizeof(p), n, sizeof(n), &e) < 0, "over-long name refused");
	}
}

int main(void)
{
	snprintf(home, sizeof(home), "%s/home", tap_tmpdir());
	snprintf(xdg, sizeof(xdg), "%s/xdg", tap_tmpdir());
	paths();
	precedence();
	saving();
	refs();
	return tap_done();
}
