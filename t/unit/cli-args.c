/* Unit tests: the CLI's flag parsing and dispatch (exit codes, usage, help). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/fs.h"
#include "base/str.h"
#include "cli/cli.h"
#include "tap.h"

static const struct cli_flag flags[] = {
	{ "name", 0, CLI_STR, "N", "a name" },
	{ "file", 'f', CLI_STR, "F", "a file" },
	{ "service", 0, CLI_STR, "S", "a service" },
	{ "wait", 0, CLI_BOOL, NULL, "wait" },
	{ "interactive", 'i', CLI_BOOL, NULL, "stdin" },
	{ "tty", 't', CLI_BOOL, NULL, "a terminal" },
	{ 0 },
};

/* Parse a space-separated command line (no quoting needed in these cases). */
static int parse(const char *line, int stop_after, struct cli_args *a, struct err *e)
{
	static char *words[64];
	static char copy[1024];
	int n = 0;

	str_copy(copy, sizeof(copy), line);
	for (char *p = copy; *p && n < 63;) {
		while (*p == ' ')
			*p++ = '\0';
		if (!*p)
			break;
		words[n++] = p;
		while (*p && *p != ' ')
			p++;
	}
	words[n] = NULL;
	return cli_args_parse(flags, stop_after, n, words, a, e);
}

static void positions(void)
{
	static const char *const lines[] = {
		"alpha --name f1", "--name f1 alpha", "--name=f1 alpha", "alpha --name=f1", "-name f1 alpha",
		"alpha -name=f1",
	};
	struct cli_args a;
	struct err e;

	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		int r = parse(lines[i], 0, &a, &e);

		ok(r == 0 && a.npos == 1 && str_eq(a.pos[0], "alpha") && str_eq(cli_flag_str(&a, "name"), "f1"),
		   "\"%s\": one positional alpha, --name f1", lines[i]);
		cli_args_release(&a);
	}
	ok(parse("a -f x.yaml b", 0, &a, &e) == 0 && a.npos == 2 && str_eq(cli_flag_str(&a, "file"), "x.yaml") &&
		   str_eq(a.pos[1], "b"),
	   "short -f takes a value, positionals on both sides");
	cli_args_release(&a);
	ok(parse("a --file=y b", 0, &a, &e) == 0 && str_eq(cli_flag_str(&a, "file"), "y"), "--file=y");
	cli_args_release(&a);
	ok(parse("--name a --name b x", 0, &a, &e) == 0 && str_eq(cli_flag_str(&a, "name"), "b"), "the last value wins");
	cli_args_release(&a);
	ok(parse("x -- --name y", 0, &a, &e) == 0 && a.npos == 3 && str_eq(a.pos[1], "--name") &&
		   !cli_flag_set(&a, "name"),
	   "-- ends the flags");
	cli_args_release(&a);
	ok(parse("- x", 0, &a, &e) == 0 && a.npos == 2 && str_eq(a.pos[0], "-"), "a lone - is a positional");
	cli_args_release(&a);
	ok(parse("--name= x", 0, &a, &e) == 0 && str_eq(cli_flag_str(&a, "name"), ""), "--name= gives an empty value");
	cli_args_release(&a);
}

static void booleans(void)
{
	struct cli_args a;
	struct err e;
	bool b;

	ok(parse("x", 0, &a, &e) == 0 && cli_flag_bool(&a, "wait", true) && !cli_flag_set(&a, "wait"),
	   "absent boolean takes the default");
	cli_args_release(&a);
	ok(parse("x --wait", 0, &a, &e) == 0 && cli_flag_bool(&a, "wait", false), "--wait is true");
	cli_args_release(&a);
	ok(parse("--wait=false x", 0, &a, &e) == 0 && !cli_flag_bool(&a, "wait", true) && a.npos == 1,
	   "--wait=false is false");
	cli_args_release(&a);
	ok(parse("x -wait=0", 0, &a, &e) == 0 && !cli_flag_bool(&a, "wait", true), "-wait=0 is false");
	cli_args_release(&a);
	ok(parse("--wait false", 0, &a, &e) == 0 && a.npos == 1 && str_eq(a.pos[0], "false"),
	   "a boolean takes no separate value (Go's rule)");
	cli_args_release(&a);
	ok(parse("--wait=maybe", 0, &a, &e) < 0 && strstr(e.msg, "invalid boolean"), "--wait=maybe is refused: %s",
	   e.msg);
	ok(cli_parse_bool("True", &b) == 0 && b && cli_parse_bool("F", &b) == 0 && !b && cli_parse_bool("yes", &b) < 0,
	   "Go's boolean spellings");
	/* docker's -it: short booleans in one word. */
	ok(parse("-it x", 0, &a, &e) == 0 && cli_flag_bool(&a, "interactive", false) && cli_flag_bool(&a, "tty", false) &&
		   a.npos == 1,
	   "-it sets -i and -t");
	cli_args_release(&a);
	ok(parse("x -ti", 0, &a, &e) == 0 && cli_flag_bool(&a, "interactive", false) && cli_flag_bool(&a, "tty", false),
	   "-ti too");
	cli_args_release(&a);
	ok(parse("-i x", 0, &a, &e) == 0 && cli_flag_bool(&a, "interactive", false) && !cli_flag_bool(&a, "tty", false),
	   "-i alone");
	cli_args_release(&a);
	ok(parse("-if x", 0, &a, &e) < 0 && str_eq(e.msg, "unknown flag -if"), "a group with a valued flag: %s", e.msg);
	ok(parse("-iz x", 0, &a, &e) < 0 && str_eq(e.msg, "unknown flag -iz"), "a group with an unknown one: %s", e.msg);
}

static void errors_and_help(void)
{
	struct cli_args a;
	struct err e;

	ok(parse("x --bogus", 0, &a, &e) < 0, "unknown flag fails");
	is_str(e.msg, "unknown flag --bogus", "message names the flag");
	ok(parse("-z", 0, &a, &e) < 0 && str_eq(e.msg, "unknown flag -z"), "unknown short flag: %s", e.msg);
	ok(parse("--bogus=1", 0, &a, &e) < 0 && str_eq(e.msg, "unknown flag --bogus"), "value not in the message");
	ok(parse("x --name", 0, &a, &e) < 0 && strstr(e.msg, "needs a value"), "missing value: %s", e.msg);
	ok(parse("x --help", 0, &a, &e) == 0 && a.help, "--help after a positional");
	cli_args_release(&a);
	ok(parse("-h x", 0, &a, &e) == 0 && a.help, "-h");
	cli_args_release(&a);
	ok(parse("-- --help", 0, &a, &e) == 0 && !a.help && a.npos == 1, "--help after -- is an argument");
	cli_args_release(&a);
}

static void exec_tail(void)
{
	struct cli_args a;
	struct err e;

	ok(parse("--service box env1 sh -c id -u", 1, &a, &e) == 0 && a.npos == 5 && str_eq(a.pos[2], "-c") &&
		   str_eq(a.pos[4], "-u") && str_eq(cli_flag_str(&a, "service"), "box"),
	   "exec: flags end at the command after the environment");
	cli_args_release(&a);
	ok(parse("env1 --service box -- ls --name", 1, &a, &e) == 0 && a.npos == 3 &&
		   str_eq(cli_flag_str(&a, "service"), "box") && str_eq(a.pos[2], "--name") && !cli_flag_set(&a, "name"),
	   "exec: flags after the environment, then -- and the argv");
	cli_args_release(&a);
	ok(parse("env1 ls --service x", 1, &a, &e) == 0 && a.npos == 4 && !cli_flag_set(&a, "service"),
	   "exec: a flag after the command belongs to the command");
	cli_args_release(&a);
}

/* ---- dispatch through cli_main with a small table ---- */

static int ran;
static char seen[256];

static int run_probe(struct cli *c, const struct cli_args *a, struct err *e)
{
	ran++;
	snprintf(seen, sizeof(seen), "%s|%s|%s", a->npos ? a->pos[0] : "", cli_flag_str(a, "name") ? cli_flag_str(a, "name") : "",
		 cli_flag_bool(a, "wait", true) ? "wait" : "nowait");
	if (a->npos && str_eq(a->pos[0], "fail"))
		return err_set(e, "it failed"), CLI_FAIL;
	return CLI_OK;
}

static const struct cli_flag probe_flags[] = {
	{ "name", 0, CLI_STR, "N", "a name" },
	CLI_FLAG_WAIT,
	{ 0 },
};

static const struct cli_cmd probe = {
	.name = "probe", .args = "<env>", .summary = "a test command", .flags = probe_flags, .min_pos = 1,
	.max_pos = 1, .run = run_probe,
};
static const struct cli_cmd open_cmd = {
	.name = "open", .summary = "needs no key", .max_pos = 0, .no_auth = true, .run = run_probe,
};
static const struct cli_cmd group_subs[] = {
	{ .name = "sub", .args = "<x>", .summary = "a subcommand", .flags = probe_flags, .min_pos = 1, .max_pos = 1,
	  .run = run_probe },
	{ 0 },
};
static const struct cli_cmd group = { .name = "group", .summary = "a group", .subs = group_subs };

/* Like exec: passes "code N" on as the exit code; its own errors are 125. */
static int run_passer(struct cli *c, const struct cli_args *a, struct err *e)
{
	int64_t code = 0;

	(void)c;
	if (str_eq(a->pos[0], "usage"))
		return err_set(e, "bad use"), CLI_RUN_USAGE;
	if (str_eq(a->pos[0], "fail"))
		return err_set(e, "could not");
	if (a->npos > 1 && str_to_i64(a->pos[1], &code) == 0)
		return (int)code;
	return 0;
}

static const struct cli_cmd passer = {
	.name = "passer", .args = "<what> [code]", .summary = "passes an exit code on", .flags = probe_flags,
	.min_pos = 1, .max_pos = 2, .own_fail = CLI_EXEC_FAIL, .run = run_passer,
};
static const struct cli_cmd *const table[] = { &probe, &open_cmd, &group, &passer, NULL };

static const char *fake_key;
static char fake_home[1024];

static const char *fake_getenv(const char *name)
{
	if (str_eq(name, "DENV_API_KEY"))
		return fake_key;
	if (str_eq(name, "HOME"))
		return fake_home;
	return NULL;
}

/* Run the CLI with stdout and stderr captured into out and err. */
static int run(const char *line, struct buf *out, struct buf *err)
{
	char *argv[32], copy[512], path_o[1100], path_e[1100];
	int argc, so = dup(1), se = dup(2), fo, fe, rc;
	struct err e;

	argv[0] = "denv";
	argc = 1;
	str_copy(copy, sizeof(copy), line);
	for (char *p = copy; *p && argc < 31;) {
		while (*p == ' ')
			*p++ = '\0';
		if (!*p)
			break;
		argv[argc++] = p;
		while (*p && *p != ' ')
			p++;
	}
	argv[argc] = NULL;
	snprintf(path_o, sizeof(path_o), "%s/out", tap_tmpdir());
	snprintf(path_e, sizeof(path_e), "%s/err", tap_tmpdir());
	fflush(stdout);
	fflush(stderr);
	fo = open(path_o, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	fe = open(path_e, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	dup2(fo, 1);
	dup2(fe, 2);
	rc = cli_main(table, argc, argv, fake_getenv);
	fflush(stdout);
	fflush(stderr);
	dup2(so, 1);
	dup2(se, 2);
	close(fo);
	close(fe);
	close(so);
	close(se);
	buf_reset(out);
	buf_reset(err);
	fs_read_file(path_o, out, 1 << 20, &e);
	fs_read_file(path_e, err, 1 << 20, &e);
	return rc;
}

static void dispatch(void)
{
	struct buf out = BUF_INIT, err = BUF_INIT;

	snprintf(fake_home, sizeof(fake_home), "%s", tap_tmpdir());
	fake_key = "dak_unit";
	ran = 0;
	is_int(run("probe alpha --name f1", &out, &err), 0, "probe alpha --name f1: exit 0");
	is_str(seen, "alpha|f1|wait", "flag after the positional reached the command");
	is_int(run("probe --wait=false --name f2 beta", &out, &err), 0, "flags first: exit 0");
	is_str(seen, "beta|f2|nowait", "--wait=false reached the command");
	is_int(run("probe alpha --nope", &out, &err), 2, "unknown flag: exit 2");
	ok(str_has_prefix(err.data, "denv: unknown flag --nope\nusage: denv probe [flags] <env>"),
	   "unknown flag: message then usage on stderr");
	is_int(run("probe", &out, &err), 2, "missing positional: exit 2");
	ok(strstr(err.data, "usage: denv probe"), "missing positional: usage");
	is_int(run("probe a b", &out, &err), 2, "too many positionals: exit 2");
	is_int(run("probe --help", &out, &err), 0, "--help: exit 0");
	ok(strstr(out.data, "usage: denv probe [flags] <env>") && strstr(out.data, "--name N") && !err.len,
	   "--help: usage with the flags on stdout");
	ran = 0;
	is_int(run("probe x -h", &out, &err), 0, "-h after a positional: exit 0, command not run");
	is_int(ran, 0, "the command did not run for --help");
	is_int(run("probe fail", &out, &err), 1, "a failing command: exit 1");
	is_str(err.data, "denv: it failed\n", "denv: <message> on stderr");
	is_int(run("nosuch", &out, &err), 2, "unknown command: exit 2");
	ok(strstr(err.data, "unknown command \"nosuch\""), "unknown command named");
	is_int(run("group sub x --name y", &out, &err), 0, "group subcommand with flags after");
	is_str(seen, "x|y|wait", "subcommand got its flags");
	is_int(run("group", &out, &err), 2, "group without subcommand: exit 2");
	is_int(run("group nope", &out, &err), 2, "group with an unknown subcommand: exit 2");
	is_int(run("group --help", &out, &err), 0, "group --help: exit 0");
	ok(strstr(out.data, "sub") && strstr(out.data, "a subcommand"), "group help lists subcommands");
	is_int(run("group sub --help", &out, &err), 0, "subcommand --help");
	ok(strstr(out.data, "usage: denv group sub [flags] <x>"), "subcommand usage names the group");
	is_int(run("--help", &out, &err), 0, "denv --help: exit 0");
	ok(strstr(out.data, "probe") && strstr(out.data, "group"), "main help lists commands");
	is_int(run("", &out, &err), 2, "no command: exit 2");
	is_int(run("help probe", &out, &err), 0, "denv help probe");
	ok(strstr(out.data, "usage: denv probe"), "help <command> prints its usage");

	is_int(run("passer code 1", &out, &err), 1, "own_fail: the command's 1 is passed on");
	is_int(err.len, 0, "with nothing on stderr");
	is_int(run("passer code 2", &out, &err), 2, "and its 2");
	is_int(run("passer fail", &out, &err), 125, "own_fail: an error of the CLI is 125");
	is_str(err.data, "denv: could not\n", "with the denv: line");
	is_int(run("passer usage", &out, &err), 125, "a usage error the command finds: 125");
	ok(strstr(err.data, "denv: bad use\nusage: denv passer"), "with the usage");
	is_int(run("passer a b c", &out, &err), 125, "too many arguments: 125");
	is_int(run("passer --nope x", &out, &err), 125, "an unknown flag: 125");

	fake_key = NULL;
	is_int(run("passer code 0", &out, &err), 125, "own_fail: no credential is 125");
	ran = 0;
	is_int(run("probe alpha", &out, &err), 1, "no credential: exit 1");
	is_str(err.data, "denv: not signed in: run `denv login` or set DENV_API_KEY\n", "the exact not-signed-in message");
	is_int(ran, 0, "the command did not run");
	is_int(run("open", &out, &err), 0, "a no-auth command runs without a key");
	is_int(run("probe --help", &out, &err), 0, "--help works without a key");
	buf_release(&out);
	buf_release(&err);
}

int main(void)
{
	positions();
	booleans();
	errors_and_help();
	exec_tail();
	dispatch();
	return tap_done();
}
