/* Unit tests: verify_tree.c over a tree in a temp dir: vtree_missing says
 * which declared paths do not exist whatever a walk would refuse (a link
 * in a parent is refused, not missing; a file in a parent makes the path
 * missing), and a limit crossed by one path stops vtree_path's walk while
 * vtree_missing still answers for the paths after it. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "sidecar/sidecar.h"
#include "tap.h"

static char top[1024];

static void put(const char *rel, off_t size)
{
	char path[1200];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", top, rel);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || ftruncate(fd, size) < 0)
		tap_diag("cannot make %s", path);
	if (fd >= 0)
		close(fd);
}

int main(void)
{
	static const struct {
		const char *rel;
		bool missing;
		const char *why;
	} cases[] = {
		{ "home/agent/answer.txt", false, "a file that is there" },
		{ "home/agent/nope", true, "a name that is not there" },
		{ "home/agent/answer.txt/x", true, "below a file: cannot exist" },
		{ "home/agent/nodir/x", true, "below a missing directory" },
		{ "home/agent/link/x", false, "below a link: refused by the walk, not missing" },
		{ "home/agent/dangling", false, "a dangling link is there (and refused)" },
	};
	struct vtree t;
	struct err e;
	char path[1200];
	bool gone;
	int root;

	snprintf(top, sizeof(top), "%s", tap_tmpdir());
	snprintf(path, sizeof(path), "%s/home/agent", top);
	if (fs_mkdir_p(path, 0755, &e) < 0)
		return tap_skip_all("cannot make the tree");
	put("home/agent/answer.txt", 3);
	put("home/agent/big", (off_t)300 << 20);	/* sparse: its apparent size counts */
	snprintf(path, sizeof(path), "%s/home/agent/link", top);
	if (symlink("/etc", path) < 0)
		tap_diag("symlink failed");
	snprintf(path, sizeof(path), "%s/home/agent/dangling", top);
	if (symlink("/nowhere", path) < 0)
		tap_diag("symlink failed");
	root = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ok(vtree_missing(root, cases[i].rel) == cases[i].missing, "%s: %s", cases[i].rel, cases[i].why);

	vtree_init(&t);
	ok(vtree_path(root, "home/agent/big", &t, &gone, &e) == 0 && !gone && t.stop && json_len(t.refused) == 1,
	   "a sparse 300 MiB file crosses the size limit and stops the walk");
	is_str(json_len(t.refused) ? json_at(t.refused, 0)->u.str.s : "", "home/agent/big: submission larger than 256 MiB",
	       "the finding");
	ok(vtree_missing(root, "home/agent/nope2"), "a path after the stop is still found missing");
	vtree_refuse(&t, "home/agent/out", "changed while it was copied");
	is_str(json_at(t.refused, 1) ? json_at(t.refused, 1)->u.str.s : "", "home/agent/out: changed while it was copied",
	       "vtree_refuse adds a finding the walk could not see");
	vtree_release(&t);
	close(root);
	return tap_done();
}
