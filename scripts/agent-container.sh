#!/usr/bin/env bash
# The node agent as an operator runs it, on this machine as a one-node cluster:
# - the agent container from scripts/image.sh's archive, started by podman with the pod template of
#   deploy/kubernetes/daemonset.yaml turned into 'podman run' arguments (scripts/podman-args.py,
#   which prints what it replaced or ignored): privileged, the host's network and PIDs, bpffs,
#   cgroup2, /run/sockmap4j and the policy ConfigMap mounted, the memory limit; attached to the
#   cgroup the run's pods live under; the DaemonSet's exec probes run as the kubelet would, until ready;
# - two podman pods, each with a network namespace of its own (podman's "none" network, then a
#   veth into a "node" namespace made for the run that routes between them: no podman network, so
#   nothing in the host's netfilter): "jvm", a JVM service of plain java.net sockets
#   (cli/src/test/jvm-peer), and "c", C clients (testbed/src/main/c/peer.c); neither knows sockmap4j;
# - the pods' ports opted in through the agent for each pod's address only, as the pod reconciler
#   does from the annotation; a 64 MiB stream from the JVM pod to the C pod and a 20,000 x 1 KiB
#   ping-pong from the C pod to the JVM pod, byte-checked by both, at least 99% redirected by the
#   kernel's counters; a 64 MiB stream the other way, a C writer flat out to the JVM reader,
#   byte-checked, its share printed (not held: docs/in-flight-bound.md);
# - 'podman kill' of the agent in the middle of a 1,000,000 x 1 KiB ping-pong, which finishes
#   byte-exact and on the path; a new agent container that adopts the pins and is ready;
# - a rolling update across an ABI change ('podman stop', the pins marked an older version's, a
#   new container that retires them): an open ping-pong finishes byte-exact, a new one is
#   redirected, the retired set goes once its connection closed.
# Removes the containers, pods, the images it loaded or podman built, the pins, the namespaces, the
# cgroups (in every hierarchy) and the lock directory at the end, also on failure.
# Usage: agent-container.sh [--no-build]   (builds the image with scripts/image.sh first, unless
# --no-build and target/image has one)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
source scripts/env.sh
export STORAGE_DRIVER=${STORAGE_DRIVER:-vfs}
version=$(sed -n 's:.*<version>\(.*\)</version>.*:\1:p' pom.xml | head -1)
archive=target/image/sockmap4j-agent-$version.tar
if [ "${1:-}" != --no-build ] || [ ! -s "$archive" ]; then ./scripts/image.sh; fi
for tool in podman runc catatonit; do
  command -v "$tool" >/dev/null || [ -x "/usr/libexec/podman/$tool" ] \
    || DEBIAN_FRONTEND=noninteractive apt-get install -y "$tool" >/dev/null
done
id=$$
work=$repo/target/agent-container
rm -rf "$work"; mkdir -p "$work"
gcc -O2 -Wall -o "$work/peer" testbed/src/main/c/peer.c
"${JAVA_HOME:-/usr}/bin/javac" --release 21 -d "$work" cli/src/test/jvm-peer/JvmPeer.java

# podman's settings for this run only: runc (crun refuses this machine's hybrid cgroups), limits
# the host allows; the pods' pause container runs with them too.
cat >"$work/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=4096:4096"]
[engine]
runtime = "runc"
EOF
export CONTAINERS_CONF=$work/containers.conf

run=sockmap4j-ctr-$id         # every container's cgroup parent, in every hierarchy
cg=$CGROUP2/$run/pods         # the agent attaches here; the pods live under it
pins=/sys/fs/bpf/sockmap4j-ctr-$id
node=sm4j-ctr-$id-node        # the node's network namespace: routes between the pods
port_metrics=$((19000 + id % 1000))
image=localhost/sockmap4j/agent:$version
pause_before=$(podman images -q --filter reference=localhost/podman-pause 2>/dev/null || true)
names=() pods=()
cleanup() {
  local rc=$?
  for p in "${pods[@]}"; do podman pod rm -f -t 0 "$p" >/dev/null 2>&1 || true; done
  for n in "${names[@]}"; do podman rm -f -t 0 "$n" >/dev/null 2>&1 || true; done
  podman run --rm --privileged --cgroup-parent "/$run/agent" \
    -v /sys/fs/bpf:/sys/fs/bpf -v /run/sockmap4j:/run/sockmap4j "$image" --pin-dir="$pins" down --force \
    >/dev/null 2>&1 || true
  rm -rf "/run/sockmap4j/$(echo "$pins" | tr / _)" 2>/dev/null || true
  ip netns delete "$node" 2>/dev/null || true
  for h in /sys/fs/cgroup/*/"$run" /sys/fs/cgroup/"$run"; do
    [ -d "$h" ] && find "$h" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  podman rmi -f "$image" "docker.io/sockmap4j/agent:$version" >/dev/null 2>&1 || true
  [ -z "$pause_before" ] && podman rmi -f $(podman images -q --filter reference=localhost/podman-pause) \
    >/dev/null 2>&1 || true
  [ -e "$pins" ] && echo "pins left in $pins" && rc=1
  ls -d /sys/fs/cgroup/*/"$run" /sys/fs/cgroup/"$run" 2>/dev/null && echo "cgroups left" && rc=1
  exit $rc
}
trap cleanup EXIT
mkdir -p "$cg"
podman load -q -i "$archive" >/dev/null
podman tag "docker.io/sockmap4j/agent:$version" "$image" 2>/dev/null || true

# The pod of deploy/kubernetes/daemonset.yaml as 'podman run' arguments (podman-args.py: 'podman kube
# play' 4.3 takes no DaemonSet, ignores hostPID, refuses the spec.nodeName fieldRef); it says which
# fields it replaced or ignored, and what that changes.
python3 -c 'import yaml' 2>/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y python3-yaml >/dev/null
mapfile -t agent_args < <(python3 scripts/podman-args.py deploy/kubernetes/daemonset.yaml \
  deploy/kubernetes/policy.yaml "$work" "$image" "$pins" "$cg" "$port_metrics" "/$run/agent")
[ "${#agent_args[@]}" -gt 1 ] || { echo "podman-args.py failed"; exit 1; }
agent=
start_agent() { # NAME: the agent now
  agent=$1
  names+=("$1")
  podman run -d --name "$1" "${agent_args[@]}" >/dev/null
}
# The DaemonSet's exec probes as the kubelet runs them, in the agent's container, their socket
# path that of this run's pin directory.
probe_cmd() { # livenessProbe|readinessProbe: the command, one argument a line
  python3 - "$1" "/run/sockmap4j/$(echo "$pins" | tr / _)" <<'PY'
import sys, yaml
for doc in yaml.safe_load_all(open("deploy/kubernetes/daemonset.yaml")):
    if doc and doc.get("kind") == "DaemonSet":
        c = doc["spec"]["template"]["spec"]["containers"][0]
        for a in c[sys.argv[1]]["exec"]["command"]:
            print(a.replace("/run/sockmap4j/_sys_fs_bpf_sockmap4j", sys.argv[2]))
PY
}
mapfile -t liveness < <(probe_cmd livenessProbe)
mapfile -t readiness < <(probe_cmd readinessProbe)
probe() { # livenessProbe|readinessProbe: ok when the agent answers it, else failed
  local -n cmd=$([ "$1" = livenessProbe ] && echo liveness || echo readiness)
  podman exec "$agent" "${cmd[@]}" >/dev/null 2>&1 && echo ok || echo failed
}
until_ready() { # NAME: as the kubelet's readiness probe, every 0.5 s, for up to 60 s
  for _ in $(seq 120); do
    [ "$(probe readinessProbe)" = ok ] && { echo "$1: ready, liveness probe $(probe livenessProbe)"; return 0; }
    sleep 0.5
  done
  podman logs "$1" | tail -20; echo "$1: not ready in 60 s"; return 1
}
cli() { podman exec "$agent" /opt/sockmap4j/bin/sockmap4j --pin-dir="$pins" "$@"; }
counters() { # "redirected passed" bytes, from the kernel's counters
  cli --json stats | tr -d ' \n' | sed -n 's/.*"bytesRedirected":\([0-9]*\).*"bytesPassed":\([0-9]*\).*/\1 \2/p'
}
share() { # NAME BEFORE AFTER: at least 99% of the bytes in between redirected
  local r=$(( $(cut -d' ' -f1 <<<"$3") - $(cut -d' ' -f1 <<<"$2") )) p=$(( $(cut -d' ' -f2 <<<"$3") - $(cut -d' ' -f2 <<<"$2") ))
  if [ "$r" -gt 0 ] && [ $((r * 100)) -ge $((99 * (r + p))) ]; then echo "$1: $r bytes redirected, $p by TCP"
  else echo "$1: expected >= 99% redirected, got $r redirected and $p by TCP"; cli stats; podman logs "$agent" 2>&1 | tail -20
    return 1; fi
}
log_line() { # CONTAINER PATTERN: the first line of its output matching, within 30 s
  for _ in $(seq 300); do podman logs "$1" 2>&1 | grep -m1 -E "$2" && return 0; sleep 0.1; done
  podman logs "$1" 2>&1 | tail -20; echo "no '$2' from $1"; return 1
}

# Two pods, each in a network namespace of its own, wired to the node: 10.251.N.2 via 10.251.N.1.
ip netns add "$node"
ip netns exec "$node" sysctl -qw net.ipv4.ip_forward=1
ip -n "$node" link set lo up
n=0
for pod in jvm c; do
  n=$((n + 1))
  name=sockmap4j-ctr-$id-$pod
  pods+=("$name")
  podman pod create --name "$name" --network none --cgroup-parent "/$run/pods" >/dev/null
  podman pod start "$name" >/dev/null
  infra=$(podman inspect -f '{{.State.Pid}}' "$(podman pod inspect -f '{{.InfraContainerID}}' "$name")")
  ip -n "$node" link add "s$id$pod" type veth peer name eth0 netns "$infra"
  ip -n "$node" addr add "10.251.$n.1/24" dev "s$id$pod"
  ip -n "$node" link set "s$id$pod" up
  nsenter -t "$infra" -n sh -c "ip link set lo up && ip addr add 10.251.$n.2/24 dev eth0 \
    && ip link set eth0 up && ip route add default via 10.251.$n.1"
done
jvm_ip=10.251.1.2 c_ip=10.251.2.2
in_pod() { # POD NAME ARGS...: a container of the image in the pod, the run's binaries at /work
  names+=("$2")
  podman run -d --pod "sockmap4j-ctr-$id-$1" --name "$2" -v "$work:/work:ro" --entrypoint "$3" \
    "$image" "${@:4}" >/dev/null
}
client_done() { # NAME: the C client's container exits 0 having printed ok=1
  local rc; rc=$(podman wait "$1")
  [ "$rc" = 0 ] && podman logs "$1" 2>&1 | grep -q '^ok=1' || { podman logs "$1" 2>&1 | tail; echo "$1 failed"; return 1; }
}

start_agent sockmap4j-agent-$id-a
until_ready sockmap4j-agent-$id-a
in_pod jvm sockmap4j-ctr-$id-service java -cp /work JvmPeer serve 7070 7071
log_line sockmap4j-ctr-$id-service '^listening' >/dev/null
cli allow "7070/$jvm_ip/32" "7071/$jvm_ip/32" "7072/$c_ip/32" >/dev/null
echo "pod jvm ($jvm_ip): a JVM service on 7070 (echo) and 7071 (stream sink); pod c ($c_ip): 7072; opted in through the agent"

before=$(counters)
in_pod c sockmap4j-ctr-$id-sink /work/peer stream-server 0.0.0.0 7072 $((64 << 20))
log_line sockmap4j-ctr-$id-sink '^port=' >/dev/null
in_pod jvm sockmap4j-ctr-$id-stream java -cp /work JvmPeer stream "$c_ip" 7072 $((64 << 20))
client_done sockmap4j-ctr-$id-sink
client_done sockmap4j-ctr-$id-stream
share "pod jvm -> pod c: 64 MiB stream (a JVM writer, a C reader)" "$before" "$(counters)"
before=$(counters)
in_pod c sockmap4j-ctr-$id-pp /work/peer pp-client "$jvm_ip" 7070 20000 1024
client_done sockmap4j-ctr-$id-pp
share "pod c -> pod jvm: 20,000 x 1 KiB ping-pong" "$before" "$(counters)"
# The other way, the C writer flat out and a JVM reader that keeps up less: after a bound hit the
# writer stays on TCP until its reader has read everything (docs/in-flight-bound.md). Said, not held.
before=$(counters)
in_pod c sockmap4j-ctr-$id-stream2 /work/peer stream-client "$jvm_ip" 7071 $((64 << 20))
client_done sockmap4j-ctr-$id-stream2
log_line sockmap4j-ctr-$id-service "^stream (ok bytes=$((64 << 20))|bad)" | grep -q ok
after=$(counters)
echo "pod c -> pod jvm: 64 MiB stream (a C writer flat out, a JVM reader), byte-exact:" \
  "$(( $(cut -d' ' -f1 <<<"$after") - $(cut -d' ' -f1 <<<"$before") )) bytes redirected," \
  "$(( $(cut -d' ' -f2 <<<"$after") - $(cut -d' ' -f2 <<<"$before") )) by TCP"

# The agent killed under an open connection: the kernel keeps redirecting it without the agent.
in_pod c sockmap4j-ctr-$id-pp2 /work/peer pp-client "$jvm_ip" 7070 1000000 1024
log_line sockmap4j-ctr-$id-pp2 '^peer=' >/dev/null
before=$(counters)
podman kill sockmap4j-agent-$id-a >/dev/null
echo "agent killed (podman kill) during a 1,000,000 x 1 KiB ping-pong"
start_agent sockmap4j-agent-$id-b
client_done sockmap4j-ctr-$id-pp2
until_ready sockmap4j-agent-$id-b
podman logs sockmap4j-agent-$id-b 2>&1 | grep -m1 -o '[0-9]* rules adopted' || true
share "ping-pong across the agent's kill and restart" "$before" "$(counters)"

# A rolling update across a change of the pinned maps' ABI: 'podman stop' (SIGTERM, as the kubelet
# does), the pins made an older version's (their meta map's ABI number lowered: the retire reads
# nothing else of a set), a new container, which retires them. The open ping-pong finishes
# byte-exact on the retired set; a new connection is on the new set; the retired set goes once
# the old connection closed.
in_pod c sockmap4j-ctr-$id-pp3 /work/peer pp-client "$jvm_ip" 7070 1000000 1024
log_line sockmap4j-ctr-$id-pp3 '^peer=' >/dev/null
podman stop -t 30 "$agent" >/dev/null
abi=$(bpftool -j map lookup pinned "$pins/meta" key 0 0 0 0 | sed -n 's/.*"value":\["0x\([0-9a-f]*\)".*/\1/p')
older=$(( 16#$abi - 1 ))
bpftool map update pinned "$pins/meta" key 0 0 0 0 value "$older" 0 0 0
echo "agent stopped (podman stop) during a 1,000,000 x 1 KiB ping-pong; pins marked ABI $older (this one's: $((16#$abi)))"
start_agent sockmap4j-agent-$id-c
until_ready sockmap4j-agent-$id-c
[ -d "$pins/retired-abi-$older-1" ] || { podman logs "$agent" 2>&1 | tail; echo "no retired set in $pins"; exit 1; }
podman logs "$agent" 2>&1 | grep -m1 -o 'Retired the [0-9]* pins of sockmap4j ABI [0-9]*' || true
before=$(counters)
in_pod c sockmap4j-ctr-$id-pp4 /work/peer pp-client "$jvm_ip" 7070 20000 1024
client_done sockmap4j-ctr-$id-pp4
share "a connection made after the upgrade: 20,000 x 1 KiB ping-pong" "$before" "$(counters)"
client_done sockmap4j-ctr-$id-pp3
echo "the ping-pong open across the upgrade: byte-exact"
for _ in $(seq 100); do [ -d "$pins/retired-abi-$older-1" ] || break; sleep 0.1; done
[ ! -d "$pins/retired-abi-$older-1" ] || { echo "the retired set stayed after its connection closed"; exit 1; }
echo "retired set removed once its connection closed"
echo "agent container: ok"
