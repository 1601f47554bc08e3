#!/usr/bin/env bash
# Runs every test against the real kernel, with the fast path required: a test that could
# only pass by falling back to TCP fails. Extra arguments go to Maven (e.g. -pl core).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

enter_child_cgroup sockmap4j-tests
# The kernel's own per-program run counters (bpftool prog show: run_cnt), on for the run.
stats_before=$(cat /proc/sys/kernel/bpf_stats_enabled 2>/dev/null || echo 0)
echo 1 > /proc/sys/kernel/bpf_stats_enabled 2>/dev/null || true
restore_stats() {
  local rc=$? # the run's status, before anything here changes $?
  echo "$stats_before" > /proc/sys/kernel/bpf_stats_enabled 2>/dev/null || true
  leave_child_cgroup "$rc"
}
trap restore_stats EXIT

mvn_b verify -Pkernel -Dsockmap4j.require=true "$@"
# The whole suite (no arguments): also a new user's projects, built from the README alone, and
# services that do not change (Spring Boot 3.5 on Java 17) under the node agent.
if [ "$#" = 0 ]; then
  ./scripts/new-user.sh
  ./scripts/framework-examples.sh
  ./scripts/unchanged-services.sh 300 67108864 1
fi
