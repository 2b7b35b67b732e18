/*
 * sys.h: system-call wrappers that retry EINTR and loop over short transfers.
 */
#ifndef DENV_SYS_H
#define DENV_SYS_H

#include <stddef.h>
#include <sys/types.h>

/* Write all n bytes (retrying EINTR and short writes). 0, or -1 with errno. */
int sys_write_all(int fd, const void *p, size_t n);
/* read(2) that retries EINTR. */
ssize_t sys_read(int fd, void *p, size_t n);
/* Read until EOF or n bytes. Returns bytes read or -1. */
ssize_t sys_read_full(int fd, void *p, size_t n);
int sys_set_nonblock(int fd, int on);
int sys_set_cloexec(int fd);
/* close(2) that keeps errno. */
void sys_close(int fd);

#endif
