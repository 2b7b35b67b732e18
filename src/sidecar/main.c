/* main.c: denvd's verbs (join, run, install, version), the hidden
 * "__worker" verb the agent starts for each command, the hidden
 * "__ingress" verb, an egress-denied environment's port proxy, and the
 * hidden "__names" verb, the host's name gateway (sidecar.h). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/str.h"
#include "sidecar/sidecar.h"
#include "spec/spec.h"

static const char usage_text[] =
	"usage: denvd join --server URL --token T [OPTIONS]\n"
	"       denvd run [--server URL] [OPTIONS]\n"
	"       denvd install --server URL --token T [OPTIONS]   (saves them for the systemd unit)\n"
	"       denvd version\n"
	"\n"
	"The denv sidecar: dials the control plane over one WebSocket and runs\n"
	"environments with Docker on this host. See denvd(8).\n"
	"\n"
	"  --server URL       control plane, http:// or https:// (DENV_SERVER); a comma list\n"
	"                     or the flag again: its standbys, tried in turn on a drop\n"
	"  --token T          join token djt_... (DENV_JOIN_TOKEN); first join only\n"
	"  --state FILE       identity file (default /etc/denv/host.json as root, else ~/.denv/host.json)\n"
	"  --data DIR         data directory (DENV_DATA_DIR; default /var/lib/denv as root, else ~/.denv/data)\n"
	"  --zfs-pool POOL    ZFS pool (DENV_ZFS_POOL)\n"
	"  --btrfs-root DIR   keep volumes as btrfs subvolumes under DIR (DENV_BTRFS_ROOT)\n"
	"  --env-file FILE    read KEY=VALUE lines into the environment first\n"
	"  --probe-image IMG  egress probe image (DENV_PROBE_IMAGE; default busybox)\n"
	"  --probe-url URL    egress probe URL (DENV_PROBE_URL; default http://1.1.1.1/)\n"
	"  --probe-mode M     auto, netns or container (DENV_PROBE_MODE; default auto)\n"
	"  --runtime R        runc or gvisor: services that declare no x-denv.runtime (DENV_RUNTIME;\n"
	"                     default runc); with runsc installed, denvd registers it with Docker\n"
	"  --disk-limit SIZE  disk cap of an environment that declares no x-denv.disk, e.g. 10g\n"
	"                     (DENV_DISK_LIMIT; default none)\n"
	"  --ingress-domain D serve published services as https://<service>--<env>.D\n"
	"                     (DENV_INGRESS_DOMAIN; default none: no names)\n"
	"  --ingress-listen A the names' HOST:PORT (DENV_INGRESS_LISTEN; default 0.0.0.0:443)\n"
	"  --ingress-ca-cert F, --ingress-ca-key F\n"
	"                     issue the names' certificate from this CA (DENV_INGRESS_CA_CERT,\n"
	"                     DENV_INGRESS_CA_KEY; default: self-signed by this host)\n"
	"  --ingress-cert-days N  its validity; issued again with a third left (default 30)\n"
	"  -v                 debug logging\n"
	"\n"
	"environment: DENV_SUBNET_POOL, the IPv4 range environment networks take /25s from\n"
	"(default 10.208.0.0/12).\n";

int main(int argc, char **argv)
{
	struct sc_config c;
	struct err e;
	const char *verb = argc > 1 ? argv[1] : "";

	memset(&c, 0, sizeof(c));
	err_clear(&e);
	if (str_eq(verb, "__worker"))
		return worker_main(argc, argv);
	if (str_eq(verb, "__ingress"))
		return ingress_main(argc, argv);
	if (str_eq(verb, "__names"))
		return names_main(argc, argv);
	if (str_eq(verb, "version") || str_eq(verb, "--version")) {
		printf("denvd %s\n", DENVD_VERSION);
		return 0;
	}
	if (str_eq(verb, "-h") || str_eq(verb, "--help") || str_eq(verb, "help")) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (!str_eq(verb, "join") && !str_eq(verb, "run") && !str_eq(verb, "install")) {
		fprintf(stderr, "denvd: %s%s\n%s", *verb ? "unknown verb " : "a verb is required",
			verb, usage_text);
		return 2;
	}
	c.verb = verb;
	if (sc_config_parse(argc, argv, &c, &e) < 0) {
		fprintf(stderr, "denvd %s: %s\n%s", verb, e.msg, usage_text);
		return 2;
	}
	if (c.env_file && sc_env_file_load(c.env_file, &e) < 0) {
		fprintf(stderr, "denvd %s: %s\n", verb, e.msg);
		return 1;
	}
	log_set_level(c.verbose ? LOG_DEBUG : LOG_INFO);
	sc_config_defaults(&c);
	if (!rt_name_ok(c.runtime)) {
		fprintf(stderr, "denvd %s: --runtime %s: must be runc or gvisor\n", verb, c.runtime);
		return 2;
	}
	if (c.disk_limit && *c.disk_limit && sc_parse_disk_mb(c.disk_limit, &(int64_t){ 0 }) < 0) {
		fprintf(stderr, "denvd %s: --disk-limit %s: must be a size like 10g or 512m, at least %d MiB\n", verb,
			c.disk_limit, SPEC_MIN_DISK_MB);
		return 2;
	}
	if (nm_config_check(&c, &e) < 0) {
		fprintf(stderr, "denvd %s: %s\n", verb, e.msg);
		return 2;
	}
	if (str_eq(verb, "install")) {
		if (install_run(&c, "/proc/self/exe", &e) < 0) {
			fprintf(stderr, "denvd install: %s\n", e.msg);
			return 1;
		}
		return 0;
	}
	signal(SIGPIPE, SIG_IGN);
	/* gVisor is an option, not a need: without it runc services still run. */
	if (rt_register(NULL, &e) < 0)
		log_warn("denvd", "gVisor is not available to Docker: %s", e.msg);
	if (agent_run(&c, &e) < 0) {
		log_error("denvd", "%s", e.msg);
		sc_config_release(&c);
		return 1;
	}
	sc_config_release(&c);
	return 0;
}
