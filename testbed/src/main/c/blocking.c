// SPDX-License-Identifier: Apache-2.0
/*
 * Blocking readers and writers, as plain C services and relays use sockets: a thread per
 * connection (two for a relay), blocking read(2) and write(2), no poll. A read that fails with
 * EAGAIN on these blocking sockets is counted (and retried, so that the test can check every
 * byte): the kernel's sockmap receive path returns it where a wake-up finds nothing queued.
 *
 *   blocking server ADDR PORT ROUNDS SIZE END   accept until stdin closes; on each connection
 *                          echo ROUNDS messages of SIZE bytes, then END: "keep" (echo on until
 *                          EOF), "close" (close), "reset" (close with an RST, SO_LINGER 0)
 *   blocking client ADDR PORT CONNS ROUNDS SIZE END THREADS   CONNS connections (THREADS at a
 *                          time), each ROUNDS round trips of SIZE bytes, each byte checked; then,
 *                          END "keep", close; "close", read its EOF; "reset", read its ECONNRESET
 *   blocking relay ADDR PORT [ADDR PORT]... UP   listen on each ADDR:PORT; each connection
 *                          relayed to its original destination (UP "origdst": SO_ORIGINAL_DST, as
 *                          a mesh's sidecar asks it) or to UP, HOST:PORT; two threads copying
 *                          with blocking reads, each passing its side's end on as a half-close
 *                          (shutdown of the other side's write half), as socat and HTTP/1.0
 *                          proxies do; SM4J_PEER_BIND (an address) binds the upstream connect;
 *                          a connection whose destination is the relay's own end is an error
 *                          (it would loop)
 * Servers and relays print port=N once listening, then eagain=N conns=N errors=N active=N (the
 * connections done so far, and those accepted and not yet done), again at each line read from
 * stdin, until it closes; the line "stuck" prints instead where each active connection waits
 * (stuck=PHASE/TCP_STATE/BYTES_QUEUED,... for up to 16 of them). Clients print the counts and
 * ok=1 when done. A connection that sees other than what it should (a byte, an end) counts an
 * error and ends.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define SO_ORIGINAL_DST_OPT 80

static atomic_long eagains, conns, errors, active;

/*
 * Where each active connection of a server or relay waits, for the "stuck" report: the phase is
 * 'r' (a request of the rounds), 'e' (the client's end), 'u' (a relay's copy) or 0 (a free slot).
 */
#define SLOTS 1024
static struct slot {
	_Atomic int fd;
	_Atomic char phase;
} slots[SLOTS];

static struct slot *slot_take(int fd, char phase)
{
	for (int i = 0; i < SLOTS; i++) {
		char free_phase = 0;

		if (atomic_compare_exchange_strong(&slots[i].phase, &free_phase, phase)) {
			atomic_store(&slots[i].fd, fd);
			return &slots[i];
		}
	}
	return NULL;
}

static void slot_set(struct slot *s, char phase)
{
	if (s)
		atomic_store(&s->phase, phase);
}

static void print_stuck(void)
{
	int shown = 0;

	printf("stuck=");
	for (int i = 0; i < SLOTS && shown < 16; i++) {
		char phase = atomic_load(&slots[i].phase);
		int fd = atomic_load(&slots[i].fd), queued = -1;
		struct tcp_info ti;
		socklen_t len = sizeof(ti);

		if (!phase)
			continue;
		memset(&ti, 0, sizeof(ti));
		getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len);
		ioctl(fd, FIONREAD, &queued);
		printf("%s%c/%u/%d", shown++ ? "," : "", phase, ti.tcpi_state, queued);
	}
	printf("\n");
	fflush(stdout);
}
static int rounds, size;
static const char *end_mode = "keep";

static int addr_of(const char *ip, int port, struct sockaddr_in6 *a)
{
	char mapped[64];

	memset(a, 0, sizeof(*a));
	a->sin6_family = AF_INET6;
	a->sin6_port = htons(port);
	if (!strchr(ip, ':')) {
		snprintf(mapped, sizeof(mapped), "::ffff:%s", ip);
		ip = mapped;
	}
	return inet_pton(AF_INET6, ip, &a->sin6_addr) == 1 ? 0 : -1;
}

/* read(2) that retries EAGAIN and EINTR, counting EAGAIN: what it returned otherwise. */
static ssize_t rd(int fd, char *buf, size_t n)
{
	for (;;) {
		ssize_t r = read(fd, buf, n);

		if (r >= 0 || (errno != EAGAIN && errno != EINTR))
			return r;
		if (errno == EAGAIN)
			atomic_fetch_add(&eagains, 1);
	}
}

static int rd_full(int fd, char *buf, long n)
{
	long done = 0;

	while (done < n) {
		ssize_t r = rd(fd, buf + done, n - done);

		if (r <= 0)
			return -1;
		done += r;
	}
	return 0;
}

static int wr_full(int fd, const char *buf, long n)
{
	long done = 0;

	while (done < n) {
		ssize_t w = write(fd, buf + done, n - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		done += w;
	}
	return 0;
}

static int nodelay(int fd)
{
	int one = 1;

	return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int listener(const char *ip, int port)
{
	struct sockaddr_in6 a;
	socklen_t len = sizeof(a);
	int one = 1, fd = socket(AF_INET6, SOCK_STREAM, 0);

	if (fd < 0 || addr_of(ip, port, &a) < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 1024) < 0)
		return -1;
	if (getsockname(fd, (struct sockaddr *)&a, &len) < 0)
		return -1;
	printf("port=%d\n", ntohs(a.sin6_port));
	fflush(stdout);
	return fd;
}

static void *serve_one(void *arg)
{
	int c = (int)(long)arg;
	char *buf = malloc(size);
	int ok = buf != NULL;
	struct slot *at = slot_take(c, 'r');

	nodelay(c);
	for (int i = 0; ok && i < rounds; i++)
		ok = rd_full(c, buf, size) == 0 && wr_full(c, buf, size) == 0;
	if (ok && !strcmp(end_mode, "keep")) {
		ssize_t r;

		slot_set(at, 'e');

		while ((r = rd(c, buf, size)) > 0)
			if (wr_full(c, buf, r) < 0)
				break;
		ok = r == 0;
	} else if (ok && !strcmp(end_mode, "reset")) {
		struct linger l = { 1, 0 };

		setsockopt(c, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	}
	if (!ok)
		atomic_fetch_add(&errors, 1);
	slot_set(at, 0);
	atomic_fetch_add(&conns, 1);
	atomic_fetch_sub(&active, 1);
	close(c);
	free(buf);
	return NULL;
}

struct pair {
	int from, to;
};

/* One direction of a relay: what {from} reads goes to {to}; at its end, passed on. */
static void *copy(void *arg)
{
	struct pair *p = arg;
	char buf[65536];
	ssize_t n;
	struct slot *at = slot_take(p->from, 'u');

	while ((n = rd(p->from, buf, sizeof(buf))) > 0)
		if (wr_full(p->to, buf, n) < 0)
			break;
	if (n < 0 && errno != ECONNRESET && errno != EPIPE)
		atomic_fetch_add(&errors, 1);
	shutdown(p->to, SHUT_WR);
	slot_set(at, 0);
	return NULL;
}

static const char *upstream;

static void *relay_one(void *arg)
{
	int c = (int)(long)arg, u = socket(AF_INET6, SOCK_STREAM, 0);
	struct sockaddr_in6 dst;
	struct sockaddr_storage orig;
	socklen_t olen = sizeof(orig);
	const char *bind_to = getenv("SM4J_PEER_BIND");
	pthread_t t;

	nodelay(c);
	if (strcmp(upstream, "origdst")) {
		char host[64];
		const char *colon = strrchr(upstream, ':');

		snprintf(host, sizeof(host), "%.*s", (int)(colon - upstream), upstream);
		addr_of(host, atoi(colon + 1), &dst);
	} else if (getsockopt(c, SOL_IP, SO_ORIGINAL_DST_OPT, &orig, &olen) == 0) {
		struct sockaddr_in *o = (struct sockaddr_in *)&orig;
		char host[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &o->sin_addr, host, sizeof(host));
		addr_of(host, ntohs(o->sin_port), &dst);
	} else {
		atomic_fetch_add(&errors, 1);
		atomic_fetch_sub(&active, 1);
		close(c);
		close(u);
		return NULL;
	}
	{
		/* Never to itself: a destination that is this listener's own address would loop. */
		struct sockaddr_in6 own;
		socklen_t len = sizeof(own);

		if (getsockname(c, (struct sockaddr *)&own, &len) == 0 && own.sin6_port == dst.sin6_port
		    && !memcmp(&own.sin6_addr, &dst.sin6_addr, sizeof(own.sin6_addr))) {
			fprintf(stderr, "relay: the destination of a connection is the relay itself\n");
			atomic_fetch_add(&errors, 1);
			atomic_fetch_sub(&active, 1);
			close(c);
			close(u);
			return NULL;
		}
	}
	if (bind_to) {
		struct sockaddr_in6 b;

		addr_of(bind_to, 0, &b);
		bind(u, (struct sockaddr *)&b, sizeof(b));
	}
	nodelay(u);
	if (connect(u, (struct sockaddr *)&dst, sizeof(dst)) < 0) {
		atomic_fetch_add(&errors, 1);
		atomic_fetch_sub(&active, 1);
		close(c);
		close(u);
		return NULL;
	}
	struct pair down = { c, u }, up = { u, c };
	int second = pthread_create(&t, NULL, copy, &up) == 0;

	if (!second)
		atomic_fetch_add(&errors, 1);
	copy(&down);
	if (second)
		pthread_join(t, NULL);
	atomic_fetch_add(&conns, 1);
	atomic_fetch_sub(&active, 1);
	close(c);
	close(u);
	return NULL;
}

struct acceptor {
	int fd;
	void *(*serve)(void *);
};

static void *accept_loop(void *arg)
{
	struct acceptor *a = arg;

	for (;;) {
		int c = accept(a->fd, NULL, NULL);
		pthread_t t;

		if (c < 0)
			continue;
		atomic_fetch_add(&active, 1);
		if (pthread_create(&t, NULL, a->serve, (void *)(long)c) != 0) {
			atomic_fetch_add(&errors, 1);
			atomic_fetch_sub(&active, 1);
			close(c);
			continue;
		}
		pthread_detach(t);
	}
	return NULL;
}

/* Accepts on each of {fds} until stdin closes, then prints the counts. */
static int serve_until_stdin_closes(int *fds, int n, void *(*serve)(void *))
{
	struct acceptor a[8];
	char line[256] = "";
	pthread_t t;

	for (int i = 0; i < n; i++) {
		a[i].fd = fds[i];
		a[i].serve = serve;
		pthread_create(&t, NULL, accept_loop, &a[i]);
		pthread_detach(t);
	}
	do {
		if (!strncmp(line, "stuck", 5)) {
			print_stuck();
			continue;
		}
		printf("eagain=%ld conns=%ld errors=%ld active=%ld\n", atomic_load(&eagains), atomic_load(&conns),
		       atomic_load(&errors), atomic_load(&active));
		fflush(stdout);
	} while (fgets(line, sizeof(line), stdin));
	return 0;
}

struct client_args {
	const char *ip;
	int port;
	long count;
	atomic_long next;
};

static void *client(void *arg)
{
	struct client_args *c = arg;
	char *out = malloc(size), *in = malloc(size);

	for (long k; (k = atomic_fetch_add(&c->next, 1)) < c->count;) {
		struct sockaddr_in6 a;
		int fd = socket(AF_INET6, SOCK_STREAM, 0), ok;

		addr_of(c->ip, c->port, &a);
		nodelay(fd);
		ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
		for (int i = 0; ok && i < rounds; i++) {
			for (int j = 0; j < size; j++)
				out[j] = (char)(k * 131 + i * 7 + j);
			ok = wr_full(fd, out, size) == 0 && rd_full(fd, in, size) == 0 && !memcmp(out, in, size);
		}
		if (ok && strcmp(end_mode, "keep")) {
			ssize_t r = rd(fd, in, 1);

			ok = !strcmp(end_mode, "close") ? r == 0 : r < 0 && errno == ECONNRESET;
		}
		if (!ok)
			atomic_fetch_add(&errors, 1);
		atomic_fetch_add(&conns, 1);
		close(fd);
	}
	free(out);
	free(in);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	if (!strcmp(mode, "server") && argc == 7) {
		int fd = listener(argv[2], atoi(argv[3]));

		rounds = atoi(argv[4]);
		size = atoi(argv[5]);
		end_mode = argv[6];
		if (fd < 0) {
			perror("listen");
			return 1;
		}
		return serve_until_stdin_closes(&fd, 1, serve_one);
	}
	if (!strcmp(mode, "client") && argc == 9) {
		int threads = atoi(argv[8]);
		struct client_args c = { argv[2], atoi(argv[3]), atol(argv[4]), 0 };
		pthread_t t[64];

		rounds = atoi(argv[5]);
		size = atoi(argv[6]);
		end_mode = argv[7];
		if (threads < 1 || threads > 64)
			return 2;
		for (int i = 0; i < threads; i++)
			pthread_create(&t[i], NULL, client, &c);
		for (int i = 0; i < threads; i++)
			pthread_join(t[i], NULL);
		printf("eagain=%ld conns=%ld errors=%ld\nok=1\n", atomic_load(&eagains), atomic_load(&conns),
		       atomic_load(&errors));
		fflush(stdout);
		return 0;
	}
	if (!strcmp(mode, "relay") && argc >= 5 && argc % 2 == 1 && argc <= 19) {
		int fds[8], n = 0;

		upstream = argv[argc - 1];
		for (int i = 2; i < argc - 1; i += 2) {
			fds[n] = listener(argv[i], atoi(argv[i + 1]));
			if (fds[n++] < 0) {
				perror("listen");
				return 1;
			}
		}
		return serve_until_stdin_closes(fds, n, relay_one);
	}
	fprintf(stderr, "usage: blocking server|client|relay ... (see its header)\n");
	return 2;
}
