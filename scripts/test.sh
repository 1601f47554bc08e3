#!/usr/bin/env bash
# Runs every test against the real kernel, with the fast path required: a test that could
# only pass by falling back to TCP fails. Installs what it needs first (scripts/install.sh).
# Extra arguments go to Maven (e.g. -pl core).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$#" = 0 ]; then ./scripts/install.sh base java17; else ./scripts/install.sh base; fi
source scripts/lib.sh
need

enter_child_cgroup sockmap4j-tests
# The host's sysctls are left alone: a test that reads the kernel's per-program run counters
# (run_cnt) turns them on for itself with a BPF_ENABLE_STATS handle (TestKernel.runStats()).

mvn_b verify -Pkernel -Dsockmap4j.require=true "$@"
# The whole suite (no arguments): also a new user's projects, built from the README alone, the
# framework examples, and services that do not change (Spring Boot 3.5 on Java 17 and others)
# under the node agent.
if [ "$#" = 0 ]; then
  ./scripts/examples.sh all
fi
