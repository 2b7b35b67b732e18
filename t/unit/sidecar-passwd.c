/* Unit tests: passwd.c, an image's /etc/passwd and /etc/group, and Docker's
 * rules for a service's `user` (what `docker run --user` does with them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sidecar/sidecar.h"
#include "tap.h"

static const char passwd[] =
	"root:x:0:0:root:/root:/bin/sh\n"
	"# a comment:x:5:5\n"
	"\n"
	"   \t\n"
	"daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\r\n"
	"agent:x:1234:1234::/home/agent:/bin/sh\n"
	"agent:x:999:999::/second:/bin/sh\n"	/* first match wins */
	"badid:x:12a:5::/:/bin/sh\n"
	"negative:x:-1:5::/:/bin/sh\n"
	"huge:x:2147483648:5::/:/bin/sh\n"
	"short:x:77\n"
	"+nis:x:7:7::/:/bin/sh\n"
	":x:8:8::/:/bin/sh\n"
	"four:x:4000:40\n"
	"  padded:x:3000:30::/:/bin/sh  ";	/* no final newline */

static const char group[] =
	"root:x:0:\n"
	"staff:x:50:agent\n"
	"agent:x:1234:\n"
	"staff:x:51:\n"
	"nogid:x::\n"
	"big:x:99999999999:\n"
	"three:x:60\n"
	"2000:x:70:\n";

static struct pw_files files(void)
{
	struct pw_files f = { passwd, sizeof(passwd) - 1, group, sizeof(group) - 1 };

	return f;
}

static void test_parser(void)
{
	long u = -1, g = -1;

	ok(pw_user_by_name(passwd, strlen(passwd), "agent", 5, &u, &g) == 1 && u == 1234 && g == 1234,
	   "a name gives its uid and primary gid");
	ok(pw_user_by_name(passwd, strlen(passwd), "daemon", 6, &u, &g) == 1 && u == 1 && g == 1,
	   "a CRLF line is read");
	ok(pw_user_by_name(passwd, strlen(passwd), "padded", 6, &u, &g) == 1 && u == 3000 && g == 30,
	   "blanks around a line are trimmed; a last line without newline counts");
	ok(pw_user_by_name(passwd, strlen(passwd), "four", 4, &u, &g) == 1 && u == 4000 && g == 40,
	   "four fields are enough for a passwd line");
	ok(pw_user_by_name(passwd, strlen(passwd), "badid", 5, &u, &g) == 0, "a non-numeric uid skips the line");
	ok(pw_user_by_name(passwd, strlen(passwd), "negative", 8, &u, &g) == 0, "a negative uid skips the line");
	ok(pw_user_by_name(passwd, strlen(passwd), "huge", 4, &u, &g) == 0, "a uid over 2^31-1 skips the line");
	ok(pw_user_by_name(passwd, strlen(passwd), "short", 5, &u, &g) == 0, "three fields skip the line");
	ok(pw_user_by_name(passwd, strlen(passwd), "+nis", 4, &u, &g) == 0, "NIS entries are skipped");
	ok(pw_user_by_name(passwd, strlen(passwd), "# a comment", 11, &u, &g) == 0, "comments are skipped");
	ok(pw_user_by_name(passwd, strlen(passwd), "", 0, &u, &g) == 0, "an empty name matches nothing");
	ok(pw_user_by_name(passwd, strlen(passwd), "agen", 4, &u, &g) == 0, "a prefix is not a match");
	ok(pw_user_by_uid(passwd, strlen(passwd), 1234, &g) == 1 && g == 1234, "by uid");
	ok(pw_user_by_uid(passwd, strlen(passwd), 8, &g) == 0, "an entry with an empty name is skipped");
	ok(pw_user_by_uid(passwd, strlen(passwd), 42, &g) == 0, "an unknown uid");
	ok(pw_user_by_uid(NULL, 0, 0, &g) == 0, "no file, no entry");
	ok(pw_group_by_name(group, strlen(group), "staff", 5, &g) == 1 && g == 50, "a group; the first wins");
	ok(pw_group_by_name(group, strlen(group), "three", 5, &g) == 1 && g == 60, "three fields make a group line");
	ok(pw_group_by_name(group, strlen(group), "nogid", 5, &g) == 0, "an empty gid skips the line");
	ok(pw_group_by_name(group, strlen(group), "big", 3, &g) == 0, "an 11-digit gid skips the line");

	{
		/* A NUL inside a line, and a line over PW_LINE_MAX, are skipped. */
		char nul[] = "ag\0nt:x:5:5::/:/bin/sh\nok:x:6:6::/:/bin/sh\n";
		static const char tail[] = "\nnext:x:10:10::/:/bin/sh\n";
		size_t big = PW_LINE_MAX + 100, n = big + sizeof(tail) - 1;
		char *p = malloc(n);

		ok(pw_user_by_name(nul, sizeof(nul) - 1, "ag", 2, &u, &g) == 0 &&
		   pw_user_by_name(nul, sizeof(nul) - 1, "ok", 2, &u, &g) == 1 && u == 6,
		   "a line with a NUL is skipped, the next one read");
		memset(p, 'a', big);
		memcpy(p, "long:x:9:9::/:", 14);
		memcpy(p + big, tail, sizeof(tail) - 1);
		ok(pw_user_by_name(p, n, "long", 4, &u, &g) == 0 && pw_user_by_name(p, n, "next", 4, &u, &g) == 1 &&
		   u == 10,
		   "a line over PW_LINE_MAX is skipped, the next one read");
		free(p);
	}
}

struct rcase {
	const char *user;
	int rc;
	long uid, gid;
	const char *msg;	/* part of the error */
};

static void test_resolve(void)
{
	static const struct rcase cases[] = {
		{ "agent", 0, 1234, 1234, NULL },
		{ "agent:staff", 0, 1234, 50, NULL },
		{ "agent:50", 0, 1234, 50, NULL },
		{ "agent:", 0, 1234, 1234, NULL },
		{ "1234", 0, 1234, 1234, NULL },	/* a known uid takes its entry's gid, as Docker does */
		{ "1234:staff", 0, 1234, 50, NULL },
		{ "998", 0, 998, 0, NULL },		/* an unknown uid runs with group 0 */
		{ "999:7", 0, 999, 7, NULL },
		{ "999", 0, 999, 999, NULL },		/* by uid, the second "agent" line */
		{ "0:50", 0, 0, 50, NULL },
		{ ":staff", 0, 0, 50, NULL },
		{ "2000", 0, 2000, 0, NULL },		/* a group named "2000" is no user */
		{ "1:2000", 0, 1, 2000, NULL },		/* digits are a gid, not a group name */
		{ "nobodyhere", -1, 0, 0, "user \"nobodyhere\" is not in the image's /etc/passwd" },
		{ "agent:nogroup", -1, 0, 0, "group \"nogroup\" is not in the image's /etc/group" },
		{ "badid", -1, 0, 0, "not in the image's /etc/passwd" },
		{ "2147483648", -1, 0, 0, "not uid[:gid]" },
		{ "1:99999999999", -1, 0, 0, "not uid[:gid]" },
		{ "a:b:c", -1, 0, 0, "not uid[:gid]" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct rcase *c = &cases[i];
		struct pw_files f = files();
		struct err e;
		long u = -1, g = -1;
		int rc;

		err_clear(&e);
		rc = pw_resolve(c->user, &f, &u, &g, &e);
		if (c->rc == 0)
			ok(rc == 0 && u == c->uid && g == c->gid, "\"%s\" -> %ld:%ld (got %d %ld:%ld %s)", c->user,
			   c->uid, c->gid, rc, u, g, e.msg);
		else
			ok(rc < 0 && strstr(e.msg, c->msg), "\"%s\" refused: %s", c->user, e.msg);
	}
}

static void test_no_files(void)
{
	struct pw_files none = { NULL, 0, NULL, 0 };
	struct err e;
	long u = -1, g = -1;

	ok(pw_resolve("1000", &none, &u, &g, &e) == 0 && u == 1000 && g == 0,
	   "no /etc/passwd: a bare uid runs with group 0");
	ok(pw_resolve("1000:5", NULL, &u, &g, &e) == 0 && u == 1000 && g == 5, "uid:gid needs no file");
	ok(pw_resolve("agent", &none, &u, &g, &e) < 0 && strstr(e.msg, "the image has no /etc/passwd"),
	   "a name with no /etc/passwd: %s", e.msg);
	ok(pw_resolve("0:staff", &none, &u, &g, &e) < 0 && strstr(e.msg, "the image has no /etc/group"),
	   "a group name with no /etc/group: %s", e.msg);
	ok(render_user("1000", &u, &g) == 0 && u == 1000 && g == 0, "render_user is the image-less rule");
	ok(render_user("agent", &u, &g) < 0 && render_user("", &u, &g) < 0, "render_user refuses names and empty");
}

static void test_needs(void)
{
	is_int(pw_needs("1000:1000"), 0, "uid:gid needs no file");
	is_int(pw_needs("1000"), PW_NEED_PASSWD, "a bare uid needs passwd (its entry's gid)");
	is_int(pw_needs("agent"), PW_NEED_PASSWD, "a name needs passwd");
	is_int(pw_needs("agent:staff"), PW_NEED_PASSWD | PW_NEED_GROUP, "name:group needs both");
	is_int(pw_needs("1000:staff"), PW_NEED_GROUP, "uid:group needs group");
	is_int(pw_needs("agent:50"), PW_NEED_PASSWD, "name:gid needs passwd");
	is_int(pw_needs("a:b:c"), -1, "two colons: refused");
	{
		char longer[PW_USER_MAX + 2];

		memset(longer, 'a', sizeof(longer) - 1);
		longer[sizeof(longer) - 1] = '\0';
		is_int(pw_needs(longer), -1, "a value over PW_USER_MAX is refused");
	}
}

int main(void)
{
	test_parser();
	test_resolve();
	test_no_files();
	test_needs();
	return tap_done();
}
