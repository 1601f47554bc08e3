// SPDX-License-Identifier: Apache-2.0
/*
 * Traffic for the XDP tests, from a chosen source address:
 *   net_probe tcp SRC DST PORT      prints connected or failed (1 s to connect)
 *   net_probe udp SRC DST PORT N    sends N datagrams of 32 bytes, prints sent=N
 *   net_probe raw IFACE N           sends N truncated IPv4 frames (an Ethernet header and 10
 *                                   bytes: less than an IP header), prints sent=N
 * Addresses are IPv4 or IPv6 literals.
 */
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static socklen_t addr(const char *s, int port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (strchr(s, ':')) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;

		a->sin6_family = AF_INET6;
		a->sin6_port = htons(port);
		inet_pton(AF_INET6, s, &a->sin6_addr);
		return sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;

		a->sin_family = AF_INET;
		a->sin_port = htons(port);
		inet_pton(AF_INET, s, &a->sin_addr);
		return sizeof(*a);
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_storage src, dst;
	socklen_t sl, dl;
	int tcp, fd;

	if (argc == 4 && strcmp(argv[1], "raw") == 0) {
		struct sockaddr_ll ll = { .sll_family = AF_PACKET, .sll_halen = 6 };
		unsigned char frame[14 + 10] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 1, 0x08, 0x00 };
		int n = atoi(argv[3]), i, s = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));

		ll.sll_ifindex = if_nametoindex(argv[2]);
		memset(ll.sll_addr, 0xff, 6);
		if (s < 0 || ll.sll_ifindex == 0) {
			perror("raw");
			return 1;
		}
		for (i = 0; i < n; i++)
			sendto(s, frame, sizeof(frame), 0, (struct sockaddr *)&ll, sizeof(ll));
		printf("sent=%d\n", n);
		return 0;
	}
	if (argc < 5) {
		fprintf(stderr, "usage: net_probe tcp|udp SRC DST PORT [N] | raw IFACE N\n");
		return 2;
	}
	tcp = strcmp(argv[1], "tcp") == 0;
	sl = addr(argv[2], 0, &src);
	dl = addr(argv[3], atoi(argv[4]), &dst);
	fd = socket(dst.ss_family, tcp ? SOCK_STREAM : SOCK_DGRAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&src, sl) < 0) {
		perror("bind");
		return 1;
	}
	if (tcp) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		int err = 0;
		socklen_t len = sizeof(err);

		fcntl(fd, F_SETFL, O_NONBLOCK);
		if (connect(fd, (struct sockaddr *)&dst, dl) < 0 && errno != EINPROGRESS) {
			printf("failed\n");
			return 0;
		}
		if (poll(&p, 1, 1000) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0)
			printf("connected\n");
		else
			printf("failed\n");
		return 0;
	}
	{
		int n = argc > 5 ? atoi(argv[5]) : 1, i;
		char buf[32] = { 0 };

		for (i = 0; i < n; i++)
			sendto(fd, buf, sizeof(buf), 0, (struct sockaddr *)&dst, dl);
		printf("sent=%d\n", n);
	}
	return 0;
}
