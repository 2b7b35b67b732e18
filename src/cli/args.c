/* args.c: flag parsing for every command. See cli.h for the rules. */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

#include "base/str.h"

/* Index of the flag called name (long, or short when len is 1), or -1. */
static int flag_index(const struct cli_flag *flags, const char *name, size_t len)
{
	for (int i = 0; flags && flags[i].name; i++) {
		if (strlen(flags[i].name) == len && strncmp(flags[i].name, name, len) == 0)
			return i;
		if (len == 1 && flags[i].short_name && flags[i].short_name == name[0])
			return i;
	}
	return -1;
}

int cli_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "1", "t", "T", "TRUE", "true", "True", NULL };
	static const char *const no[] = { "0", "f", "F", "FALSE", "false", "False", NULL };

	for (int i = 0; yes[i]; i++)
		if (str_eq(s, yes[i]))
			return *out = true, 0;
	for (int i = 0; no[i]; i++)
		if (str_eq(s, no[i]))
			return *out = false, 0;
	return -1;
}

static bool is_help(const char *name, size_t len)
{
	return (len == 4 && strncmp(name, "help", 4) == 0) || (len == 1 && name[0] == 'h');
}

/* "-it": one dash and several short boolean flags, as docker takes them. */
static int take_short_group(struct cli_args *a, const char *word, struct err *e)
{
	for (const char *p = word + 1; *p; p++) {
		int k = flag_index(a->flags, p, 1);

		if (k < 0 || a->flags[k].kind != CLI_BOOL)
			return err_set(e, "unknown flag %s", word);
	}
	for (const char *p = word + 1; *p; p++)
		a->val[flag_index(a->flags, p, 1)] = "true";
	return 0;
}

/*
 * One flag word at argv[*i] (it starts with '-' and is not "-" or "--").
 * Consumes its value from the next word when needed.
 */
static int take_flag(struct cli_args *a, int argc, char **argv, int *i, struct err *e)
{
	const char *word = argv[*i], *name = word + 1, *eq, *value = NULL;
	size_t len;
	int k;

	if (*name == '-')
		name++;
	eq = strchr(name, '=');
	len = eq ? (size_t)(eq - name) : strlen(name);
	if (eq)
		value = eq + 1;
	if (!eq && is_help(name, len) && flag_index(a->flags, name, len) < 0) {
		a->help = true;
		return 0;
	}
	k = len ? flag_index(a->flags, name, len) : -1;
	if (k < 0 && name == word + 1 && !eq && len > 1)
		return take_short_group(a, word, e);
	if (k < 0)
		return err_set(e, "unknown flag %.*s", (int)(name - word + len), word);
	if (a->flags[k].kind == CLI_BOOL) {
		bool b;

		if (value && cli_parse_bool(value, &b) < 0)
			return err_set(e, "invalid boolean value \"%s\" for --%s", value, a->flags[k].name);
		a->val[k] = value ? (b ? "true" : "false") : "true";
		return 0;
	}
	if (!value) {
		if (*i + 1 >= argc)
			return err_set(e, "flag --%s needs a value", a->flags[k].name);
		value = argv[++*i];
	}
	a->val[k] = value;
	return 0;
}

int cli_args_parse(const struct cli_flag *flags, int stop_after, int argc, char **argv,
		   struct cli_args *a, struct err *e)
{
	bool tail = false;

	memset(a, 0, sizeof(*a));
	a->flags = flags;
	for (int n = 0; flags && flags[n].name; n++)
		if (n >= CLI_MAX_FLAGS)
			return err_set(e, "too many flags declared");
	if (argc > CLI_MAX_ARGS)
		return err_set(e, "too many arguments (at most %d)", CLI_MAX_ARGS);
	a->pos = xcalloc((size_t)argc + 1, sizeof(*a->pos));
	for (int i = 0; i < argc; i++) {
		const char *w = argv[i];

		if (!tail && str_eq(w, "--")) {
			tail = true;
			continue;
		}
		if (tail || w[0] != '-' || w[1] == '\0') {
			a->pos[a->npos++] = w;
			/* exec: the command's argv starts after the environment. */
			if (stop_after > 0 && a->npos > stop_after)
				tail = true;
			continue;
		}
		if (take_flag(a, argc, argv, &i, e) < 0) {
			cli_args_release(a);
			return -1;
		}
	}
	return 0;
}

void cli_args_release(struct cli_args *a)
{
	free(a->pos);
	a->pos = NULL;
	a->npos = 0;
}

static int find(const struct cli_args *a, const char *name)
{
	return flag_index(a->flags, name, strlen(name));
}

const char *cli_flag_str(const struct cli_args *a, const char *name)
{
	int k = find(a, name);

	return k < 0 ? NULL : a->val[k];
}

bool cli_flag_bool(const struct cli_args *a, const char *name, bool def)
{
	const char *v = cli_flag_str(a, name);

	return v ? str_eq(v, "true") : def;
}

bool cli_flag_set(const struct cli_args *a, const char *name)
{
	return cli_flag_str(a, name) != NULL;
}
