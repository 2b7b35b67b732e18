/* config.c: where the server and the credential come from. See cli.h. */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

#include "base/fs.h"
#include "base/str.h"
#include "json/json.h"

/* An unset and an empty variable mean the same: nothing given. */
static const char *nonempty(const char *s)
{
	return s && *s ? s : NULL;
}

int cli_config_path(const struct cli_env *env, struct buf *out, struct err *e)
{
	const char *xdg = nonempty(env->xdg_config_home);

	if (xdg && xdg[0] == '/')
		return buf_addf(out, "%s/denv/config.json", xdg) < 0 ? err_set(e, "config path too long") : 0;
	if (!nonempty(env->home))
		return err_set(e, "neither XDG_CONFIG_HOME nor HOME is set: cannot find the config file");
	return buf_addf(out, "%s/.config/denv/config.json", env->home) < 0 ? err_set(e, "config path too long") : 0;
}

/* Copy the string member key of doc (NULL when absent or empty). */
static char *member(const struct json *doc, const char *key)
{
	const char *s = json_get_str(doc, key);

	return s && *s ? xstrdup(s) : NULL;
}

/* Read the file's three keys. A missing file leaves them NULL. */
static int load_file(struct cli_config *cfg, char **server, struct err *e)
{
	struct buf text = BUF_INIT;
	struct json *doc = NULL;

	*server = NULL;
	if (!fs_exists(cfg->path))
		return 0;
	if (fs_read_file(cfg->path, &text, CLI_CONFIG_MAX, e) < 0 ||
	    json_parse(text.data, text.len, NULL, &doc, e) < 0) {
		buf_release(&text);
		return err_prefix(e, "config %s", cfg->path);
	}
	buf_release(&text);
	if (doc->type != JSON_OBJECT) {
		json_free(doc);
		return err_set(e, "config %s: not a JSON object", cfg->path);
	}
	cfg->api_key = member(doc, "api_key");
	cfg->team = member(doc, "team");
	*server = member(doc, "server");
	if (cfg->api_key)
		cfg->key_source = "config file";
	json_free(doc);
	return 0;
}

/* Drop trailing slashes so that paths can be appended as "/v1/...". */
static char *clean_server(const char *s)
{
	char *c = xstrdup(s);
	size_t n = strlen(c);

	while (n > 0 && c[n - 1] == '/')
		c[--n] = '\0';
	return c;
}

int cli_config_resolve(const struct cli_env *env, struct cli_config *cfg, struct err *e)
{
	struct buf path = BUF_INIT;
	char *file_server = NULL;
	const char *server;

	memset(cfg, 0, sizeof(*cfg));
	if (cli_config_path(env, &path, e) == 0)
		cfg->path = buf_detach(&path, NULL);
	buf_release(&path);
	if (nonempty(env->api_key)) {
		cfg->api_key = xstrdup(env->api_key);
		cfg->key_source = "DENV_API_KEY";
	} else if (cfg->path && load_file(cfg, &file_server, e) < 0) {
		cli_config_release(cfg);
		return -1;
	}
	server = nonempty(env->flag_server);
	if (!server)
		server = nonempty(env->server);
	if (!server)
		server = file_server;
	if (!server)
		server = CLI_DEFAULT_SERVER;
	cfg->server = clean_server(server);
	free(file_server);
	return 0;
}

void cli_config_release(struct cli_config *cfg)
{
	free(cfg->server);
	free(cfg->api_key);
	free(cfg->team);
	free(cfg->path);
	memset(cfg, 0, sizeof(*cfg));
}

/* The directory part of path, for mkdir -p. */
static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash && slash != path ? xstrndup(path, (size_t)(slash - path)) : xstrdup("/");
}

int cli_config_save(const char *path, const char *server, const char *api_key, const char *team,
		    struct err *e)
{
	struct json *doc = json_new_object();
	struct buf text = BUF_INIT;
	char *dir = dir_of(path);
	int rc = -1;

	json_object_set_str(doc, "server", server);
	json_object_set_str(doc, "api_key", api_key);
	json_object_set_str(doc, "team", team ? team : "");
	if (json_write(&text, doc, JSON_PRETTY) < 0) {
		err_set(e, "config: cannot encode");
		goto out;
	}
	/* 0700: the directory holds a secret. */
	if (fs_mkdir_p(dir, 0700, e) < 0 || fs_write_atomic(path, text.data, text.len, 0600, e) < 0) {
		err_prefix(e, "config %s", path);
		goto out;
	}
	rc = 0;
out:
	free(dir);
	buf_release(&text);
	json_free(doc);
	return rc;
}
