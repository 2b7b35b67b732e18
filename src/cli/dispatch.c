/*
 * dispatch.c: from argv to one command of the table: global flags, groups
 * and their subcommands, help, the credential check, exit codes.
 */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/str.h"

#ifndef CLI_VERSION
#error "CLI_VERSION comes from the VERSION file (the Makefile passes it)"
#endif

const char *cli_version(void)
{
	return CLI_VERSION;
}

static void print_flags(FILE *f, const struct cli_flag *flags)
{
	if (!flags || !flags[0].name)
		return;
	fprintf(f, "\nflags:\n");
	for (int i = 0; flags[i].name; i++) {
		char left[64];

		if (flags[i].short_name)
			snprintf(left, sizeof(left), "-%c, --%s%s%s", flags[i].short_name, flags[i].name,
				 flags[i].metavar ? " " : "", flags[i].metavar ? flags[i].metavar : "");
		else
			snprintf(left, sizeof(left), "--%s%s%s", flags[i].name, flags[i].metavar ? " " : "",
				 flags[i].metavar ? flags[i].metavar : "");
		fprintf(f, "  %-24s %s\n", left, flags[i].help);
	}
}

void cli_usage(FILE *f, const struct cli_cmd *parent, const struct cli_cmd *cmd)
{
	const char *pname = parent ? parent->name : "";
	const char *sep = parent ? " " : "";

	if (cmd->subs) {
		fprintf(f, "usage: denv %s <command> [flags]\n\n%s\n\ncommands:\n", cmd->name, cmd->summary);
		for (const struct cli_cmd *s = cmd->subs; s->name; s++)
			fprintf(f, "  %-12s %s\n", s->name, s->summary);
		fprintf(f, "\nRun 'denv %s <command> --help' for its flags.\n", cmd->name);
		return;
	}
	fprintf(f, "usage: denv %s%s%s%s%s%s\n\n%s\n", pname, sep, cmd->name,
		cmd->flags && cmd->flags[0].name ? " [flags]" : "", cmd->args && *cmd->args ? " " : "",
		cmd->args ? cmd->args : "", cmd->summary);
	print_flags(f, cmd->flags);
	if (cmd->notes)
		fprintf(f, "\n%s", cmd->notes);
	fprintf(f, "\nFlags may come before or after the arguments; an environment is an id\n"
		   "(env_...), <project>/<env>, or a bare name that one project alone has.\n");
}

static void main_usage(FILE *f, const struct cli_cmd *const *table)
{
	fprintf(f, "usage: denv [--server URL] <command> [flags] [arguments]\n\ncommands:\n");
	for (int i = 0; table[i]; i++)
		fprintf(f, "  %-12s %s\n", table[i]->name, table[i]->summary);
	fprintf(f, "\nRun 'denv <command> --help' for a command's flags. Configuration: DENV_API_KEY,\n"
		   "DENV_SERVER, or the file written by 'denv login'. See denv(1).\n\n"
		   "Exit status: 0 success, 1 an error (a \"denv: \" line on stderr), 2 a usage\n"
		   "error; exec exits with the command's own code (124 timed out, 125 denv\n"
		   "could not run it).\n");
}

static const struct cli_cmd *lookup(const struct cli_cmd *const *table, const struct cli_cmd *subs,
				    const char *name)
{
	if (table) {
		for (int i = 0; table[i]; i++)
			if (str_eq(table[i]->name, name))
				return table[i];
		return NULL;
	}
	for (const struct cli_cmd *s = subs; s->name; s++)
		if (str_eq(s->name, name))
			return s;
	return NULL;
}

static int usage_error(const struct cli_cmd *parent, const struct cli_cmd *cmd, const char *msg)
{
	fprintf(stderr, "denv: %s\n", msg);
	cli_usage(stderr, parent, cmd);
	return cmd->own_fail ? cmd->own_fail : CLI_USAGE;
}

/* A command whose run returns exit codes to pass on (exec). */
static int run_own(struct cli *c, const struct cli_cmd *parent, const struct cli_cmd *cmd,
		   const struct cli_args *a, struct err *e)
{
	int rc;

	if (!cmd->no_auth && cli_need_key(c, e) < 0)
		rc = -1;
	else
		rc = cmd->run(c, a, e);
	if (rc == CLI_RUN_USAGE)
		return usage_error(parent, cmd, e->msg);
	if (rc < 0) {
		fprintf(stderr, "denv: %s\n", e->msg[0] ? e->msg : "failed");
		return cmd->own_fail;
	}
	/* The code is the command's; a message beside it (a timeout) is ours. */
	if (e->msg[0])
		fprintf(stderr, "denv: %s\n", e->msg);
	return rc;
}

/* Positional count check, then the credential, then the command. */
static int run_cmd(struct cli *c, const struct cli_cmd *parent, const struct cli_cmd *cmd, int argc,
		   char **argv)
{
	struct cli_args a;
	struct err e;
	char what[80];
	int rc;

	err_clear(&e);
	if (cli_args_parse(cmd->flags, cmd->stop_after, argc, argv, &a, &e) < 0)
		return usage_error(parent, cmd, e.msg);
	if (a.help) {
		cli_usage(stdout, parent, cmd);
		cli_args_release(&a);
		return CLI_OK;
	}
	if (a.npos < cmd->min_pos || (cmd->max_pos >= 0 && a.npos > cmd->max_pos)) {
		snprintf(what, sizeof(what), a.npos < cmd->min_pos ? "missing arguments" : "too many arguments");
		cli_args_release(&a);
		return usage_error(parent, cmd, what);
	}
	c->verbose = cli_flag_bool(&a, "verbose", false);
	if (cmd->own_fail) {
		rc = run_own(c, parent, cmd, &a, &e);
		cli_args_release(&a);
		return rc;
	}
	if (!cmd->no_auth && cli_need_key(c, &e) < 0) {
		rc = CLI_FAIL;
	} else {
		rc = cmd->run(c, &a, &e);
		if (rc < 0)
			rc = CLI_FAIL;
	}
	cli_args_release(&a);
	if (rc == CLI_USAGE)
		return usage_error(parent, cmd, e.msg);
	if (rc != CLI_OK && e.msg[0])
		fprintf(stderr, "denv: %s\n", e.msg);
	return rc;
}

/* A group: the next word names the subcommand. */
static int run_group(struct cli *c, const struct cli_cmd *g, int argc, char **argv)
{
	const struct cli_cmd *sub;
	char msg[160];

	if (argc < 1 || str_eq(argv[0], "--help") || str_eq(argv[0], "-h") || str_eq(argv[0], "help")) {
		cli_usage(argc < 1 ? stderr : stdout, NULL, g);
		return argc < 1 ? CLI_USAGE : CLI_OK;
	}
	sub = lookup(NULL, g->subs, argv[0]);
	if (!sub) {
		snprintf(msg, sizeof(msg), "unknown command \"%s %.60s\"", g->name, argv[0]);
		return usage_error(NULL, g, msg);
	}
	return run_cmd(c, g, sub, argc - 1, argv + 1);
}

/* Global flags before the command: --server URL, --help, --version. */
static int globals(int argc, char **argv, int *i, const char **server)
{
	while (*i < argc && argv[*i][0] == '-') {
		const char *w = argv[*i];

		if (str_eq(w, "--server") || str_eq(w, "-server")) {
			if (*i + 1 >= argc)
				return -1;
			*server = argv[++*i];
		} else if (str_has_prefix(w, "--server=")) {
			*server = w + 9;
		} else if (str_eq(w, "--help") || str_eq(w, "-h") || str_eq(w, "-help")) {
			return 1;
		} else if (str_eq(w, "--version")) {
			return 2;
		} else {
			return -1;
		}
		++*i;
	}
	return 0;
}

int cli_main(const struct cli_cmd *const *table, int argc, char **argv,
	     const char *(*getenv_fn)(const char *))
{
	const char *server = NULL;
	const struct cli_cmd *cmd;
	struct cli_env env;
	struct cli c;
	struct err e;
	int i = 1, g, rc;

	g = globals(argc, argv, &i, &server);
	if (g == 1 || (i < argc && str_eq(argv[i], "help") && i + 1 >= argc)) {
		main_usage(stdout, table);
		return CLI_OK;
	}
	if (g == 2) {
		printf("denv %s\n", CLI_VERSION);
		return CLI_OK;
	}
	if (g < 0 || i >= argc) {
		if (g < 0)
			fprintf(stderr, "denv: unknown or incomplete global flag %s\n", argv[i]);
		main_usage(stderr, table);
		return CLI_USAGE;
	}
	/* "denv help fork" is "denv fork --help". */
	if (str_eq(argv[i], "help") && (cmd = lookup(table, NULL, argv[i + 1]))) {
		cli_usage(stdout, NULL, cmd);
		return CLI_OK;
	}
	cmd = lookup(table, NULL, argv[i]);
	if (!cmd) {
		fprintf(stderr, "denv: unknown command \"%.60s\"\n", argv[i]);
		main_usage(stderr, table);
		return CLI_USAGE;
	}
	env.flag_server = server && *server ? server : NULL;
	env.api_key = getenv_fn("DENV_API_KEY");
	env.server = getenv_fn("DENV_SERVER");
	env.xdg_config_home = getenv_fn("XDG_CONFIG_HOME");
	env.home = getenv_fn("HOME");
	cli_init(&c);
	if (cli_config_resolve(&env, &c.cfg, &e) < 0) {
		/* A broken config file must not lock out `denv login`, which rewrites it. */
		if (!cmd->no_auth) {
			fprintf(stderr, "denv: %s\n", e.msg);
			cli_release(&c);
			return cmd->own_fail ? cmd->own_fail : CLI_FAIL;
		}
		env.xdg_config_home = env.home = env.api_key = NULL;
		cli_config_resolve(&env, &c.cfg, &e);
	}
	if (cmd->subs)
		rc = run_group(&c, cmd, argc - i - 1, argv + i + 1);
	else
		rc = run_cmd(&c, NULL, cmd, argc - i - 1, argv + i + 1);
	cli_release(&c);
	return rc;
}
