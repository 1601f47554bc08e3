#!/usr/bin/env bash
# The gRPC demo: a stock grpc-netty pair, then a sockmap4j pair, unary 1 KiB p50/p99.
# Usage: scripts/demo-grpc.sh [calls]   (or: server PORT | client PORT [CALLS])
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

mvn_b -q install -DskipTests
enter_child_cgroup sockmap4j-demo
mvn_b -q -pl examples exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED -classpath %classpath io.github.sockmap4j.examples.GrpcDemo ${*:-both 5000}"
