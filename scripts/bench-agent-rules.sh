#!/usr/bin/env bash
# A node agent's cost per rule as its policy grows to 65,536 rules (AgentRulesBench).
# Usage: scripts/bench-agent-rules.sh [rules]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

mvn_b -q install -DskipTests
enter_child_cgroup sockmap4j-bench
mvn_b -q -pl bench exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED -classpath %classpath io.github.sockmap4j.bench.AgentRulesBench $SM4J_CGROUP ${1:-65536}"
