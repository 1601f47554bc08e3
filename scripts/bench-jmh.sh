#!/usr/bin/env bash
# JMH micro-benchmarks (bench/src/main/java/io/github/sockmap4j/bench/jmh): one thread sends and
# receives over plain TCP and over the redirect, single and gathering writes.
# Usage: scripts/bench-jmh.sh [JMH options, e.g. -f 1 -wi 2 -i 3 SendReceiveBench]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

mvn_b -q install -DskipTests
enter_child_cgroup sockmap4j-bench
mvn_b -q -pl bench exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED -classpath %classpath org.openjdk.jmh.Main ${*:-SendReceiveBench}"
