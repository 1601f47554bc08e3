#!/usr/bin/env bash
# The node agent as operators run it and as attackers and failures meet it, one job a run:
#
#   scripts/agent.sh container [--no-build]   the agent's image run by podman as the DaemonSet's pod
#   scripts/agent.sh soak [SECONDS]           Trust III's and IV's attacks together, then the mesh mode
#                                             on a busy node (default 300 each)
#   scripts/agent.sh chaos [SECONDS]          kills and restarts under C and JVM streams (default 600)
#   scripts/agent.sh order [ROUNDS] [SIZE] [BUSY]   byte order of C streams across agent restarts
#   scripts/agent.sh coverage [RUNS]          how much of C peers' traffic the agent alone accelerates
#
# Each job's own description is above its function below. Needs root and what scripts/install.sh
# installs (the container job: its image group too); each job removes all it made.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
source scripts/lib.sh

# The chaos and order jobs' run: the C peer built into $work and the cgroup $cg made (enter_run);
# the pins of $pins, the cgroup once empty and $work removed (leave_run). Both use $sm.
enter_run() {
  cc -O2 -Wall -o "$work/peer" testbed/src/main/c/peer.c || exit 1
  mkdir "$cg"
}
leave_run() {
  $sm --pin-dir "$pins" down --force >/dev/null 2>&1
  for _ in $(seq 50); do [ -s "$cg/cgroup.procs" ] || break; sleep 0.1; done
  rmdir "$cg" 2>/dev/null
  rm -rf "$work"
}

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
# Usage: scripts/agent.sh container [--no-build]   (builds the image with scripts/image.sh first, unless
# --no-build and target/image has one)
job_container() {
  need base image
  export STORAGE_DRIVER=${STORAGE_DRIVER:-vfs}
  version=$(sed -n 's:.*<version>\(.*\)</version>.*:\1:p' pom.xml | head -1)
  archive=target/image/sockmap4j-agent-$version.tar
  if [ "${1:-}" != --no-build ] || [ ! -s "$archive" ]; then ./scripts/image.sh; fi
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
}

# Trust III's and Trust IV's attacks on the node agent together for SECONDS (default 300): HTTP
# connections dribbling a byte a second (III.1), pipelined /metrics never read (III.2), a user
# namespace's 8 uids holding control-socket connections with PINGs or refused DENYs (III.5, IV.4),
# 600 connections from a user's own namespaces and a pod's three nested ones against a map of 1,024
# (III.6, IV.2), 1,000 namespaces in that pod (IV.3), sockets squatting ephemeral ports of a
# namespace shared with a mesh's proxy (IV.1) and another user holding the bystander's loopback
# VIP in its own namespace (IV.7). Every second the DaemonSet's probes, a /metrics scrape, root's
# probe, a granted bystander's opt-in and Service must be answered within 1 s, its round trips
# redirected, its meshed call's proxy told the right destination; the agent's RSS and descriptors
# must be flat (AgentSoakTest, counted after 45 s of the same attacks). Then the mesh mode on a busy
# node: 100 meshed pods (namespaces with a process where the kubelet puts them) and 1,000 that never
# get a process, one meshed pod's annotation taken away and given back every second: each taken out
# and put back within 1 s at the 99th percentile, the RSS flat, the agent's CPU printed
# (MeshSoakTest, after 20 s). The build runs each for 60 s after its warm-up.
job_soak() {
  exec ./scripts/test.sh -pl testbed,linux,control,core,test-support,node,metrics,agent \
    -Dtest='AgentSoakTest,MeshSoakTest' \
    -Dsurefire.failIfNoSpecifiedTests=false -Dsockmap4j.soakSeconds="${1:-300}"
}

# Chaos soak of the fast path under 'sockmap4j agent': C peers (testbed/src/main/c/peer.c) and JVM
# peers (bench's SoakPeer, SockmapChannels) run streams, ping-pongs and connection churn on
# loopback in a cgroup the agent attached to, four jobs at a time, while every few seconds one of
# these happens: a peer is killed with SIGKILL, the agent is killed with SIGKILL and started again
# (in the first 60% of the run), a spare port is allowed or denied; in the middle third a JVM holds
# 400 idle connection pairs, so the SOCKHASH (1,024 sockets) is nearly full. Every stream is
# checked byte by byte and every ping-pong reply; a job whose peer was killed must end, not hang.
# At the end nothing may be left in the map, and the agent's RSS over its last 40% must be flat.
# Prints each failure, then a summary and 'N passed, M failed'; exits 1 on any failure. Removes
# all it made.
#   scripts/agent.sh chaos [SECONDS]      (default 600; CI runs 60)
job_chaos() {
  set +e -uo pipefail
  seconds=${1:-600}
  need
  set +e
  sm=scripts/sockmap4j
  $sm --version >/dev/null || exit 1   # builds the distribution once
  mvn_b -q install -DskipTests -pl bench -am >/dev/null || exit 1
  id=$$
  work=$(mktemp -d)
  mvn_b -q -pl bench dependency:build-classpath -Dmdep.outputFile="$work/cp" >/dev/null || exit 1
  cp="$repo/bench/target/classes:$(cat "$work/cp")"
  cg=$CGROUP2/sockmap4j-soak-$id
  pins=/sys/fs/bpf/sockmap4j-soak-$id
  # Below the ephemeral range (32768 and up), so that no client of the soak holds one as its own port.
  ports=$(seq 20700 20739)
  spare=20799
  agent_pid=""
  declare -gA job_type job_spid job_cpid job_start job_killed job_killt job_port
  jobs_live=""
  cleanup() {
    for j in $jobs_live; do kill -9 "${job_spid[$j]}" "${job_cpid[$j]}" 2>/dev/null; done
    [ -n "${hold_pid:-}" ] && kill -9 "$hold_pid" 2>/dev/null
    [ -n "$agent_pid" ] && kill -9 "$agent_pid" 2>/dev/null
    # Whatever of the run is still in its cgroup (a peer no job holds any more) goes too.
    [ -f "$cg/cgroup.procs" ] && xargs -r kill -9 < "$cg/cgroup.procs" 2>/dev/null
    wait 2>/dev/null
    leave_run
  }
  trap cleanup EXIT
  enter_run
  java_peer="$JAVA_HOME/bin/java --enable-native-access=ALL-UNNAMED -Xmx256m -XX:+UseSerialGC"
  java_peer="$java_peer -XX:TieredStopAtLevel=1 -Dsockmap4j.pinDir=$pins -Dsockmap4j.cgroup=$cg"
  java_peer="$java_peer -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp $cp io.github.sockmap4j.bench.SoakPeer"
  incg() { sh -c "echo \$\$ > $cg/cgroup.procs; exec $*"; }
  # The same for a peer started with '&': exec, so that $! is the peer itself (the JVM or C
  # program), not a subshell whose SIGKILL would leave the peer running.
  incg_bg() { exec sh -c "echo \$\$ > $cg/cgroup.procs; exec $*"; }
  start_agent() {
    $sm --pin-dir "$pins" agent --cgroup "$cg" --metrics-port -1 --max-sockets 1024 > "$work/agent.log" 2>&1 &
    agent_pid=$!
    for _ in $(seq 300); do grep -q "agent: ready" "$work/agent.log" && return 0; sleep 0.1; done
    echo "the agent did not start:"; cat "$work/agent.log"; exit 1
  }
  rss_of() { awk '/^VmRSS:/ {print int($2 / 1024)}' "/proc/$1/status" 2>/dev/null || echo 0; }
  start_agent
  # shellcheck disable=SC2086
  $sm --pin-dir "$pins" allow $ports >/dev/null || { echo "allow failed"; exit 1; }

  passed=0; failed=0; killed=0; seq_n=0; port_i=0
  declare -gA count
  fail() { echo "FAILED: $*"; failed=$((failed + 1)); }
  wait_port() { # FILE: until the server listens (or died)
    for _ in $(seq 600); do grep -q port= "$1" 2>/dev/null && return 0; sleep 0.05; done
    return 1
  }
  start_job() { # TYPE
    local t=$1 j=$((seq_n += 1)) p s_out c_out
    local busy=" " k
    for k in $jobs_live; do busy="$busy${job_port[$k]} "; done
    # The next port no live job holds and nothing listens on (a server whose client was killed can
    # still be listening on its own while its job has ended: a JVM takes a moment to exit).
    while :; do
      port_i=$(( (port_i + 1) % 40 )); p=$((20700 + port_i))
      case "$busy" in *" $p "*) continue ;; esac
      [ -z "$(ss -Hltn "sport = :$p" 2>/dev/null)" ] && break
    done
    s_out="$work/$j.s"; c_out="$work/$j.c"
    case $t in
      c-stream) incg_bg "$work/peer" stream-server 127.0.0.1 "$p" $((1 << 30)) > "$s_out" 2>&1 & ;;
      c-pp) incg_bg "$work/peer" pp-server 127.0.0.1 "$p" > "$s_out" 2>&1 & ;;
      jvm-stream) incg_bg $java_peer stream-server "$p" $((256 << 20)) > "$s_out" 2>&1 & ;;
      jvm-pp) incg_bg $java_peer pp-server "$p" > "$s_out" 2>&1 & ;;
      churn) ( ok=0; for i in $(seq 30); do
                 incg_bg "$work/peer" pp-server 127.0.0.1 "$p" > "$s_out.$i" 2>&1 & sp=$!
                 wait_port "$s_out.$i" || break
                 incg "$work/peer" pp-client 127.0.0.1 "$p" 20 512 > "$c_out.$i" 2>&1
                 wait $sp; grep -q ok=1 "$c_out.$i" && ok=$((ok + 1))
               done; echo "churn=$ok" > "$s_out"; echo ok=1 ) > "$c_out" 2>&1 &
             job_spid[$j]=$!; job_cpid[$j]=$!; job_type[$j]=$t; job_start[$j]=$(date +%s); job_killed[$j]=0
             job_port[$j]=$p; jobs_live="$jobs_live $j"; return ;;
    esac
    job_spid[$j]=$!
    if ! wait_port "$s_out"; then fail "job $j ($t): the server never listened: $(cat "$s_out")"; return; fi
    case $t in
      c-stream) incg_bg "$work/peer" stream-client 127.0.0.1 "$p" $((1 << 30)) 300 > "$c_out" 2>&1 & ;;
      c-pp) incg_bg "$work/peer" pp-client 127.0.0.1 "$p" 20000 1024 > "$c_out" 2>&1 & ;;
      jvm-stream) incg_bg $java_peer stream-client "$p" $((256 << 20)) > "$c_out" 2>&1 & ;;
      jvm-pp) incg_bg $java_peer pp-client "$p" 20000 1024 > "$c_out" 2>&1 & ;;
    esac
    job_cpid[$j]=$!; job_type[$j]=$t; job_start[$j]=$(date +%s); job_killed[$j]=0; job_port[$j]=$p
    jobs_live="$jobs_live $j"
  }
  finish_jobs() { # reaps jobs that ended, judging each; fails (and kills) one running over 180 s
    local live="" j s_out c_out now
    now=$(date +%s)
    for j in $jobs_live; do
      if kill -0 "${job_spid[$j]}" 2>/dev/null || kill -0 "${job_cpid[$j]}" 2>/dev/null; then
        if [ "${job_killed[$j]}" = 1 ] && [ $((now - job_killt[$j])) -gt 30 ]; then
          # A client must notice that its server died; a server whose client died before it
          # connected waits in accept, which is no fault.
          if kill -0 "${job_cpid[$j]}" 2>/dev/null && ! kill -0 "${job_spid[$j]}" 2>/dev/null; then
            fail "job $j (${job_type[$j]}): the client did not end 30 s after its server was killed"
          fi
          kill -9 "${job_spid[$j]}" "${job_cpid[$j]}" 2>/dev/null
        elif [ $((now - job_start[$j])) -gt 180 ]; then
          fail "job $j (${job_type[$j]}, port ${job_port[$j]}) still running after 180 s (killed=${job_killed[$j]})"
          kill -9 "${job_spid[$j]}" "${job_cpid[$j]}" 2>/dev/null
        else
          live="$live $j"; continue
        fi
      fi
      wait "${job_spid[$j]}" 2>/dev/null; wait "${job_cpid[$j]}" 2>/dev/null
      s_out="$work/$j.s"; c_out="$work/$j.c"
      if grep -qE '^bad=' "$s_out" 2>/dev/null; then
        fail "job $j (${job_type[$j]}): a byte out of place: $(grep -E '^bad=' "$s_out")"
      elif [ "${job_killed[$j]}" = 1 ]; then
        killed=$((killed + 1))
      elif [ "${job_type[$j]}" = churn ]; then
        n=$(sed -n 's/^churn=//p' "$s_out"); n=${n:-0}
        if [ "$n" = 30 ]; then passed=$((passed + 1)); count[churn]=$((${count[churn]:-0} + 30))
        else fail "job $j (churn): $n of 30 short connections completed"; fi
      elif grep -q ok=1 "$s_out" && grep -qE 'ok=1|mbps=' "$c_out"; then
        passed=$((passed + 1)); count[${job_type[$j]}]=$((${count[${job_type[$j]}]:-0} + 1))
      else
        fail "job $j (${job_type[$j]}): server '$(tr '\n' ' ' < "$s_out")' client '$(tr '\n' ' ' < "$c_out")'"
      fi
    done
    jobs_live=$live
  }

  types=(c-stream jvm-stream c-pp jvm-pp churn)
  t0=$(date +%s); deadline=$((t0 + seconds)); ti=0; next_chaos=$((t0 + 3))
  hold_pid=""; rss_mid=""; restarts=0; flips=0; peer_kills=0
  while [ "$(date +%s)" -lt "$deadline" ]; do
    now=$(date +%s); elapsed=$((now - t0))
    # The nearly full map, in the middle third.
    if [ -z "$hold_pid" ] && [ "$elapsed" -ge $((seconds / 3)) ]; then
      incg_bg $java_peer hold $spare 400 $((seconds / 3)) > "$work/hold.out" 2>&1 & hold_pid=$!
      echo "t=${elapsed}s: a JVM holds 400 idle connection pairs for $((seconds / 3)) s"
    elif [ -n "$hold_pid" ] && [ "$hold_pid" != done ] && ! kill -0 "$hold_pid" 2>/dev/null; then
      wait "$hold_pid"
      grep -q held=800 "$work/hold.out" || fail "the map filler: $(tr '\n' ' ' < "$work/hold.out")"
      hold_pid=done
    fi
    [ -z "$rss_mid" ] && [ "$elapsed" -ge $((6 * seconds / 10)) ] && rss_mid=$(rss_of "$agent_pid")
    finish_jobs
    n_live=$(echo $jobs_live | wc -w)
    while [ "$n_live" -lt 4 ]; do start_job "${types[ti % ${#types[@]}]}"; ti=$((ti + 1)); n_live=$((n_live + 1)); done
    if [ "$now" -ge "$next_chaos" ]; then
      next_chaos=$((now + 2 + RANDOM % 3))
      r=$((RANDOM % 10))
      if [ "$r" -lt 3 ] && [ -n "$jobs_live" ]; then
        set -- $jobs_live; pick=$(( RANDOM % $# + 1 )); j=${!pick}
        if [ "${job_type[$j]}" != churn ] && [ "${job_killed[$j]}" = 0 ]; then
          victim=${job_spid[$j]}; [ $((RANDOM % 2)) = 0 ] && victim=${job_cpid[$j]}
          kill -9 "$victim" 2>/dev/null && { job_killed[$j]=1; job_killt[$j]=$now; peer_kills=$((peer_kills + 1))
            echo "t=${elapsed}s: SIGKILL to a peer of job $j (${job_type[$j]})"; }
        fi
      elif [ "$r" -lt 5 ] && [ "$elapsed" -lt $((6 * seconds / 10)) ]; then
        kill -9 "$agent_pid"; wait "$agent_pid" 2>/dev/null; start_agent; restarts=$((restarts + 1))
        echo "t=${elapsed}s: the agent was killed (SIGKILL) and started again"
      elif [ "$r" -lt 8 ]; then
        if [ $((flips % 2)) = 0 ]; then $sm --pin-dir "$pins" allow "$spare" >/dev/null || fail "allow $spare"
        else $sm --pin-dir "$pins" deny "$spare" >/dev/null || fail "deny $spare"; fi
        flips=$((flips + 1))
      fi
    fi
    sleep 0.2
  done
  while [ -n "$jobs_live" ]; do finish_jobs; sleep 0.2; done
  if [ -n "$hold_pid" ] && [ "$hold_pid" != done ]; then
    for _ in $(seq 600); do kill -0 "$hold_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$hold_pid" 2>/dev/null && fail "the map filler did not end"
    wait "$hold_pid" 2>/dev/null
  fi
  rss_end=$(rss_of "$agent_pid")
  rss_mid=${rss_mid:-$rss_end}
  kill -TERM "$agent_pid"; wait "$agent_pid"; agent_pid=""
  left=$($sm --pin-dir "$pins" stats | sed -n 's/.*in map \([0-9]*\).*/\1/p')
  [ "${left:-x}" = 0 ] || fail "sockets left in the map at the end: ${left:-unknown}"
  [ "$rss_end" -le $((rss_mid * 13 / 10 + 32)) ] || fail "the agent's RSS grew from $rss_mid to $rss_end MiB over the last 40%"
  echo "chaos soak: ${seconds} s; streams C ${count[c-stream]:-0} (1 GiB at 300 MB/s), JVM ${count[jvm-stream]:-0} (256 MiB), byte-checked;" \
    "ping-pongs C ${count[c-pp]:-0}, JVM ${count[jvm-pp]:-0} (20,000 x 1 KiB); ${count[churn]:-0} short connections;" \
    "$peer_kills peers killed (their jobs ended: $killed), $restarts agent SIGKILLs and restarts, $flips allow/deny flips;" \
    "map at the end: ${left:-?} sockets; agent RSS ${rss_mid} -> ${rss_end} MiB"
  $sm --pin-dir "$pins" stats
  echo "$passed passed, $failed failed"
  [ "$failed" = 0 ]
}

# Byte order of C streams under 'sockmap4j agent' with a busy CPU: ROUNDS streams of SIZE bytes on
# loopback between testbed/src/main/c/peer.c's writer and its checking reader, in a cgroup the agent
# attached to, with BUSY shell busy loops running; every second round the agent is stopped with
# SIGTERM and started again mid-stream. Prints each round's reader verdict (ok=1, or bad=OFFSET
# where a byte was out of place) and the count of bad rounds; exits 1 when any was bad. Removes
# all it made.
#   scripts/agent.sh order [ROUNDS] [SIZE] [BUSY]     (defaults: 40, 12 GiB, 1)
job_order() {
  set +e -uo pipefail
  rounds=${1:-40}; size=${2:-$((12 << 30))}; busy=${3:-1}
  need
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
    leave_run
  }
  trap cleanup EXIT
  enter_run
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
}

# How much of C peers' traffic the fast path carries under 'sockmap4j agent', no sockmap4j JVM:
# RUNS rounds of a 64 B ping-pong (20,000 round trips), a 1 GiB stream whose reader keeps up (the
# writer paced at half the rate the same pair reached unpaced in this run) and a 1 GiB stream whose
# writer runs as fast as it can (testbed/src/main/c/peer.c), on loopback and between two veth "pods",
# each in a cgroup the agent attached to. Prints each round's redirected share and the medians;
# removes all it made.
#   scripts/agent.sh coverage [RUNS]
job_coverage() {
  runs=${1:-5}
  need
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
}

job=${1:-}
[ $# -eq 0 ] || shift
case $job in
  container|soak|chaos|order|coverage) "job_$job" "$@" ;;
  *) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
