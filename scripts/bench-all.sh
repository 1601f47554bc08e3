#!/usr/bin/env bash
# Every benchmark once, one after the other, each printing ratios against the plain path
# measured in the same run, in both topologies: loopback (one network namespace) and node (each
# endpoint in a pod of the node-shaped bed, routed through a node namespace with kube-proxy-style
# NAT); logs and plots go to OUT (default bench-results/<date>).
# About 75 minutes with the defaults. Usage: scripts/bench-all.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

out=${1:-bench-results/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
mvn_b -q install -DskipTests
enter_child_cgroup sockmap4j-bench
ulimit -n 65536 2>/dev/null || true

jflags="--enable-native-access=ALL-UNNAMED --add-opens=java.base/java.nio=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow"
run() { # run NAME MODULE ARGS...
  local name=$1 module=$2; shift 2
  echo "== $name: $*" | tee "$out/$name.log"
  mvn_b -q -pl "$module" exec:exec -Dexec.args="$jflags -classpath %classpath $*" 2>&1 | grep -v '^WARNING:' | tee -a "$out/$name.log"
}
{
  echo "machine: $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), kernel $(uname -r)"
  echo "cpu: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
  echo "java: $("$JAVA_HOME/bin/java" -version 2>&1 | head -n 1)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
} | tee "$out/machine.txt"

run rtt bench -Dplots="$out" io.github.sockmap4j.bench.RttBench 5 20000 64,4096,65536
run rtt-busy-poll bench -Dwait=BUSY_POLL io.github.sockmap4j.bench.RttBench 5 20000 64,65536
run stream bench -Dgather=16 io.github.sockmap4j.bench.StreamBench 5 512 65536,1024,64
run scale bench io.github.sockmap4j.bench.ScaleBench 5 2000 20000
run netty-grpc bench -Dloops=1 io.github.sockmap4j.bench.NettyGrpcBench 7 10000
# SockmapGrpc's two other profiles, against stock epoll as gRPC sets it up (its executor, or
# directExecutor()), in-process on the same kind of executor as sockmap4j.
run netty-grpc-polling bench -Dexecutor=polling -Dpoll=50 io.github.sockmap4j.bench.NettyGrpcBench 7 10000
run netty-grpc-direct bench -Dexecutor=direct -Dpoll=200 io.github.sockmap4j.bench.NettyGrpcBench 7 10000
run arrow bench -Xmx2g io.github.sockmap4j.bench.ArrowBench 5
run jmh bench org.openjdk.jmh.Main SendReceiveBench -p blocking=true
# The node topology: C, SockmapChannel and java.nio round trips between pods (three placements);
# streaming, connect + accept, Netty/gRPC and Arrow with each end in its pod, dialing Service VIPs.
run node-rtt-64 bench -Dplots="$out" io.github.sockmap4j.bench.NodeRttBench 5 20000 64
run node-rtt-4k bench io.github.sockmap4j.bench.NodeRttBench 5 10000 4096
run node-rtt-64k bench -Dplots="$out" io.github.sockmap4j.bench.NodeRttBench 5 5000 65536
run node-stream bench -Dtopology=node -Dgather=16 io.github.sockmap4j.bench.StreamBench 5 512 65536,1024,64
run node-scale bench -Dtopology=node io.github.sockmap4j.bench.ScaleBench 5 2000 20000
run node-netty-grpc bench -Dtopology=node -Dloops=1 io.github.sockmap4j.bench.NettyGrpcBench 7 10000
run node-netty-grpc-polling bench -Dtopology=node -Dexecutor=polling -Dpoll=50 io.github.sockmap4j.bench.NettyGrpcBench 7 10000
run node-netty-grpc-direct bench -Dtopology=node -Dexecutor=direct -Dpoll=200 io.github.sockmap4j.bench.NettyGrpcBench 7 10000
run node-arrow bench -Dtopology=node -Xmx2g io.github.sockmap4j.bench.ArrowBench 5
run rag examples/rag-pipeline --add-modules=jdk.incubator.vector -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
  io.github.sockmap4j.examples.rag.RagDemo --rounds 3 --plot "$out/rag-latency-node.png"
run rag-loopback examples/rag-pipeline --add-modules=jdk.incubator.vector -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
  io.github.sockmap4j.examples.rag.RagDemo --rounds 3 --topology loopback --plot "$out/rag-latency-loopback.png"
echo "results in $out"
