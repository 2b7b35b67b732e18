/* Unit tests: digest.c's tree digest (env.digest, promote's
 * gate.consistency) in a temp dir: a copy digests the same, times do not
 * count, content, mode, a link's target and a name do; creation order does
 * not; a FIFO is never opened; a deep tree is digested; a missing root is
 * an error. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/str.h"
#include "sidecar/sidecar.h"
#include "sidecar/storage/storage.h"
#include "tap.h"

#define DEEP 1500	/* levels of "d/": 3000 bytes of path, under STG_PATH_MAX */

static char top[256];

static void path_of(char *out, size_t n, const char *rel)
{
	snprintf(out, n, "%s/%s", top, rel);
}

static int put(const char *rel, const char *text)
{
	char p[512];
	FILE *f;

	path_of(p, sizeof(p), rel);
	if (!(f = fopen(p, "w")))
		return -1;
	fputs(text, f);
	return fclose(f);
}

/* The digest of top/rel, or "error: <msg>". */
static const char *dig(const char *rel, char out[STG_DIGEST_MAX + ERR_MSG_MAX])
{
	char p[512];
	struct err e;

	path_of(p, sizeof(p), rel);
	if (stg_digest_tree(p, out, NULL, NULL, &e) < 0)
		snprintf(out, STG_DIGEST_MAX + ERR_MSG_MAX, "error: %s", e.msg);
	return out;
}

static void make_tree(const char *root, bool reversed)
{
	char p[512], q[600];

	path_of(p, sizeof(p), root);
	mkdir(p, 0755);
	for (int i = 0; i < 2; i++) {
		int k = reversed ? 1 - i : i;

		snprintf(q, sizeof(q), "%s/%s", root, k ? "b.txt" : "a.txt");
		put(q, k ? "bee\n" : "ay\n");
	}
	snprintf(q, sizeof(q), "%s/sub", p);
	mkdir(q, 0750);
	snprintf(q, sizeof(q), "%s/sub/link", p);
	if (symlink("../a.txt", q) < 0)
		tap_diag("symlink failed");
	snprintf(q, sizeof(q), "%s/sub/fifo", p);
	mkfifo(q, 0600);
}

static void test_same_and_different(void)
{
	char a[STG_DIGEST_MAX + ERR_MSG_MAX], b[STG_DIGEST_MAX + ERR_MSG_MAX], p[512], q[512];
	struct timespec ts[2] = { { 1000000, 0 }, { 1000000, 0 } };
	struct err e;

	make_tree("one", false);
	make_tree("two", true);
	dig("one", a);
	ok(str_has_prefix(a, "sha256:") && strlen(a) == STG_DIGEST_MAX - 1, "a tree digests to sha256:<64 hex> (%s)", a);
	is_str(dig("two", b), a, "the same tree made in another order digests the same (and the FIFO was not opened)");
	path_of(p, sizeof(p), "one");
	path_of(q, sizeof(q), "copy");
	ok(stg_copy_tree(p, q, &e) == 0, "stg_copy_tree makes a copy");
	is_str(dig("copy", b), a, "the copy digests the same");
	path_of(p, sizeof(p), "copy/a.txt");
	utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW);
	is_str(dig("copy", b), a, "a changed mtime does not count");
	put("copy/a.txt", "AY\n");
	ok(strcmp(dig("copy", b), a) != 0, "changed content of the same size does");
	put("copy/a.txt", "ay\n");
	is_str(dig("copy", b), a, "  and putting it back restores the digest");
	chmod(p, 0600);
	ok(strcmp(dig("copy", b), a) != 0, "a changed mode counts");
	chmod(p, 0644);
	path_of(p, sizeof(p), "copy/sub/link");
	unlink(p);
	if (symlink("../b.txt", p) < 0)
		tap_diag("symlink failed");
	ok(strcmp(dig("copy", b), a) != 0, "a changed link target counts");
	path_of(q, sizeof(q), "copy/sub/link2");
	unlink(p);
	if (symlink("../a.txt", q) < 0)
		tap_diag("symlink failed");
	ok(strcmp(dig("copy", b), a) != 0, "a renamed entry counts");
	put("copy/new.txt", "");
	ok(strcmp(dig("copy", b), a) != 0, "an added empty file counts");
}

static void test_deep_and_missing(void)
{
	char out[STG_DIGEST_MAX + ERR_MSG_MAX], p[512];
	struct buf rel = BUF_INIT;
	uint64_t files = 0, bytes = 0;
	struct err e;

	path_of(p, sizeof(p), "deep");
	mkdir(p, 0755);
	buf_adds(&rel, p);
	for (int i = 0; i < DEEP; i++) {
		buf_adds(&rel, "/d");
		if (mkdir(rel.data, 0755) < 0)
			break;
	}
	buf_adds(&rel, "/leaf");
	fs_write_atomic(rel.data, "bottom", 6, 0644, &e);
	ok(stg_digest_tree(p, out, &files, &bytes, &e) == 0, "a tree %d levels deep is digested", DEEP);
	ok(files == DEEP + 2 && bytes == 6, "  counting %d entries and 6 bytes (got %llu, %llu)", DEEP + 2,
	   (unsigned long long)files, (unsigned long long)bytes);
	buf_release(&rel);
	ok(str_has_prefix(dig("nowhere", out), "error: lstat "), "a missing root is an error (%s)", out);
}

int main(void)
{
	struct err e;

	snprintf(top, sizeof(top), "/tmp/denv-digest-%ld", (long)getpid());
	if (mkdir(top, 0700) < 0) {
		tap_diag("cannot make %s", top);
		return 1;
	}
	test_same_and_different();
	test_deep_and_missing();
	fs_remove_all(top, &e);
	return tap_done();
}
