#!/usr/bin/env bash
# 256 MiB of embeddings a round: the Arrow bridge on the fast path vs Arrow Flight on stock
# grpc-netty (and Flight on the sockmap gRPC transport). Usage: [TOPOLOGY=node] scripts/bench-arrow.sh [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

mvn_b -q install -DskipTests
enter_child_cgroup sockmap4j-bench
mvn_b -q -pl bench exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED --add-opens=java.base/java.nio=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow -Xmx2g -classpath %classpath -Dtopology=${TOPOLOGY:-loopback} io.github.sockmap4j.bench.ArrowBench ${1:-5}"
