/* progress.c: a command's progress lines (sidecar.h). A worker's stdout
 * carries them to the agent, one line each; every command writes them, so
 * they live apart from worker.c, which runs the commands. */
#include <stdarg.h>
#include <stdio.h>

#include "base/log.h"
#include "base/sys.h"
#include "sidecar/sidecar.h"

void wk_progress(const char *fmt, ...)
{
	char line[SC_PROGRESS_LINE_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	for (int i = 0; i < n; i++)
		if (line[i] == '\n')
			line[i] = ' ';
	line[n++] = '\n';
	/* The agent may be gone (killed mid-command): the work goes on regardless. */
	(void)sys_write_all(1, line, (size_t)n);
	log_debug("worker", "%.*s", n - 1, line);
}
