#!/usr/bin/env bash
# The quick-start demo: the RAG pipeline (gateway -> embedding -> vector search -> context
# assembly, one JVM each, gRPC with Arrow batches) under a fixed request rate, on plain TCP and on
# the sockmap fast path side by side, measured in alternating slices, and a table of P50/P99,
# throughput, CPU % and RSS per stage, and the kernel's sk_msg run count. About 6 minutes with the
# defaults (each path warms up until the stages' JIT compilers are quiet); flags scale it
# (scripts/demo.sh --help):
#   scripts/demo.sh --requests 20000 --rate 300 --rounds 3 --docs 50000
set -euo pipefail
caller=$PWD # a relative --plot FILE lands where the demo was started from
cd "$(dirname "$0")/.."
source scripts/env.sh

mvn_b -q install -DskipTests
enter_child_cgroup sockmap4j-demo
java_flags=(--enable-native-access=ALL-UNNAMED --add-modules=jdk.incubator.vector
  --add-opens=java.base/java.nio=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow
  -Dorg.slf4j.simpleLogger.defaultLogLevel=warn)
rc=0
mvn_b -q -pl examples/rag-pipeline exec:exec -Dexec.workingdir="$caller" \
  -Dexec.args="${java_flags[*]} -classpath %classpath io.github.sockmap4j.examples.rag.RagDemo $*" || rc=$?
if [ -d /sys/fs/bpf/sockmap4j ] && [ ! -e /sys/fs/bpf/sockmap4j/agent ]; then
  echo "warning: /sys/fs/bpf/sockmap4j is still there after the demo" >&2
  rc=1
fi
exit $rc
