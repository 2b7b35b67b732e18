/* Unit tests: denvd's flags, --env-file, the state file, stream URLs, ids. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/fs.h"
#include "base/str.h"
#include "sidecar/sidecar.h"
#include "tap.h"

static void test_urls(void)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
		{ "http://127.0.0.1:8080", "ws://127.0.0.1:8080/v1/hosts/stream" },
		{ "https://api.example.com/", "wss://api.example.com/v1/hosts/stream" },
		{ "http://h/base//", "ws://h/base/v1/hosts/stream" },
		{ "ftp://h", NULL },
		{ "http://", NULL },
		{ "", NULL },
	};
	char out[512];
	struct err e;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = sc_stream_url(cases[i].in, out, sizeof(out), &e);

		if (cases[i].want)
			ok(rc == 0 && strcmp(out, cases[i].want) == 0, "stream url of %s: %s", cases[i].in, out);
		else
			ok(rc < 0 && e.msg[0], "stream url of \"%s\" refused: %s", cases[i].in, e.msg);
	}
}

/* A control plane and its standbys: a comma list, or --server again. */
static void test_url_list(void)
{
	static char urls[SC_SERVERS_MAX][SC_URL_MAX];
	char many[SC_SERVERS_MAX * 16 + 16];
	size_t used = 0;
	char *argv[] = { "denvd", "run", "--server", "http://a:1", "--server=http://b:2,http://c:3", NULL };
	struct sc_config c;
	struct err e;
	size_t n = 0;

	ok(sc_stream_urls("http://a:1, https://b/ ,http://c:3", urls, SC_SERVERS_MAX, &n, &e) == 0 && n == 3 &&
	   strcmp(urls[0], "ws://a:1/v1/hosts/stream") == 0 && strcmp(urls[1], "wss://b/v1/hosts/stream") == 0 &&
	   strcmp(urls[2], "ws://c:3/v1/hosts/stream") == 0, "a list of three, spaces trimmed (%zu)", n);
	ok(sc_stream_urls("http://a", urls, SC_SERVERS_MAX, &n, &e) == 0 && n == 1, "one URL is a list of one");
	ok(sc_stream_urls("http://a,,http://b", urls, SC_SERVERS_MAX, &n, &e) < 0 && strstr(e.msg, "empty"),
	   "an empty entry is refused: %s", e.msg);
	ok(sc_stream_urls("http://a,ftp://b", urls, SC_SERVERS_MAX, &n, &e) < 0 && strstr(e.msg, "ftp://b"),
	   "a bad entry is named: %s", e.msg);
	for (int i = 0; i <= SC_SERVERS_MAX; i++)
		used += (size_t)snprintf(many + used, sizeof(many) - used, "%shttp://h%d", i ? "," : "", i);
	ok(sc_stream_urls(many, urls, SC_SERVERS_MAX, &n, &e) < 0 && strstr(e.msg, "more than"),
	   "more than %d URLs refused: %s", SC_SERVERS_MAX, e.msg);
	memset(&c, 0, sizeof(c));
	ok(sc_config_parse(5, argv, &c, &e) == 0 && c.server && strcmp(c.server, "http://a:1,http://b:2,http://c:3") == 0,
	   "--server twice joins the lists: %s", c.server ? c.server : "(none)");
	sc_config_release(&c);
}

static void test_ids(void)
{
	char longid[200];

	memset(longid, 'a', sizeof(longid) - 1);
	longid[sizeof(longid) - 1] = '\0';
	ok(sc_safe_id("cmd_01JD3W5ZQ9X4M8B2Y7C6V0T1RS"), "a ULID command id is safe");
	ok(sc_safe_id("env-a_B9"), "letters, digits, _ and - are safe");
	ok(!sc_safe_id("../etc") && !sc_safe_id("a/b") && !sc_safe_id("a.b") && !sc_safe_id(""),
	   "path characters and empty ids are refused");
	ok(!sc_safe_id(NULL) && !sc_safe_id(longid), "NULL and over-long ids are refused");
}

static void test_flags(void)
{
	char *argv[] = { "denvd", "join", "--server=http://x", "--data", "/d", "--zfs-pool", "tank", "-v",
			 "--test-leaky-network", "--probe-mode", "container", NULL };
	char *bad1[] = { "denvd", "join", "--nope", NULL };
	char *bad2[] = { "denvd", "join", "--server", NULL };
	char *bad3[] = { "denvd", "join", "stray", NULL };
	struct sc_config c;
	struct err e;

	memset(&c, 0, sizeof(c));
	ok(sc_config_parse(11, argv, &c, &e) == 0, "flags parse");
	ok(c.server && strcmp(c.server, "http://x") == 0 && c.server_flag, "--server=V form, marked given");
	ok(c.data_dir && strcmp(c.data_dir, "/d") == 0 && c.data_flag, "--data V form, marked given");
	ok(c.zfs_flag && c.verbose && c.leaky_network && strcmp(c.probe_mode, "container") == 0,
	   "zfs pool, -v, test flag, probe mode");
	memset(&c, 0, sizeof(c));
	ok(sc_config_parse(3, bad1, &c, &e) < 0 && strstr(e.msg, "unknown flag"), "unknown flag: %s", e.msg);
	ok(sc_config_parse(3, bad2, &c, &e) < 0 && strstr(e.msg, "needs an argument"), "missing value: %s", e.msg);
	ok(sc_config_parse(3, bad3, &c, &e) < 0 && strstr(e.msg, "unexpected"), "stray argument: %s", e.msg);
}

static void test_env_file(void)
{
	char path[1024];
	const char *text = "# cloud-init\n\nDENV_SERVER=http://cp:8080\nexport DENV_JOIN_TOKEN=\"djt_q\"\n"
			   "DENV_DATA_DIR='/srv/d'\n";
	struct err e;

	snprintf(path, sizeof(path), "%s/join.env", tap_tmpdir());
	fs_write_atomic(path, text, strlen(text), 0600, &e);
	unsetenv("DENV_SERVER");
	ok(sc_env_file_load(path, &e) == 0, "env file loads");
	ok(getenv("DENV_SERVER") && strcmp(getenv("DENV_SERVER"), "http://cp:8080") == 0, "plain KEY=VALUE");
	ok(getenv("DENV_JOIN_TOKEN") && strcmp(getenv("DENV_JOIN_TOKEN"), "djt_q") == 0, "export and double quotes");
	ok(getenv("DENV_DATA_DIR") && strcmp(getenv("DENV_DATA_DIR"), "/srv/d") == 0, "single quotes");
	fs_write_atomic(path, "NOEQUALS\n", 9, 0600, &e);
	ok(sc_env_file_load(path, &e) < 0 && strstr(e.msg, "KEY=VALUE"), "a bad line is refused: %s", e.msg);
	snprintf(path, sizeof(path), "%s/missing.env", tap_tmpdir());
	ok(sc_env_file_load(path, &e) < 0, "a missing file is an error");
	unsetenv("DENV_SERVER");
	unsetenv("DENV_JOIN_TOKEN");
	unsetenv("DENV_DATA_DIR");
}

static void test_state(void)
{
	struct sc_config c, d;
	char path[1024];
	struct stat st;
	struct err e;

	snprintf(path, sizeof(path), "%s/st/sub/host.json", tap_tmpdir());
	memset(&c, 0, sizeof(c));
	c.state_path = path;
	c.server = "http://saved";
	c.data_dir = "/saved/data";
	c.zfs_pool = "";
	str_copy(c.host_id, sizeof(c.host_id), "host_1");
	str_copy(c.secret, sizeof(c.secret), "dhs_s3cret");
	ok(sc_state_save(&c, &e) == 0, "state saved (dirs made): %s", e.msg);
	ok(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "state file is 0600");

	setenv("DENV_SERVER", "http://from-env", 1);
	memset(&d, 0, sizeof(d));
	d.state_path = path;
	ok(sc_state_load(&d, &e) == 0, "state loads");
	ok(strcmp(d.host_id, "host_1") == 0 && strcmp(d.secret, "dhs_s3cret") == 0, "identity read back");
	ok(strcmp(d.server, "http://saved") == 0 && strcmp(d.data_dir, "/saved/data") == 0,
	   "saved server and data dir win over the environment");
	sc_config_release(&d);
	memset(&d, 0, sizeof(d));
	d.state_path = path;
	d.server = "http://flag";
	d.server_flag = true;
	sc_state_load(&d, &e);
	ok(strcmp(d.server, "http://flag") == 0, "a flag wins over saved state");
	sc_config_release(&d);
	fs_write_atomic(path, "[1]", 3, 0600, &e);
	memset(&d, 0, sizeof(d));
	d.state_path = path;
	ok(sc_state_load(&d, &e) < 0 && strstr(e.msg, "state file"), "a broken state file is reported: %s", e.msg);
	unsetenv("DENV_SERVER");
}

/* --disk-limit and DENV_DISK_LIMIT: a size in MiB, at least SPEC_MIN_DISK_MB. */
static void test_disk_limit(void)
{
	static const struct {
		const char *in;
		int64_t want;	/* -1: refused */
	} cases[] = {
		{ "10g", 10240 }, { "512m", 512 }, { "16m", 16 }, { "1073741824", 1024 }, { "1.5G", 1536 },
		{ "15m", -1 }, { "0", -1 }, { "", -1 }, { "lots", -1 }, { "10 g", -1 }, { "-1g", -1 }, { "17t", -1 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int64_t mb = -7;
		int rc = sc_parse_disk_mb(cases[i].in, &mb);

		if (cases[i].want >= 0)
			ok(rc == 0 && mb == cases[i].want, "--disk-limit %s is %lld MiB (%lld)", cases[i].in,
			   (long long)cases[i].want, (long long)mb);
		else
			ok(rc < 0 && mb == -7, "--disk-limit \"%s\" is refused", cases[i].in);
	}
}

/* x-denv.runtime's names as denvd knows them. */
static void test_runtime_names(void)
{
	ok(rt_name_ok("runc") && rt_name_ok("gvisor"), "runc and gvisor are runtimes");
	ok(!rt_name_ok("runsc") && !rt_name_ok("") && !rt_name_ok("kata"), "runsc (Docker's name), \"\" and kata are not");
}

int main(void)
{
	test_disk_limit();
	test_runtime_names();
	test_urls();
	test_url_list();
	test_ids();
	test_flags();
	test_env_file();
	test_state();
	return tap_done();
}
