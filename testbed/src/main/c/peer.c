// SPDX-License-Identifier: Apache-2.0
/*
 * Peers that are not sockmap4j (they publish nothing about their reads), for the agent's tests.
 *   peer pp-server ADDR PORT              accept one, echo until EOF
 *   peer pp-client ADDR PORT COUNT SIZE   COUNT round trips of SIZE bytes
 *   peer stream-server ADDR PORT TOTAL    accept one, read TOTAL bytes of big-endian 64-bit sequence numbers
 *   peer stream-client ADDR PORT TOTAL [MBPS]  write them in 64 KiB writes, at most MBPS MB/s if given;
 *                                         prints the MB/s reached
 *   peer step-client ADDR PORT TOTAL      the same, pausing halfway (prints half=1) until stdin closes
 *   peer sink-server ADDR PORT [FIRST]    accept one, read FIRST bytes (default 0) and then no more, until
 *                                         stdin closes
 *   peer agent-call SOCKET LINE...        send each line to a Unix socket, print each answer line (all N
 *                                         lines after a LIST's or SERVICES' OK N)
 *   peer conn-server ADDR PORT            accept connections until stdin closes, echo one 8-byte message on
 *                                         each and close it; prints conns=N at the end
 *   peer conn-client ADDR PORT COUNT      COUNT connections one after another, one 8-byte round trip each
 *   peer refused-client ADDR PORT COUNT   COUNT connects one after another, each expected to fail;
 *                                         prints refused=N, how many did
 *   peer twin ADDR PORT SRC_ADDR SRC_PORT  listen on ADDR:PORT; on a line from stdin connect to it from
 *                                         SRC_ADDR:SRC_PORT, accept, send 64 KiB from the client to the
 *                                         server (then prints twin=1); until stdin closes, read whatever either end
 *                                         is sent; prints stolen=N, the bytes beyond its own 64 KiB
 *   peer repair ADDR PORT SRC_ADDR SRC_PORT N  N sockets in TCP_REPAIR mode (CAP_NET_ADMIN in the network
 *                                         namespace, as unshare -Urn gives any user), each bound to SRC_ADDR and
 *                                         SRC_PORT+i with sequence numbers of its choosing, connected to ADDR:PORT
 *                                         (no packet is sent); prints repaired=K, the sockets connected, and
 *                                         holds them until stdin closes
 *   peer dribble ADDR PORT N MS           N connections to ADDR:PORT (as many as it gets), each sent one byte of
 *                                         a request every MS ms until stdin closes, dialled again when cut off;
 *                                         prints dribbling=K, the connections it got first
 *   peer pipeline ADDR PORT               connect to ADDR:PORT and write GET /metrics requests without reading an
 *                                         answer until the connection is cut, then again, until killed; prints
 *                                         pipelining=1 once the first is written
 *   peer ctl-keepalive SOCKET N MS [LINE [EXPECT]]  N connections to the agent's Unix socket SOCKET, each
 *                                         sent LINE (default PING) every MS ms, kept while the answer starts with
 *                                         EXPECT (default OK), dialled again when it does not or the agent closed
 *                                         it, until killed; prints kept=K, the connections its first round kept
 *   peer hold ADDR PORT N                 listen on ADDR:PORT, connect N clients to it and accept them (its descriptor
 *                                         limit raised to the hard one), print held=N, keep them until stdin closes
 *   peer mesh-proxy ADDR PORT             a service mesh's sidecar in miniature: listen on ADDR:PORT (0.0.0.0, or ::
 *                                         for IPv6), accept one connection a NAT rule sent there, print
 *                                         origdst=ADDR:PORT (its SO_ORIGINAL_DST), connect there and relay both ways
 *                                         until either end closes
 *   peer origdst-squat VIP VPORT SINK SPORT N  N IPv6 sockets, each made v6-only and connected to the IPv4 VIP
 *                                         (v4-mapped: a connect hook may translate it; the kernel then refuses it
 *                                         before any SYN), made dual-stack again and connected to SINK:SPORT;
 *                                         prints squat=K (sockets connected) and holds them until stdin closes
 *   peer listen-flood ADDR PORT N SOCKET CONNS SECONDS RATE LINE  N listeners on ADDR:PORT, PORT+1, ...
 *                                         (its descriptor limit raised to the hard one; prints listening=K), then
 *                                         for SECONDS sends LINE on each of CONNS connections to the Unix socket
 *                                         SOCKET and reads the answers, round after round, RATE lines a second at
 *                                         most; prints requests=R, refused=F (answers other than the first's) and
 *                                         answer=the first answer
 * Servers print port=N once listening (PORT 0: any free port), clients peer=ADDR:PORT once connected
 * (getpeername); all print ok=1 when done, or why not. A client binds to the address and port in
 * SM4J_PEER_BIND (ADDR:PORT, IPv4) before it connects, when set.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "peer_io.h"

static int fail(const char *what)
{
	if (errno)
		printf("error=%s (%s)\n", what, strerror(errno));
	else
		printf("error=%s\n", what);
	fflush(stdout);
	return 1;
}

static int addr_of(const char *ip, int port, struct sockaddr_storage *ss, socklen_t *len)
{
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, ip, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons(port);
		*len = sizeof(*a4);
		return AF_INET;
	}
	if (inet_pton(AF_INET6, ip, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons(port);
		*len = sizeof(*a6);
		return AF_INET6;
	}
	return -1;
}

/* A listening socket on ip:port; prints port=N. */
static int listener(const char *ip, int port, int backlog)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int one = 1, fd, family = addr_of(ip, port, &ss, &len);

	if (family < 0)
		return -1;
	fd = socket(family, SOCK_STREAM, 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, backlog) < 0)
		return -1;
	getsockname(fd, (struct sockaddr *)&ss, &len);
	printf("port=%d\n", ntohs(((struct sockaddr_in *)&ss)->sin_port));
	fflush(stdout);
	return fd;
}

static int serve(const char *ip, int port)
{
	int fd = listener(ip, port, 4), c;

	if (fd < 0)
		return -1;
	c = accept(fd, NULL, NULL);
	close(fd);
	return c;
}

/* Binds fd to SM4J_PEER_BIND (ADDR:PORT) when set: a client with a 4-tuple chosen in advance. */
static int bind_from_env(int fd)
{
	const char *at = getenv("SM4J_PEER_BIND");
	struct sockaddr_storage ss;
	char host[64];
	const char *colon;
	socklen_t len;
	int one = 1;

	if (!at)
		return 0;
	colon = strrchr(at, ':');
	if (!colon || colon - at >= (long)sizeof(host))
		return -1;
	memcpy(host, at, colon - at);
	host[colon - at] = 0;
	if (addr_of(host, atoi(colon + 1), &ss, &len) < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	return bind(fd, (struct sockaddr *)&ss, len);
}

static int dial_quietly(const char *ip, int port, int announce)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, family = addr_of(ip, port, &ss, &len);

	if (family < 0)
		return -1;
	fd = socket(family, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	if (bind_from_env(fd) < 0 || connect(fd, (struct sockaddr *)&ss, len) < 0) {
		int err = errno;

		close(fd);
		errno = err;
		return -1;
	}
	/* The peer as getpeername reports it: a Service's VIP even when the kernel dialed an endpoint. */
	if (announce) {
		char host[64];

		len = sizeof(ss);
		if (getpeername(fd, (struct sockaddr *)&ss, &len) == 0) {
			if (ss.ss_family == AF_INET)
				inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host, sizeof(host));
			else
				inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, host, sizeof(host));
			printf("peer=%s:%d\n", host, ntohs(((struct sockaddr_in *)&ss)->sin_port));
			fflush(stdout);
		}
	}
	return fd;
}

static int dial(const char *ip, int port)
{
	return dial_quietly(ip, port, 1);
}

int main(int argc, char **argv)
{
	static char buf[65536 + 8];
	const char *mode = argc > 1 ? argv[1] : "";
	int fd;

	if (argc < 4) {
		fprintf(stderr, "usage: peer MODE ADDR PORT [ARGS]\n");
		return 2;
	}
	if (!strcmp(mode, "agent-call")) {
		struct sockaddr_un un = { .sun_family = AF_UNIX };

		strncpy(un.sun_path, argv[2], sizeof(un.sun_path) - 1);
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&un, sizeof(un)) < 0)
			return fail("connect");
		for (int i = 3; i < argc; i++) {
			/* LIST and SERVICES are answered OK N and then N lines: each printed as an answer. */
			int listing = !strcmp(argv[i], "LIST") || !strcmp(argv[i], "SERVICES"), lines = 1;

			if (write(fd, argv[i], strlen(argv[i])) < 0 || write(fd, "\n", 1) != 1)
				return fail("write");
			for (int l = 0; l < lines; l++) {
				size_t len = 0;

				while (len < sizeof(buf) - 1 && read(fd, buf + len, 1) == 1 && buf[len] != '\n')
					len++;
				buf[len] = 0;
				printf("answer=%s\n", buf);
				fflush(stdout);
				if (l == 0 && listing && !strncmp(buf, "OK ", 3))
					lines += atoi(buf + 3);
			}
		}
		close(fd);
		return 0;
	}
	if (!strcmp(mode, "refused-client") && argc == 5) {
		int count = atoi(argv[4]), refused = 0;

		for (int i = 0; i < count; i++) {
			int c = dial_quietly(argv[2], atoi(argv[3]), 0);

			if (c < 0)
				refused++;
			else
				close(c);
		}
		printf("refused=%d\nok=1\n", refused);
		fflush(stdout);
		return 0;
	}
	if (!strcmp(mode, "dribble") && argc == 6) {
		static int fds[4096];
		const char *req = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
		int n = atoi(argv[4]), ms = atoi(argv[5]), got = 0;
		size_t at = 0;

		for (int i = 0; i < n && i < 4096; i++) {
			int fd = dial_quietly(argv[2], atoi(argv[3]), 0);

			if (fd >= 0)
				fds[got++] = fd;
		}
		printf("dribbling=%d\n", got);
		fflush(stdout);
		for (;;) {
			struct pollfd p = {.fd = 0, .events = POLLIN};

			if (poll(&p, 1, ms) > 0 && read(0, buf, sizeof(buf)) <= 0)
				break;
			for (int i = 0; i < got; i++)
				if (fds[i] >= 0 && send(fds[i], req + at, 1, MSG_NOSIGNAL) < 0) {
					/* Cut off: dial again, as an attacker would. */
					close(fds[i]);
					fds[i] = dial_quietly(argv[2], atoi(argv[3]), 0);
				}
			at = (at + 1) % strlen(req);
		}
		return 0;
	}
	if (!strcmp(mode, "pipeline") && argc == 4) {
		const char *req = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
		int announced = 0;

		for (;;) {
			int fd = dial_quietly(argv[2], atoi(argv[3]), 0);
			struct timespec pause = { 0, 100000000L };

			while (fd >= 0 && send(fd, req, strlen(req), MSG_NOSIGNAL) > 0)
				if (!announced++) {
					printf("pipelining=1\n");
					fflush(stdout);
				}
			if (fd >= 0)
				close(fd);
			nanosleep(&pause, NULL);
		}
	}
	if (!strcmp(mode, "ctl-keepalive") && argc >= 5 && argc <= 7) {
		struct sockaddr_un un = { .sun_family = AF_UNIX };
		int n = atoi(argv[3]), ms = atoi(argv[4]), fds[64], round = 0;
		char line[256];
		const char *expect = argc == 7 ? argv[6] : "OK";
		size_t line_len;

		snprintf(line, sizeof(line), "%s\n", argc >= 6 ? argv[5] : "PING");
		line_len = strlen(line);

		strncpy(un.sun_path, argv[2], sizeof(un.sun_path) - 1);
		for (int c = 0; c < n && c < 64; c++)
			fds[c] = -1;
		for (;; round++) {
			int served = 0;
			struct timespec pause = { ms / 1000, (ms % 1000) * 1000000L };

			for (int c = 0; c < n && c < 64; c++) {
				size_t len = 0;

				if (fds[c] < 0) {
					fds[c] = socket(AF_UNIX, SOCK_STREAM, 0);
					if (fds[c] >= 0 && connect(fds[c], (struct sockaddr *)&un, sizeof(un)) < 0) {
						close(fds[c]);
						fds[c] = -1;
					}
				}
				if (fds[c] < 0 || send(fds[c], line, line_len, MSG_NOSIGNAL) != (ssize_t)line_len) {
					if (fds[c] >= 0)
						close(fds[c]);
					fds[c] = -1;
					continue;
				}
				while (len < sizeof(buf) - 1 && read(fds[c], buf + len, 1) == 1 && buf[len] != '\n')
					len++;
				buf[len] = 0;
				if (!strncmp(buf, expect, strlen(expect))) {
					served++;
				} else {
					close(fds[c]);
					fds[c] = -1;
				}
			}
			if (!round) {
				printf("kept=%d\n", served);
				fflush(stdout);
			}
			nanosleep(&pause, NULL);
		}
	}
	if (!strcmp(mode, "repair") && argc == 7) {
		int n = atoi(argv[6]), made = 0;

		for (int i = 0; i < n; i++) {
			struct sockaddr_storage src, dst;
			socklen_t slen, dlen;
			int one = 1, q = TCP_SEND_QUEUE, fd;
			unsigned int seq = 0x5eed0000u + i;

			if (addr_of(argv[4], atoi(argv[5]) + i, &src, &slen) < 0 || addr_of(argv[2], atoi(argv[3]), &dst, &dlen) < 0)
				return fail("address");
			fd = socket(src.ss_family, SOCK_STREAM, 0);
			if (fd < 0 || setsockopt(fd, IPPROTO_TCP, TCP_REPAIR, &one, sizeof(one)) < 0)
				return fail("TCP_REPAIR");
			setsockopt(fd, IPPROTO_TCP, TCP_REPAIR_QUEUE, &q, sizeof(q));
			setsockopt(fd, IPPROTO_TCP, TCP_QUEUE_SEQ, &seq, sizeof(seq));
			q = TCP_RECV_QUEUE;
			setsockopt(fd, IPPROTO_TCP, TCP_REPAIR_QUEUE, &q, sizeof(q));
			setsockopt(fd, IPPROTO_TCP, TCP_QUEUE_SEQ, &seq, sizeof(seq));
			if (bind(fd, (struct sockaddr *)&src, slen) < 0 || connect(fd, (struct sockaddr *)&dst, dlen) < 0)
				return fail("repair connect");
			made++;
		}
		printf("repaired=%d\n", made);
		fflush(stdout);
		while (read(0, buf, sizeof(buf)) > 0)
			;
		return 0;
	}
	if (!strcmp(mode, "twin") && argc == 6) {
		struct pollfd p[3];
		long long got = 0;
		int lfd = listener(argv[2], atoi(argv[3]), 4), c, a;

		if (lfd < 0)
			return fail("listen");
		if (read(0, buf, sizeof(buf)) <= 0)
			return fail("stdin");
		snprintf(buf, sizeof(buf), "%s:%s", argv[4], argv[5]);
		setenv("SM4J_PEER_BIND", buf, 1);
		c = dial_quietly(argv[2], atoi(argv[3]), 0);
		a = c < 0 ? -1 : accept(lfd, NULL, NULL);
		if (a < 0)
			return fail("connect");
		memset(buf, 0, 65536);
		if (full(c, buf, 65536, 0) < 0)
			return fail("write");
		printf("twin=1\n");
		fflush(stdout);
		p[0] = (struct pollfd){.fd = 0, .events = POLLIN};
		p[1] = (struct pollfd){.fd = c, .events = POLLIN};
		p[2] = (struct pollfd){.fd = a, .events = POLLIN};
		for (;;) {
			ssize_t n = 0;

			if (poll(p, 3, -1) < 0)
				return fail("poll");
			if (p[0].revents) {
				if (read(0, buf, sizeof(buf)) <= 0)
					break;
			}
			for (int i = 1; i < 3; i++) {
				if (p[i].revents & POLLIN) {
					n = read(p[i].fd, buf, sizeof(buf));
					if (n > 0)
						got += n;
					else
						p[i].fd = -1;
				}
			}
		}
		printf("stolen=%lld\n", got > 65536 ? got - 65536 : 0);
		printf("ok=1\n");
		fflush(stdout);
		return 0;
	}
	if (!strcmp(mode, "hold") && argc == 5) {
		struct rlimit rl;
		long n = atol(argv[4]), held = 0;
		int lfd;

		if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
		}
		lfd = listener(argv[2], atoi(argv[3]), 4096);
		if (lfd < 0)
			return fail("listen");
		for (; held < n; held++) {
			int c = dial_quietly(argv[2], atoi(argv[3]), 0);

			if (c < 0 || accept(lfd, NULL, NULL) < 0)
				break;
		}
		printf("held=%ld\n", held);
		fflush(stdout);
		while (read(0, buf, sizeof(buf)) > 0)
			;
		return 0;
	}
	if (!strcmp(mode, "listen-flood") && argc == 10) {
		struct rlimit rl;
		struct sockaddr_un un = { .sun_family = AF_UNIX };
		long n = atol(argv[4]), made = 0, requests = 0, other = 0;
		int conns = atoi(argv[6]), *fds;
		struct timespec pause = { 0, 0 };
		time_t end;
		char first[512] = "";

		if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
		}
		for (; made < n; made++)
			if (listener(argv[2], atoi(argv[3]) + made, 1) < 0)
				break;
		printf("listening=%ld\n", made);
		fflush(stdout);
		fds = calloc(conns, sizeof(int));
		strncpy(un.sun_path, argv[5], sizeof(un.sun_path) - 1);
		for (int c = 0; c < conns; c++) {
			fds[c] = socket(AF_UNIX, SOCK_STREAM, 0);
			if (fds[c] < 0 || connect(fds[c], (struct sockaddr *)&un, sizeof(un)) < 0)
				return fail("connect");
		}
		pause.tv_nsec = 1000000000L / atol(argv[8]) * conns;
		pause.tv_sec = pause.tv_nsec / 1000000000L;
		pause.tv_nsec %= 1000000000L;
		end = time(NULL) + atoi(argv[7]);
		while (time(NULL) < end) {
			for (int c = 0; c < conns; c++)
				if (send(fds[c], argv[9], strlen(argv[9]), MSG_NOSIGNAL) < 0
				    || send(fds[c], "\n", 1, MSG_NOSIGNAL) != 1)
					return fail("write");
			for (int c = 0; c < conns; c++) {
				size_t len = 0;

				while (len < sizeof(buf) - 1 && read(fds[c], buf + len, 1) == 1 && buf[len] != '\n')
					len++;
				buf[len] = 0;
				if (!requests++)
					snprintf(first, sizeof(first), "%s", buf);
				else if (strcmp(first, buf))
					other++;
			}
			nanosleep(&pause, NULL);
		}
		printf("requests=%ld\nrefused=%ld\nanswer=%s\n", requests, other, first);
		fflush(stdout);
		return 0;
	}
	if (!strcmp(mode, "origdst-squat") && argc == 7) {
		int n = atoi(argv[6]), got = 0, one = 1, zero = 0;
		char mapped[64];

		for (int i = 0; i < n; i++) {
			struct sockaddr_in6 a = { .sin6_family = AF_INET6 };
			int s6 = socket(AF_INET6, SOCK_STREAM, 0);

			if (s6 < 0 || setsockopt(s6, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0)
				return fail("socket");
			snprintf(mapped, sizeof(mapped), "::ffff:%s", argv[2]);
			a.sin6_port = htons(atoi(argv[3]));
			if (inet_pton(AF_INET6, mapped, &a.sin6_addr) != 1)
				return fail("VIP");
			if (connect(s6, (struct sockaddr *)&a, sizeof(a)) == 0)
				return fail("a v6-only socket connected to an IPv4 address");
			if (setsockopt(s6, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) < 0)
				return fail("IPV6_V6ONLY off");
			snprintf(mapped, sizeof(mapped), "::ffff:%s", argv[4]);
			a.sin6_port = htons(atoi(argv[5]));
			if (inet_pton(AF_INET6, mapped, &a.sin6_addr) != 1)
				return fail("SINK");
			if (connect(s6, (struct sockaddr *)&a, sizeof(a)) == 0)
				got++;
		}
		printf("squat=%d\n", got);
		fflush(stdout);
		while (read(0, buf, sizeof(buf)) > 0)
			;
		printf("ok=1\n");
		fflush(stdout);
		return 0;
	}
	if (!strcmp(mode, "mesh-proxy") && argc == 4) {
		struct sockaddr_storage orig;
		socklen_t olen = sizeof(orig);
		char host[INET6_ADDRSTRLEN];
		int c = serve(argv[2], atoi(argv[3])), up, port, v6;

		if (c < 0)
			return fail("listen/accept");
		/* SO_ORIGINAL_DST (IPv4) and IP6T_SO_ORIGINAL_DST are both 80, at the accepted socket's IP level. */
		v6 = strchr(argv[2], ':') != NULL;
		if (getsockopt(c, v6 ? SOL_IPV6 : SOL_IP, 80, &orig, &olen) < 0)
			return fail("SO_ORIGINAL_DST");
		if (v6)
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&orig)->sin6_addr, host, sizeof(host));
		else
			inet_ntop(AF_INET, &((struct sockaddr_in *)&orig)->sin_addr, host, sizeof(host));
		port = ntohs(((struct sockaddr_in *)&orig)->sin_port);
		printf("origdst=%s:%d\n", host, port);
		fflush(stdout);
		up = dial_quietly(host, port, 0);
		if (up < 0)
			return fail("connect upstream");
		for (;;) {
			struct pollfd p[2] = { { .fd = c, .events = POLLIN }, { .fd = up, .events = POLLIN } };
			ssize_t n;

			if (poll(p, 2, -1) < 0)
				return fail("poll");
			for (int i = 0; i < 2; i++) {
				if (!p[i].revents)
					continue;
				n = read(p[i].fd, buf, sizeof(buf));
				if (n <= 0) {
					printf("ok=1\n");
					fflush(stdout);
					return 0;
				}
				if (full(p[1 - i].fd, buf, n, 0) < 0)
					return fail("relay");
			}
		}
	}
	if (!strcmp(mode, "conn-server")) {
		long conns = 0;
		int lfd = listener(argv[2], atoi(argv[3]), 128);

		if (lfd < 0)
			return fail("listen");
		for (;;) {
			struct pollfd p[2] = { { .fd = lfd, .events = POLLIN }, { .fd = 0, .events = POLLIN } };

			if (poll(p, 2, -1) < 0)
				return fail("poll");
			if (p[1].revents) {
				if (read(0, buf, sizeof(buf)) <= 0)
					break;
				continue;
			}
			if (p[0].revents) {
				int c = accept(lfd, NULL, NULL);

				if (c < 0 || full(c, buf, 8, 1) < 0 || full(c, buf, 8, 0) < 0)
					return fail("accept/echo");
				close(c);
				conns++;
			}
		}
		printf("conns=%ld\nok=1\n", conns);
		fflush(stdout);
		return 0;
	}
	if (!strcmp(mode, "conn-client") && argc == 5) {
		long count = atol(argv[4]);

		for (long i = 0; i < count; i++) {
			int c = dial_quietly(argv[2], atoi(argv[3]), 0);

			memcpy(buf, &i, 8);
			if (c < 0 || full(c, buf, 8, 0) < 0 || full(c, buf + 8, 8, 1) < 0 || memcmp(buf, buf + 8, 8))
				return fail("connection");
			close(c);
		}
		printf("ok=1\n");
		fflush(stdout);
		return 0;
	}
	if (!strcmp(mode, "pp-server") || !strcmp(mode, "stream-server") || !strcmp(mode, "sink-server")) {
		fd = serve(argv[2], atoi(argv[3]));
		if (fd < 0)
			return fail("listen/accept");
	} else {
		fd = dial(argv[2], atoi(argv[3]));
		if (fd < 0)
			return fail("connect");
	}
	if (!strcmp(mode, "pp-server")) {
		ssize_t n;

		while ((n = read(fd, buf, sizeof(buf))) > 0)
			if (full(fd, buf, n, 0) < 0)
				return fail("write");
	} else if (!strcmp(mode, "pp-client") && argc == 6) {
		long count = atol(argv[4]), size = atol(argv[5]);

		for (long i = 0; i < count; i++) {
			memset(buf, (int)i, size);
			if (full(fd, buf, size, 0) < 0 || full(fd, buf, size, 1) < 0)
				return fail("round trip");
			if (buf[size - 1] != (char)i)
				return fail("echo mismatch");
		}
	} else if (!strcmp(mode, "stream-server") && argc == 5) {
		long long total = atoll(argv[4]), got = 0, expected = 0;
		size_t carry = 0;

		while (got < total) {
			ssize_t n = read(fd, buf + carry, 65536);
			size_t len, off = 0;

			if (n <= 0)
				return fail("eof");
			got += n;
			len = carry + n;
			for (; off + 8 <= len; off += 8) {
				unsigned long long v;

				memcpy(&v, buf + off, 8);
				if (be64toh(v) != (unsigned long long)expected) {
					printf("bad=%lld\n", expected * 8);
					fflush(stdout);
					return 1;
				}
				expected++;
			}
			carry = len - off;
			memmove(buf, buf + off, carry);
		}
	} else if ((!strcmp(mode, "stream-client") && (argc == 5 || argc == 6))
		   || (!strcmp(mode, "step-client") && argc == 5)) {
		long long total = atoll(argv[4]), seq = 0;
		double rate = argc == 6 ? atof(argv[5]) * 1e6 : 0; /* bytes per second, 0 = as fast as it can */
		long long pause_at = !strcmp(mode, "step-client") ? total / 2 / 65536 * 65536 : -1;
		struct timespec start, now;

		clock_gettime(CLOCK_MONOTONIC, &start);
		for (long long sent = 0; sent < total; sent += 65536) {
			long chunk = total - sent < 65536 ? total - sent : 65536;

			if (sent == pause_at) {
				printf("half=1\n");
				fflush(stdout);
				while (read(0, buf, sizeof(buf)) > 0)
					;
			}

			if (rate > 0) {
				double due = sent / rate, at;

				clock_gettime(CLOCK_MONOTONIC, &now);
				at = (now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9;
				if (due > at) {
					struct timespec pause = {(time_t)(due - at), (long)((due - at - (time_t)(due - at)) * 1e9)};

					nanosleep(&pause, NULL);
				}
			}

			for (long off = 0; off < chunk; off += 8) {
				unsigned long long v = htobe64((unsigned long long)seq++);

				memcpy(buf + off, &v, 8);
			}
			if (full(fd, buf, chunk, 0) < 0)
				return fail("write");
		}
		shutdown(fd, SHUT_WR);
		read(fd, buf, 1); /* until the reader closes: every byte was taken */
		clock_gettime(CLOCK_MONOTONIC, &now);
		printf("mbps=%.0f\n", total / 1e6 / ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9));
	} else if (!strcmp(mode, "sink-server")) {
		long long first = argc > 4 ? atoll(argv[4]) : 0;

		printf("accepted=1\n");
		fflush(stdout);
		while (first > 0) {
			ssize_t n = read(fd, buf, first < 65536 ? first : 65536);

			if (n <= 0)
				return fail("eof");
			first -= n;
		}
		printf("stopped=1\n");
		fflush(stdout);
		while (read(0, buf, sizeof(buf)) > 0)
			;
	} else {
		fprintf(stderr, "usage: peer MODE ADDR PORT [ARGS]\n");
		return 2;
	}
	printf("ok=1\n");
	fflush(stdout);
	close(fd);
	return 0;
}
