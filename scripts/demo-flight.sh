#!/usr/bin/env bash
# Arrow Flight on the sockmap gRPC transport: DoPut then DoGet of embeddings batches, checked equal,
# with what went through the redirect. Usage: scripts/demo-flight.sh [batches] [rows] [dim]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

mvn_b -q install -DskipTests
enter_child_cgroup sockmap4j-demo
mvn_b -q -pl examples exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED --add-opens=java.base/java.nio=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow -classpath %classpath io.github.sockmap4j.examples.FlightDemo $*"
