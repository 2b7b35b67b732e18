/* Fuzz target: passwd.c, an image's /etc/passwd and /etc/group and a
 * service's `user`. The input is the user value up to the first '\n', then
 * the passwd file up to the first NUL, then the group file. Whatever it
 * holds, a resolved id is within 0..PW_ID_MAX, a refusal says why, and the
 * answer agrees with the files' own lookups. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sidecar/sidecar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *nl = memchr(p, '\n', size), *nul;
	char user[PW_USER_MAX + 2];
	struct pw_files f;
	struct err e;
	size_t ulen, rest;
	long u, g, u2, g2;
	int need;

	ulen = nl ? (size_t)(nl - p) : size;
	if (ulen > PW_USER_MAX + 1)
		ulen = PW_USER_MAX + 1;
	memcpy(user, p, ulen);
	user[ulen] = '\0';	/* a NUL inside cuts it short, as a C string would */
	rest = nl ? size - (size_t)(nl + 1 - p) : 0;
	p = nl ? nl + 1 : p + size;
	nul = memchr(p, '\0', rest);
	memset(&f, 0, sizeof(f));
	f.passwd = p;
	f.passwd_len = nul ? (size_t)(nul - p) : rest;
	if (nul) {
		f.group = nul + 1;
		f.group_len = rest - f.passwd_len - 1;
	}
	need = pw_needs(user);
	err_clear(&e);
	if (pw_resolve(user, &f, &u, &g, &e) == 0) {
		if (need < 0 || u < 0 || u > PW_ID_MAX || g < 0 || g > PW_ID_MAX)
			abort();
		/* A name resolved through the file gives that entry's ids. */
		if (need & PW_NEED_PASSWD && !strchr(user, ':') && strspn(user, "0123456789") < strlen(user) &&
		    pw_user_by_name(f.passwd, f.passwd_len, user, strlen(user), &u2, &g2) == 1 &&
		    (u2 != u || g2 != g))
			abort();
	} else if (!e.msg[0]) {
		abort();
	}
	/* The files alone, with no value: lookups never read past len. */
	(void)pw_user_by_uid(f.passwd, f.passwd_len, 0, &g);
	(void)pw_group_by_name(f.group, f.group_len, "staff", 5, &g);
	return 0;
}
