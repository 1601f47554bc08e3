// SPDX-License-Identifier: Apache-2.0
// An unprivileged user racing sockmap4j for a directory: waits until WATCH exists (the lock
// directory, made just before the pin directory), then makes TARGET with mode 0777 at once.
// Prints ready=1, then won=1 or lost=ERRNO (or timeout=1), and exits.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: dir_racer WATCH TARGET SECONDS\n");
        return 2;
    }
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    printf("ready=1\n");
    fflush(stdout);
    for (;;) {
        if (access(argv[1], F_OK) == 0) {
            umask(0);
            if (mkdir(argv[2], 0777) == 0) {
                printf("won=1\n");
            } else {
                printf("lost=%d\n", errno);
            }
            return 0;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec > atol(argv[3])) {
            printf("timeout=1\n");
            return 0;
        }
    }
}
