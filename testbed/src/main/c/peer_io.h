// SPDX-License-Identifier: Apache-2.0
/*
 * What the C peers share: the test bed's peer.c and the benchmarks' podpingpong.c (compiled with
 * -I on this directory). Blocking sockets only.
 */
#ifndef SM4J_PEER_IO_H
#define SM4J_PEER_IO_H

#include <sys/types.h>
#include <unistd.h>

/* Reads (reading != 0) or writes all n bytes of buf on fd: 0, or -1 on an error or an early end. */
static int full(int fd, char *buf, long n, int reading)
{
	long done = 0;

	while (done < n) {
		ssize_t r = reading ? read(fd, buf + done, n - done) : write(fd, buf + done, n - done);

		if (r <= 0)
			return -1;
		done += r;
	}
	return 0;
}

#endif
