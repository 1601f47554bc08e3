#!/usr/bin/env bash
# The demos, each on plain TCP and on the sockmap fast path in the same run:
#
#   scripts/demo.sh [FLAGS]           the quick-start demo: the RAG pipeline (gateway -> embedding ->
#                                     vector search -> context assembly, one JVM each, gRPC with
#                                     Arrow batches) in pods of a node built for the run; its load
#                                     curve at fractions of plain TCP's maximum throughput, both paths
#                                     in alternating slices: P50/P99/P99.9, CPU, RSS and wake-ups per
#                                     stage, the kernel's sk_msg runs, and the ratios. 8-9 minutes;
#                                     flags scale it (scripts/demo.sh --help), e.g.
#                                     scripts/demo.sh --rate 300 --rounds 3 --plot curve.png
#   scripts/demo.sh --mesh            the same pipeline meshed: every pod with Istio's NAT and an HAProxy
#                                     sidecar, every stage unchanged; the pods' NAT (every leg by TCP)
#                                     against the pods meshed in the kernel (docs/mesh.md), and what each
#                                     leg of the meshed requests redirected
#   scripts/demo.sh echo              an echo over the fast path, then plain vs fast-path RTT and counters
#   scripts/demo.sh grpc [CALLS]      a stock grpc-netty pair, then a sockmap4j pair: unary 1 KiB p50/p99
#                                     (or: grpc server PORT | grpc client PORT [CALLS])
#   scripts/demo.sh flight [BATCHES] [ROWS] [DIM]   Arrow Flight on the sockmap gRPC transport: DoPut
#                                     then DoGet of embeddings batches, checked equal
#
# Installs what it needs first (scripts/install.sh), runs in a child cgroup of its own, which it
# removes afterwards, and leaves no pin behind.
set -euo pipefail
caller=$PWD # a relative --plot FILE lands where the demo was started from
cd "$(dirname "$0")/.."
./scripts/install.sh base
source scripts/lib.sh
need

mvn_b -q install -DskipTests
enter_child_cgroup sockmap4j-demo
java_flags=(--enable-native-access=ALL-UNNAMED --add-opens=java.base/java.nio=ALL-UNNAMED
  --sun-misc-unsafe-memory-access=allow)
# The fast path's stages agree on co-located connections where they can (-Dsockmap4j.colocated=true;
# docs/colocated.md), between pods through a broker directory all of them are given;
# COLOCATED=false leaves the transport off (HTTP/2 over the fast path's sockets)
colocated_flags
rc=0
case ${1:-} in
  echo)
    mvn_b -q -pl examples exec:exec || rc=$? ;;
  grpc)
    shift
    mvn_b -q -pl examples exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED -classpath %classpath \
io.github.sockmap4j.examples.GrpcDemo ${*:-both 5000}" || rc=$? ;;
  flight)
    shift
    mvn_b -q -pl examples exec:exec -Dexec.args="${java_flags[*]} -classpath %classpath \
io.github.sockmap4j.examples.FlightDemo $*" || rc=$? ;;
  *)
    mvn_b -q -pl examples/rag-pipeline exec:exec -Dexec.workingdir="$caller" \
      -Dexec.args="${java_flags[*]} --add-modules=jdk.incubator.vector -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
-classpath %classpath io.github.sockmap4j.examples.rag.RagDemo $*" || rc=$? ;;
esac
if [ -d /sys/fs/bpf/sockmap4j ] && [ ! -e /sys/fs/bpf/sockmap4j/agent ]; then
  echo "warning: /sys/fs/bpf/sockmap4j is still there after the demo" >&2
  rc=1
fi
exit $rc
