/* Unit tests: the writer and tar_write_tree, checked against GNU tar. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "base/buf.h"
#include "base/err.h"
#include "tar/tar.h"
#include "tap.h"
#include "tar-util.h"

static int contains(const char *hay, const char *needle)
{
	return strstr(hay, needle) != NULL;
}

static int str_has_prefix_(const char *s);

static void test_tree_vs_gnu(void)
{
	char src[512], out[512], tarp[512], p[600], xdir[512];
	struct buf arch = BUF_INIT, listing = BUF_INIT;
	struct tar_writer *w;
	struct err e;
	char *want, *got;
	int fd;

	snprintf(src, sizeof(src), "%s/src", tap_tmpdir());
	make_sample_tree(src);
	snprintf(p, sizeof(p), "%s/fifo", src);
	mkfifo(p, 0644);

	w = tar_writer_new_buf(&arch);
	ok(tar_write_tree(src, "", w, NULL, 0, &e) == 0, "tree written (%s)", e.msg);
	ok(tar_writer_finish(w, &e) == 0, "finished");
	tar_writer_free(w);
	ok(arch.len % 512 == 0, "archive is whole blocks");

	snprintf(tarp, sizeof(tarp), "%s/ours.tar", tap_tmpdir());
	write_file(tarp, arch.data, arch.len, 0644);
	if (!have_prog("tar")) {
		ok(1, "# SKIP no GNU tar");
		buf_release(&arch);
		return;
	}
	{
		const char *argv[] = { "tar", "-tvf", tarp, NULL };
		ok(run(argv, NULL, &listing) == 0, "GNU tar -tvf lists our archive");
		ok(contains(listing.data, "link -> a.txt") && contains(listing.data, "x/up -> ../a.txt"), "symlinks listed");
		ok(contains(listing.data, "-rwxr-xr-x") && contains(listing.data, "drwxr-x---"), "modes listed");
		ok(!contains(listing.data, "fifo"), "FIFO skipped by default");
		ok(contains(listing.data, "\xc3\xbcnic\xc3\xb6" "de-\xe6\x97\xa5\xe6\x9c\xac.txt"), "unicode name listed");
		ok(contains(listing.data, "ffffffffff") && contains(listing.data, "longlink -> dddddddd"),
		   "long name and long link listed");
	}
	snprintf(out, sizeof(out), "%s/gnu-out", tap_tmpdir());
	mkdir(out, 0755);
	{
		const char *argv[] = { "tar", "-xpf", tarp, "-C", out, NULL };
		ok(run(argv, NULL, NULL) == 0, "GNU tar -xf extracts our archive");
	}
	unlink(p);	/* the FIFO is not expected in copies */
	want = manifest(src, 1);
	got = manifest(out, 1);
	is_str(got, want, "GNU tar's extraction is identical: content, modes, mtimes, symlinks");
	ok(contains(want, "emptydir d 0750") && contains(want, "empty f 0600 0"), "(empty dir and empty file included)");
	free(got);

	/* our own extraction of our archive: identical too */
	snprintf(xdir, sizeof(xdir), "%s/our-out", tap_tmpdir());
	mkdir(xdir, 0755);
	ok(tar_extract_mem(arch.data, arch.len, xdir, NULL, 0, NULL, &e) == 0, "we extract our archive (%s)", e.msg);
	got = manifest(xdir, 1);
	is_str(got, want, "our extraction is identical");
	free(got);
	free(want);

	/* with a prefix, written to an fd */
	buf_reset(&listing);
	snprintf(tarp, sizeof(tarp), "%s/prefixed.tar", tap_tmpdir());
	fd = open(tarp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	w = tar_writer_new_fd(fd);
	ok(tar_write_tree(src, "top/", w, NULL, 0, &e) == 0 && tar_writer_finish(w, &e) == 0, "prefixed tree to an fd");
	tar_writer_free(w);
	close(fd);
	{
		const char *argv[] = { "tar", "-tf", tarp, NULL };
		run(argv, NULL, &listing);
		ok(str_has_prefix_(listing.data), "entries start with top/");
	}
	buf_release(&listing);
	buf_release(&arch);
}

/* keep the test independent of base/str.h's prototypes */
static int str_has_prefix_(const char *s)
{
	if (strncmp(s, "top/\n", 5) != 0)
		return 0;
	for (const char *l = s; *l; l = strchr(l, '\n') + 1)
		if (strncmp(l, "top/", 4) != 0)
			return 0;
	return 1;
}

static void test_tree_special_and_limits(void)
{
	char src[512], p[600];
	struct buf arch = BUF_INIT;
	struct tar_writer *w;
	struct tar_limits lim = { 0 };
	struct err e;
	int s;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	snprintf(src, sizeof(src), "%s/special", tap_tmpdir());
	mkdir(src, 0755);
	snprintf(p, sizeof(p), "%s/f1", src);
	write_file(p, "12345", 5, 0644);
	snprintf(p, sizeof(p), "%s/f2", src);
	write_file(p, "67890", 5, 0644);
	if (snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/sock", src) >= (int)sizeof(sa.sun_path))
		abort();
	s = socket(AF_UNIX, SOCK_STREAM, 0);
	bind(s, (struct sockaddr *)&sa, sizeof(sa));

	w = tar_writer_new_buf(&arch);
	ok(tar_write_tree(src, "", w, NULL, TAR_W_REFUSE_SPECIAL, &e) == -1 && contains(e.msg, "\"sock\": is a socket"),
	   "socket refused with TAR_W_REFUSE_SPECIAL: %s", e.msg);
	tar_writer_free(w);
	buf_reset(&arch);
	w = tar_writer_new_buf(&arch);
	ok(tar_write_tree(src, "", w, NULL, 0, &e) == 0, "socket skipped by default");
	tar_writer_free(w);
	close(s);

	buf_reset(&arch);
	w = tar_writer_new_buf(&arch);
	lim.max_entries = 1;
	ok(tar_write_tree(src, "", w, &lim, 0, &e) == -1 && contains(e.msg, "more than 1 entries"), "entry limit: %s", e.msg);
	tar_writer_free(w);

	buf_reset(&arch);
	w = tar_writer_new_buf(&arch);
	lim.max_entries = 0;
	lim.max_bytes = 8;
	ok(tar_write_tree(src, "", w, &lim, 0, &e) == -1 && contains(e.msg, "\"f2\": files total more than 8 bytes"),
	   "byte limit: %s", e.msg);
	tar_writer_free(w);

	buf_reset(&arch);
	w = tar_writer_new_buf(&arch);
	snprintf(p, sizeof(p), "%s/f1", src);
	ok(tar_write_tree(p, "", w, NULL, 0, &e) == -1 && contains(e.msg, "prefix"), "a file needs a prefix");
	tar_writer_free(w);
	buf_reset(&arch);
	w = tar_writer_new_buf(&arch);
	ok(tar_write_tree(p, "one.txt", w, NULL, 0, &e) == 0 && tar_writer_finish(w, &e) == 0 && arch.len == 512 * 4,
	   "a single file with a name");
	tar_writer_free(w);
	buf_release(&arch);
}

/* Names that need pax: what GNU tar shows for each. */
static void test_pax_names_vs_gnu(void)
{
	struct buf arch = BUF_INIT, listing = BUF_INIT;
	struct tar_writer *w = tar_writer_new_buf(&arch);
	struct tar_meta m = { .mode = 0640, .uid = 4000000000ULL, .gid = 7, .mtime = 1234567890 };
	char p300[301], tarp[512];
	struct err e;

	memset(p300, 'q', 300);
	p300[300] = '\0';
	p300[150] = '/';
	tar_write_file(w, p300, &m, "data", 4, &e);
	tar_write_file(w, "caf\xc3\xa9", &m, "", 0, &e);
	tar_write_symlink(w, "sym", p300, NULL, &e);
	ok(tar_writer_finish(w, &e) == 0, "pax archive written");
	tar_writer_free(w);
	snprintf(tarp, sizeof(tarp), "%s/pax.tar", tap_tmpdir());
	write_file(tarp, arch.data, arch.len, 0644);
	if (!have_prog("tar")) {
		ok(1, "# SKIP no GNU tar");
	} else {
		const char *argv[] = { "tar", "--numeric-owner", "-tvf", tarp, NULL };
		ok(run(argv, NULL, &listing) == 0, "GNU tar lists it");
		ok(contains(listing.data, p300) && contains(listing.data, "4000000000/7"), "300-byte path and big uid via pax");
		ok(contains(listing.data, "caf\xc3\xa9") && contains(listing.data, "sym -> qqq"), "unicode and long link target");
		ok(contains(listing.data, "2009-02-1"), "mtime");
	}
	buf_release(&listing);
	buf_release(&arch);
}

int main(void)
{
	test_tree_vs_gnu();
	test_tree_special_and_limits();
	test_pax_names_vs_gnu();
	return tap_done();
}
