#!/usr/bin/env bash
# Where a gRPC unary call's time goes between threads (GrpcHandoffs): per thread group, sleeps
# (voluntary context switches), preemptions, CPU and run-queue time per call, for TCP, sockmap4j
# and gRPC in-process, loopback; then per call the kernel's sk_msg runs and the system calls by
# kind (perf stat on the sys_enter tracepoints while the measured calls run, which slows them:
# SYSCALLS=false leaves it out). EXECUTOR=direct for the directExecutor()
# profile, EXECUTOR=polling for the polling executor (every transport's, as the loops),
# EXECUTOR=loops for the echo service on the event loops (SockmapGrpc.runOnEventLoops).
# POLL=<us>: event loops that poll before they sleep; TRANSPORTS=UDS,SOCKMAP: only these.
# Usage: [EXECUTOR=direct] scripts/bench-grpc-handoffs.sh [calls]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

mvn_b -q install -DskipTests
enter_child_cgroup sockmap4j-bench
mvn_b -q -pl bench exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED -classpath %classpath -Dexecutor=${EXECUTOR:-default} -Dpoll=${POLL:-0} -Dtransports=${TRANSPORTS:-} -Dsyscalls=${SYSCALLS:-true} io.github.sockmap4j.bench.GrpcHandoffs ${1:-20000}"
