/* sidecar-engine-run: engine_run (src/sidecar/engine_run.c) on the argv
 * given, for t/integ/denvd-engine-run.sh. Prints "api" when the container
 * was created and started on the socket, "cli" when engine_run left it to
 * the docker CLI (and nothing behind). */
#include <stdio.h>

#include "base/log.h"
#include "sidecar/sidecar.h"

int main(int argc, char **argv)
{
	struct argv a;
	int rc;

	log_set_level(LOG_WARN);
	av_init(&a);
	for (int i = 1; i < argc; i++)
		av_add(&a, argv[i]);
	rc = engine_run(&a);
	av_release(&a);
	puts(rc == 1 ? "api" : "cli");
	return 0;
}
