/* Unit tests: .dockerignore matching (ignore.c) against Docker's rules:
 * root-anchored patterns, parent directories, "**", classes, escapes,
 * exceptions where the last match decides, cleaning, comments; and the
 * filtered tree writer that packs a build context. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/fs.h"
#include "tar/tar.h"
#include "tap.h"

struct ig_case {
	const char *file;	/* the .dockerignore text */
	const char *path;
	bool excluded;
	const char *name;
};

static const struct ig_case cases[] = {
	{ "*.md\n", "README.md", true, "a root pattern matches at the root" },
	{ "*.md\n", "docs/x.md", false, "  and not deeper (unlike .gitignore)" },
	{ "**/*.md\n", "docs/x.md", true, "**/ matches any depth" },
	{ "**/*.md\n", "README.md", true, "  including none" },
	{ "docs/**\n", "docs/a/b.txt", true, "a trailing ** is everything below" },
	{ "docs/**\n", "docsx/a", false, "  of that directory only" },
	{ "a/**/b\n", "a/b", true, "a/**/b matches a/b" },
	{ "a/**/b\n", "a/x/y/b", true, "  and a/x/y/b" },
	{ "a/**/b\n", "a/xb", false, "  but not a/xb" },
	{ "node_modules\n", "node_modules/x/y.js", true, "a directory's pattern takes what is inside" },
	{ "secret.txt\n", "sub/secret.txt", false, "a name is not matched below the root" },
	{ "*\n!keep.txt\n", "keep.txt", false, "an exception brings a file back" },
	{ "*\n!keep.txt\n", "other.txt", true, "  the rest stays out" },
	{ "!keep.txt\n*\n", "keep.txt", true, "the last matching pattern decides" },
	{ "dir\n!dir/keep\n", "dir/keep", false, "an exception inside an excluded directory" },
	{ "dir\n!dir/keep\n", "dir/other", true, "  and its siblings stay out" },
	{ "?.txt\n", "a.txt", true, "? is one character" },
	{ "?.txt\n", "ab.txt", false, "  exactly one" },
	{ "a?b\n", "a/b", false, "? never matches /" },
	{ "a*b\n", "a/b", false, "* never matches /" },
	{ "[abc].txt\n", "b.txt", true, "a class" },
	{ "[!abc].txt\n", "b.txt", false, "a negated class" },
	{ "[a-c]x\n", "cx", true, "a range" },
	{ "\\*.txt\n", "*.txt", true, "an escaped star is literal" },
	{ "\\*.txt\n", "a.txt", false, "  and matches nothing else" },
	{ "./build/\n", "build/out", true, "./ and a trailing / are cleaned away" },
	{ "/tmp\n", "tmp", true, "a leading / is the root" },
	{ "a/../b\n", "b", true, "a/../b is b" },
	{ "# comment\n\n   \n", "# comment", false, "comments and blank lines are no patterns" },
	{ "  spaced.txt  \r\n", "spaced.txt", true, "whitespace and CR are trimmed" },
	{ "", "anything", false, "an empty file excludes nothing" },
	{ "**\n", "x/y/z", true, "** alone is everything" },
	{ "[\n", "[", true, "an unclosed [ is literal" },
};

static void test_cases(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct ig_case *c = &cases[i];
		struct tar_ignore *ig = NULL;
		struct err e = { "", 0 };

		if (tar_ignore_parse(c->file, strlen(c->file), &ig, &e) < 0) {
			ok(0, "%s: %s", c->name, e.msg);
			continue;
		}
		ok(tar_ignore_match(ig, c->path) == c->excluded, "%s (%s %s)", c->name, c->path,
		   c->excluded ? "out" : "in");
		tar_ignore_free(ig);
	}
}

static void test_limits(void)
{
	struct tar_ignore *ig = NULL;
	struct err e = { "", 0 };
	size_t n = (TAR_IGNORE_MAX_PATTERNS + 1) * 2;
	char *many = malloc(n + 1);

	for (size_t i = 0; i < n; i += 2)
		memcpy(many + i, "a\n", 2);
	many[n] = '\0';
	ok(tar_ignore_parse(many, n, &ig, &e) < 0, "more than %d patterns is refused", TAR_IGNORE_MAX_PATTERNS);
	is_str(e.msg, ".dockerignore: more than 4096 patterns", "  with the limit named");
	free(many);
	ok(tar_ignore_parse("!a\n", 3, &ig, &e) == 0 && tar_ignore_has_exceptions(ig), "exceptions are reported");
	tar_ignore_free(ig);
}

/* A long run of stars against a long path: the matcher must not backtrack. */
static void test_no_blowup(void)
{
	char pat[401], path[2001];
	struct tar_ignore *ig = NULL;
	struct err e = { "", 0 };

	for (size_t i = 0; i < 400; i += 2)
		memcpy(pat + i, "*a", 2);
	pat[399] = 'b';
	pat[400] = '\0';
	memset(path, 'a', 2000);
	path[2000] = '\0';
	ok(tar_ignore_parse(pat, strlen(pat), &ig, &e) == 0 && !tar_ignore_match(ig, path),
	   "200 stars against 2000 bytes finish (no match)");
	tar_ignore_free(ig);
}

struct skip_ctx {
	struct tar_ignore *ig;
};

static bool skip(void *arg, const char *path, bool is_dir, bool *descend)
{
	struct skip_ctx *s = arg;

	if (!tar_ignore_match(s->ig, path))
		return false;
	*descend = is_dir && tar_ignore_has_exceptions(s->ig);
	return true;
}

static void put(const char *dir, const char *name, const char *text)
{
	char path[512];
	struct err e;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (fs_write_atomic(path, text, strlen(text), 0644, &e) < 0)
		tap_diag("%s", e.msg);
}

static void test_tree(void)
{
	const char *dir = tap_tmpdir();
	static const char rules[] = "secret\nlogs\n!logs/keep.log\n";
	char sub[512];
	struct buf a = BUF_INIT, b = BUF_INIT, names = BUF_INIT;
	struct tar_writer *w;
	struct tar_reader *r;
	struct skip_ctx s;
	struct err e = { "", 0 };

	snprintf(sub, sizeof(sub), "%s/logs", dir);
	mkdir(sub, 0755);
	put(dir, "app.txt", "app");
	put(dir, "secret", "s");
	put(dir, "logs/keep.log", "k");
	put(dir, "logs/drop.log", "d");
	(void)tar_ignore_parse(rules, strlen(rules), &s.ig, &e);
	w = tar_writer_new_buf(&a);
	ok(tar_write_tree_filtered(dir, "", w, NULL, TAR_W_STABLE, skip, &s, &e) == 0 && tar_writer_finish(w, &e) == 0,
	   "a filtered tree is written");
	tar_writer_free(w);
	r = tar_reader_new();
	for (size_t off = 0; off < a.len;) {
		struct tar_event ev;
		size_t used;
		int k = tar_reader_feed(r, a.data + off, a.len - off, &used, &ev, &e);

		off += used;
		if (k < 0 || k == TAR_EV_END)
			break;
		if (k == TAR_EV_ENTRY)
			buf_addf(&names, "%s ", ev.entry->path);
	}
	tar_reader_free(r);
	is_str(names.data ? names.data : "", "app.txt logs/keep.log ", "  holds what the rules let in, in order");
	w = tar_writer_new_buf(&b);
	(void)tar_write_tree_filtered(dir, "", w, NULL, TAR_W_STABLE, skip, &s, &e);
	(void)tar_writer_finish(w, &e);
	tar_writer_free(w);
	ok(a.len == b.len && !memcmp(a.data, b.data, a.len), "  and the same tree gives the same bytes");
	tar_ignore_free(s.ig);
	buf_release(&a);
	buf_release(&b);
	buf_release(&names);
}

int main(void)
{
	test_cases();
	test_limits();
	test_no_blowup();
	test_tree();
	return tap_done();
}
