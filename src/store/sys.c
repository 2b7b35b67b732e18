/* sys.c: the store's default system-call table (see struct st_sys in store.h). */
#include "store/store.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* open(2) is variadic; the table wants a fixed signature. */
static int real_open(const char *path, int flags, mode_t mode)
{
	return open(path, flags, mode);
}

static const struct st_sys st_sys_real = {
	.open = real_open,
	.close = close,
	.pread = pread,
	.pwrite = pwrite,
	.fsync = fsync,
	.fdatasync = fdatasync,
	.ftruncate = ftruncate,
	.rename = rename,
	.unlink = unlink,
	.fstat = fstat,
	.flock = flock,
};

const struct st_sys *st_sys_default(void)
{
	return &st_sys_real;
}
