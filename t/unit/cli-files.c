/* Unit tests: `denv files get` extraction refuses escaping archives, and the
 * --wait phase printer. Archives are built with the library's tar writer. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/fs.h"
#include "base/str.h"
#include "cli/cli.h"
#include "json/json.h"
#include "tar/tar.h"
#include "tap.h"

static char top[1024];

static const char *at(const char *rel)
{
	static char p[4][1200];
	static int i;
	char *s = p[i++ % 4];

	snprintf(s, sizeof(p[0]), "%s/%s", top, rel);
	return s;
}

/* Raw entry with any path, bypassing the convenience writers' checks. */
static void raw_entry(struct tar_writer *w, enum tar_type type, const char *path, const char *link,
		      const char *data)
{
	struct tar_entry ent = { 0 };
	struct err e;

	ent.type = type;
	ent.path = path;
	ent.linkpath = link ? link : "";
	ent.size = data ? strlen(data) : 0;
	ent.mode = type == TAR_DIR ? 0755 : 0644;
	ok(tar_write_header(w, &ent, &e) == 0, "writer: header for %s", path);
	if (data && *data)
		tar_write_data(w, data, strlen(data), &e);
}

static void finish(struct tar_writer *w)
{
	struct err e;

	tar_writer_finish(w, &e);
	tar_writer_free(w);
}

static void good(void)
{
	struct buf tar = BUF_INIT;
	struct tar_writer *w = tar_writer_new_buf(&tar);
	struct buf got = BUF_INIT;
	uint64_t n;
	struct err e;

	raw_entry(w, TAR_DIR, "out/", NULL, NULL);
	raw_entry(w, TAR_REG, "out/a.txt", NULL, "hello\n");
	raw_entry(w, TAR_DIR, "out/sub/", NULL, NULL);
	raw_entry(w, TAR_REG, "out/sub/b.txt", NULL, "b");
	raw_entry(w, TAR_SYMLINK, "out/link", "a.txt", NULL);
	finish(w);
	ok(cli_files_extract(tar.data, tar.len, at("good/new"), &n, &e) == 0, "a plain archive extracts: %s",
	   e.msg);
	is_int(n, 3, "three files written (two files, one link)");
	fs_read_file(at("good/new/out/a.txt"), &got, 100, &e);
	is_str(got.data, "hello\n", "content");
	buf_release(&got);
	buf_release(&tar);
}

static void dotdot(void)
{
	struct buf tar = BUF_INIT;
	struct tar_writer *w = tar_writer_new_buf(&tar);
	uint64_t n;
	struct err e;

	fs_mkdir_p(at("dd/target"), 0755, &e);
	raw_entry(w, TAR_REG, "ok.txt", NULL, "fine");
	raw_entry(w, TAR_REG, "../escaped.txt", NULL, "evil");
	finish(w);
	ok(cli_files_extract(tar.data, tar.len, at("dd/target"), &n, &e) < 0, "an archive with ../ is refused");
	ok(strstr(e.msg, "../escaped.txt") != NULL, "the message names the entry: %s", e.msg);
	ok(!fs_exists(at("dd/escaped.txt")), "nothing written outside the target");
	buf_release(&tar);

	tar.len = 0;
	w = tar_writer_new_buf(&tar);
	raw_entry(w, TAR_REG, "a/../../up.txt", NULL, "evil");
	finish(w);
	ok(cli_files_extract(tar.data, tar.len, at("dd/target"), &n, &e) < 0, "a/../../ is refused: %s", e.msg);
	ok(!fs_exists(at("dd/up.txt")) && !fs_exists(at("up.txt")), "nothing written above");
	buf_release(&tar);

	w = tar_writer_new_buf(&tar);
	raw_entry(w, TAR_REG, "/tmp/abs-denv-cli-test", NULL, "evil");
	finish(w);
	ok(cli_files_extract(tar.data, tar.len, at("dd/target"), &n, &e) < 0, "an absolute path is refused: %s",
	   e.msg);
	buf_release(&tar);
}

static void symlinks(void)
{
	struct buf tar = BUF_INIT;
	struct tar_writer *w = tar_writer_new_buf(&tar);
	uint64_t n;
	struct err e;
	struct stat st;

	raw_entry(w, TAR_SYMLINK, "link", "../../outside", NULL);
	finish(w);
	ok(cli_files_extract(tar.data, tar.len, at("sl/target"), &n, &e) < 0, "an escaping symlink is refused: %s",
	   e.msg);
	ok(lstat(at("sl/target/link"), &st) < 0, "the link was not created");
	buf_release(&tar);

	w = tar_writer_new_buf(&tar);
	raw_entry(w, TAR_SYMLINK, "abs", "/etc", NULL);
	finish(w);
	ok(cli_files_extract(tar.data, tar.len, at("sl/target"), &n, &e) < 0, "an absolute symlink is refused: %s",
	   e.msg);
	buf_release(&tar);

	/* The classic: a link inside, then a file written through it. */
	fs_mkdir_p(at("sl/victim"), 0755, &e);
	w = tar_writer_new_buf(&tar);
	raw_entry(w, TAR_SYMLINK, "d", "../victim", NULL);
	raw_entry(w, TAR_REG, "d/pwned", NULL, "evil");
	finish(w);
	ok(cli_files_extract(tar.data, tar.len, at("sl/t2"), &n, &e) < 0, "link then write-through refused: %s",
	   e.msg);
	ok(!fs_exists(at("sl/victim/pwned")), "nothing written through the link");
	buf_release(&tar);
}

static void watch_lines(void)
{
	const char *doc1 = "{\"deployment\":{\"ID\":\"dep_1\",\"Status\":\"running\"},\"phases\":["
			   "{\"Seq\":1,\"Name\":\"resolve\",\"Status\":\"ok\",\"Evidence\":{\"version\":\"ver_1\"},\"Error\":\"\"},"
			   "{\"Seq\":2,\"Name\":\"place\",\"Status\":\"running\",\"Evidence\":null,\"Error\":\"\"},"
			   "{\"Seq\":3,\"Name\":\"verdict\",\"Status\":\"pending\",\"Evidence\":null,\"Error\":\"\"}]}";
	const char *doc2 = "{\"deployment\":{\"ID\":\"dep_1\",\"Status\":\"failed\"},\"phases\":["
			   "{\"Seq\":1,\"Name\":\"resolve\",\"Status\":\"ok\",\"Evidence\":{\"version\":\"ver_1\"},\"Error\":\"\"},"
			   "{\"Seq\":2,\"Name\":\"place\",\"Status\":\"failed\",\"Evidence\":{},\"Error\":\"no host\"},"
			   "{\"Seq\":3,\"Name\":\"verdict\",\"Status\":\"ok\",\"Evidence\":{},\"Error\":\"\"}]}";
	struct cli_watch w = { 0 };
	struct json *d1, *d2;
	struct buf out = BUF_INIT;
	struct err e;

	json_parse(doc1, strlen(doc1), NULL, &d1, &e);
	json_parse(doc2, strlen(doc2), NULL, &d2, &e);
	is_int(cli_watch_print(&w, d1, &out), 2, "first read: two lines (pending is not news)");
	is_str(out.data, "  resolve    ok        {\"version\":\"ver_1\"}\n  place      running\n", "lines");
	buf_reset(&out);
	is_int(cli_watch_print(&w, d1, &out), 0, "same document: nothing");
	is_int(cli_watch_print(&w, d2, &out), 2, "changes only");
	is_str(out.data, "  place      failed    no host\n  verdict    ok\n", "failed phase shows its error");
	ok(cli_status_final("failed") && cli_status_final("succeeded") && cli_status_final("rolled_back") &&
		   !cli_status_final("running") && !cli_status_final(NULL),
	   "final statuses");
	cli_watch_release(&w);
	json_free(d1);
	json_free(d2);
	buf_release(&out);
}

int main(void)
{
	snprintf(top, sizeof(top), "%s", tap_tmpdir());
	good();
	dotdot();
	symlinks();
	watch_lines();
	return tap_done();
}
