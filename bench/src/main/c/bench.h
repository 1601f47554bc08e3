// SPDX-License-Identifier: Apache-2.0
/* What the benchmarks' C peers share: failing with the reason, and pinning to a CPU. */
#ifndef SM4J_BENCH_H
#define SM4J_BENCH_H

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Exits 1 with "PROGRAM: what: strerror(errno)" on stderr. */
static void die(const char *what)
{
	fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what, strerror(errno));
	exit(1);
}

/* Pins the calling thread to {cpu}; a negative cpu leaves it to the scheduler. */
static void pin(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		die("sched_setaffinity");
}

#endif
