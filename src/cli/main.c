/* main.c: the denv command table (the dispatcher is dispatch.c). */
#include <signal.h>
#include <stdlib.h>

#include "cli/cli.h"

static const struct cli_cmd *const commands[] = {
	&cli_cmd_login, &cli_cmd_whoami, &cli_cmd_keys, &cli_cmd_templates, &cli_cmd_init,
	&cli_cmd_project, &cli_cmd_cloud, &cli_cmd_host, &cli_cmd_deploy, &cli_cmd_env,
	&cli_cmd_fork, &cli_cmd_snapshot, &cli_cmd_verify, &cli_cmd_rollback, &cli_cmd_redeploy, &cli_cmd_promote, &cli_cmd_sheet,
	&cli_cmd_exec, &cli_cmd_bg, &cli_cmd_pause, &cli_cmd_resume,
	&cli_cmd_files, &cli_cmd_deployment, &cli_cmd_events, &cli_cmd_quotas, &cli_cmd_batch, &cli_cmd_logs,
	&cli_cmd_metrics, &cli_cmd_mcp, &cli_cmd_import, &cli_cmd_export, &cli_cmd_top, NULL,
};

static const char *process_getenv(const char *name)
{
	return getenv(name);
}

int main(int argc, char **argv)
{
	/* A closed pipe (denv ... | head) ends the write, not the process. */
	signal(SIGPIPE, SIG_IGN);
	return cli_main(commands, argc, argv, process_getenv);
}
