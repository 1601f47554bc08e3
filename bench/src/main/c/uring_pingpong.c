// Ping-pong round trips over one loopback TCP connection, both ends in this process, with
// blocking send/recv or with io_uring (a linked send + recv per round trip: one io_uring_enter
// instead of two syscalls). Run it inside a cgroup where sockmap4j is up: on a port that is
// allowed the bytes take the redirect, on another they take TCP.
//
// Usage: uring_pingpong PORT ITERATIONS SIZE blocking|uring   (prints p50 and p99 in us)
#include <arpa/inet.h>
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int size, iterations, use_uring;

static void die(const char *what) { perror(what); exit(1); }

static long long now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void full_recv(int fd, char *buf, int n) {
	for (int got = 0; got < n;) {
		ssize_t r = recv(fd, buf + got, n - got, 0);
		if (r <= 0) die("recv");
		got += r;
	}
}

// One round trip's worth of I/O on a ring: send `out` (if any), then receive `n` bytes.
static void uring_send_recv(struct io_uring *ring, int fd, char *out, char *in, int n) {
	struct io_uring_cqe *cqe;
	int want = 0;
	if (out) {
		struct io_uring_sqe *s = io_uring_get_sqe(ring);
		io_uring_prep_send(s, fd, out, n, 0);
		s->flags |= IOSQE_IO_LINK;
		want++;
	}
	struct io_uring_sqe *r = io_uring_get_sqe(ring);
	io_uring_prep_recv(r, fd, in, n, MSG_WAITALL);
	want++;
	if (io_uring_submit_and_wait(ring, want) < 0) die("io_uring_submit_and_wait");
	for (int i = 0; i < want; i++) {
		if (io_uring_wait_cqe(ring, &cqe) < 0) die("io_uring_wait_cqe");
		if (cqe->res < 0) { errno = -cqe->res; die("io_uring op"); }
		if (cqe->res != n) { fprintf(stderr, "short op: %d of %d\n", cqe->res, n); exit(1); }
		io_uring_cqe_seen(ring, cqe);
	}
}

static void *echo(void *arg) {
	int fd = *(int *)arg;
	char *buf = malloc(size);
	struct io_uring ring;
	if (use_uring && io_uring_queue_init(8, &ring, 0) < 0) die("io_uring_queue_init");
	for (int i = 0; i < iterations; i++) {
		if (use_uring) {
			// Receive, then send it back linked with the next receive (except after the last).
			if (i == 0) uring_send_recv(&ring, fd, NULL, buf, size);
			if (i + 1 < iterations) uring_send_recv(&ring, fd, buf, buf, size);
			else if (send(fd, buf, size, 0) != size) die("send");
		} else {
			full_recv(fd, buf, size);
			if (send(fd, buf, size, 0) != size) die("send");
		}
	}
	return NULL;
}

static int cmp(const void *a, const void *b) {
	long long x = *(const long long *)a, y = *(const long long *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
	if (argc != 5) { fprintf(stderr, "usage: %s PORT ITERATIONS SIZE blocking|uring\n", argv[0]); return 2; }
	int port = atoi(argv[1]);
	iterations = atoi(argv[2]);
	size = atoi(argv[3]);
	use_uring = strcmp(argv[4], "uring") == 0;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int one = 1;
	int l = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(l, (struct sockaddr *)&a, sizeof a) < 0) die("bind");
	if (listen(l, 1) < 0) die("listen");
	int c = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(c, (struct sockaddr *)&a, sizeof a) < 0) die("connect");
	int s = accept(l, NULL, NULL);
	if (s < 0) die("accept");
	setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	pthread_t t;
	pthread_create(&t, NULL, echo, &s);
	char *out = calloc(1, size), *in = malloc(size);
	long long *lat = malloc(sizeof(long long) * iterations);
	struct io_uring ring;
	if (use_uring && io_uring_queue_init(8, &ring, 0) < 0) die("io_uring_queue_init");
	for (int i = 0; i < iterations; i++) {
		long long t0 = now_ns();
		if (use_uring) {
			uring_send_recv(&ring, c, out, in, size);
		} else {
			if (send(c, out, size, 0) != size) die("send");
			full_recv(c, in, size);
		}
		lat[i] = now_ns() - t0;
	}
	pthread_join(t, NULL);
	qsort(lat, iterations, sizeof *lat, cmp);
	printf("%s %d B: p50 %.1f us, p99 %.1f us\n", argv[4], size, lat[iterations / 2] / 1000.0,
	       lat[(int)(iterations * 0.99)] / 1000.0);
	return 0;
}
