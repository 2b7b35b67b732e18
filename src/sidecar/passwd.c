/* passwd.c: the uid and gid a service's `user` runs as, by Docker's rules,
 * from the IMAGE's /etc/passwd and /etc/group (never this host's).
 *
 * Docker's rules (moby's user.GetExecUser, checked against dockerd here):
 *   "name"           the first passwd entry of that name: its uid and gid
 *   "uid"            the first passwd entry with that uid gives the gid;
 *                    without one, gid 0
 *   "x:group"        the user as above; the gid of the first group entry of
 *                    that name
 *   "x:gid"          the user as above; that gid
 *   ""               root (":g" likewise, with g's gid)
 * A name missing from the file (or a file missing from the image) is an
 * error; numbers need no entry. Ids above PW_ID_MAX are refused.
 *
 * The parser is strict where Docker's is lax, and allocates nothing:
 *   - a file is read by the caller up to PW_FILE_MAX bytes (over: refused);
 *   - lines are split at '\n' and trimmed of blanks ("\r" included); empty
 *     lines and '#' comments are skipped;
 *   - a malformed line is skipped, never guessed at: one over PW_LINE_MAX
 *     bytes, one holding a NUL, fewer than 4 fields (passwd: name, password,
 *     uid, gid) or 3 (group: name, password, gid), an empty name or one over
 *     PW_NAME_MAX, a NIS "+"/"-" entry, an id that is not 1 to 10 decimal
 *     digits or is above PW_ID_MAX. (Docker reads a bad id as 0, root: here
 *     such a line is as good as absent.) Fields past those are ignored. */
#include <stdio.h>
#include <string.h>

#include "base/str.h"
#include "sidecar/sidecar.h"

struct view {
	const char *s;
	size_t n;
};

/* The next line of buf at *pos, trimmed; false at the end. */
static bool next_line(const char *buf, size_t len, size_t *pos, struct view *line)
{
	const char *nl, *s, *end;

	if (*pos >= len)
		return false;
	s = buf + *pos;
	nl = memchr(s, '\n', len - *pos);
	end = nl ? nl : buf + len;
	*pos = (size_t)(end - buf) + (nl ? 1 : 0);
	while (s < end && (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\v' || *s == '\f'))
		s++;
	while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r' || end[-1] == '\v' ||
			   end[-1] == '\f'))
		end--;
	line->s = s;
	line->n = (size_t)(end - s);
	return true;
}

/* Split a usable line into its first max fields; how many it has (at most
 * max), or 0 for a line to skip. */
static size_t fields(struct view line, struct view *f, size_t max)
{
	size_t k = 0, start = 0;

	if (line.n == 0 || line.n > PW_LINE_MAX || line.s[0] == '#' || memchr(line.s, '\0', line.n))
		return 0;
	for (size_t i = 0; i <= line.n && k < max; i++) {
		if (i == line.n || line.s[i] == ':') {
			f[k].s = line.s + start;
			f[k].n = i - start;
			k++;
			start = i + 1;
		}
	}
	if (f[0].n == 0 || f[0].n > PW_NAME_MAX || f[0].s[0] == '+' || f[0].s[0] == '-')
		return 0;
	return k;
}

/* 1 to 10 decimal digits, at most PW_ID_MAX. */
static bool id_of(struct view v, long *out)
{
	long x = 0;

	if (v.n == 0 || v.n > 10)
		return false;
	for (size_t i = 0; i < v.n; i++) {
		if (v.s[i] < '0' || v.s[i] > '9')
			return false;
		x = x * 10 + (v.s[i] - '0');	/* 10 digits fit a 64-bit long; checked below */
	}
	if (x > PW_ID_MAX)
		return false;
	*out = x;
	return true;
}

static bool same(struct view v, const char *s, size_t n)
{
	return v.n == n && memcmp(v.s, s, n) == 0;
}

/* The first passwd entry matching name (name != NULL) or uid. */
static int find_user(const char *buf, size_t len, const char *name, size_t nlen, long uid, long *ouid,
		     long *ogid)
{
	struct view line, f[4];
	size_t pos = 0;
	long u, g;

	while (buf && next_line(buf, len, &pos, &line)) {
		if (fields(line, f, 4) < 4 || !id_of(f[2], &u) || !id_of(f[3], &g))
			continue;
		if (name ? same(f[0], name, nlen) : u == uid) {
			*ouid = u;
			*ogid = g;
			return 1;
		}
	}
	return 0;
}

int pw_user_by_name(const char *buf, size_t len, const char *name, size_t nlen, long *uid, long *gid)
{
	return name ? find_user(buf, len, name, nlen, 0, uid, gid) : 0;
}

int pw_user_by_uid(const char *buf, size_t len, long uid, long *gid)
{
	long u;

	return find_user(buf, len, NULL, 0, uid, &u, gid);
}

int pw_group_by_name(const char *buf, size_t len, const char *name, size_t nlen, long *gid)
{
	struct view line, f[3];
	size_t pos = 0;
	long g;

	while (buf && next_line(buf, len, &pos, &line)) {
		if (fields(line, f, 3) < 3 || !id_of(f[2], &g))
			continue;
		if (same(f[0], name, nlen)) {
			*gid = g;
			return 1;
		}
	}
	return 0;
}

static bool all_digits(struct view v)
{
	for (size_t i = 0; i < v.n; i++)
		if (v.s[i] < '0' || v.s[i] > '9')
			return false;
	return v.n > 0;
}

/* A spec split into its user and group parts (group NULL without a ':').
 * -1 for one that no image can satisfy: too long, or a second ':'. */
struct spec {
	struct view user, group;
	bool has_group, user_num, group_num;
	long uid, gid;
};

static int split(const char *user, struct spec *s)
{
	size_t n = user ? strlen(user) : 0;
	const char *colon = n ? memchr(user, ':', n) : NULL;

	memset(s, 0, sizeof(*s));
	if (n > PW_USER_MAX || (colon && memchr(colon + 1, ':', n - (size_t)(colon + 1 - user))))
		return -1;
	s->user.s = n ? user : "";
	s->user.n = colon ? (size_t)(colon - user) : n;
	if (colon && colon[1]) {	/* "x:" is "x", as in Docker */
		s->has_group = true;
		s->group.s = colon + 1;
		s->group.n = n - (size_t)(colon + 1 - user);
	}
	/* An empty user is root (Docker's default uid 0). */
	s->user_num = s->user.n == 0 || id_of(s->user, &s->uid);
	s->group_num = s->has_group && id_of(s->group, &s->gid);
	/* Digits that are out of range are neither a number nor a name. */
	if ((!s->user_num && all_digits(s->user)) || (s->has_group && !s->group_num && all_digits(s->group)))
		return -1;
	return 0;
}

int pw_needs(const char *user)
{
	struct spec s;
	int need = 0;

	if (split(user, &s) < 0)
		return -1;
	if (!s.user_num || !s.has_group)	/* a bare uid takes its entry's gid */
		need |= PW_NEED_PASSWD;
	if (s.has_group && !s.group_num)
		need |= PW_NEED_GROUP;
	return need;
}

int pw_resolve(const char *user, const struct pw_files *f, long *uid, long *gid, struct err *e)
{
	static const struct pw_files none;
	char name[PW_USER_MAX + 1];
	struct spec s;
	long u = 0, g = 0;

	if (!f)
		f = &none;
	if (split(user, &s) < 0)
		return err_set(e, "user \"%.*s\": not uid[:gid] or name[:group]", PW_USER_MAX, user ? user : "");
	if (s.user_num) {
		u = s.uid;
		if (!pw_user_by_uid(f->passwd, f->passwd_len, u, &g))
			g = 0;	/* a uid the image does not know runs with group 0 */
	} else if (!pw_user_by_name(f->passwd, f->passwd_len, s.user.s, s.user.n, &u, &g)) {
		snprintf(name, sizeof(name), "%.*s", (int)s.user.n, s.user.s);
		return f->passwd ? err_set(e, "user \"%s\" is not in the image's /etc/passwd", name)
				 : err_set(e, "user \"%s\": the image has no /etc/passwd", name);
	}
	if (s.group_num) {
		g = s.gid;
	} else if (s.has_group && !pw_group_by_name(f->group, f->group_len, s.group.s, s.group.n, &g)) {
		snprintf(name, sizeof(name), "%.*s", (int)s.group.n, s.group.s);
		return f->group ? err_set(e, "group \"%s\" is not in the image's /etc/group", name)
				: err_set(e, "group \"%s\": the image has no /etc/group", name);
	}
	*uid = u;
	*gid = g;
	return 0;
}
