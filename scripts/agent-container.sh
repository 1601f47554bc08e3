#!/usr/bin/env bash
# The node agent as an operator runs it: the container from scripts/image.sh's archive, started by
# podman privileged with the host's network, PIDs, bpffs, cgroup2 and /run/sockmap4j (what the
# DaemonSet's pod asks for), attached to a child cgroup made for the run. Then, as the kubelet
# would, /healthz and /readyz until ready; two peers in that cgroup (C programs that know nothing
# of sockmap4j) on a port the agent opted in: a 64 MiB stream and a ping-pong, byte-checked by the
# peers, at least 99% redirected by the kernel's counters; 'podman kill' of the agent in the
# middle of a second ping-pong, which finishes byte-exact and on the path; a new container that
# adopts the pins and is ready. Removes the containers, the image, the pins, the cgroup and the
# lock directory at the end, also on failure.
# Usage: agent-container.sh   (builds the image first when target/image has none)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
source scripts/env.sh
export STORAGE_DRIVER=${STORAGE_DRIVER:-vfs}
version=$(sed -n 's:.*<version>\(.*\)</version>.*:\1:p' pom.xml | head -1)
archive=target/image/sockmap4j-agent-$version.tar
[ -s "$archive" ] || ./scripts/image.sh
for tool in podman runc; do
  command -v "$tool" >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y "$tool" >/dev/null
done
id=$$
work=target/agent-container
mkdir -p "$work"
gcc -O2 -Wall -o "$work/peer" cli/src/test/c/peer.c
cg=$CGROUP2/sockmap4j-ctr-$id
pins=/sys/fs/bpf/sockmap4j-ctr-$id
port_metrics=$((19000 + id % 1000))
image=localhost/sockmap4j/agent:$version
names=()
cleanup() {
  local rc=$?
  for n in "${names[@]}"; do podman rm -f "$n" >/dev/null 2>&1 || true; done
  for p in $(cat "$work"/*.pid 2>/dev/null); do kill "$p" 2>/dev/null || true; done
  rm -f "$work"/*.pid
  for _ in $(seq 50); do [ -s "$cg/cgroup.procs" ] || break; sleep 0.1; done
  rmdir "$cg" 2>/dev/null || true
  podman run --rm --runtime runc --privileged --ulimit nofile=$(ulimit -Hn):$(ulimit -Hn) --ulimit nproc=4096:4096 \
    -v /sys/fs/bpf:/sys/fs/bpf -v /run/sockmap4j:/run/sockmap4j "$image" --pin-dir="$pins" down --force \
    >/dev/null 2>&1 || true
  rm -rf "/run/sockmap4j/$(echo "$pins" | tr / _)" 2>/dev/null || true
  podman rmi -f "$image" "docker.io/sockmap4j/agent:$version" >/dev/null 2>&1 || true
  [ -e "$pins" ] && echo "pins left in $pins" && rc=1
  exit $rc
}
trap cleanup EXIT
mkdir "$cg"
podman load -q -i "$archive" >/dev/null
podman tag "docker.io/sockmap4j/agent:$version" "$image" 2>/dev/null || true

# What a DaemonSet pod of deploy/kubernetes/daemonset.yaml becomes here (podman run rather than
# 'podman kube play': 4.3 takes no DaemonSet, ignores hostPID, refuses the spec.nodeName fieldRef).
run_opts=(--runtime runc --privileged --network host --pid host
  --ulimit nofile=$(ulimit -Hn):$(ulimit -Hn) --ulimit nproc=4096:4096
  -v /sys/fs/bpf:/sys/fs/bpf:rshared -v /sys/fs/cgroup:/sys/fs/cgroup -v /run/sockmap4j:/run/sockmap4j)
start_agent() { # NAME
  names+=("$1")
  podman run -d --name "$1" "${run_opts[@]}" "$image" --pin-dir="$pins" agent --cgroup="$cg" \
    --metrics-port=$port_metrics >/dev/null
}
probe() { # PATH: the HTTP status the agent answers, 000 when it does not
  curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$port_metrics$1" || true
}
until_ready() { # NAME: as the kubelet's readiness probe, every 0.5 s, for up to 60 s
  for _ in $(seq 120); do
    [ "$(probe /readyz)" = 200 ] && { echo "$1: ready, /healthz $(probe /healthz)"; return 0; }
    sleep 0.5
  done
  podman logs "$1" | tail -20; echo "$1: not ready in 60 s"; return 1
}
cli() { podman exec "${names[-1]}" /opt/sockmap4j/bin/sockmap4j --pin-dir="$pins" "$@"; }
counters() { # "redirected passed" bytes, from the kernel's counters
  cli --json stats | tr -d ' \n' | sed -n 's/.*"bytesRedirected":\([0-9]*\).*"bytesPassed":\([0-9]*\).*/\1 \2/p'
}
in_cg() { # OUTPUT PID-FILE ARGS...: the peer in the run's cgroup, in the background
  local out=$1 pidf=$2; shift 2
  sh -c 'echo $$ > "$0/cgroup.procs"; shift; exec "$@"' "$cg" - "$work/peer" "$@" >"$out" 2>&1 &
  echo $! >"$pidf"
}
wait_line() { # FILE PATTERN: the first line matching, within 30 s
  for _ in $(seq 300); do grep -m1 -E "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  cat "$1"; echo "no '$2' in $1"; return 1
}
share() { # NAME BEFORE AFTER: at least 99% of the bytes in between redirected
  local r=$(( $(cut -d' ' -f1 <<<"$3") - $(cut -d' ' -f1 <<<"$2") )) p=$(( $(cut -d' ' -f2 <<<"$3") - $(cut -d' ' -f2 <<<"$2") ))
  if [ "$r" -gt 0 ] && [ $((r * 100)) -ge $((99 * (r + p))) ]; then echo "$1: $r bytes redirected, $p by TCP"
  else echo "$1: expected >= 99% redirected, got $r redirected and $p by TCP"; return 1; fi
}
server() { # NAME KIND ARGS...: a peer server on port 0, opted in through the agent; prints its port
  in_cg "$work/$1.out" "$work/$1.pid" "$2" 127.0.0.1 0 "${@:3}"
  local port; port=$(wait_line "$work/$1.out" '^port=' | cut -d= -f2)
  cli allow "$port" >/dev/null
  echo "$port"
}
client_done() { # NAME: waits for the client, which must print ok=1
  wait "$(cat "$work/$1.pid")" || true
  grep -q '^ok=1' "$work/$1.out" || { cat "$work/$1.out"; echo "$1 failed"; return 1; }
}

start_agent sockmap4j-agent-$id-a
until_ready sockmap4j-agent-$id-a
before=$(counters)
p=$(server stream-server stream-server $((64 << 20)))
in_cg "$work/stream-client.out" "$work/stream-client.pid" stream-client 127.0.0.1 "$p" $((64 << 20))
client_done stream-client
p=$(server pp-server pp-server)
in_cg "$work/pp-client.out" "$work/pp-client.pid" pp-client 127.0.0.1 "$p" 20000 1024
client_done pp-client
share "64 MiB stream and 20,000 x 1 KiB ping-pong" "$before" "$(counters)"

# The agent killed under an open connection: the kernel keeps redirecting it without the agent.
p=$(server pp2-server pp-server)
in_cg "$work/pp2-client.out" "$work/pp2-client.pid" pp-client 127.0.0.1 "$p" 200000 1024
wait_line "$work/pp2-client.out" '^peer=' >/dev/null
before=$(counters)
podman kill sockmap4j-agent-$id-a >/dev/null
echo "agent killed (podman kill) during a 200,000 x 1 KiB ping-pong"
start_agent sockmap4j-agent-$id-b
client_done pp2-client
until_ready sockmap4j-agent-$id-b
podman logs sockmap4j-agent-$id-b 2>&1 | grep -m1 -o '[0-9]* rules adopted' || true
share "ping-pong across the agent's kill and restart" "$before" "$(counters)"
echo "agent container: ok"
