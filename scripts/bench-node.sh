#!/usr/bin/env bash
# Round trips between pods on the node-shaped bed (NodeRttBench): redirect, plain TCP, a peer off
# the fast path and a Service VIP, each against its plain path in the same run, three placements.
# Usage: [PLOTS=DIR] scripts/bench-node.sh [rounds] [iterations-per-round] [size]
#        scripts/bench-node.sh services [rounds] [connects-per-round] [services]   (ServiceScaleBench)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

mvn_b -q install -DskipTests
enter_child_cgroup sockmap4j-bench
if [ "${1:-}" = services ]; then
  mvn_b -q -pl bench exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED -classpath %classpath io.github.sockmap4j.bench.ServiceScaleBench ${2:-5} ${3:-1000} ${4:-50000}"
else
  mvn_b -q -pl bench exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED -classpath %classpath ${PLOTS:+-Dplots=$PLOTS} io.github.sockmap4j.bench.NodeRttBench ${1:-5} ${2:-20000} ${3:-64}"
fi
