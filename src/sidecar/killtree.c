/* killtree.c: signal a process and every descendant (sidecar.h). Used by
 * background commands' signals and by an exec's kill (engine_exec.c), so it
 * sits apart from both. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "sidecar/sidecar.h"

/* The host pids of pid's descendants (from /proc's ppid fields), pid first. */
static size_t tree_of(pid_t pid, pid_t *out, size_t cap)
{
	size_t n = 0, grew = 1;

	out[n++] = pid;
	/* A few passes find grandchildren listed before their parents. */
	for (int pass = 0; grew && pass < 8; pass++) {
		DIR *d = opendir("/proc");
		struct dirent *de;

		grew = 0;
		while (d && (de = readdir(d)) && n < cap) {
			char path[64], line[512], *rp;
			long p = strtol(de->d_name, &rp, 10), pp = 0;
			FILE *f;
			bool known = false;

			if (*rp || p <= 1)
				continue;
			for (size_t i = 0; i < n; i++)
				known = known || out[i] == (pid_t)p;
			snprintf(path, sizeof(path), "/proc/%ld/stat", p);
			if (known || !(f = fopen(path, "re")))
				continue;
			/* "pid (comm) state ppid ...": comm may hold spaces and ')'. */
			if (fgets(line, sizeof(line), f) && (rp = strrchr(line, ')')) && sscanf(rp + 1, " %*c %ld", &pp) == 1)
				for (size_t i = 0; i < n; i++)
					if (out[i] == (pid_t)pp && n < cap) {
						out[n++] = (pid_t)p;
						grew = 1;
						break;
					}
			fclose(f);
		}
		if (d)
			closedir(d);
	}
	return n;
}

/* The whole tree: `sh -c 'a | b'` is not ended by signalling sh alone. */
size_t sc_kill_tree(pid_t pid, int sig)
{
	pid_t tree[SC_BG_TREE_MAX];
	size_t n = tree_of(pid, tree, SC_BG_TREE_MAX);

	for (size_t i = 0; i < n; i++)
		if (kill(tree[i], sig) < 0 && errno != ESRCH)
			log_info("bg", "kill %d: %s", (int)tree[i], strerror(errno));
	return n;
}
