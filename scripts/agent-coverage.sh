#!/usr/bin/env bash
# How much of C peers' traffic the fast path carries under 'sockmap4j agent', no sockmap4j JVM:
# RUNS rounds of a 64 B ping-pong (20,000 round trips), a 1 GiB stream whose reader keeps up (the
# writer paced at half the rate the same pair reached unpaced in this run) and a 1 GiB stream whose
# writer runs as fast as it can (testbed/src/main/c/peer.c), on loopback and between two veth "pods",
# each in a cgroup the agent attached to. Prints each round's redirected share and the medians;
# removes all it made.
#   ./scripts/agent-coverage.sh [RUNS]
set -euo pipefail
runs=${1:-5}
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
source scripts/env.sh
sm=scripts/sockmap4j
$sm --version >/dev/null   # builds the distribution once
id=$$
work=$(mktemp -d)
cg=$CGROUP2/sockmap4j-coverage-$id
pins=/sys/fs/bpf/sockmap4j-coverage-$id
nsa=sm4jcov$id-a; nsb=sm4jcov$id-b
agent_pid=""
cleanup() {
  [ -n "$agent_pid" ] && kill -TERM "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null || true
  $sm --pin-dir "$pins" down --force >/dev/null 2>&1 || true
  ip netns delete "$nsa" 2>/dev/null || true
  ip netns delete "$nsb" 2>/dev/null || true
  for _ in $(seq 50); do [ -s "$cg/cgroup.procs" ] || break; sleep 0.1; done
  rmdir "$cg" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cc -O2 -Wall -o "$work/peer" testbed/src/main/c/peer.c
mkdir "$cg"
ip netns add "$nsa"; ip netns add "$nsb"
ip link add "c${id}a" type veth peer name "c${id}b"
ip link set "c${id}a" netns "$nsa"; ip link set "c${id}b" netns "$nsb"
ip -n "$nsa" addr add 10.254.80.1/24 dev "c${id}a"; ip -n "$nsb" addr add 10.254.80.2/24 dev "c${id}b"
for n in "$nsa:c${id}a" "$nsb:c${id}b"; do ip -n "${n%%:*}" link set "${n#*:}" up; ip -n "${n%%:*}" link set lo up; done
$sm --pin-dir "$pins" agent --cgroup "$cg" --metrics-port -1 > "$work/agent.log" 2>&1 &
agent_pid=$!
for _ in $(seq 100); do grep -q "agent: ready" "$work/agent.log" && break; sleep 0.1; done
grep -q "agent: ready" "$work/agent.log" || { cat "$work/agent.log"; exit 1; }
$sm --pin-dir "$pins" allow 47501 47502 >/dev/null
incg() { sh -c "echo \$\$ > $cg/cgroup.procs; exec $*"; }
stat() { $sm --pin-dir "$pins" --json stats | tr -d '{}"' | tr ',' '\n' | sed -n "s/^$1://p"; }
round() { # KIND NSSERVER NSCLIENT ADDR PORT [MBPS] -> redirected share of messages (pp) or bytes
  # (stream), and for a stream the MB/s it reached
  local kind=$1 ns_s=$2 ns_c=$3 addr=$4 port=$5 rate=${6:-} pre_s="" pre_c="" rb0 tb0 rm0
  if [ "$ns_s" != - ]; then pre_s="ip netns exec $ns_s"; fi
  if [ "$ns_c" != - ]; then pre_c="ip netns exec $ns_c"; fi
  rb0=$(stat bytesRedirected); tb0=$(stat bytesPassed); rm0=$(stat messagesRedirected)
  if [ "$kind" = pp ]; then
    incg $pre_s "$work/peer" pp-server "$addr" "$port" > "$work/s.out" &
    until grep -q port= "$work/s.out"; do sleep 0.05; done
    incg $pre_c "$work/peer" pp-client "$addr" "$port" 20000 64 > "$work/c.out"
  else
    incg $pre_s "$work/peer" stream-server "$addr" "$port" $((1 << 30)) > "$work/s.out" &
    until grep -q port= "$work/s.out"; do sleep 0.05; done
    incg $pre_c "$work/peer" stream-client "$addr" "$port" $((1 << 30)) $rate > "$work/c.out"
  fi
  wait $!
  grep -q "ok=1" "$work/s.out" || { echo "reader failed: $(cat "$work/s.out")" >&2; exit 1; }
  if [ "$kind" = pp ]; then
    echo "$(( $(stat messagesRedirected) - rm0 )) 40000" | awk '{printf "%.2f", 100 * $1 / $2}'
  else
    echo "$(( $(stat bytesRedirected) - rb0 )) $(( $(stat bytesPassed) - tb0 )) $(sed -n 's/^mbps=//p' "$work/c.out")" |
      awk '{printf "%.2f %s", 100 * $1 / ($1 + $2), $3}'
  fi
}
median() { tr ' ' '\n' | sort -g | awk '{a[NR]=$1} END {print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2)}'; }
report() { # WHAT WHERE SHARES
  printf '%-24s %-10s redirected %%: %s  median %s\n' "$1" "$2" "$3" "$(echo $3 | median)"
}
for where in "- - 127.0.0.1 47501" "$nsa $nsb 10.254.80.1 47502"; do
  set -- $where
  name=$([ "$1" = - ] && echo "loopback" || echo "pod to pod")
  shares=""
  for _ in $(seq "$runs"); do shares="$shares $(round pp "$@")"; done
  report "pp 64 B" "$name" "$shares"
  shares=""; rates=""
  for _ in $(seq "$runs"); do
    r=$(round stream "$@"); shares="$shares ${r% *}"; rates="$rates ${r#* }"
  done
  report "stream, unpaced" "$name" "$shares"
  pace=$(( $(echo $rates | median | cut -d. -f1) / 2 ))
  shares=""
  for _ in $(seq "$runs"); do r=$(round stream "$@" "$pace"); shares="$shares ${r% *}"; done
  report "stream, at $pace MB/s" "$name" "$shares"
  echo "  (unpaced MB/s: $rates; the paced writer runs at half their median)"
done
