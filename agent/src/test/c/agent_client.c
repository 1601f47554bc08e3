// SPDX-License-Identifier: Apache-2.0
// A client of the agent's control socket, for tests that need one with another uid than root.
//   agent_client SOCKET CONNECTIONS [handoff|vanish COMMAND...]
// Opens CONNECTIONS connections (printing connected=N), then reads commands from stdin:
//   send K LINE      sends LINE on connection K, prints "answer=K LINE" with the first line back
//   flood K N        sends N PINGs on connection K at once, prints "flood=OK ERR" counts of answers
//   long K N         sends N bytes without a newline on K, prints "answer=K LINE" (or answer=K EOF)
//   wait K           sends nothing on K, prints "answer=K LINE" with the next line the agent sends (or EOF)
//   close K          closes connection K
// With handoff or vanish the commands are the arguments after it (ARGS...), one an argument, and
// the process that connected exits and a child it forked (holding the connections) serves the
// commands once its parent is gone: the connections outlive the process whose credentials they
// carry. With handoff each connection is answered a PING first (the agent has admitted it while
// its process lived); with vanish the process exits at once, possibly before the agent looks at it.
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int readline(int fd, char *buf, size_t cap) {
    size_t n = 0;
    while (n + 1 < cap) {
        ssize_t r = read(fd, buf + n, 1);
        if (r <= 0) {
            return n == 0 ? -1 : (int) n;
        }
        if (buf[n] == '\n') {
            break;
        }
        n++;
    }
    buf[n] = 0;
    return (int) n;
}

static char line[1 << 16];

static void run(int *fds, const char *cmd) {
    int k = 0, n = 0;
    char text[4096];
    if (sscanf(cmd, "send %d %4095[^\n]", &k, text) == 2) {
        dprintf(fds[k], "%s\n", text);
        printf("answer=%d %s\n", k, readline(fds[k], line, sizeof(line)) < 0 ? "EOF" : line);
    } else if (sscanf(cmd, "flood %d %d", &k, &n) == 2) {
        // All requests in one write, then the answers: the requests fit the socket's buffer.
        char *all = malloc(5 * (size_t) n);
        for (int i = 0; i < n; i++) {
            memcpy(all + 5 * i, "PING\n", 5);
        }
        ssize_t w = write(fds[k], all, 5 * (size_t) n);
        (void) w;
        free(all);
        int ok = 0, err = 0;
        for (int i = 0; i < n && readline(fds[k], line, sizeof(line)) >= 0; i++) {
            if (strncmp(line, "OK", 2) == 0) {
                ok++;
            } else {
                err++;
            }
        }
        printf("flood=%d %d\n", ok, err);
    } else if (sscanf(cmd, "long %d %d", &k, &n) == 2) {
        char *big = malloc(n);
        memset(big, 'x', n);
        ssize_t w = write(fds[k], big, n);
        (void) w;
        free(big);
        printf("answer=%d %s\n", k, readline(fds[k], line, sizeof(line)) < 0 ? "EOF" : line);
    } else if (sscanf(cmd, "wait %d", &k) == 1) {
        printf("answer=%d %s\n", k, readline(fds[k], line, sizeof(line)) < 0 ? "EOF" : line);
    } else if (sscanf(cmd, "close %d", &k) == 1) {
        close(fds[k]);
        printf("closed=%d\n", k);
    } else {
        printf("error=unknown command\n");
    }
    fflush(stdout);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: agent_client SOCKET CONNECTIONS [handoff]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN); // a connection the agent closed reads as EOF
    int count = atoi(argv[2]);
    int *fds = calloc(count, sizeof(int));
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    strncpy(addr.sun_path, argv[1], sizeof(addr.sun_path) - 1);
    for (int i = 0; i < count; i++) {
        fds[i] = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fds[i] < 0 || connect(fds[i], (struct sockaddr *) &addr, sizeof(addr)) < 0) {
            printf("error=connect %d: %s\n", i, strerror(errno));
            fflush(stdout);
            return 1;
        }
    }
    int handoff = argc > 3 && (strcmp(argv[3], "handoff") == 0 || strcmp(argv[3], "vanish") == 0);
    if (handoff && strcmp(argv[3], "handoff") == 0) {
        for (int i = 0; i < count; i++) {
            if (write(fds[i], "PING\n", 5) != 5 || readline(fds[i], line, sizeof(line)) < 0) {
                printf("error=PING %d\n", i);
                fflush(stdout);
                return 1;
            }
        }
    }
    if (handoff) {
        pid_t parent = getpid();
        if (fork() != 0) {
            return 0;
        }
        while (getppid() == parent) {
            usleep(1000);
        }
    }
    printf("connected=%d\n", count);
    fflush(stdout);
    static char cmd[1 << 16];
    if (handoff) {
        // The commands are the arguments after "handoff": stdin went with the process that exited.
        for (int i = 4; i < argc; i++) {
            run(fds, argv[i]);
        }
        return 0;
    }
    while (fgets(cmd, sizeof(cmd), stdin)) {
        run(fds, cmd);
    }
    return 0;
}
