/*
 * cloud_init.c: the user data a provisioned machine boots with (denvd.md,
 * "Provisioned machines"): install ca-certificates, curl, Docker and ZFS
 * tools, write /etc/denv/join.env (DENV_SERVER, DENV_JOIN_TOKEN; 0600, the
 * token is a credential), download denvd from this control plane's denvd URL
 * and run `denvd install --env-file /etc/denv/join.env`, whose systemd unit
 * runs `denvd join`. No ZFS pool is created: such a host reports dir storage.
 */
#include <string.h>

#include "base/buf.h"
#include "base/str.h"
#include "cp/cp.h"

/* The URLs end up inside single-quoted shell words and YAML block text:
 * allow only what a URL needs, never a quote, backslash, space or newline
 * (a URL that needs one of those can say it with %-escapes). */
static bool url_carriable(const char *u)
{
	static const char extra[] = "-._~:/?#[]@!$&()*+,;=%";

	return (str_has_prefix(u, "http://") || str_has_prefix(u, "https://")) && str_only(u, extra);
}

/* Tokens are "djt_" and base64url: nothing to quote, but check anyway. */
static bool token_carriable(const char *t)
{
	return str_has_prefix(t, "djt_") && str_only(t, "_-");
}

int cp_cloud_init(const struct cp *cp, const char *token, struct buf *out, struct err *e)
{
	char denvd[1024];

	cp_denvd_url(cp, denvd, sizeof(denvd));
	if (!url_carriable(cp->cfg.public_url))
		return err_set(e, "-public-url %s cannot be passed to cloud-init (it must be an http(s) URL "
				  "without quotes, spaces or backslashes)", cp->cfg.public_url);
	if (!url_carriable(denvd))
		return err_set(e, "-denvd-url %s cannot be passed to cloud-init (it must be an http(s) URL "
				  "without quotes, spaces or backslashes)", denvd);
	if (!token_carriable(token))
		return err_set(e, "the join token has an unexpected form");
	buf_reset(out);
	/* write_files carries both files as YAML block text, so no value needs
	 * YAML quoting; runcmd only names the script. */
	buf_addf(out,
		 "#cloud-config\n"
		 "package_update: true\n"
		 "packages:\n"
		 "  - ca-certificates\n"
		 "  - curl\n"
		 "  - docker.io\n"
		 "  - docker-compose-v2\n"
		 "  - zfsutils-linux\n"
		 "write_files:\n"
		 "  - path: /etc/denv/join.env\n"
		 "    permissions: '0600'\n"
		 "    content: |\n"
		 "      DENV_SERVER=%s\n"
		 "      DENV_JOIN_TOKEN=%s\n"
		 "  - path: /etc/denv/join.sh\n"
		 "    permissions: '0700'\n"
		 "    content: |\n"
		 "      #!/bin/sh\n"
		 "      set -eu\n"
		 "      curl -fsSL --retry 10 --retry-delay 3 '%s' -o /usr/local/bin/denvd.new\n"
		 "      chmod 0755 /usr/local/bin/denvd.new\n"
		 "      mv /usr/local/bin/denvd.new /usr/local/bin/denvd\n"
		 "      exec /usr/local/bin/denvd install --env-file /etc/denv/join.env\n"
		 "runcmd:\n"
		 "  - [sh, /etc/denv/join.sh]\n",
		 cp->cfg.public_url, token, denvd);
	if (out->len > CP_USER_DATA_MAX)
		return err_set(e, "cloud-init user data is %zu bytes, more than the provider takes (%zu)", out->len,
			       CP_USER_DATA_MAX);
	return 0;
}
