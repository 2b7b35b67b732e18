/* sys.c: see sys.h. */
#include "base/sys.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

int sys_write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n > 0) {
		ssize_t w = write(fd, c, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

ssize_t sys_read(int fd, void *p, size_t n)
{
	ssize_t r;

	do
		r = read(fd, p, n);
	while (r < 0 && errno == EINTR);
	return r;
}

ssize_t sys_read_full(int fd, void *p, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = sys_read(fd, (char *)p + got, n - got);
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

int sys_set_nonblock(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -1;
	fl = on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK;
	return fcntl(fd, F_SETFL, fl);
}

int sys_set_cloexec(int fd)
{
	int fl = fcntl(fd, F_GETFD);

	if (fl < 0)
		return -1;
	return fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
}

void sys_close(int fd)
{
	int saved = errno;

	if (fd >= 0)
		close(fd);
	errno = saved;
}
