#!/usr/bin/env bash
# Trust III's attacks on the node agent together for SECONDS (default 300): HTTP connections
# dribbling a byte a second (row 1), pipelined /metrics never read (row 2), a user namespace's
# 8 uids holding control-socket connections with keep-alives (row 5), and 600 connections from a
# user's own namespaces against a map of 1,024 (row 6). Every second the DaemonSet's probes,
# root's probe and a granted bystander's opt-in must be answered within 1 s, the bystander's
# round trips redirected; the agent's RSS must be flat (AgentSoakTest, counted after 45 s of the same
# attacks). The build runs it for 60 s after that warm-up.
set -euo pipefail
cd "$(dirname "$0")/.."
exec ./scripts/test.sh -pl testbed,linux,core,test-support,node,metrics,agent -Dtest=AgentSoakTest \
  -Dsurefire.failIfNoSpecifiedTests=false -Dsockmap4j.soakSeconds="${1:-300}"
