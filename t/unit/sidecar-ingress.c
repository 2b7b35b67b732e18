/*
 * Unit tests: ingress_cfg.c, the pure parts of the ingress proxy. The
 * config round-trips and every malformed one is refused with a message;
 * port strings are checked; one direction's buffer moves bytes in any
 * split of reads and writes, stops reading when full (backpressure),
 * compacts instead of growing, and asks for the half-close only after the
 * last pending byte is out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sidecar/sidecar.h"
#include "tap.h"

static void config_cases(void)
{
	static const struct {
		const char *text, *want;	/* want: a piece of the error, NULL when valid */
	} cases[] = {
		{ "{\"env\":\"env_A\",\"service\":\"web\",\"container\":\"env_a-web-1\","
		  "\"ports\":[{\"container\":5000,\"host\":41234},{\"container\":81,\"host\":41235}]}", NULL },
		{ "[]", "not an object" },
		{ "{", "ingress config" },
		{ "{\"service\":\"web\",\"container\":\"c\",\"ports\":[{\"container\":1,\"host\":2}]}", "\"env\" missing" },
		{ "{\"env\":\"e\",\"service\":\"web\",\"ports\":[{\"container\":1,\"host\":2}]}", "\"container\" missing" },
		{ "{\"env\":\"e\",\"service\":\"web\",\"container\":\"c\",\"ports\":[]}", "non-empty list" },
		{ "{\"env\":\"e\",\"service\":\"web\",\"container\":\"c\",\"ports\":{}}", "non-empty list" },
		{ "{\"env\":\"e\",\"service\":\"web\",\"container\":\"c\",\"ports\":[{\"container\":0,\"host\":2}]}", "1..65535" },
		{ "{\"env\":\"e\",\"service\":\"web\",\"container\":\"c\",\"ports\":[{\"container\":1,\"host\":65536}]}", "1..65535" },
		{ "{\"env\":\"e\",\"service\":\"web\",\"container\":\"c\",\"ports\":[{\"container\":\"1\",\"host\":2}]}", "1..65535" },
		{ "{\"env\":\"e\",\"service\":\"web\",\"container\":\"c\",\"ports\":[{\"container\":1,\"host\":2},"
		  "{\"container\":3,\"host\":2}]}", "repeats" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ig_config c;
		struct err e;
		int rc;

		err_clear(&e);
		rc = ig_config_parse(cases[i].text, strlen(cases[i].text), &c, &e);
		if (!cases[i].want)
			ok(rc == 0, "config %zu parses (%s)", i, e.msg);
		else
			ok(rc < 0 && strstr(e.msg, cases[i].want), "config %zu refused: %s", i, e.msg);
	}
	{
		struct ig_config c, d;
		struct err e;
		char *text;

		ig_config_parse(cases[0].text, strlen(cases[0].text), &c, &e);
		is_str(c.container, "env_a-web-1", "container");
		is_int(c.nports, 2, "two ports");
		is_int(c.ports[1].container, 81, "second container port");
		is_int(c.ports[1].host, 41235, "second host port");
		text = ig_config_format(&c);
		ok(ig_config_parse(text, strlen(text), &d, &e) == 0 && memcmp(&c, &d, sizeof(c)) == 0,
		   "format then parse gives the same config");
		free(text);
	}
	{
		/* More ports than the cap. */
		char *big = malloc(128 * 1024);
		size_t n = 0;
		struct ig_config c;
		struct err e;

		n += (size_t)snprintf(big + n, 128 * 1024 - n, "{\"env\":\"e\",\"service\":\"s\",\"container\":\"c\",\"ports\":[");
		for (int i = 0; i <= IG_MAX_PORTS; i++)
			n += (size_t)snprintf(big + n, 128 * 1024 - n, "%s{\"container\":%d,\"host\":%d}", i ? "," : "",
					      i + 1, i + 10000);
		n += (size_t)snprintf(big + n, 128 * 1024 - n, "]}");
		ok(ig_config_parse(big, n, &c, &e) < 0 && strstr(e.msg, "more than"), "too many ports: %s", e.msg);
		free(big);
	}
}

static void port_cases(void)
{
	static const struct {
		const char *s;
		int want;	/* -1: refused */
	} cases[] = {
		{ "5000", 5000 }, { "1", 1 }, { "65535", 65535 }, { "0", -1 }, { "65536", -1 }, { "", -1 },
		{ "80/tcp", -1 }, { "-1", -1 }, { " 80", -1 }, { "0080", 80 }, { "999999", -1 }, { "8o", -1 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int p = -1, rc = ig_port_parse(cases[i].s, &p);

		ok(cases[i].want < 0 ? rc < 0 : rc == 0 && p == cases[i].want, "port \"%s\"", cases[i].s);
	}
	{
		int p;

		ok(ig_port_parse(NULL, &p) < 0, "port NULL refused");
	}
}

/* Push src through a direction with reads of rsz and writes of wsz bytes. */
static bool through(const char *src, size_t len, size_t cap, size_t rsz, size_t wsz)
{
	char *buf = malloc(cap), *out = malloc(len + 1);
	struct ig_dir d;
	size_t in = 0, got = 0, steps = 0;
	bool ok_ = true;

	ig_dir_init(&d, buf, cap);
	while (!ig_dir_need_shut(&d) && steps++ < 10 * len + 100) {
		if (ig_dir_want_read(&d)) {
			size_t room, n;
			char *p = ig_dir_space(&d, &room);

			ok_ &= room > 0;
			n = len - in < rsz ? len - in : rsz;
			n = n < room ? n : room;
			if (n == 0 && in == len)
				d.eof = true;
			memcpy(p, src + in, n);
			ig_dir_filled(&d, n);
			in += n;
			ok_ &= d.off + d.len <= d.cap;
		}
		if (ig_dir_want_write(&d)) {
			size_t pend, n;
			const char *p = ig_dir_pending(&d, &pend);

			n = pend < wsz ? pend : wsz;
			memcpy(out + got, p, n);
			ig_dir_drained(&d, n);
			got += n;
		}
	}
	ok_ &= got == len && memcmp(src, out, len) == 0 && ig_dir_need_shut(&d);
	free(buf);
	free(out);
	return ok_;
}

static void dir_cases(void)
{
	char buf[8], src[1000];
	struct ig_dir d;
	size_t n;
	char *p;

	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (char)(i * 7 + 3);
	ig_dir_init(&d, buf, sizeof(buf));
	ok(ig_dir_want_read(&d) && !ig_dir_want_write(&d) && !ig_dir_need_shut(&d), "empty: read, no write");
	p = ig_dir_space(&d, &n);
	ok(p == buf && n == 8, "all of it free");
	memcpy(p, "abcdefgh", 8);
	ig_dir_filled(&d, 8);
	ok(!ig_dir_want_read(&d) && ig_dir_want_write(&d), "full: no read (backpressure), write");
	ig_dir_drained(&d, 3);
	p = ig_dir_space(&d, &n);
	ok(n == 3 && p == buf + 5 && memcmp(buf, "defgh", 5) == 0, "a full tail compacts to the front");
	ok(ig_dir_want_read(&d), "room again: read");
	ig_dir_drained(&d, 5);
	ok(d.off == 0 && d.len == 0, "drained: back to the start");
	d.eof = true;
	ok(ig_dir_need_shut(&d) && !ig_dir_want_read(&d), "eof and nothing pending: shut, no read");
	ig_dir_init(&d, buf, sizeof(buf));
	p = ig_dir_space(&d, &n);
	memcpy(p, "xy", 2);
	ig_dir_filled(&d, 2);
	d.eof = true;
	ok(!ig_dir_need_shut(&d) && ig_dir_want_write(&d), "eof with bytes pending: write them first");
	ig_dir_drained(&d, 100);
	ok(d.len == 0 && ig_dir_need_shut(&d), "over-drain is clamped; then shut");
	d.shut = true;
	ok(!ig_dir_need_shut(&d) && !ig_dir_want_write(&d), "shut once");
	{
		static const size_t sizes[][3] = {
			{ 8, 1, 1 }, { 8, 3, 5 }, { 8, 5, 3 }, { 8, 8, 8 }, { 8, 100, 1 }, { 7, 1, 100 },
			{ 64, 13, 17 }, { 1, 1, 1 }, { 1000, 1000, 999 },
		};
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
			ok(through(src, sizeof(src), sizes[i][0], sizes[i][1], sizes[i][2]),
			   "1000 bytes through a %zu-byte buffer, reads of %zu, writes of %zu", sizes[i][0], sizes[i][1],
			   sizes[i][2]);
		ok(through(src, 0, 8, 1, 1), "nothing at all: straight to the shut");
	}
}

int main(void)
{
	config_cases();
	port_cases();
	dir_cases();
	return tap_done();
}
