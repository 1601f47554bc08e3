#!/usr/bin/env bash
# Streaming throughput: java.nio TCP vs the redirect with and without the in-flight bound.
# Usage: [GATHER=N] [NODELAY=true] scripts/bench-stream.sh [rounds] [MiB-per-round] [write sizes, e.g. 65536,1024,64]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

mvn_b -q install -DskipTests
enter_child_cgroup sockmap4j-bench
mvn_b -q -pl bench exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED -classpath %classpath -Dgather=${GATHER:-0} -Dnodelay=${NODELAY:-false} -Dtopology=${TOPOLOGY:-loopback} io.github.sockmap4j.bench.StreamBench ${1:-7} ${2:-1024} ${3:-65536,1024}"
