/* Unit tests: which commands on one environment may run side by side. */
#include "sidecar/agent/dispatch.h"
#include "tap.h"

int main(void)
{
	static const struct {
		const char *running, *queued;
		bool ok;
	} cases[] = {
		{ "env.exec", "env.exec", true },    /* a kill beside the command it kills */
		{ "env.exec", "env.put", false },    /* file moves wait their turn */
		{ "env.put", "env.exec", false },
		{ "env.exec", "env.snapshot", false }, /* lifecycle waits for the exec */
		{ "env.destroy", "env.exec", false },
		{ "env.fork", "env.exec", false },
		{ "env.create", "env.create", false },
		{ "env.bg.get", "env.exec", true },	/* a wait does not hold up an exec */
		{ "env.exec", "env.bg.start", true },
		{ "env.bg.get", "env.bg.signal", true }, /* nor a kill of what it waits for */
		{ "env.bg.get", "env.destroy", false },
		{ "env.snapshot", "env.bg.list", false },
		{ "env.bg.get", "env.pause", true },	/* a pause freezes a waiting command */
		{ "env.exec", "env.resume", true },
		{ "env.pause", "env.exec", false },
		{ "env.snapshot", "env.pause", false },
		{ "env.create", "env.logs", true },	/* a deploy's logs while it runs */
		{ "env.snapshot", "env.metrics", true },
		{ "env.metrics", "env.destroy", true },	/* a read never holds the lifecycle back */
		{ "env.logs", "env.exec", true },
		{ "env.put", "env.get", false },	/* env.get reads a file an env.put may be writing */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ok(dispatch_may_overlap(cases[i].running, cases[i].queued) == cases[i].ok, "%s running, %s queued: %s",
		   cases[i].running, cases[i].queued, cases[i].ok ? "may start" : "waits");
	return tap_done();
}
