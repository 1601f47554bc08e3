#!/usr/bin/env bash
# The RTT benchmark: java.nio TCP vs SockmapChannel (TCP and redirected), ratios from one run.
# Usage: scripts/bench.sh [rounds] [iterations-per-round]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

mvn_b -q install -DskipTests
enter_child_cgroup sockmap4j-bench
mvn_b -q -pl bench exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED -classpath %classpath -Dwait=${WAIT:-BLOCKING} -Dplacement=${PLACEMENT:-ANY} io.github.sockmap4j.bench.RttBench ${1:-7} ${2:-20000} ${3:-64,4096,65536}"
