// SPDX-License-Identifier: Apache-2.0
/*
 * The C reference of RttBench: the same ping-pong as PingPong.java (a client and an echo thread in
 * one process, one loopback connection, TCP_NODELAY, SIZE bytes each way per round trip), written
 * the way a C service would: blocking read/write, or MSG_DONTWAIT in a loop when SPIN is 1. SPIN 2
 * spins as SockmapChannel does: after two reads in a row that found nothing, poll(2) with no
 * timeout before each recv(2), which keeps the spinning reader off the socket's lock.
 *
 *   pingpong SIZE WARMUP ITERATIONS SPIN CLIENT_CPU ECHO_CPU
 *
 * Listens on 127.0.0.1, any free port, prints "port=N" and waits for a line on stdin (RttBench opts
 * the port in, or not, meanwhile); then runs WARMUP + ITERATIONS round trips and prints
 * "p50=NS p99=NS p999=NS cpu=NS_PER_ROUND_TRIP count=N". A negative CPU leaves that thread to the
 * scheduler. Exits 1 with a line on stderr on any failure.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

static int size, spin, listener, echo_cpu;

/* All of n bytes; 0 on end of stream before any byte, -1 on error. */
static long full(int fd, char *buf, long n, int reading)
{
	long done = 0;
	int empty = 0; /* reads in a row that found nothing */

	while (done < n) {
		ssize_t r;

		if (reading && spin == 2 && empty >= 2) {
			/* Spin on poll, which does not take the socket's lock, until there is something to read. */
			struct pollfd p = {.fd = fd, .events = POLLIN};

			if (poll(&p, 1, 0) == 0)
				continue;
		}
		r = reading ? recv(fd, buf + done, n - done, spin ? MSG_DONTWAIT : 0)
			    : send(fd, buf + done, n - done, spin ? MSG_DONTWAIT : 0);
		empty = r < 0 && errno == EAGAIN ? empty + 1 : 0;
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			return done ? -1 : 0;
		done += r;
	}
	return done;
}

static void nodelay(int fd)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)))
		die("TCP_NODELAY");
}

static void *echo(void *unused)
{
	char *buf = malloc(size);
	int fd = accept(listener, NULL, NULL);

	(void)unused;
	if (fd < 0 || !buf)
		die("accept");
	pin(echo_cpu);
	nodelay(fd);
	for (;;) {
		long n = full(fd, buf, size, 1);

		if (n <= 0)
			break;
		if (full(fd, buf, size, 0) < 0)
			die("echo write");
	}
	close(fd);
	free(buf);
	return NULL;
}

static int by_value(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	return x < y ? -1 : x > y;
}

static long nanos(clockid_t clock)
{
	struct timespec t;

	clock_gettime(clock, &t);
	return t.tv_sec * 1000000000L + t.tv_nsec;
}

/* As HdrHistogram's getValueAtPercentile: the smallest value that p percent of values do not exceed. */
static long at(const long *sorted, long n, double p)
{
	long i = (long)(p / 100 * n + 0.999999) - 1;

	return sorted[i < 0 ? 0 : i >= n ? n - 1 : i];
}

int main(int argc, char **argv)
{
	struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(addr);
	long warmup, iterations, *rtt, cpu0 = 0;
	pthread_t thread;
	char *out, *in, line[16];
	int fd, client_cpu;

	if (argc != 7) {
		fprintf(stderr, "usage: pingpong SIZE WARMUP ITERATIONS SPIN CLIENT_CPU ECHO_CPU\n");
		return 2;
	}
	size = atoi(argv[1]);
	warmup = atol(argv[2]);
	iterations = atol(argv[3]);
	spin = atoi(argv[4]);
	client_cpu = atoi(argv[5]);
	echo_cpu = atoi(argv[6]);
	out = malloc(size);
	in = malloc(size);
	rtt = malloc(sizeof(long) * (iterations ? iterations : 1));
	if (size <= 0 || iterations <= 0 || !out || !in || !rtt) {
		fprintf(stderr, "pingpong: SIZE and ITERATIONS must be positive\n");
		return 2;
	}
	memset(out, 0x5a, size);
	listener = socket(AF_INET, SOCK_STREAM, 0);
	if (listener < 0 || bind(listener, (struct sockaddr *)&addr, sizeof(addr)) || listen(listener, 1) ||
	    getsockname(listener, (struct sockaddr *)&addr, &len))
		die("listen");
	printf("port=%d\n", ntohs(addr.sin_port));
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1; /* the benchmark went away */
	if (pthread_create(&thread, NULL, echo, NULL))
		die("pthread_create");
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)))
		die("connect");
	nodelay(fd);
	pin(client_cpu);
	for (long i = 0; i < warmup + iterations; i++) {
		long t0;

		if (i == warmup)
			cpu0 = nanos(CLOCK_PROCESS_CPUTIME_ID);
		t0 = nanos(CLOCK_MONOTONIC);
		if (full(fd, out, size, 0) < 0)
			die("write");
		if (full(fd, in, size, 1) <= 0)
			die("read");
		if (i >= warmup)
			rtt[i - warmup] = nanos(CLOCK_MONOTONIC) - t0;
	}
	cpu0 = nanos(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
	shutdown(fd, SHUT_WR);
	pthread_join(thread, NULL);
	close(fd);
	qsort(rtt, iterations, sizeof(long), by_value);
	printf("p50=%ld p99=%ld p999=%ld cpu=%ld count=%ld\n", at(rtt, iterations, 50), at(rtt, iterations, 99),
	       at(rtt, iterations, 99.9), cpu0 / iterations, iterations);
	return 0;
}
