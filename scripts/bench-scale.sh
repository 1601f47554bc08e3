#!/usr/bin/env bash
# Connect+accept cost with and without the port opted in, and 64 B RTT with 10 vs 10,000
# sockets in the SOCKHASH. Usage: [TOPOLOGY=node] scripts/bench-scale.sh [rounds] [connections] [rtt-iterations]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

mvn_b -q install -DskipTests
enter_child_cgroup sockmap4j-bench
ulimit -n 65536 2>/dev/null || true
mvn_b -q -pl bench exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED -classpath %classpath -Dtopology=${TOPOLOGY:-loopback} io.github.sockmap4j.bench.ScaleBench ${1:-5} ${2:-2000} ${3:-20000}"
