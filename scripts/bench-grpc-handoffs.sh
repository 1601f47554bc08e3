#!/usr/bin/env bash
# Where a gRPC unary call's time goes between threads (GrpcHandoffs): per thread group, sleeps
# (voluntary context switches), preemptions, CPU and run-queue time per call, for TCP, sockmap4j
# and gRPC in-process, loopback; EXECUTOR=direct for the directExecutor() profile.
# Usage: [EXECUTOR=direct] scripts/bench-grpc-handoffs.sh [calls]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

mvn_b -q install -DskipTests
enter_child_cgroup sockmap4j-bench
mvn_b -q -pl bench exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED -classpath %classpath -Dexecutor=${EXECUTOR:-default} io.github.sockmap4j.bench.GrpcHandoffs ${1:-20000}"
