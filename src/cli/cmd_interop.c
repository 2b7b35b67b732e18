/*
 * cmd_interop.c: denv import harbor|karotte DIR and denv export --harbor|--openenv REF DIR.
 *
 * Both run the Python package's denv.interop module instead of working in C:
 * a Harbor task is TOML (task.toml), a Karotte environment is Python code
 * (its steps are Python objects only Python can load), and an exported OpenEnv
 * environment is a Python server. Those formats' own parsers live in Python,
 * and a second reader of them in C would be one more thing to keep in step.
 * The verb checks its arguments here (so --help and usage errors are the
 * CLI's), hands the resolved server and key over in DENV_SERVER and
 * DENV_API_KEY, and replaces itself with $DENV_PYTHON (default python3).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/str.h"
#include "cli/cli.h"

#define INTEROP_PYTHON_DEFAULT "python3"
#define INTEROP_MODULE "denv.interop"
#define INTEROP_ARGV_MAX 16	/* python -m module verb format a b + four flags with values */

/* argv builder with a bound: the caller's table never overflows. */
struct argv_list {
	const char *v[INTEROP_ARGV_MAX + 1];
	int n;
};

static int argv_add(struct argv_list *l, const char *s, struct err *e)
{
	if (l->n >= INTEROP_ARGV_MAX)
		return err_set(e, "internal: too many arguments for %s", INTEROP_MODULE);
	l->v[l->n++] = s;
	l->v[l->n] = NULL;
	return 0;
}

/* Append "--flag value" when the flag was given. */
static int argv_flag(struct argv_list *l, const struct cli_args *a, const char *flag, const char *opt,
		     struct err *e)
{
	const char *v = cli_flag_str(a, flag);

	if (!v)
		return 0;
	if (!*v)
		return err_set(e, "--%s: empty", flag);
	return argv_add(l, opt, e) < 0 || argv_add(l, v, e) < 0 ? -1 : 0;
}

static const char *interop_python(void)
{
	const char *py = getenv("DENV_PYTHON");

	return py && *py ? py : INTEROP_PYTHON_DEFAULT;
}

/* The module's first words: python -m denv.interop VERB FORMAT. */
static void argv_start(struct argv_list *l, const char *verb, const char *format)
{
	l->n = 0;
	l->v[l->n++] = interop_python();
	l->v[l->n++] = "-m";
	l->v[l->n++] = INTEROP_MODULE;
	l->v[l->n++] = verb;
	l->v[l->n++] = format;
	l->v[l->n] = NULL;
}

/* Replace this process with the module; returns only on failure (-1 with e). */
static int hand_over(struct cli *c, const struct argv_list *l, struct err *e)
{
	if (setenv("DENV_SERVER", c->cfg.server, 1) < 0 ||
	    (c->cfg.api_key && setenv("DENV_API_KEY", c->cfg.api_key, 1) < 0))
		return err_set(e, "setenv: %s", strerror(errno));
	fflush(stdout);
	execvp(l->v[0], (char *const *)l->v);
	return err_set(e, "cannot run %s (%s): set DENV_PYTHON to a Python 3.11+ that has the denv "
		       "package (pip install denv)", l->v[0], strerror(errno));
}

/* A usage error: the message in e, CLI_USAGE for the dispatcher. */
static int usage(struct err *e, const char *msg)
{
	err_set(e, "%s", msg);
	return CLI_USAGE;
}

/* ---- import ---- */

/* Both verbs' --help: they run the same Python module. */
static const char interop_notes[] = "Runs the Python package's denv.interop module: DENV_PYTHON (default python3)\n"
				    "must have the denv package. See denv(1), IMPORT AND EXPORT.\n";

static const struct cli_flag import_flags[] = {
	{ "out", 'o', CLI_STR, "DIR", "project directory to write (default ./denv-<DIR's name>; must be empty)" },
	{ "deploy", 0, CLI_BOOL, NULL, "then create the project and deploy it (waits for the deployment)" },
	{ "project", 0, CLI_STR, "NAME", "with --deploy: the project (default: the output directory's name)" },
	{ "env", 0, CLI_STR, "NAME", "with --deploy: the environment (default alpha)" },
	{ NULL, 0, 0, NULL, NULL },
};

static int run_import(struct cli *c, const struct cli_args *a, struct err *e)
{
	struct argv_list l;
	bool deploy = cli_flag_bool(a, "deploy", false);

	if (!str_eq(a->pos[0], "harbor") && !str_eq(a->pos[0], "karotte")) {
		err_set(e, "import: unknown format \"%s\" (harbor or karotte)", a->pos[0]);
		return CLI_USAGE;
	}
	if (!deploy && (cli_flag_set(a, "project") || cli_flag_set(a, "env")))
		return usage(e, "import: --project and --env need --deploy");
	if (deploy && cli_need_key(c, e) < 0)
		return -1;
	argv_start(&l, "import", a->pos[0]);
	if (argv_add(&l, a->pos[1], e) < 0 || argv_flag(&l, a, "out", "--out", e) < 0 ||
	    argv_flag(&l, a, "project", "--project", e) < 0 || argv_flag(&l, a, "env", "--env", e) < 0 ||
	    (deploy && argv_add(&l, "--deploy", e) < 0))
		return -1;
	return hand_over(c, &l, e);
}

const struct cli_cmd cli_cmd_import = {
	.name = "import", .args = "harbor|karotte <dir>",
	.summary = "turn a Harbor task or a Karotte environment into a denv project (compose + x-denv)",
	.flags = import_flags, .min_pos = 2, .max_pos = 2, .no_auth = true, .run = run_import,
	.notes = interop_notes,
};

/* ---- export ---- */

static const struct cli_flag export_flags[] = {
	{ "harbor", 0, CLI_BOOL, NULL, "write one Harbor task directory per task of the project" },
	{ "openenv", 0, CLI_BOOL, NULL, "write an OpenEnv environment whose reset forks the version" },
	{ "project-dir", 0, CLI_STR, "DIR", "with --harbor: where tasks/*/instruction.md are (default .)" },
	{ NULL, 0, 0, NULL, NULL },
};

static int run_export(struct cli *c, const struct cli_args *a, struct err *e)
{
	struct argv_list l;
	bool harbor = cli_flag_bool(a, "harbor", false), openenv = cli_flag_bool(a, "openenv", false);

	if (harbor == openenv)
		return usage(e, "export: give exactly one of --harbor and --openenv");
	if (openenv && cli_flag_set(a, "project-dir"))
		return usage(e, "export: --project-dir is for --harbor");
	if (cli_need_key(c, e) < 0)	/* after the usage checks: no_auth defers it here */
		return -1;
	argv_start(&l, "export", harbor ? "harbor" : "openenv");
	if (argv_add(&l, a->pos[0], e) < 0 || argv_add(&l, a->pos[1], e) < 0 ||
	    argv_flag(&l, a, "project-dir", "--project-dir", e) < 0)
		return -1;
	return hand_over(c, &l, e);
}

const struct cli_cmd cli_cmd_export = {
	.name = "export", .args = "<project@version|env[@version]> <dir>",
	.summary = "write a version as Harbor tasks (--harbor) or an OpenEnv environment (--openenv)",
	.flags = export_flags, .min_pos = 2, .max_pos = 2, .no_auth = true, .run = run_export,
	.notes = interop_notes,
};
