/* subnet.c: a small subnet of its own for every environment network.
 *
 * Left to itself, dockerd hands each new network a /16 or /20 from its default
 * address pools, which run out after about 31 networks: a host could hold only
 * that many environments, where forks per rollout want hundreds. So denvd
 * carves /25 blocks (126 addresses: more than a spec's 64 services) out of its
 * own pool, DENV_SUBNET_POOL (default 10.208.0.0/12: 8192 networks), starting
 * at a block chosen by a hash of the environment and moving on while Docker
 * answers that a block overlaps one in use.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crypto.h"
#include "base/str.h"
#include "sidecar/sidecar.h"

int subnet_pool(struct subnet_pool *p, struct err *e)
{
	const char *s = getenv("DENV_SUBNET_POOL");
	char addr[INET_ADDRSTRLEN];
	const char *slash;
	struct in_addr in;
	int prefix;

	if (!s || !*s)
		s = SUBNET_POOL_DEFAULT;
	slash = strchr(s, '/');
	if (!slash || (size_t)(slash - s) >= sizeof(addr))
		return err_set(e, "DENV_SUBNET_POOL \"%s\" is not an IPv4 CIDR such as %s", s, SUBNET_POOL_DEFAULT);
	memcpy(addr, s, (size_t)(slash - s));
	addr[slash - s] = '\0';
	if (inet_pton(AF_INET, addr, &in) != 1 || str_to_int(slash + 1, &prefix) < 0 ||
	    prefix < 8 || prefix > SUBNET_BLOCK_PREFIX)
		return err_set(e, "DENV_SUBNET_POOL \"%s\" must be an IPv4 CIDR from /8 to /%d",
			       s, SUBNET_BLOCK_PREFIX);
	p->prefix = prefix;
	p->base = ntohl(in.s_addr) & (prefix ? ~0u << (32 - prefix) : 0);
	p->blocks = 1u << (SUBNET_BLOCK_PREFIX - prefix);
	return 0;
}

uint32_t subnet_first(const struct subnet_pool *p, const char *project)
{
	unsigned char h[32];

	if (sha256(project, strlen(project), h) < 0)
		return 0;
	return (((uint32_t)h[0] << 24) | ((uint32_t)h[1] << 16) | ((uint32_t)h[2] << 8) | h[3]) % p->blocks;
}

void subnet_block(const struct subnet_pool *p, uint32_t i, char out[SUBNET_CIDR_MAX])
{
	uint32_t a = p->base + ((i % p->blocks) << (32 - SUBNET_BLOCK_PREFIX));

	snprintf(out, SUBNET_CIDR_MAX, "%u.%u.%u.%u/%d", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255,
		 SUBNET_BLOCK_PREFIX);
}
