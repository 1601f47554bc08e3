#!/usr/bin/env bash
# Byte order of C streams under 'sockmap4j agent' with a busy CPU: ROUNDS streams of SIZE bytes on
# loopback between testbed/src/main/c/peer.c's writer and its checking reader, in a cgroup the agent
# attached to, with BUSY shell busy loops running; every second round the agent is stopped with
# SIGTERM and started again mid-stream. Prints each round's reader verdict (ok=1, or bad=OFFSET
# where a byte was out of place) and the count of bad rounds; exits 1 when any was bad. Removes
# all it made.
#   ./scripts/agent-order-stress.sh [ROUNDS] [SIZE] [BUSY]     (defaults: 40, 12 GiB, 1)
set -uo pipefail
rounds=${1:-40}; size=${2:-$((12 << 30))}; busy=${3:-1}
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
source scripts/env.sh
set +e
sm=scripts/sockmap4j
$sm --version >/dev/null
id=$$
work=$(mktemp -d)
cg=$CGROUP2/sockmap4j-order-$id
pins=/sys/fs/bpf/sockmap4j-order-$id
port=47611
agent_pid=""; busy_pids=""; spid=""; cpid=""
cleanup() {
  for p in $busy_pids $spid $cpid; do kill "$p" 2>/dev/null; done
  if [ -n "$agent_pid" ]; then kill -TERM "$agent_pid" 2>/dev/null; wait "$agent_pid" 2>/dev/null; fi
  $sm --pin-dir "$pins" down --force >/dev/null 2>&1
  for _ in $(seq 50); do [ -s "$cg/cgroup.procs" ] || break; sleep 0.1; done
  rmdir "$cg" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
cc -O2 -Wall -o "$work/peer" testbed/src/main/c/peer.c || exit 1
mkdir "$cg"
start_agent() {
  $sm --pin-dir "$pins" agent --cgroup "$cg" --metrics-port -1 > "$work/agent.log" 2>&1 &
  agent_pid=$!
  for _ in $(seq 300); do grep -q "agent: ready" "$work/agent.log" && return 0; sleep 0.1; done
  cat "$work/agent.log"; exit 1
}
start_agent
$sm --pin-dir "$pins" allow "$port" >/dev/null || exit 1
for _ in $(seq "$busy"); do ( while :; do :; done ) & busy_pids="$busy_pids $!"; done
incg() { sh -c "echo \$\$ > $cg/cgroup.procs; exec $*"; }
bad=0
for r in $(seq "$rounds"); do
  rm -f "$work/s.out"
  incg "$work/peer" stream-server 127.0.0.1 "$port" "$size" > "$work/s.out" & spid=$!
  until grep -q port= "$work/s.out" 2>/dev/null; do sleep 0.05; done
  incg "$work/peer" stream-client 127.0.0.1 "$port" "$size" > /dev/null & cpid=$!
  if [ $((r % 2)) = 0 ]; then
    sleep 0.3; kill -TERM "$agent_pid"; wait "$agent_pid"; start_agent
  fi
  wait "$spid"; wait "$cpid"; spid=""; cpid=""
  verdict=$(grep -oE 'ok=1|bad=[0-9]+' "$work/s.out" || echo "no verdict")
  [ "$verdict" = ok=1 ] || bad=$((bad + 1))
  echo "round $r: $verdict"
done
echo "bad rounds: $bad of $rounds"
[ "$bad" = 0 ]
