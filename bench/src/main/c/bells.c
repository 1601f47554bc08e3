/*
 * What waking a sleeping peer costs, by the kind of descriptor that rings it: a "gateway" process
 * calls STAGES-1 other processes in turn, each call one ring there and one back, every process
 * asleep in epoll_wait (edge-triggered) between rings, as a co-located connection's event loops
 * are. Rings with an eventfd (what the co-located rings use: one 8-byte write, nothing to read),
 * a pipe or a Unix socketpair (one byte written, read back after each wake).
 *
 *   bells KIND CALLS STAGES [WORK [GAP_US]]
 *     KIND: eventfd | pipe | socketpair; WORK: a busy loop's iterations in each called stage;
 *     GAP_US: the gateway's pause between requests (every process then sleeps)
 *
 * Prints the wall time and the CPU time of all processes (getrusage) a request.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum kind { EVENTFD, PIPE, SOCKETPAIR };
static enum kind kind;

struct bell {
    int rd, wr;
};

static void die(const char *what) {
    perror(what);
    exit(1);
}

static struct bell bell_new(void) {
    struct bell b;
    int fds[2];
    switch (kind) {
    case EVENTFD:
        if ((b.rd = b.wr = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) die("eventfd");
        break;
    case PIPE:
        if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) < 0) die("pipe2");
        b.rd = fds[0];
        b.wr = fds[1];
        break;
    case SOCKETPAIR:
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) < 0) die("socketpair");
        b.rd = fds[0];
        b.wr = fds[1];
        break;
    }
    return b;
}

static void bell_ring(struct bell b) {
    uint64_t one = 1;
    char c = 1;
    ssize_t n = kind == EVENTFD ? write(b.wr, &one, sizeof one) : write(b.wr, &c, 1);
    if (n < 0) die("ring");
}

/* An epoll set holding one bell, edge-triggered. */
static int watch(struct bell b) {
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, b.rd, &ev) < 0) die("epoll");
    return ep;
}

/* Sleeps in epoll_wait until the bell rings; a pipe's or socket's byte is taken so it never fills. */
static void await_ring(int ep, struct bell b) {
    struct epoll_event got;
    while (epoll_wait(ep, &got, 1, -1) < 1) {
    }
    if (kind != EVENTFD) {
        char buf[64];
        if (read(b.rd, buf, sizeof buf) < 0) die("read");
    }
}

static void work(long iterations) {
    volatile long x = 0;
    for (long i = 0; i < iterations; i++) x += i;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: bells eventfd|pipe|socketpair CALLS STAGES [WORK [GAP_US]]\n");
        return 2;
    }
    kind = !strcmp(argv[1], "eventfd") ? EVENTFD : !strcmp(argv[1], "pipe") ? PIPE
         : !strcmp(argv[1], "socketpair") ? SOCKETPAIR : (enum kind) -1;
    long calls = atol(argv[2]);
    int stages = atoi(argv[3]);
    long iterations = argc > 4 ? atol(argv[4]) : 0;
    int gap = argc > 5 ? atoi(argv[5]) : 0;
    if ((int) kind < 0 || calls < 1 || stages < 2 || stages > 16) {
        fprintf(stderr, "bells: a kind of eventfd, pipe or socketpair, CALLS >= 1, 2 <= STAGES <= 16\n");
        return 2;
    }
    struct bell to[16], back[16];
    for (int s = 1; s < stages; s++) {
        to[s] = bell_new();
        back[s] = bell_new();
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int s = 1; s < stages; s++) {
        pid_t pid = fork();
        if (pid < 0) die("fork");
        if (pid == 0) {
            int ep = watch(to[s]);
            for (long i = 0; i < calls; i++) {
                await_ring(ep, to[s]);
                work(iterations);
                bell_ring(back[s]);
            }
            _exit(0);
        }
    }
    int eps[16];
    for (int s = 1; s < stages; s++) eps[s] = watch(back[s]);
    for (long i = 0; i < calls; i++) {
        for (int s = 1; s < stages; s++) {
            bell_ring(to[s]);
            await_ring(eps[s], back[s]);
        }
        if (gap) usleep(gap);
    }
    while (wait(NULL) > 0) {
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    struct rusage self, children;
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &children);
    double cpu = (self.ru_utime.tv_sec + self.ru_stime.tv_sec + children.ru_utime.tv_sec + children.ru_stime.tv_sec) * 1e6
               + self.ru_utime.tv_usec + self.ru_stime.tv_usec + children.ru_utime.tv_usec + children.ru_stime.tv_usec;
    double wall = (t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) / 1e3;
    printf("%s: %.1f us wall, %.1f us CPU a request\n", argv[1], wall / calls, cpu / calls);
    return 0;
}
