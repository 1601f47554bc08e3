// SPDX-License-Identifier: Apache-2.0
/*
 * A reader that is not sockmap4j (so it publishes nothing about its reads): connects to
 * 127.0.0.1:PORT, reads TOTAL bytes of big-endian 64-bit sequence numbers, pausing 1 ms after
 * every 512 KiB, and prints ok=1, or where the sequence broke.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	static unsigned char buf[65536 + 8];
	long long total, got = 0, expected = 0, next_pause = 512 * 1024;
	struct sockaddr_in addr = { .sin_family = AF_INET };
	size_t carry = 0;
	int fd;

	if (argc != 3) {
		fprintf(stderr, "usage: slow_reader PORT TOTAL\n");
		return 2;
	}
	total = atoll(argv[2]);
	addr.sin_port = htons(atoi(argv[1]));
	inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		perror("connect");
		return 1;
	}
	printf("connected=1\n");
	fflush(stdout);
	while (got < total) {
		ssize_t n = read(fd, buf + carry, 65536);
		size_t len, off = 0;

		if (n <= 0) {
			printf("eof=%lld\n", got);
			return 1;
		}
		got += n;
		len = carry + n;
		for (; off + 8 <= len; off += 8) {
			unsigned long long v;

			memcpy(&v, buf + off, 8);
			if (be64toh(v) != (unsigned long long)expected) {
				printf("bad=%lld\n", expected * 8);
				return 1;
			}
			expected++;
		}
		carry = len - off;
		memmove(buf, buf + off, carry);
		if (got >= next_pause) {
			next_pause += 512 * 1024;
			usleep(1000);
		}
	}
	printf("ok=1\n");
	return 0;
}
