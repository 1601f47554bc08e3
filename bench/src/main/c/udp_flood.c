// SPDX-License-Identifier: Apache-2.0
/* udp_flood SRC DST PORT SECONDS: sends 64-byte UDP datagrams as fast as it can; prints sent=N. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct sockaddr_in src = { .sin_family = AF_INET }, dst = { .sin_family = AF_INET };
	struct timespec start, now;
	char buf[64] = { 0 };
	long long sent = 0;
	int fd, secs;

	if (argc != 5) {
		fprintf(stderr, "usage: udp_flood SRC DST PORT SECONDS\n");
		return 2;
	}
	inet_pton(AF_INET, argv[1], &src.sin_addr);
	inet_pton(AF_INET, argv[2], &dst.sin_addr);
	dst.sin_port = htons(atoi(argv[3]));
	secs = atoi(argv[4]);
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&src, sizeof(src)) < 0) {
		perror("bind");
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		int i;

		for (i = 0; i < 1024; i++)
			if (sendto(fd, buf, sizeof(buf), 0, (struct sockaddr *)&dst, sizeof(dst)) > 0)
				sent++;
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec - start.tv_sec < secs);
	printf("sent=%lld\n", sent);
	return 0;
}
