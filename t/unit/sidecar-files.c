/* Unit tests: env.put's docker cp rules and ownership (files_cp.c). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/str.h"
#include "sidecar/sidecar.h"
#include "tap.h"
#include "tar/tar.h"

static const struct fc_stat DIR_1000 = { true, true, 1000, 1001 };
static const struct fc_stat FILE_7 = { true, false, 7, 7 };
static const struct fc_stat MISSING = { false, false, 0, 0 };
static const struct fc_stat ROOT_DIR = { true, true, 0, 0 };

static void test_split(void)
{
	static const struct {
		const char *target, *parent, *base;
		bool slash;
	} cases[] = {
		{ "/home/ubuntu/fixtures", "/home/ubuntu", "fixtures", false },
		{ "/home/ubuntu/fixtures/", "/home/ubuntu", "fixtures", true },
		{ "/x", "/", "x", false },
		{ "//x//y//", "//x", "y", true },
		{ "/", "/", "", false },
	};
	static const char *const bad[] = { "relative", "/a/../b", "/a/./b", "/a/..", "" };
	char parent[FC_PATH_MAX + 1], base[FC_NAME_MAX + 1];
	struct err e;
	bool slash;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = fc_split(cases[i].target, parent, sizeof(parent), base, sizeof(base), &slash, &e);

		ok(rc == 0 && str_eq(parent, cases[i].parent) && str_eq(base, cases[i].base) &&
			   slash == cases[i].slash,
		   "split %s: %s + %s%s (got %s + %s)", cases[i].target, cases[i].parent, cases[i].base,
		   cases[i].slash ? " /" : "", rc == 0 ? parent : "-", rc == 0 ? base : e.msg);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(fc_split(bad[i], parent, sizeof(parent), base, sizeof(base), &slash, &e) < 0, "refused: \"%s\"",
		   bad[i]);
	ok(fc_split("/a\nb", parent, sizeof(parent), base, sizeof(base), &slash, &e) < 0, "refused: a newline");
}

static void test_parse_stat(void)
{
	struct fc_stat st = { 0 };

	ok(fc_parse_stat("41ed 1000 1001\n", &st) == 0 && st.exists && st.is_dir && st.uid == 1000 && st.gid == 1001,
	   "a directory (hex mode 41ed)");
	ok(fc_parse_stat("81a4 0 0\n", &st) == 0 && !st.is_dir && st.uid == 0, "a regular file (81a4)");
	ok(fc_parse_stat("stat: cannot stat", &st) < 0 && fc_parse_stat("41ed -1 0", &st) < 0 &&
		   fc_parse_stat(NULL, &st) < 0,
	   "odd output is refused");
}

static void test_plan(void)
{
	static const struct {
		const char *what, *target;
		bool src_dir;
		const struct fc_stat *t, *parent;
		const char *dir, *rename;	/* NULL dir: refused, rename holds part of the message */
		long uid;
	} cases[] = {
		{ "dir into a missing target becomes it", "/home/ubuntu/fixtures", true, &MISSING, &DIR_1000,
		  "/home/ubuntu", "fixtures", 1000 },
		{ "dir into an existing dir goes inside", "/home/ubuntu", true, &DIR_1000, &ROOT_DIR, "/home/ubuntu",
		  "", 1000 },
		{ "file into an existing dir goes inside", "/home/ubuntu/", false, &DIR_1000, &ROOT_DIR,
		  "/home/ubuntu/", "", 1000 },
		{ "file to a missing path becomes it", "/home/ubuntu/a.txt", false, &MISSING, &DIR_1000,
		  "/home/ubuntu", "a.txt", 1000 },
		{ "file over a file replaces it", "/home/ubuntu/a.txt", false, &FILE_7, &DIR_1000, "/home/ubuntu",
		  "a.txt", 1000 },
		{ "dir with a trailing / into a missing target becomes it", "/srv/new/", true, &MISSING, &ROOT_DIR,
		  "/srv", "new", 0 },
		{ "dir over a file is refused", "/home/ubuntu/a.txt", true, &FILE_7, &DIR_1000, NULL,
		  "a directory cannot replace it", 0 },
		{ "file to a missing path/ is refused", "/home/ubuntu/new/", false, &MISSING, &DIR_1000, NULL,
		  "a file cannot become a directory", 0 },
		{ "missing parent is refused", "/nope/x", true, &MISSING, &MISSING, NULL, "/nope does not exist", 0 },
		{ "parent that is a file is refused", "/etc/passwd/x", false, &MISSING, &FILE_7, NULL,
		  "/etc/passwd is not a directory", 0 },
		{ "a file with a trailing / is refused", "/home/ubuntu/a.txt/", false, &FILE_7, &DIR_1000, NULL,
		  "is not a directory", 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct fc_plan p;
		struct err e;
		int rc;

		err_clear(&e);
		rc = fc_plan(cases[i].target, cases[i].src_dir, cases[i].t, cases[i].parent, &p, &e);
		if (cases[i].dir)
			ok(rc == 0 && str_eq(p.dir, cases[i].dir) && str_eq(p.rename, cases[i].rename) &&
				   p.uid == cases[i].uid,
			   "%s: into %s as \"%s\", uid %ld (got %s, \"%s\", %ld; %s)", cases[i].what, cases[i].dir,
			   cases[i].rename, cases[i].uid, p.dir, p.rename, p.uid, e.msg);
		else
			ok(rc < 0 && strstr(e.msg, cases[i].rename), "%s (%s)", cases[i].what, e.msg);
	}
}

/* An archive file in the test's temp dir; returns an fd at its start. */
static int archive(const char *name, const char *const *paths)
{
	char path[512];
	struct tar_writer *w;
	struct tar_meta m = { .uid = 0, .gid = 0, .mtime = 1 };
	struct err e;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", tap_tmpdir(), name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	w = tar_writer_new_fd(fd);
	for (size_t i = 0; paths[i]; i++) {
		size_t n = strlen(paths[i]);

		if (paths[i][n - 1] == '/')
			tar_write_dir(w, paths[i], &m, &e);
		else if (str_has_prefix(paths[i], "L:"))
			tar_write_hardlink(w, paths[i] + 2, "fixtures/a.txt", &m, &e);
		else
			tar_write_file(w, paths[i], &m, "data\n", 5, &e);
	}
	tar_writer_finish(w, &e);
	tar_writer_free(w);
	lseek(fd, 0, SEEK_SET);
	return fd;
}

/* The entries of the archive on fd as "path uid:gid [-> link]" lines. */
static void listing(int fd, struct buf *out)
{
	struct tar_reader *r = tar_reader_new();
	const struct tar_entry *ent;
	struct err e;

	lseek(fd, 0, SEEK_SET);
	while (tar_reader_next_fd(r, fd, &ent, &e) == 1)
		buf_addf(out, "%s %llu:%llu%s%s;", ent->path, (unsigned long long)ent->uid,
			 (unsigned long long)ent->gid, ent->type == TAR_HARDLINK ? " -> " : "", ent->linkpath);
	tar_reader_free(r);
}

static void test_top_and_restamp(void)
{
	static const char *const tree[] = { "fixtures/", "fixtures/a.txt", "fixtures/sub/", "fixtures/sub/b.txt",
					    "L:fixtures/hard", NULL };
	static const char *const file[] = { "a.txt", NULL };
	static const char *const dotted[] = { "./", "./fixtures/", "./fixtures/a.txt", NULL };
	static const char *const two[] = { "a.txt", "b.txt", NULL };
	char top[FC_NAME_MAX + 1], path[512];
	struct buf got = BUF_INIT;
	struct err e;
	bool is_dir;
	int in, out;

	in = archive("tree.tar", tree);
	ok(fc_archive_top(in, top, sizeof(top), &is_dir, &e) == 0 && str_eq(top, "fixtures") && is_dir,
	   "a directory's archive: top fixtures, a directory");
	close(in);
	in = archive("file.tar", file);
	ok(fc_archive_top(in, top, sizeof(top), &is_dir, &e) == 0 && str_eq(top, "a.txt") && !is_dir,
	   "a file's archive: top a.txt, a file");
	close(in);
	in = archive("dotted.tar", dotted);
	ok(fc_archive_top(in, top, sizeof(top), &is_dir, &e) == 0 && str_eq(top, "fixtures") && is_dir,
	   "\"./\" entries are the archive's root, not its top");
	close(in);
	in = archive("two.tar", two);
	ok(fc_archive_top(in, top, sizeof(top), &is_dir, &e) < 0 && strstr(e.msg, "more than one"),
	   "two top entries are refused (%s)", e.msg);
	close(in);

	in = archive("tree.tar", tree);
	snprintf(path, sizeof(path), "%s/out.tar", tap_tmpdir());
	out = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ok(fc_restamp(in, out, "fixtures", "data", true, 1000, 1001, &e) == 0, "restamp: renamed and owned");
	listing(out, &got);
	is_str(got.data,
	       "data/ 1000:1001;data/a.txt 1000:1001;data/sub/ 1000:1001;data/sub/b.txt 1000:1001;"
	       "data/hard 1000:1001 -> data/a.txt;",
	       "every entry renamed and owned; a hard link's target renamed too");
	close(in);
	close(out);

	buf_reset(&got);
	in = archive("dotted.tar", dotted);
	out = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ok(fc_restamp(in, out, "fixtures", NULL, true, 5, 6, &e) == 0, "restamp: owned, name kept");
	listing(out, &got);
	is_str(got.data, "./fixtures/ 5:6;./fixtures/a.txt 5:6;", "the archive's own ./ is dropped");
	close(in);
	close(out);

	buf_reset(&got);
	in = archive("dotted.tar", dotted);
	out = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ok(fc_restamp(in, out, NULL, NULL, true, 5, 6, &e) == 0, "restamp without a top (env.put's path)");
	listing(out, &got);
	is_str(got.data, "./ 5:6;./fixtures/ 5:6;./fixtures/a.txt 5:6;", "every entry kept, owner set");
	close(in);
	close(out);
	buf_release(&got);
}

int main(void)
{
	test_split();
	test_parse_stat();
	test_plan();
	test_top_and_restamp();
	return tap_done();
}
