/* Unit tests: safe extraction. Traversal attacks, limits, and GNU tar's
 * archives extracted identically. Runs as root: the code must refuse. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/fs.h"
#include "base/str.h"
#include "tar/tar.h"
#include "tap.h"
#include "tar-util.h"

static int contains(const char *hay, const char *needle)
{
	return strstr(hay, needle) != NULL;
}

/* python3 tarfile: the prelude gives add(name, type, data, link, **attrs);
 * OUT is argv[1], an absolute directory outside the destination. */
static const char py_prelude[] =
	"import tarfile, io, sys\n"
	"OUT = sys.argv[1]\n"
	"FMT = tarfile.PAX_FORMAT\n"
	"ents = []\n"
	"def add(name, type=tarfile.REGTYPE, data=b'', link='', **kw):\n"
	"    ents.append((name, type, data, link, kw))\n";
static const char py_epilogue[] =
	"b = io.BytesIO()\n"
	"t = tarfile.open(fileobj=b, mode='w', format=FMT)\n"
	"for name, type, data, link, kw in ents:\n"
	"    i = tarfile.TarInfo(name); i.type = type; i.linkname = link\n"
	"    i.size = len(data) if type in (tarfile.REGTYPE, tarfile.CONTTYPE) else 0\n"
	"    for k, v in kw.items(): setattr(i, k, v)\n"
	"    t.addfile(i, io.BytesIO(data) if i.size else None)\n"
	"t.close(); sys.stdout.buffer.write(b.getvalue())\n";

static int py_build(const char *body, const char *outside, struct buf *arch)
{
	struct buf script = BUF_INIT;
	int rc;

	buf_adds(&script, py_prelude);
	buf_adds(&script, body);
	buf_addch(&script, '\n');
	buf_adds(&script, py_epilogue);
	const char *argv[] = { "python3", "-c", script.data, outside, NULL };
	rc = run(argv, NULL, arch);
	buf_release(&script);
	return rc;
}

static char *read_text(const char *path)
{
	struct buf b = BUF_INIT;
	struct err e;

	if (fs_read_file(path, &b, 1 << 20, &e) < 0)
		buf_adds(&b, "<missing>");
	return buf_detach(&b, NULL);
}

struct xcase {
	const char *name;
	const char *py;		/* add(...) calls */
	unsigned flags;
	const char *want;	/* error substring; NULL: must succeed */
	const char *pre;	/* set-up in dest: "sym:NAME" (symlink NAME -> OUT), "file:NAME" */
	const char *check;	/* after: "NAME=content" in dest, or "!NAME" (must not exist) */
};

static const struct xcase cases[] = {
	{ "../evil", "add('../evil', data=b'bad')", 0, "entry \"../evil\": path escapes the destination", NULL, NULL },
	{ "a/../../evil", "add('a/../../evil', data=b'bad')", 0, "entry \"a/../../evil\": path escapes the destination", NULL, NULL },
	{ "/etc/evil", "add('/etc/evil', data=b'bad')", 0, "entry \"/etc/evil\": path is absolute", NULL, NULL },
	{ "absolute into OUT", "add(OUT + '/evil', data=b'bad')", 0, "path is absolute", NULL, NULL },
	{ "symlink -> OUT (default: refused)", "add('link', tarfile.SYMTYPE, link=OUT)\nadd('link/evil', data=b'bad')", 0,
	  "entry \"link\": symlink target", NULL, NULL },
	{ "symlink -> OUT then link/evil", "add('link', tarfile.SYMTYPE, link=OUT)\nadd('link/evil', data=b'bad')",
	  TAR_X_ALLOW_ESCAPING_SYMLINKS, "entry \"link/evil\": \"link\" is a symlink; refusing to follow it", NULL, NULL },
	{ "symlink -> .. (default: refused)", "add('link', tarfile.SYMTYPE, link='..')\nadd('link/evil', data=b'bad')", 0,
	  "entry \"link\": symlink target \"..\" is absolute or leaves the destination", NULL, NULL },
	{ "symlink -> .. then link/evil", "add('link', tarfile.SYMTYPE, link='..')\nadd('link/evil', data=b'bad')",
	  TAR_X_ALLOW_ESCAPING_SYMLINKS, "entry \"link/evil\": \"link\" is a symlink; refusing to follow it", NULL, NULL },
	{ "deep: symlink then a/link/b/evil", "add('a/link', tarfile.SYMTYPE, link='../..')\nadd('a/link/b/evil', data=b'bad')",
	  TAR_X_ALLOW_ESCAPING_SYMLINKS, "\"a/link\" is a symlink; refusing to follow it", NULL, NULL },
	{ "symlink then dir through it", "add('d', tarfile.SYMTYPE, link=OUT)\nadd('d/sub', tarfile.DIRTYPE)",
	  TAR_X_ALLOW_ESCAPING_SYMLINKS, "entry \"d/sub/\": \"d\" is a symlink", NULL, NULL },
	{ "symlink then a file of the same name", "add('f', tarfile.SYMTYPE, link=OUT + '/sentinel')\nadd('f', data=b'new')",
	  TAR_X_ALLOW_ESCAPING_SYMLINKS, NULL, NULL, "f=new" },
	{ "symlink chain sub/../..", "add('sub', tarfile.SYMTYPE, link='.')\nadd('x', tarfile.SYMTYPE, link='sub/../..')", 0,
	  "entry \"x\": symlink target \"sub/../..\" is absolute or leaves", NULL, NULL },
	{ "inside symlinks are fine", "add('d/f', data=b'1')\nadd('d/l', tarfile.SYMTYPE, link='../d/f')\nadd('l2', tarfile.SYMTYPE, link='d/l')",
	  0, NULL, NULL, "d/l=1" },
	{ "symlinks refused by flag", "add('s', tarfile.SYMTYPE, link='a')", TAR_X_NO_SYMLINKS,
	  "entry \"s\": symlinks are not allowed here", NULL, NULL },
	{ "pre-existing symlink in dest", "add('pre/evil', data=b'bad')", 0,
	  "entry \"pre/evil\": \"pre\" is a symlink; refusing to follow it", "sym:pre", NULL },
	{ "hard link to /etc/passwd", "add('h', tarfile.LNKTYPE, link='/etc/passwd')", 0,
	  "entry \"h\": hard link target is absolute", NULL, NULL },
	{ "hard link to ../x", "add('h', tarfile.LNKTYPE, link='../x')", 0, "entry \"h\": hard link target escapes the destination", NULL, NULL },
	{ "hard link to a file not from this archive", "add('h', tarfile.LNKTYPE, link='pre')", 0,
	  "entry \"h\": hard link target \"pre\" is not a regular file extracted from this archive", "file:pre", NULL },
	{ "hard link to a symlink", "add('s', tarfile.SYMTYPE, link='x')\nadd('h', tarfile.LNKTYPE, link='s')", 0,
	  "hard link target \"s\" is not a regular file extracted", NULL, NULL },
	{ "hard link to a replaced file", "add('a', data=b'1')\nadd('a', tarfile.SYMTYPE, link=OUT + '/sentinel')\nadd('h', tarfile.LNKTYPE, link='a')",
	  TAR_X_ALLOW_ESCAPING_SYMLINKS, "entry \"h\": hard link target \"a\" changed since it was extracted", NULL, NULL },
	{ "hard link to itself", "add('a', data=b'1')\nadd('a', tarfile.LNKTYPE, link='a')", 0, "entry \"a\": hard link to itself", NULL, NULL },
	{ "hard link, then a file over it", "add('a', data=b'orig')\nadd('b', tarfile.LNKTYPE, link='a')\nadd('b', data=b'new')",
	  0, NULL, NULL, "a=orig" },
	{ "hard links refused by flag", "add('a', data=b'1')\nadd('b', tarfile.LNKTYPE, link='a')", TAR_X_NO_HARDLINKS,
	  "entry \"b\": hard links are not allowed here", NULL, NULL },
	{ "char device", "add('dev', tarfile.CHRTYPE, devmajor=1, devminor=3)", 0, "entry \"dev\": character device entries are not allowed", NULL, NULL },
	{ "block device", "add('blk', tarfile.BLKTYPE, devmajor=8, devminor=0)", 0, "entry \"blk\": block device entries are not allowed", NULL, NULL },
	{ "FIFO", "add('fifo', tarfile.FIFOTYPE)", 0, "entry \"fifo\": FIFO entries are not allowed", NULL, NULL },
	{ "contiguous file", "add('c', tarfile.CONTTYPE, data=b'x')", 0, "entry \"c\": contiguous file entries are not allowed", NULL, NULL },
	{ "FIFO skipped by flag", "add('fifo', tarfile.FIFOTYPE)\nadd('after', data=b'ok')", TAR_X_SKIP_SPECIAL, NULL, NULL, "!fifo" },
	{ "pax path ../evil", "add('safe', data=b'bad', pax_headers={'path': '../evil'})", 0,
	  "entry \"../evil\": path escapes the destination", NULL, NULL },
	{ "pax linkpath to /etc/passwd", "add('h', tarfile.LNKTYPE, link='ok', pax_headers={'linkpath': '/etc/passwd'})", 0,
	  "entry \"h\": hard link target is absolute", NULL, NULL },
	{ "GNU long name ../evil", "FMT = tarfile.GNU_FORMAT\nadd('../' + 'e' * 120, data=b'bad')", 0, "path escapes the destination", NULL, NULL },
	{ "GNU long link to ../x", "FMT = tarfile.GNU_FORMAT\nadd('h', tarfile.LNKTYPE, link='../' + 'x' * 120)", 0,
	  "entry \"h\": hard link target escapes the destination", NULL, NULL },
	{ "a file named .", "add('.', data=b'x')", 0, "entry \".\": names the destination itself", NULL, NULL },
	{ "file over an existing dir", "add('d', tarfile.DIRTYPE)\nadd('d', data=b'x')", 0,
	  "entry \"d\": a directory of that name already exists", NULL, NULL },
	{ "./ and ./a are fine", "add('./', tarfile.DIRTYPE)\nadd('./a', data=b'A')", 0, NULL, NULL, "a=A" },
};

static void test_attacks(void)
{
	char base[600], dest[700], out[700], p[800];
	struct buf arch = BUF_INIT;
	struct err e;
	char *before, *after;

	if (!have_prog("python3")) {
		ok(1, "# SKIP no python3");
		return;
	}
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct xcase *c = &cases[i];
		int rc;

		snprintf(base, sizeof(base), "%s/case%zu", tap_tmpdir(), i);
		snprintf(dest, sizeof(dest), "%s/dest", base);
		snprintf(out, sizeof(out), "%s/outside", base);
		mkdir(base, 0755);
		mkdir(dest, 0755);
		mkdir(out, 0755);
		snprintf(p, sizeof(p), "%s/sentinel", out);
		write_file(p, "sentinel", 8, 0644);
		if (c->pre && str_has_prefix(c->pre, "sym:")) {
			snprintf(p, sizeof(p), "%s/%s", dest, c->pre + 4);
			symlink(out, p);
		} else if (c->pre && str_has_prefix(c->pre, "file:")) {
			snprintf(p, sizeof(p), "%s/%s", dest, c->pre + 5);
			write_file(p, "pre", 3, 0644);
		}
		buf_reset(&arch);
		if (py_build(c->py, out, &arch) != 0) {
			ok(0, "%s: python could not build the archive", c->name);
			continue;
		}
		before = manifest(base, 1);
		err_clear(&e);
		rc = tar_extract_mem(arch.data, arch.len, dest, NULL, c->flags, NULL, &e);
		if (c->want)
			ok(rc == -1 && contains(e.msg, c->want), "%s: refused: %s", c->name, e.msg);
		else
			ok(rc == 0, "%s: extracted (%s)", c->name, e.msg);
		/* nothing outside dest changed: the outside dir, base, /etc */
		snprintf(p, sizeof(p), "%s/sentinel", out);
		after = read_text(p);
		is_str(after, "sentinel", "  outside file untouched");
		free(after);
		snprintf(p, sizeof(p), "%s/evil", out);
		ok(!fs_exists(p), "  nothing written in the outside dir");
		snprintf(p, sizeof(p), "%s/evil", base);
		ok(!fs_exists(p) && !fs_exists("/etc/evil") && !fs_exists("/evil"), "  nothing written above dest");
		after = manifest(base, 1);
		{
			/* lines outside dest/ must be identical */
			struct buf a = BUF_INIT, b = BUF_INIT;
			for (char *l = before; *l; l = strchr(l, '\n') + 1)
				if (!str_has_prefix(l, "dest/") && !str_has_prefix(l, "dest "))
					buf_add(&a, l, (size_t)(strchr(l, '\n') + 1 - l));
			for (char *l = after; *l; l = strchr(l, '\n') + 1)
				if (!str_has_prefix(l, "dest/") && !str_has_prefix(l, "dest "))
					buf_add(&b, l, (size_t)(strchr(l, '\n') + 1 - l));
			ok(strcmp(a.data, b.data) == 0, "  the tree outside dest is unchanged");
			buf_release(&a);
			buf_release(&b);
		}
		free(before);
		free(after);
		if (c->check && c->check[0] == '!') {
			snprintf(p, sizeof(p), "%s/%s", dest, c->check + 1);
			ok(!fs_exists(p), "  %s does not exist", c->check + 1);
		} else if (c->check) {
			const char *eq = strchr(c->check, '=');
			snprintf(p, sizeof(p), "%s/%.*s", dest, (int)(eq - c->check), c->check);
			after = read_text(p);
			is_str(after, eq + 1, c->check);
			free(after);
		}
	}
	buf_release(&arch);
}

static void test_modes_owner_times(void)
{
	char dest[600], p[700];
	struct buf arch = BUF_INIT;
	struct err e;
	struct stat st;
	const char *py = "add('ro', tarfile.DIRTYPE, mode=0o555, mtime=1000000000)\n"
			 "add('ro/f', data=b'x', mode=0o4755, mtime=1200000000, uid=1234, gid=4321)\n"
			 "add('sticky', tarfile.DIRTYPE, mode=0o1777)\n"
			 "add('ro/s', tarfile.SYMTYPE, link='f', mtime=1300000000)\n";

	if (!have_prog("python3"))
		return;
	py_build(py, "/nonexistent", &arch);
	for (int keep = 0; keep < 2; keep++) {
		unsigned flags = keep ? TAR_X_KEEP_SPECIAL_BITS | TAR_X_KEEP_OWNER : 0;
		snprintf(dest, sizeof(dest), "%s/modes%d", tap_tmpdir(), keep);
		mkdir(dest, 0755);
		ok(tar_extract_mem(arch.data, arch.len, dest, NULL, flags, NULL, &e) == 0, "extracted (%s)", e.msg);
		snprintf(p, sizeof(p), "%s/ro/f", dest);
		stat(p, &st);
		is_int(st.st_mode & 07777, keep ? 04755 : 0755, keep ? "setuid kept with the flag" : "setuid masked");
		is_int(st.st_uid, keep ? 1234 : 0, keep ? "owner kept with the flag" : "owner is ours");
		is_int(st.st_mtime, 1200000000, "file mtime restored");
		snprintf(p, sizeof(p), "%s/ro", dest);
		stat(p, &st);
		is_int(st.st_mode & 07777, 0555, "read-only dir mode set at the end (its file was written)");
		is_int(st.st_mtime, 1000000000, "dir mtime restored after its contents");
		snprintf(p, sizeof(p), "%s/sticky", dest);
		stat(p, &st);
		is_int(st.st_mode & 07777, keep ? 01777 : 0777, "sticky bit masked unless the flag");
		snprintf(p, sizeof(p), "%s/ro/s", dest);
		lstat(p, &st);
		is_int(st.st_mtime, 1300000000, "symlink mtime restored (not its target's)");
	}
	buf_release(&arch);
}

static void test_limits(void)
{
	char dest[600], p[700];
	struct buf arch = BUF_INIT;
	struct tar_limits lim;
	struct err e;
	struct tar_stats st;

	if (!have_prog("python3"))
		return;
	py_build("for i in range(5): add('f%d' % i, data=b'12345')", "/x", &arch);
	snprintf(dest, sizeof(dest), "%s/lim1", tap_tmpdir());
	mkdir(dest, 0755);
	lim = (struct tar_limits){ .max_entries = 3 };
	ok(tar_extract_mem(arch.data, arch.len, dest, &lim, 0, NULL, &e) == -1 &&
	   contains(e.msg, "entry \"f3\": more than 3 entries"), "entry limit: %s", e.msg);
	snprintf(dest, sizeof(dest), "%s/lim2", tap_tmpdir());
	mkdir(dest, 0755);
	lim = (struct tar_limits){ .max_bytes = 12 };
	ok(tar_extract_mem(arch.data, arch.len, dest, &lim, 0, NULL, &e) == -1 &&
	   contains(e.msg, "entry \"f2\": files total more than the limit of 12 bytes"), "byte limit: %s", e.msg);
	snprintf(p, sizeof(p), "%s/f2", dest);
	ok(!fs_exists(p), "the file over the byte limit was not created");
	lim = (struct tar_limits){ 0 };
	ok(tar_extract_mem(arch.data, arch.len, dest, &lim, 0, &st, &e) == 0 && st.files == 5 && st.bytes == 25,
	   "within default limits: 5 files, 25 bytes");

	buf_reset(&arch);
	py_build("add('a' * 60 + '/' + 'b' * 60, data=b'x')\nadd('/'.join(['d'] * 20) + '/f', data=b'x')", "/x", &arch);
	lim = (struct tar_limits){ .max_path = 100 };
	ok(tar_extract_mem(arch.data, arch.len, dest, &lim, 0, NULL, &e) == -1 &&
	   contains(e.msg, "path longer than 100 bytes"), "path length limit: %s", e.msg);
	lim = (struct tar_limits){ .max_depth = 10 };
	ok(tar_extract_mem(arch.data, arch.len, dest, &lim, 0, NULL, &e) == -1 &&
	   contains(e.msg, "path deeper than 10 levels"), "depth limit: %s", e.msg);
	ok(tar_path_check("a/./b//c/", NULL, &e) == 0, "path check: . and empty components are fine");
	ok(tar_path_check("a/b/..", NULL, &e) == -1, "path check: trailing ..");
	ok(tar_path_check("..", NULL, &e) == -1 && tar_path_check("//x", NULL, &e) == -1, "path check: .. and //x");
	ok(tar_path_check("a/..b/c..", NULL, &e) == 0, "path check: names containing .. are fine");

	/* truncated in a file's data: error names it, the partial file is removed */
	buf_reset(&arch);
	py_build("add('whole', data=b'w' * 600)\nadd('part', data=b'p' * 5000)", "/x", &arch);
	snprintf(dest, sizeof(dest), "%s/trunc", tap_tmpdir());
	mkdir(dest, 0755);
	ok(tar_extract_mem(arch.data, 2048 + 1000, dest, NULL, 0, NULL, &e) == -1 &&
	   contains(e.msg, "entry \"part\": archive truncated in its data (1000 of 5000 bytes)"), "truncated: %s", e.msg);
	snprintf(p, sizeof(p), "%s/part", dest);
	ok(!fs_exists(p), "the partly written file is removed");
	snprintf(p, sizeof(p), "%s/whole", dest);
	ok(fs_exists(p), "the complete file before it stays");

	/* every truncation point: always an error, never anything outside */
	{
		int all = 1;
		/* whole: header + 2 blocks; part: header + 10 blocks; then the end marker */
		size_t end = 512 + 1024 + 512 + 5120;
		for (size_t cut = 0; cut < end + 512; cut += (cut < end - 600 ? 61 : 1)) {
			snprintf(dest, sizeof(dest), "%s/cut", tap_tmpdir());
			fs_remove_all(dest, &e);
			mkdir(dest, 0755);
			if (tar_extract_mem(arch.data, cut, dest, NULL, 0, NULL, &e) != -1)
				all = 0;
		}
		ok(all, "every cut before the end marker is refused");
	}

	/* corrupt checksum */
	arch.data[600] ^= 0x55;		/* inside the 'whole' data: fine */
	arch.data[1536 + 20] ^= 0x55;	/* inside part's header name */
	snprintf(dest, sizeof(dest), "%s/cksum", tap_tmpdir());
	mkdir(dest, 0755);
	ok(tar_extract_mem(arch.data, arch.len, dest, NULL, 0, NULL, &e) == -1 &&
	   contains(e.msg, "checksum mismatch") && contains(e.msg, "after entry \"whole\""), "corrupt header: %s", e.msg);
	buf_release(&arch);

	snprintf(p, sizeof(p), "%s/nonexistent", tap_tmpdir());
	ok(tar_extract_new(p, NULL, 0, &e) == NULL && contains(e.msg, "tar: destination"), "missing destination: %s", e.msg);
}

/* GNU tar's archives of a tree, extracted by us, byte-for-byte by feeding one
 * byte at a time and through the fd convenience. */
static void test_gnu_extract(void)
{
	const char *formats[] = { "pax", "gnu" };
	char src[600], p[800], q[800];
	struct err e;
	char *want;

	if (!have_prog("tar"))
		return;
	snprintf(src, sizeof(src), "%s/gsrc", tap_tmpdir());
	make_sample_tree(src);
	snprintf(p, sizeof(p), "%s/a.txt", src);
	snprintf(q, sizeof(q), "%s/x/hard", src);
	link(p, q);
	want = manifest(src, 1);
	for (int i = 0; i < 2; i++) {
		char tarp[700], fmt[40], dest[700];
		struct tar_stats st;
		struct stat s1, s2;
		struct buf arch = BUF_INIT;
		int fd;
		snprintf(fmt, sizeof(fmt), "--format=%s", formats[i]);
		snprintf(tarp, sizeof(tarp), "%s/g-%s.tar", tap_tmpdir(), formats[i]);
		const char *argv[] = { "tar", fmt, "-cf", tarp, "-C", src, ".", NULL };
		ok(run(argv, NULL, NULL) == 0, "GNU tar %s archive", formats[i]);

		snprintf(dest, sizeof(dest), "%s/gx-%s", tap_tmpdir(), formats[i]);
		mkdir(dest, 0755);
		fd = open(tarp, O_RDONLY);
		ok(tar_extract_fd(fd, dest, NULL, 0, &st, &e) == 0, "%s: extracted from an fd (%s)", formats[i], e.msg);
		close(fd);
		{
			char *got = manifest(dest, 1);
			is_str(got, want, "identical tree: content, modes, mtimes, symlinks, long and unicode names");
			free(got);
		}
		ok(st.hardlinks == 1 && st.symlinks == 3, "stats: 1 hard link, 3 symlinks");
		snprintf(p, sizeof(p), "%s/a.txt", dest);
		snprintf(q, sizeof(q), "%s/x/hard", dest);
		ok(stat(p, &s1) == 0 && stat(q, &s2) == 0 && s1.st_ino == s2.st_ino, "hard link is a hard link");

		/* one byte at a time */
		snprintf(dest, sizeof(dest), "%s/gx1-%s", tap_tmpdir(), formats[i]);
		mkdir(dest, 0755);
		{
			struct tar_extract *x = tar_extract_new(dest, NULL, 0, &e);
			int rc = 0;
			fs_read_file(tarp, &arch, 1 << 24, &e);
			for (size_t k = 0; k < arch.len && rc == 0; k++)
				rc = tar_extract_feed(x, arch.data + k, 1, &e);
			if (rc == 0)
				rc = tar_extract_finish(x, &e);
			tar_extract_free(x);
			char *got = manifest(dest, 1);
			ok(rc == 0 && strcmp(got, want) == 0, "%s: fed one byte at a time: identical", formats[i]);
			free(got);
		}
		buf_release(&arch);
	}
	free(want);
}

/* Something else in the destination swaps a file we extracted for another
 * regular file before the hard link to it arrives: the inode check refuses. */
static void test_hardlink_tamper(void)
{
	char dest[600], p[700];
	struct buf arch = BUF_INIT;
	struct tar_writer *w = tar_writer_new_buf(&arch);
	struct tar_extract *x;
	struct err e;

	tar_write_file(w, "a", NULL, "data", 4, &e);
	tar_write_hardlink(w, "h", "a", NULL, &e);
	tar_writer_finish(w, &e);
	tar_writer_free(w);
	snprintf(dest, sizeof(dest), "%s/tamper", tap_tmpdir());
	mkdir(dest, 0755);
	x = tar_extract_new(dest, NULL, 0, &e);
	ok(tar_extract_feed(x, arch.data, 1024, &e) == 0, "first entry extracted");
	/* a new inode while the old one still exists, so the number cannot be reused */
	snprintf(p, sizeof(p), "%s/a.new", dest);
	write_file(p, "other", 5, 0644);
	{
		char to[700];
		snprintf(to, sizeof(to), "%s/a", dest);
		rename(p, to);
	}
	ok(tar_extract_feed(x, arch.data + 1024, arch.len - 1024, &e) == -1 &&
	   contains(e.msg, "entry \"h\": hard link target \"a\" changed since it was extracted"), "swapped target: %s", e.msg);
	ok(tar_extract_finish(x, &e) == -1, "and the extraction stays failed");
	tar_extract_free(x);
	buf_release(&arch);
}

int main(void)
{
	test_hardlink_tamper();
	test_attacks();
	test_modes_owner_times();
	test_limits();
	test_gnu_extract();
	return tap_done();
}
