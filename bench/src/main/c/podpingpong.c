// SPDX-License-Identifier: Apache-2.0
/*
 * A ping-pong between two processes, for NodeRttBench: each end in a pod of the node-shaped bed,
 * TCP_NODELAY, blocking read/write, SIZE bytes each way per round trip.
 *
 *   podpingpong server ADDR PORT CPU                    listen, print port=N, echo one connection
 *   podpingpong client ADDR PORT SIZE WARMUP ITER CPU [samples]
 *                                                       WARMUP + ITER round trips; prints
 *                                                       "p50=NS p99=NS p999=NS peer=ADDR:PORT", with
 *                                                       "samples" a second line "samples=NS,NS,..."
 *   podpingpong acceptor ADDR PORT CPU                  listen, print port=N, then for each connection
 *                                                       echo one 8-byte message and close it, until killed
 *   podpingpong connects ADDR PORT WARMUP ITER CPU      WARMUP + ITER connections, each timed from
 *                                                       socket() to its first 8-byte round trip; prints
 *                                                       "p50=NS p99=NS p999=NS"
 *
 * A negative CPU leaves the process to the scheduler. Exits 1 with a line on stderr on failure.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "peer_io.h"

static socklen_t addr_of(const char *ip, int port, struct sockaddr_storage *ss)
{
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, ip, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons(port);
		return sizeof(*a4);
	}
	if (inet_pton(AF_INET6, ip, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons(port);
		return sizeof(*a6);
	}
	errno = EINVAL;
	die(ip);
	return 0;
}

static long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000L + t.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	static char buf[1 << 20];
	struct sockaddr_storage ss;
	socklen_t len;
	int one = 1, fd;

	if (argc == 5 && !strcmp(argv[1], "server")) {
		int lfd, n;

		pin(atoi(argv[4]));
		len = addr_of(argv[2], atoi(argv[3]), &ss);
		lfd = socket(ss.ss_family, SOCK_STREAM, 0);
		setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (lfd < 0 || bind(lfd, (struct sockaddr *)&ss, len) || listen(lfd, 4))
			die("listen");
		getsockname(lfd, (struct sockaddr *)&ss, &len);
		printf("port=%d\n", ntohs(((struct sockaddr_in *)&ss)->sin_port));
		fflush(stdout);
		fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			die("accept");
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			if (full(fd, buf, n, 0))
				die("write");
		return 0;
	}
	if (argc == 5 && !strcmp(argv[1], "acceptor")) {
		int lfd;

		pin(atoi(argv[4]));
		len = addr_of(argv[2], atoi(argv[3]), &ss);
		lfd = socket(ss.ss_family, SOCK_STREAM, 0);
		setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (lfd < 0 || bind(lfd, (struct sockaddr *)&ss, len) || listen(lfd, 128))
			die("listen");
		getsockname(lfd, (struct sockaddr *)&ss, &len);
		printf("port=%d\n", ntohs(((struct sockaddr_in *)&ss)->sin_port));
		fflush(stdout);
		for (;;) {
			fd = accept(lfd, NULL, NULL);
			if (fd < 0)
				die("accept");
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			if (full(fd, buf, 8, 1) || full(fd, buf, 8, 0))
				die("echo");
			close(fd);
		}
	}
	if (argc == 7 && !strcmp(argv[1], "connects")) {
		long warmup = atol(argv[4]), iter = atol(argv[5]);
		long *lat = malloc(sizeof(long) * (iter > 0 ? iter : 1));
		struct sockaddr_storage to;
		socklen_t tolen = addr_of(argv[2], atoi(argv[3]), &to);

		if (iter <= 0 || !lat) {
			errno = EINVAL;
			die("arguments");
		}
		pin(atoi(argv[6]));
		for (long i = 0; i < warmup + iter; i++) {
			long t0 = now_ns();

			fd = socket(to.ss_family, SOCK_STREAM, 0);
			if (fd < 0 || connect(fd, (struct sockaddr *)&to, tolen))
				die("connect");
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			memcpy(buf, &i, 8);
			if (full(fd, buf, 8, 0) || full(fd, buf + 8, 8, 1) || memcmp(buf, buf + 8, 8))
				die("round trip");
			if (i >= warmup)
				lat[i - warmup] = now_ns() - t0;
			{
				/* An abortive close: no TIME_WAIT on this side, so the ports last any number of rounds. */
				struct linger abort_close = { .l_onoff = 1, .l_linger = 0 };

				setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_close, sizeof(abort_close));
			}
			close(fd);
		}
		qsort(lat, iter, sizeof(long), by_value);
		printf("p50=%ld p99=%ld p999=%ld\n", lat[iter / 2], lat[iter * 99 / 100], lat[iter * 999 / 1000]);
		fflush(stdout);
		return 0;
	}
	if ((argc == 8 || argc == 9) && !strcmp(argv[1], "client")) {
		long size = atol(argv[4]), warmup = atol(argv[5]), iter = atol(argv[6]);
		long *rtt = malloc(sizeof(long) * (iter > 0 ? iter : 1));
		char host[64];

		if (size <= 0 || size > (long)sizeof(buf) || iter <= 0 || !rtt) {
			errno = EINVAL;
			die("arguments");
		}
		pin(atoi(argv[7]));
		len = addr_of(argv[2], atoi(argv[3]), &ss);
		fd = socket(ss.ss_family, SOCK_STREAM, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&ss, len))
			die("connect");
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		for (long i = 0; i < warmup + iter; i++) {
			long t0 = now_ns();

			memset(buf, (int)i, size);
			if (full(fd, buf, size, 0) || full(fd, buf, size, 1))
				die("round trip");
			if (buf[size - 1] != (char)i) {
				errno = EBADMSG;
				die("echo");
			}
			if (i >= warmup)
				rtt[i - warmup] = now_ns() - t0;
		}
		len = sizeof(ss);
		getpeername(fd, (struct sockaddr *)&ss, &len);
		if (ss.ss_family == AF_INET)
			inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host, sizeof(host));
		else
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, host, sizeof(host));
		qsort(rtt, iter, sizeof(long), by_value);
		printf("p50=%ld p99=%ld p999=%ld peer=%s:%d\n", rtt[iter / 2], rtt[iter * 99 / 100],
		       rtt[iter * 999 / 1000], host, ntohs(((struct sockaddr_in *)&ss)->sin_port));
		if (argc > 8 && strcmp(argv[8], "samples") == 0) {
			printf("samples=");
			for (long i = 0; i < iter; i++)
				printf(i ? ",%ld" : "%ld", rtt[i]);
			printf("\n");
		}
		fflush(stdout);
		close(fd);
		return 0;
	}
	fprintf(stderr, "usage: podpingpong server ADDR PORT CPU | client ADDR PORT SIZE WARMUP ITER CPU | "
		"acceptor ADDR PORT CPU | connects ADDR PORT WARMUP ITER CPU\n");
	return 2;
}
