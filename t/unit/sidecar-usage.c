/* Unit tests: stg_tree_bytes, the volume usage of env.metrics on the dir and
 * btrfs backends: allocated blocks (a hole costs nothing), links not
 * followed, a missing tree is 0, a tree deeper than STG_USAGE_DEPTH_MAX is
 * an error rather than a walk without end. */
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

#define MIB ((int64_t)1 << 20)

static int write_file(const char *path, size_t len, off_t hole)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	char *data = calloc(1, len ? len : 1);
	int rc = -1;

	if (fd < 0 || !data)
		goto out;
	memset(data, 'x', len);
	if (hole && ftruncate(fd, hole) < 0)
		goto out;
	if (len && pwrite(fd, data, len, hole) != (ssize_t)len)
		goto out;
	rc = fsync(fd);
out:
	if (fd >= 0)
		close(fd);
	free(data);
	return rc;
}

/* levels nested "d" directories under root. */
static int nest(const char *root, int levels)
{
	char path[8192];
	size_t n = (size_t)snprintf(path, sizeof(path), "%s", root);

	for (int i = 0; i < levels && n + 3 < sizeof(path); i++) {
		n += (size_t)snprintf(path + n, sizeof(path) - n, "/d");
		if (mkdir(path, 0755) < 0)
			return -1;
	}
	return 0;
}

int main(void)
{
	char tmpl[] = "/tmp/denv-usage.XXXXXX", path[4200], sub[4200];
	char *dir = mkdtemp(tmpl);
	int64_t bytes = -1;
	struct err e;

	if (!dir)
		return 1;
	snprintf(path, sizeof(path), "%s/none", dir);
	ok(stg_tree_bytes(path, &bytes, &e) == 0 && bytes == 0, "a missing tree: 0 bytes");

	snprintf(path, sizeof(path), "%s/vol", dir);
	snprintf(sub, sizeof(sub), "%s/vol/sub", dir);
	ok(mkdir(path, 0755) == 0 && mkdir(sub, 0755) == 0, "a volume with a subdirectory");
	snprintf(sub, sizeof(sub), "%s/vol/sub/one", dir);
	ok(write_file(sub, (size_t)MIB, 0) == 0, "1 MiB written below it");
	snprintf(sub, sizeof(sub), "%s/vol/sparse", dir);
	ok(write_file(sub, 4096, (off_t)(100 * MIB)) == 0, "and a 100 MiB file that is a hole but 4 KiB");
	snprintf(sub, sizeof(sub), "%s/vol/etc", dir);
	ok(symlink("/usr", sub) == 0, "and a link to /usr");
	ok(stg_tree_bytes(path, &bytes, &e) == 0, "walked: %s", e.msg);
	ok(bytes >= MIB + 4096 && bytes < 3 * MIB,
	   "blocks allocated: at least 1 MiB + 4 KiB, the hole and /usr not counted (%lld)", (long long)bytes);

	snprintf(sub, sizeof(sub), "%s/vol/sub/one", dir);
	ok(stg_tree_bytes(sub, &bytes, &e) < 0, "a file is not a tree: %s", e.msg);

	snprintf(path, sizeof(path), "%s/deep", dir);
	ok(mkdir(path, 0755) == 0 && nest(path, STG_USAGE_DEPTH_MAX + 2) == 0, "a tree %d levels deep",
	   STG_USAGE_DEPTH_MAX + 2);
	ok(stg_tree_bytes(path, &bytes, &e) < 0 && strstr(e.msg, "deeper than"), "refused: %s", e.msg);

	{
		struct err re;

		ok(stg_remove_tree(dir, &re) == 0, "cleaned up");
	}
	return tap_done();
}
