/* hostwall.c: keep an environment's containers away from the host itself.
 *
 * Docker's --internal network has no route out, but the host is not "out":
 * a container can still open connections to every address of the host (its
 * bridge gateway, anything listening on 0.0.0.0 — a control plane on the same
 * machine, say), and the same holds on a normal network. So every environment
 * network gets a bridge interface name we choose, and one INPUT rule drops
 * NEW connections that arrive from it. Replies to connections the host opens
 * (health checks, exec, a proxy) are not NEW and still pass; traffic the host
 * forwards to the internet for an egress-allowed stack goes through FORWARD,
 * not INPUT, and is not affected. The rule carries a comment naming the
 * project, and goes when the network goes.
 */
#include <stdio.h>
#include <string.h>

#include "base/crypto.h"
#include "base/fs.h"
#include "base/proc.h"
#include "base/str.h"
#include "sidecar/sidecar.h"

void hw_bridge_name(const char *project, char out[HW_BRIDGE_MAX])
{
	char hex[65];

	/* Interface names are at most 15 bytes: "dnv" and 12 hex digits. */
	if (sha256_hex(project, strlen(project), hex) < 0)
		hex[0] = '\0';
	snprintf(out, HW_BRIDGE_MAX, "dnv%.12s", hex);
}

/* Run `iptables -w <action> INPUT <the rule>`. Returns the exit code (0 when
 * the rule exists for -C), or -1 with e when iptables could not run. */
static int iptables(const char *action, const char *project, struct err *e, struct buf *errout)
{
	char bridge[HW_BRIDGE_MAX], comment[128];
	const char *argv[] = { "iptables", "-w", "10", action, "INPUT", "-i", bridge,
			       "-m", "conntrack", "--ctstate", "NEW", "-m", "comment",
			       "--comment", comment, "-j", "DROP", NULL };
	struct proc_spec spec;
	struct proc_result r;
	int code;

	hw_bridge_name(project, bridge);
	snprintf(comment, sizeof(comment), "denv %s", project);
	proc_spec_init(&spec, argv);
	spec.timeout_ms = HW_TIMEOUT_MS;
	if (proc_run(&spec, NULL, 0, &r, e) < 0)
		return err_prefix(e, "hostwall");
	code = r.exit_code;
	if (errout)
		buf_add(errout, r.err.data, r.err.len);
	proc_result_release(&r);
	return code;
}

/* Remove denv rules whose bridge no longer exists: an environment torn down
 * behind denvd's back (docker rm, a crash before destroy) leaves its rule. */
static void prune_stale(void)
{
	const char *argv[] = { "iptables", "-w", "10", "-S", "INPUT", NULL };
	struct proc_spec spec;
	struct proc_result r;
	struct err e;
	char **lines;

	proc_spec_init(&spec, argv);
	spec.timeout_ms = HW_TIMEOUT_MS;
	if (proc_run(&spec, NULL, 0, &r, &e) < 0)
		return;
	lines = str_split(r.out.data, "\n", NULL);
	for (char **l = lines; *l; l++) {
		const char *in = strstr(*l, " -i dnv"), *tag = strstr(*l, "--comment \"denv ");
		char bridge[HW_BRIDGE_MAX], path[64], project[96];
		size_t n;

		if (!in || !tag)
			continue;
		n = strcspn(in + 4, " ");
		if (n >= sizeof(bridge))
			continue;
		memcpy(bridge, in + 4, n);
		bridge[n] = '\0';
		snprintf(path, sizeof(path), "/sys/class/net/%s", bridge);
		tag += strlen("--comment \"denv ");
		n = strcspn(tag, "\"");
		if (fs_exists(path) || n >= sizeof(project))
			continue;
		memcpy(project, tag, n);
		project[n] = '\0';
		hw_release(project, &e);
	}
	str_list_free(lines);
	proc_result_release(&r);
}

int hw_isolate(const char *project, struct err *e)
{
	struct buf why = BUF_INIT;
	int code;

	prune_stale();
	if (iptables("-C", project, e, NULL) == 0)
		return 0;	/* already there (a create retried after a crash) */
	code = iptables("-I", project, e, &why);
	if (code != 0) {
		if (code > 0)
			err_set(e, "cannot wall the host off from network of %s: iptables: %s",
				project, why.len ? str_trim(why.data) : "failed");
		buf_release(&why);
		return -1;
	}
	buf_release(&why);
	return 0;
}

int hw_release(const char *project, struct err *e)
{
	/* -D removes one copy; loop in case an older run left a duplicate. */
	for (int i = 0; i < HW_MAX_DUPLICATES; i++) {
		int code = iptables("-D", project, e, NULL);
		if (code < 0)
			return -1;
		if (code != 0)
			break;
	}
	err_clear(e);
	return 0;
}
