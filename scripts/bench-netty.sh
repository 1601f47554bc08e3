#!/usr/bin/env bash
# Netty echo and gRPC (unary RTT, streaming throughput) over the fast path vs stock epoll.
# EXECUTOR=direct runs every gRPC server and channel with directExecutor(), EXECUTOR=polling sockmap4j's and
# in-process's on a PollingExecutor (stock's too with POLL_STOCK=true); the default: gRPC's own executor.
# POLL=<us> lets sockmap4j's event loops poll up to that long before they sleep (POLL_STOCK=true: stock epoll's too).
# Usage: [TOPOLOGY=node] [EXECUTOR=direct] scripts/bench-netty.sh [rounds] [round-trips-per-round]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

mvn_b -q install -DskipTests
enter_child_cgroup sockmap4j-bench
mvn_b -q -pl bench exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED -classpath %classpath -Dloops=${LOOPS:-2} -Dtopology=${TOPOLOGY:-loopback} -Dexecutor=${EXECUTOR:-default} -Dpoll=${POLL:-0} -DpollStock=${POLL_STOCK:-false} io.github.sockmap4j.bench.NettyGrpcBench ${1:-7} ${2:-20000}"
