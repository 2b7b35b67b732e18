/* Unit tests: utf8 validation, incremental validation, encoding. */
#include <string.h>

#include "base/utf8.h"
#include "tap.h"

struct utf8_case {
	const char *bytes;
	bool valid;
	const char *name;
};

static const struct utf8_case cases[] = {
	{ "plain ascii", true, "ascii" },
	{ "caf\xc3\xa9", true, "two-byte" },
	{ "\xe2\x82\xac", true, "three-byte euro" },
	{ "\xf0\x9f\x98\x80", true, "four-byte emoji" },
	{ "\xf4\x8f\xbf\xbf", true, "U+10FFFF" },
	{ "\xc0\xaf", false, "overlong two-byte slash" },
	{ "\xe0\x80\xaf", false, "overlong three-byte" },
	{ "\xf0\x80\x80\xaf", false, "overlong four-byte" },
	{ "\xed\xa0\x80", false, "surrogate U+D800" },
	{ "\xf4\x90\x80\x80", false, "past U+10FFFF" },
	{ "\xc3", false, "truncated two-byte" },
	{ "\xe2\x82", false, "truncated three-byte" },
	{ "\x80", false, "lone continuation" },
	{ "\xff", false, "0xFF" },
	{ "a\xc3\xa9\xc3", false, "valid then truncated" },
};

int main(void)
{
	char out[4];
	uint32_t st;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct utf8_case *c = &cases[i];
		size_t n = strlen(c->bytes);
		bool whole, pieces = true;

		whole = utf8_valid(c->bytes, n);
		ok(whole == c->valid, "utf8_valid: %s", c->name);
		/* The same bytes one at a time must give the same verdict. */
		st = 0;
		for (size_t j = 0; j < n && pieces; j++)
			pieces = utf8_feed(&st, c->bytes + j, 1);
		ok((pieces && st == 0) == c->valid, "utf8_feed bytewise: %s", c->name);
	}
	is_int(utf8_encode(0x41, out), 1, "encode ascii");
	ok(utf8_encode(0x1F600, out) == 4 && memcmp(out, "\xf0\x9f\x98\x80", 4) == 0, "encode emoji");
	is_int(utf8_encode(0xD800, out), 0, "surrogate refused");
	is_int(utf8_encode(0x110000, out), 0, "past max refused");
	return tap_done();
}
