#!/usr/bin/env bash
# The echo demo: an echo over the fast path, then plain vs fast-path RTT and counters.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

mvn_b -q install -DskipTests
enter_child_cgroup sockmap4j-demo
mvn_b -q -pl examples exec:exec
