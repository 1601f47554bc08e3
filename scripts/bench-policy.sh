#!/usr/bin/env bash
# Connection cost with 10 vs 50,000 policy rules, alternating in one run.
# Usage: scripts/bench-policy.sh [rounds] [connections-per-round]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

mvn_b -q install -DskipTests
enter_child_cgroup sockmap4j-bench
mvn_b -q -pl bench exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED -classpath %classpath io.github.sockmap4j.bench.PolicyBench ${1:-5} ${2:-2000}"
