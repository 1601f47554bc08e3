#!/usr/bin/env bash
# Trust III's and Trust IV's attacks on the node agent together for SECONDS (default 300): HTTP
# connections dribbling a byte a second (III.1), pipelined /metrics never read (III.2), a user
# namespace's 8 uids holding control-socket connections with PINGs or refused DENYs (III.5, IV.4),
# 600 connections from a user's own namespaces and a pod's three nested ones against a map of 1,024
# (III.6, IV.2), 1,000 namespaces in that pod (IV.3), sockets squatting ephemeral ports of a
# namespace shared with a mesh's proxy (IV.1) and another user holding the bystander's loopback
# VIP in its own namespace (IV.7). Every second the DaemonSet's probes, a /metrics scrape, root's
# probe, a granted bystander's opt-in and Service must be answered within 1 s, its round trips
# redirected, its meshed call's proxy told the right destination; the agent's RSS and descriptors
# must be flat (AgentSoakTest, counted after 45 s of the same attacks). The build runs it for 60 s
# after that warm-up.
set -euo pipefail
cd "$(dirname "$0")/.."
exec ./scripts/test.sh -pl testbed,linux,control,core,test-support,node,metrics,agent -Dtest=AgentSoakTest \
  -Dsurefire.failIfNoSpecifiedTests=false -Dsockmap4j.soakSeconds="${1:-300}"
