#!/usr/bin/env bash
# The benchmarks, by name; each prints ratios against the plain path measured in the same run.
#
#   scripts/bench.sh NAME [ARGS]          (scripts/bench.sh with no name lists them)
#
# Environment variables (TOPOLOGY=node, EXECUTOR=direct, ...) and ARGS are each benchmark's own, as
# listed. Needs root and what scripts/install.sh installs (grpc-wakeups: its perf group; uring:
# its uring group); each run is in a child cgroup of its own, removed afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

# NAME|CLASS|JVM FLAGS (environment expanded at the run)|DEFAULT ARGS|WHAT IT MEASURES
BENCHMARKS=(
  'rtt|RttBench|-Dwait=${WAIT:-BLOCKING} -Dplacement=${PLACEMENT:-ANY}|7 20000 64,4096,65536|round trips: java.nio TCP vs SockmapChannel (TCP and redirected); [ROUNDS] [ITERATIONS] [SIZES]'
  'stream|StreamBench|-Dgather=${GATHER:-0} -Dnodelay=${NODELAY:-false} -Dtopology=${TOPOLOGY:-loopback}|7 1024 65536,1024|streaming: java.nio TCP vs the redirect with and without the in-flight bound; [GATHER=N] [NODELAY=true] [ROUNDS] [MIB] [WRITE SIZES]'
  'netty|NettyGrpcBench|-Dloops=${LOOPS:-2} -Dtopology=${TOPOLOGY:-loopback} -Dexecutor=${EXECUTOR:-default} -Dpoll=${POLL:-0} -DpollStock=${POLL_STOCK:-false}|7 20000|Netty echo and gRPC (unary, streaming) vs stock epoll; [TOPOLOGY=node] [EXECUTOR=direct|polling] [POLL=us] [POLL_STOCK=true] [ROUNDS] [ROUND TRIPS]'
  'arrow|ArrowBench|-Xmx2g -Dtopology=${TOPOLOGY:-loopback}|5|256 MiB of embeddings a round: the Arrow bridge vs Arrow Flight; [TOPOLOGY=node] [ROUNDS]'
  'arrow-ref|ArrowByReferenceBench|-Xmx2g|7|one 64 MiB Arrow batch: the Arrow bridge on the fast path vs lent by reference in a shared region; [ROUNDS]'
  'arrow-procs|ArrowAcrossProcessesBench|-Xmx2g|5|one 64 MiB Arrow batch to another process: the Arrow bridge on TCP vs lent by reference, and the receiver'"'"'s RSS; [ROUNDS]'
  'node|NodeRttBench|${PLOTS:+-Dplots=$PLOTS}|5 20000 64|round trips between pods of the node-shaped bed, three placements; [PLOTS=DIR] [ROUNDS] [ITERATIONS] [SIZE]'
  'mesh|MeshRttBench|-Dsidecar.threads=${SIDECAR_THREADS:-0} -Dmesh.only=${MESH_ONLY:-} -Dmesh.agent=${MESH_AGENT:-true} -Dsockmap4j.sidecar.log=${SIDECAR_LOG:-false}|5 20000 64|round trips between two meshed pods (HAProxy sidecars, Istio'"'"'s NAT): the kernel'"'"'s meshed pods against the pods'"'"' NAT; [SIDECAR_THREADS=N] [MESH_ONLY=accelerated|plain] [MESH_AGENT=false] [ROUNDS] [ITERATIONS] [SIZE]'
  'services|ServiceScaleBench||5 1000 50000|a connect to a Service VIP as the Service map grows; [ROUNDS] [CONNECTS] [SERVICES]'
  'scale|ScaleBench|-Dtopology=${TOPOLOGY:-loopback}|5 2000 20000|connect+accept with and without the port opted in, RTT with 10 vs 10,000 sockets in the map; [TOPOLOGY=node] [ROUNDS] [CONNECTIONS] [RTT ITERATIONS]'
  'policy|PolicyBench||5 2000|a connection with 10 vs 50,000 policy rules; [ROUNDS] [CONNECTIONS]'
  'agent-rules|AgentRulesBench||65536|a node agent'"'"'s cost per rule as its policy grows; [RULES]'
  'grpc-handoffs|GrpcHandoffs|-Dexecutor=${EXECUTOR:-default} -Dpoll=${POLL:-0} -Dtransports=${TRANSPORTS:-} -Dsyscalls=${SYSCALLS:-true}|20000|where a gRPC unary call'"'"'s time goes between threads, sk_msg runs and system calls a call; [EXECUTOR=direct|polling|loops] [POLL=us] [TRANSPORTS=UDS,SOCKMAP] [SYSCALLS=false] [CALLS]'
  'rings|RingBench||5 20000 1024,65536|round trips between two threads: TCP loopback vs the co-located rings of one shared region; [ROUNDS] [ROUND TRIPS] [SIZES]'
  'colocated-grpc|ColocatedGrpcBench|-Dkinds=${KINDS:-in-process,tcp,colocated} -Dstream=${STREAM:-true} -Didle=${IDLE:-0} -DidleKind=${IDLE_KIND:-colocated}|5 20000 1024,65536|gRPC in one JVM: in-process, grpc-netty over TCP loopback and the co-located transport, unary and a server stream; [KINDS=in-process,tcp,colocated,agreed] [STREAM=false] [IDLE=SECONDS IDLE_KIND=agreed] [ROUNDS] [CALLS] [SIZES]'
  'arrow-grpc|ArrowGrpcBench|-Dkinds=${KINDS:-tcp,colocated,lent} -Dlend=${LEND:-67108864} -Xmx2g|5 256 65536,1048576,16777216|Arrow batches as gRPC messages in one JVM: grpc-netty over TCP, the co-located rings copying them and the co-located connection lending them; [KINDS=tcp,colocated,lent] [LEND=BYTES] [ROUNDS] [MIB A SIZE A ROUND] [SIZES]'
  'arrow-marshal|ArrowMarshalBench||1|what ArrowGrpc'"'"'s marshaller costs a message by itself: a root streamed to bytes and parsed back, ns; [ROWS] [vary]'
  'jmh|org.openjdk.jmh.Main||SendReceiveBench|JMH: one thread sends and receives over TCP and the redirect; [JMH OPTIONS]'
  'xdp|XdpBench|||XDP drop vs the kernel stack refusing the same UDP traffic, in a namespace of its own; [ROUNDS] [SECONDS]'
)
# Benchmarks with more than one JVM to run, each a function below.
OTHERS=(
  'against|what a change costs: this tree against REV in turns, medians and ratios; REV [ROUNDS] (SM4J_AGAINST=jvm|arrow|arrow-grpc|netty|stream|mesh|demo)'
  'all|every benchmark once in both topologies, logs and plots in OUT (about 75 minutes); [OUT]'
  'spring-idle|what the Spring Boot starter costs a service that does nothing; [RUNS] [WINDOW]'
  'grpc-wakeups|who wakes whom during gRPC unary calls (perf); [EXECUTOR=direct] [SECONDS] [TRANSPORTS]'
  'uring|would io_uring make round trips faster? a C ping-pong; [ROUNDS] [ITERATIONS] [SIZES]'
  'bells|what waking a sleeping peer costs by the descriptor that rings it (eventfd, pipe, socketpair), C; [ROUNDS] [CALLS]'
)

list() {
  local b name rest
  echo "usage: scripts/bench.sh NAME [ARGS]; the benchmarks:" >&2
  for b in "${BENCHMARKS[@]}"; do
    IFS='|' read -r name _ _ _ rest <<<"$b"
    printf '  %-14s %s\n' "$name" "$rest" >&2
  done
  for b in "${OTHERS[@]}"; do
    printf '  %-14s %s\n' "${b%%|*}" "${b#*|}" >&2
  done
  exit 2
}

# run_jvm NAME ARGS...: one benchmark of the table, in a child cgroup.
run_jvm() {
  local name=$1 b n cls flags defaults
  shift
  for b in "${BENCHMARKS[@]}"; do
    IFS='|' read -r n cls flags defaults _ <<<"$b"
    [ "$n" = "$name" ] && break
    n=""
  done
  [ -n "$n" ] || list
  need
  mvn_b -q install -DskipTests
  [[ $cls == *.* ]] || cls=io.github.sockmap4j.bench.$cls
  flags=$(eval "echo \"$flags\"")
  local args=("$@")
  case $name in
    xdp)
      cc -O2 -Wall -o bench/target/udp_flood bench/src/main/c/udp_flood.c
      args=("$PWD/bench/target/udp_flood" "${1:-5}" "${2:-3}") ;;
    agent-rules) ;;
    *) [ ${#args[@]} -gt 0 ] || read -r -a args <<<"$defaults" ;;
  esac
  enter_child_cgroup sockmap4j-bench
  if [ "$name" = agent-rules ]; then args=("$SM4J_CGROUP" "${1:-$defaults}"); fi
  ulimit -n 65536 2>/dev/null || true
  mvn_b -q -pl bench exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED --add-opens=java.base/java.nio=ALL-UNNAMED \
--sun-misc-unsafe-memory-access=allow -classpath %classpath $flags $cls ${args[*]}"
}

# What a change costs where nothing attacks: the 64 B ping-pong between pods (C peers, pod IP,
# redirected and plain, every placement) and a connect to a Service VIP in the map (connect + first
# round trip), measured by this tree and by REV's in turns, ROUNDS times, each run in a fresh
# process; prints every run's rows, then the medians of both and their ratio (this tree / REV).
# REV is built in a worktree with a Maven repository of its own (seeded from ~/.m2), so that
# neither build sees the other's snapshot jars; both are removed at the end.
# With SM4J_AGAINST=jvm it measures the JVM's own paths instead: JMH SendReceiveBench.single at 64 B
# (redirect and TCP, ns per message) and RttBench's 64 B ping-pong (SockmapChannel redirected, p50
# and CPU per round trip), for changes to the channels and the native calls. With SM4J_AGAINST=arrow:
# ArrowBench on loopback (each tree's own; GB/s of stock Flight, the bridge, Flight on the sockmap
# transport, the bridge with the bound lifted), for changes anywhere under the Arrow bridge. With
# SM4J_AGAINST=netty: NettyGrpcBench on loopback, one event loop (each tree's own; Netty echo and
# gRPC unary, sockmap4j's and stock epoll's), for changes to the Netty transport. With
# SM4J_AGAINST=stream: StreamBench's 64 KiB writes on loopback (each tree's own; java.nio TCP, the
# redirect bounded and unbounded, gathering writes on both), for changes to the channels' writes.
# With SM4J_AGAINST=mesh: MeshRttBench (each tree's own, 3 rounds of 20,000 64 B round trips a turn,
# the agent running; its accelerated/plain p50 and p99 and the agent's CPU a turn), for changes to
# the mesh mode or to what the agent does beside meshed pods.
# With SM4J_AGAINST=arrow-grpc: ArrowGrpcBench (each tree's own; 3 rounds of 32 MiB a size, 4 KiB
# and 64 KiB batches, TCP, co-located copied and lent; CPU and p50 a call), for changes to
# ArrowGrpc's marshaller or to how the co-located transport lends.
# With SM4J_AGAINST=demo: the RAG demo (each tree's own, node shape, one round of both paths per
# turn; SM4J_DEMO_ARGS adds flags), its fast/plain ratios and the fast path's own figures, for
# changes anywhere a service feels.
# Usage: scripts/bench.sh against REV [ROUNDS]     (e.g. scripts/bench.sh against 6a39524 5)
bench_against() {
  need
  rev=${1:?usage: scripts/bench.sh against REV [ROUNDS]}
  rounds=${2:-5}
  here=$(pwd)
  old=$(mktemp -d /tmp/sm4j-against.XXXXXX)
  out=$(mktemp -d /tmp/sm4j-against-out.XXXXXX)
  cleanup() {
    git -C "$here" worktree remove --force "$old/tree" >/dev/null 2>&1 || true
    rm -rf "$old"
    git -C "$here" worktree prune
  }
  trap cleanup EXIT
  git worktree add -q --detach "$old/tree" "$rev"
  # Readable to other uids, as a checkout usually is: a mesh bench's sidecars run as their own uid.
  chmod 755 "$old"
  # The same harness on both sides: this tree's NodeRttBench (case and placement filters) and
  # ServiceScaleBench (the programs' own run time per connect).
  # (The demo mode runs each tree's own demo: nothing is copied.)
  if [ "${SM4J_AGAINST:-node}" != demo ]; then
    cp bench/src/main/java/io/github/sockmap4j/bench/{NodeRttBench,ServiceScaleBench,RttBench,BenchRun}.java \
      "$old/tree/bench/src/main/java/io/github/sockmap4j/bench/"
    cp bench/src/main/java/io/github/sockmap4j/bench/jmh/SendReceiveBench.java \
      "$old/tree/bench/src/main/java/io/github/sockmap4j/bench/jmh/"
    # The harness runs on the test bed; a REV from before it was a module gets its sources in bench
    # (they use nothing but the JDK).
    if [ ! -d "$old/tree/testbed" ]; then
      cp -r testbed/src/main/java/io/github/sockmap4j/testbed "$old/tree/bench/src/main/java/io/github/sockmap4j/"
    fi
  fi
  cp -a ~/.m2/repository "$old/m2"
  mvn_b -q install -DskipTests
  (cd "$old/tree" && mvn_b -q -Dmaven.repo.local="$old/m2" install -DskipTests)
  enter_child_cgroup sockmap4j-bench
  # enter_child_cgroup's trap moves the shell back; the worktree and its repository go too.
  trap 'rc=$?; cleanup; leave_child_cgroup "$rc"' EXIT

  export SM4J_BENCH_CASES="pod IP, redirected;pod IP, plain"
  run() { # DIR REPO LABEL N
    local dir=$1 repo=$2 label=$3 n=$4
    if [ "${SM4J_AGAINST:-node}" = demo ]; then
      (cd "$dir" && mvn_b -q -Dmaven.repo.local="$repo" -pl examples/rag-pipeline exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED \
        --add-modules=jdk.incubator.vector --add-opens=java.base/java.nio=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow \
        -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -classpath %classpath io.github.sockmap4j.examples.rag.RagDemo \
        ${SM4J_DEMO_ARGS:-}") > "$out/demo-$label-$n.txt" 2>&1
      return
    fi
    if [ "${SM4J_AGAINST:-node}" = mesh ]; then
      (cd "$dir" && mvn_b -q -Dmaven.repo.local="$repo" -pl bench exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED \
        -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -classpath %classpath io.github.sockmap4j.bench.MeshRttBench 3 20000 64") \
        > "$out/mesh-$label-$n.txt" 2>&1
      return
    fi
    if [ "${SM4J_AGAINST:-node}" = stream ]; then
      (cd "$dir" && mvn_b -q -Dmaven.repo.local="$repo" -pl bench exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED \
        -Dgather=16 -classpath %classpath io.github.sockmap4j.bench.StreamBench 3 256 65536") > "$out/stream-$label-$n.txt"
      return
    fi
    if [ "${SM4J_AGAINST:-node}" = netty ]; then
      (cd "$dir" && mvn_b -q -Dmaven.repo.local="$repo" -pl bench exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED \
        -Dloops=1 -classpath %classpath io.github.sockmap4j.bench.NettyGrpcBench 5 10000") > "$out/netty-$label-$n.txt"
      return
    fi
    if [ "${SM4J_AGAINST:-node}" = arrow-grpc ]; then
      (cd "$dir" && mvn_b -q -Dmaven.repo.local="$repo" -pl bench exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED \
        --add-opens=java.base/java.nio=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow -Xmx2g \
        -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -classpath %classpath io.github.sockmap4j.bench.ArrowGrpcBench 3 32 4096,65536") \
        > "$out/arrow-grpc-$label-$n.txt"
      return
    fi
    if [ "${SM4J_AGAINST:-node}" = arrow ]; then
      (cd "$dir" && mvn_b -q -Dmaven.repo.local="$repo" -pl bench exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED \
        --add-opens=java.base/java.nio=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow -Xmx2g \
        -classpath %classpath io.github.sockmap4j.bench.ArrowBench 5") > "$out/arrow-$label-$n.txt"
      return
    fi
    if [ "${SM4J_AGAINST:-node}" = jvm ]; then
      (cd "$dir" && mvn_b -q -Dmaven.repo.local="$repo" -pl bench exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED \
        -classpath %classpath org.openjdk.jmh.Main SendReceiveBench.single -p size=64 -p path=redirect,tcp -f 1 -wi 3 -i 5") \
        > "$out/jmh-$label-$n.txt"
      (cd "$dir" && mvn_b -q -Dmaven.repo.local="$repo" -pl bench exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED \
        -classpath %classpath io.github.sockmap4j.bench.RttBench 3 20000 64") > "$out/rtt-$label-$n.txt"
      return
    fi
    (cd "$dir" && mvn_b -q -Dmaven.repo.local="$repo" -pl bench exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED \
      -classpath %classpath io.github.sockmap4j.bench.NodeRttBench 3 20000 64") > "$out/rtt-$label-$n.txt"
    (cd "$dir" && mvn_b -q -Dmaven.repo.local="$repo" -pl bench exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED \
      -classpath %classpath io.github.sockmap4j.bench.ServiceScaleBench 3 1000 20") > "$out/svc-$label-$n.txt"
  }
  for n in $(seq 1 "$rounds"); do
    # Turns alternate which goes first: a drift in the machine falls on both.
    if [ $((n % 2)) = 1 ]; then run "$here" ~/.m2/repository new "$n"; run "$old/tree" "$old/m2" old "$n";
    else run "$old/tree" "$old/m2" old "$n"; run "$here" ~/.m2/repository new "$n"; fi
    echo "turn $n of $rounds done"
  done

  # Rows: NodeRttBench "| pod IP, redirected | p50 | p99 |..." under each "placement X" line;
  # ServiceScaleBench "| the VIP | 10 | p50 | p99 |..." and "| pod 1's IP | - | p50 |...".
  metric() { # LABEL: prints "name value" lines, one a run and metric
    local label=$1 f
    if [ "${SM4J_AGAINST:-node}" = demo ]; then
      for f in "$out"/demo-"$label"-*.txt; do
        # RagReport's rows: "| P50 latency (ms) | 5.41 | 6.14 | 1.14 |" (plain, fast, fast/plain).
        awk -F'|' 'function num(x) { gsub(/[ ,]/, "", x); return x }
          { k = "" }
          /^\| P50 latency/ { k = "demo_p50" } /^\| P99 latency/ { k = "demo_p99" } /^\| P99.9 latency/ { k = "demo_p999" }
          /^\| max throughput/ { k = "demo_max_rps" } /^\| CPU % all stages \|/ { k = "demo_cpu_all" }
          /^\| CPU % embedding/ { k = "demo_cpu_embedding" } /^\| CPU % search/ { k = "demo_cpu_search" }
          /^\| CPU % context/ { k = "demo_cpu_context" } /^\| CPU % gateway/ { k = "demo_cpu_gateway" }
          /^\| ms a request waiting/ { k = "demo_wait_ms" }
          k != "" { print k "_plain", num($3); print k "_fast", num($4); if (num($5) != "") print k "_fast_over_plain", num($5) }' "$f"
      done
      return
    fi
    if [ "${SM4J_AGAINST:-node}" = mesh ]; then
      for f in "$out"/mesh-"$label"-*.txt; do
        # MeshRttBench's rows: "| accelerated (...) | p50 | p99 | p50 / plain | p99 / plain | ... | agent CPU ms |".
        awk -F'|' 'function num(x) { gsub(/[ ,]/, "", x); return x }
          /^\| accelerated/ { print "mesh_accelerated_p50_us", num($3); print "mesh_accelerated_p99_us", num($4);
            print "mesh_p50_over_plain", num($5); print "mesh_p99_over_plain", num($6); print "mesh_agent_cpu_ms_a_turn", num($11) }
          /^\| plain/ { print "mesh_plain_p99_us", num($4); print "mesh_plain_agent_cpu_ms_a_turn", num($11) }' "$f"
      done
      return
    fi
    if [ "${SM4J_AGAINST:-node}" = stream ]; then
      for f in "$out"/stream-"$label"-*.txt; do
        # StreamBench's rows: "64 KiB  nio_tcp   1.611   1.00 ..." (GB/s in the fourth field).
        awk '/^64 KiB +[a-z_]+ +[0-9]/ {print "stream_64KiB_" $3 "_gbps", $4}' "$f"
      done
      return
    fi
    if [ "${SM4J_AGAINST:-node}" = netty ]; then
      for f in "$out"/netty-"$label"-*.txt; do
        # NettyGrpcBench's rows: "Netty echo 64 B p50 (us)   stock   sockmap4j   ..." in both trees.
        awk '/^Netty echo 64 B p50/ {print "netty_echo_p50_stock", $7; print "netty_echo_p50_sockmap4j", $8}
             /^Netty echo 64 B p99 / {print "netty_echo_p99_sockmap4j", $8}
             /^Netty echo CPU/ {print "netty_echo_cpu_stock", $5; print "netty_echo_cpu_sockmap4j", $6}
             /^gRPC unary 1 KiB p50/ {print "grpc_unary_p50_stock", $7; print "grpc_unary_p50_sockmap4j", $8}
             /^gRPC unary CPU/ {print "grpc_unary_cpu_sockmap4j", $6}' "$f"
      done
      return
    fi
    if [ "${SM4J_AGAINST:-node}" = arrow-grpc ]; then
      for f in "$out"/arrow-grpc-"$label"-*.txt; do
        # ArrowGrpcBench's rows: "lent  65536 B  273.4  200.2-459.0  123.1  2026.5  1.00  0.36  0.41  0.60"
        awk '/^(tcp|colocated|lent) +[0-9]+ B +[0-9]/ {print "arrow_grpc_" $1 "_" $2 "B_cpu_us", $4; print "arrow_grpc_" $1 "_" $2 "B_p50_us", $6}' "$f"
      done
      return
    fi
    if [ "${SM4J_AGAINST:-node}" = arrow ]; then
      for f in "$out"/arrow-"$label"-*.txt; do
        # ArrowBench's rows: "Flight DoGet, stock grpc-netty (epoll)   0.88   1.00   rounds..."
        awk '/^Flight DoGet, stock/ {print "arrow_flight_stock_gbps", $(NF-6)}
             /^Arrow bridge, default bound|^Arrow bridge over SockmapChannel/ {print "arrow_bridge_gbps", $(NF-6); print "arrow_bridge_vs_flight", $(NF-5)}
             /^Flight DoGet, sockmap/ {print "arrow_flight_sockmap_gbps", $(NF-6)}
             /^Arrow bridge, in-flight bound lifted/ {print "arrow_bridge_lifted_gbps", $(NF-6)}' "$f"
      done
      return
    fi
    if [ "${SM4J_AGAINST:-node}" = jvm ]; then
      for f in "$out"/jmh-"$label"-*.txt; do
        # JMH's result lines: "SendReceiveBench.single  [blocking]  redirect  64  avgt  5  4038.1 ± 117.2  ns/op"
        # (the blocking column since SendReceiveBench took that parameter): found from "avgt" back.
        awk '/^SendReceiveBench.single/ {
          for (k = 1; k <= NF; k++) if ($k == "avgt") break
          key = (k > 4 ? ($2 == "true" ? "blocking_" : "nonblocking_") : "") $(k - 2)
          print "jmh_single_" $(k - 1) "B_" key "_ns", $(k + 2)
        }' "$f"
      done
      for f in "$out"/rtt-"$label"-*.txt; do
        # RttBench's table: "64 B    SockmapChannel, redirect    p50 p99 p99.9 CPU ratio ratio"
        awk '/^64 B +SockmapChannel, redirect +[0-9]/ {print "rtt_64B_channel_redirect_p50_us", $5; print "rtt_64B_channel_redirect_cpu_us", $8}
             /^64 B +SockmapChannel, TCP +[0-9]/ {print "rtt_64B_channel_tcp_p50_us", $5}
             /^64 B +java.nio TCP +[0-9]/ {print "rtt_64B_nio_tcp_p50_us", $5}' "$f"
      done
      return
    fi
    for f in "$out"/rtt-"$label"-*.txt; do
      awk -F'|' '/^placement /{pl=$0; sub(/^placement /,"",pl)} /^\| pod IP, redirected \|/{gsub(/ /,"",$3); print "rtt_redirected_p50_" pl, $3}
                 /^\| pod IP, plain \|/{gsub(/ /,"",$3); print "rtt_plain_p50_" pl, $3}' "$f"
    done
    for f in "$out"/svc-"$label"-*.txt; do
      awk -F'|' '/^\| the VIP \| 10 \|/{gsub(/ /,"",$4); print "service_connect_p50", $4}
                 /^\| pod 1.s IP \|/{gsub(/ /,"",$4); print "pod_ip_connect_p50", $4}
                 /^\| all \|/{gsub(/ /,"",$5); print "programs_ns_per_connect", $5}
                 /^\| prog_sockops \|/{gsub(/ /,"",$4); print "sockops_ns_per_run", $4}
                 /^\| prog_connect4 \|/{gsub(/ /,"",$4); print "connect4_ns_per_run", $4}' "$f"
    done
  }
  median() { sort -g | awk '{v[NR]=$1} END {if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
  echo
  echo "Runs: $out (rtt-*.txt, svc-*.txt)"
  echo "| metric (µs unless named) | $rev (median of $rounds) | this tree (median of $rounds) | this / $rev |"
  echo "|---|---:|---:|---:|"
  metric new > "$out/new.tsv"
  metric old > "$out/old.tsv"
  for m in $(cut -d' ' -f1 "$out/new.tsv" | sort -u); do
    a=$(awk -v m="$m" '$1==m {print $2}' "$out/old.tsv" | median)
    b=$(awk -v m="$m" '$1==m {print $2}' "$out/new.tsv" | median)
    awk -v m="$m" -v a="$a" -v b="$b" 'BEGIN {printf "| %s | %.2f | %.2f | %.3f |\n", m, a, b, b / a}'
  done
}

# Every benchmark once, one after the other, each printing ratios against the plain path
# measured in the same run, in both topologies: loopback (one network namespace) and node (each
# endpoint in a pod of the node-shaped bed, routed through a node namespace with kube-proxy-style
# NAT); logs and plots go to OUT (default bench-results/<date>).
# About 75 minutes with the defaults. Usage: scripts/bench.sh all [OUT]
bench_all() {
  need

  out=${1:-bench-results/$(date -u +%Y%m%dT%H%M%SZ)}
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
  mvn_b -q install -DskipTests
  enter_child_cgroup sockmap4j-bench
  ulimit -n 65536 2>/dev/null || true

  jflags="--enable-native-access=ALL-UNNAMED --add-opens=java.base/java.nio=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow"
  run() { # run NAME MODULE ARGS...
    local name=$1 module=$2; shift 2
    echo "== $name: $*" | tee "$out/$name.log"
    mvn_b -q -pl "$module" exec:exec -Dexec.args="$jflags -classpath %classpath $*" 2>&1 | grep -v '^WARNING:' | tee -a "$out/$name.log"
  }
  {
    echo "machine: $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), kernel $(uname -r)"
    echo "cpu: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
    echo "java: $("$JAVA_HOME/bin/java" -version 2>&1 | head -n 1)"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  } | tee "$out/machine.txt"

  run rtt bench -Dplots="$out" io.github.sockmap4j.bench.RttBench 5 20000 64,4096,65536
  run rtt-busy-poll bench -Dwait=BUSY_POLL io.github.sockmap4j.bench.RttBench 5 20000 64,65536
  run stream bench -Dgather=16 io.github.sockmap4j.bench.StreamBench 5 512 65536,1024,64
  run scale bench io.github.sockmap4j.bench.ScaleBench 5 2000 20000
  run netty-grpc bench -Dloops=1 io.github.sockmap4j.bench.NettyGrpcBench 7 10000
  # SockmapGrpc's two other profiles, against stock epoll as gRPC sets it up (its executor, or
  # directExecutor()), in-process on the same kind of executor as sockmap4j.
  run netty-grpc-polling bench -Dexecutor=polling -Dpoll=50 io.github.sockmap4j.bench.NettyGrpcBench 7 10000
  run netty-grpc-direct bench -Dexecutor=direct -Dpoll=200 io.github.sockmap4j.bench.NettyGrpcBench 7 10000
  run arrow bench -Xmx2g io.github.sockmap4j.bench.ArrowBench 5
  run jmh bench org.openjdk.jmh.Main SendReceiveBench -p blocking=true
  # The node topology: C, SockmapChannel and java.nio round trips between pods (three placements);
  # streaming, connect + accept, Netty/gRPC and Arrow with each end in its pod, dialing Service VIPs.
  run node-rtt-64 bench -Dplots="$out" io.github.sockmap4j.bench.NodeRttBench 5 20000 64
  run node-rtt-4k bench io.github.sockmap4j.bench.NodeRttBench 5 10000 4096
  run node-rtt-64k bench -Dplots="$out" io.github.sockmap4j.bench.NodeRttBench 5 5000 65536
  run node-stream bench -Dtopology=node -Dgather=16 io.github.sockmap4j.bench.StreamBench 5 512 65536,1024,64
  run node-scale bench -Dtopology=node io.github.sockmap4j.bench.ScaleBench 5 2000 20000
  run node-netty-grpc bench -Dtopology=node -Dloops=1 io.github.sockmap4j.bench.NettyGrpcBench 7 10000
  run node-netty-grpc-polling bench -Dtopology=node -Dexecutor=polling -Dpoll=50 io.github.sockmap4j.bench.NettyGrpcBench 7 10000
  run node-netty-grpc-direct bench -Dtopology=node -Dexecutor=direct -Dpoll=200 io.github.sockmap4j.bench.NettyGrpcBench 7 10000
  run node-arrow bench -Dtopology=node -Xmx2g io.github.sockmap4j.bench.ArrowBench 5
  run rag examples/rag-pipeline --add-modules=jdk.incubator.vector -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
    io.github.sockmap4j.examples.rag.RagDemo --rounds 3 --plot "$out/rag-latency-node.png"
  run rag-loopback examples/rag-pipeline --add-modules=jdk.incubator.vector -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
    io.github.sockmap4j.examples.rag.RagDemo --rounds 3 --topology loopback --plot "$out/rag-latency-loopback.png"
  echo "results in $out"
}

# What the Spring Boot starter costs a service that does nothing: examples/spring-boot built
# with the starter and without it (profile without-sockmap4j), each started RUNS times in turn,
# idle (no calls), in a child cgroup. Prints per run the time to the first line after start,
# Spring's own start time, RSS after start and the CPU it used over WINDOW seconds of idling
# (utime + stime from /proc), then the medians and the ratios with/without.
# Usage: scripts/bench.sh spring-idle [RUNS] [WINDOW]   (default 3 runs, 60 s)
bench_spring_idle() {
  need
  runs=${1:-3}
  window=${2:-60}
  mvn_b -q install -DskipTests -Dmaven.javadoc.skip=true -Dmaven.source.skip=true -pl bom,spring-boot-starter -am
  ex=examples/spring-boot
  (cd $ex && mvn_b -q package -DskipTests -Pwithout-sockmap4j && cp target/sockmap-spring-service-1.0.jar target/without.jar \
    && mvn_b -q package -DskipTests && cp target/sockmap-spring-service-1.0.jar target/with.jar)
  id=$$
  cg=$CGROUP2/sockmap4j-idle-$id
  pins=/sys/fs/bpf/sockmap4j-idle-$id
  pid=
  cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do [ -s "$cg/cgroup.procs" ] || break; sleep 0.1; done
    rmdir "$cg" 2>/dev/null || true
    [ -e "$pins" ] && scripts/sockmap4j --pin-dir "$pins" down --force >/dev/null 2>&1 || true
  }
  trap cleanup EXIT
  mkdir "$cg"
  tck=$(getconf CLK_TCK)
  cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
  one() { # VARIANT: one run; prints "variant wall_ms spring_ms rss_kb cpu_pct"
    local v=$1 out=/tmp/sockmap4j-idle-$id.out t0 t1
    t0=$(date +%s%N)
    sh -c 'echo $$ > "$0/cgroup.procs"; shift; exec "$@"' "$cg" - "$JAVA_HOME/bin/java" \
      --enable-native-access=ALL-UNNAMED -Dsockmap4j.pinDir="$pins" -jar "$ex/target/$v.jar" 0 >"$out" 2>&1 &
    pid=$!
    for _ in $(seq 600); do grep -q '^idle' "$out" && break; sleep 0.1; done
    grep -q '^idle' "$out" || { cat "$out"; echo "$v did not start"; exit 1; }
    t1=$(date +%s%N)
    local spring rss c0 c1
    spring=$(sed -n 's/^started in \([0-9]*\) ms/\1/p' "$out")
    sleep 5 # past start-up's last tasks
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
    c0=$(cpu_ticks "$pid"); sleep "$window"; c1=$(cpu_ticks "$pid")
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
    echo "$v $(( (t1 - t0) / 1000000 )) $spring $rss $(awk -v d=$((c1 - c0)) -v t="$tck" -v w="$window" 'BEGIN {printf "%.3f", 100 * d / t / w}')"
  }
  results=()
  for r in $(seq "$runs"); do
    for v in without with; do
      line=$(one "$v"); echo "run $r: $line"; results+=("$line")
    done
  done
  median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
  for v in without with; do
    for col in 2 3 4 5; do
      printf '%s\n' "${results[@]}" | awk -v v=$v -v c=$col '$1 == v {print $c}' | median > "/tmp/sockmap4j-idle-$id.$v.$col"
    done
  done
  m() { cat "/tmp/sockmap4j-idle-$id.$1.$2"; }
  echo "medians over $runs runs (idle window ${window} s):"
  printf '%-8s %10s %10s %10s %10s\n' "" "to-ready" "spring" "rss" "cpu"
  for v in without with; do
    printf '%-8s %8s ms %8s ms %7s KiB %8s %%\n' "$v" "$(m $v 2)" "$(m $v 3)" "$(m $v 4)" "$(m $v 5)"
  done
  awk -v a="$(m with 2)" -v b="$(m without 2)" -v c="$(m with 3)" -v d="$(m without 3)" -v e="$(m with 4)" \
    -v f="$(m without 4)" -v g="$(m with 5)" -v h="$(m without 5)" \
    'BEGIN {printf "with/without: to-ready %.2f, spring start %.2f, rss %.2f; idle cpu %+.3f %% of a CPU\n", a/b, c/d, e/f, g-h}'
  rm -f /tmp/sockmap4j-idle-$id.*
}

# Who wakes whom during gRPC unary calls: GrpcHandoffs runs one transport at a time (loopback,
# 1 KiB, blocking stub) and, once its measured calls start, perf records every sched_wakeup on the
# machine for SECONDS; the wake-ups whose waker or wakee is that JVM's thread are counted by
# (waker, wakee) thread group and divided by the calls made meanwhile (the caller's wake-ups: one
# per blocking call). EXECUTOR=direct for the directExecutor() profile. A wake-up the kernel queues
# to the wakee's CPU is recorded there, with the idle task ("swapper") as its waker.
# Usage: [EXECUTOR=direct] scripts/bench.sh grpc-wakeups [SECONDS] [TRANSPORTS]   (default 3, "TCP SOCKMAP INPROCESS")
bench_grpc_wakeups() {
  need base perf
  seconds=${1:-3}
  transports=${2:-TCP SOCKMAP INPROCESS}
  out=$(mktemp -d /tmp/sm4j-wakeups.XXXXXX)
  trap 'rm -rf "$out"' EXIT

  mvn_b -q install -DskipTests
  enter_child_cgroup sockmap4j-bench
  for t in $transports; do
    mvn_b -q -pl bench exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED -classpath %classpath \
      -Dexecutor=${EXECUTOR:-default} -Dtransports=$t -Dseconds=$((seconds + 2)) io.github.sockmap4j.bench.GrpcHandoffs 20000" \
      > "$out/$t.log" 2>&1 &
    jvm=$!
    pid=$(measuring_pid "$out/$t.log" "$t" "$jvm") || exit 1
    ls /proc/"$pid"/task > "$out/$t.tids"
    perf record -q -e sched:sched_wakeup -a -o "$out/$t.data" -- sleep "$seconds" 2>/dev/null
    # The JVM's calls go on past the window; it then closes its channels and fast path and exits
    # (killed mid-call, its open connections would keep the pins it made).
    wait "$jvm"
    perf script -i "$out/$t.data" -F comm,tid,event,trace 2>/dev/null > "$out/$t.txt"
    # The window's calls are counted as the caller's wake-ups: each blocking call ends with the caller
    # woken by the response (and it is woken for nothing else).
    python3 - "$out/$t.txt" "$out/$t.tids" "$t" "${EXECUTOR:-default}" <<'PY'
import re, sys, collections
txt, tids, t, ex = sys.argv[1:5]
ours = set(open(tids).read().split())
def group(name):
    return re.sub(r'[-_]?\d+', '', name).rstrip('-_')
pairs = collections.Counter()
caller = 0
for line in open(txt):
    m = re.match(r'\s*(.+?)\s+(\d+)\s+sched:sched_wakeup:\s+comm=(.+?) pid=(\d+)', line)
    if not m:
        continue
    waker, wtid, wakee, etid = m.group(1), m.group(2), m.group(3), m.group(4)
    if wtid not in ours and etid not in ours:
        continue
    pairs[(group(waker) if wtid in ours else waker + " (outside)", group(wakee) if etid in ours else wakee + " (outside)")] += 1
    if wakee == "caller":
        caller += 1
print(f"== {t}, executor {ex}: {caller} wake-ups of the caller in the window (one per call when the call blocks)")
for (a, b), n in pairs.most_common(12):
    print(f"{a:>24} -> {b:<24} {n:8d}  {n / max(caller, 1):6.2f} per caller wake-up")
PY
  done
}

# Would an io_uring I/O path make round trips faster? A C ping-pong (bench/src/main/c/
# uring_pingpong.c) with blocking send/recv and with io_uring, over TCP and over the redirect,
# interleaved in rounds, before anyone builds the Java path. Needs liburing-dev (scripts/install.sh uring).
# Usage: scripts/bench.sh uring [rounds] [iterations] [sizes]
bench_uring() {
  need base uring

  rounds=${1:-5}; iters=${2:-20000}; sizes=${3:-64 65536}
  mvn_b -q install -DskipTests
  bin=$(mktemp -d)/uring_pingpong
  cc -O2 -Wall -Werror -o "$bin" bench/src/main/c/uring_pingpong.c -luring -lpthread

  pins=/sys/fs/bpf/sockmap4j-uring-$$
  enter_child_cgroup sockmap4j-uring
  cleanup() { local rc=$?; ./scripts/sockmap4j --pin-dir="$pins" down --force >/dev/null 2>&1 || true; rm -f "$bin"; leave_child_cgroup "$rc"; }
  trap cleanup EXIT
  ./scripts/sockmap4j --pin-dir="$pins" up --cgroup "$SM4J_CGROUP" >/dev/null
  fast=$((20000 + $$ % 10000)); plain=$((fast + 1))
  # C peers publish no reads and no sockmap4j JVM runs a watcher here: lift the in-flight bound.
  ./scripts/sockmap4j --pin-dir="$pins" allow --bound=-1 "$fast" >/dev/null
  echo "io_uring trial: $rounds rounds x $iters round trips, kernel $(uname -r), $(nproc) CPUs; p50 us of each round"
  for size in $sizes; do
    for r in $(seq "$rounds"); do
      for mode in blocking uring; do
        echo "$size tcp $mode $("$bin" "$plain" "$iters" "$size" "$mode" | sed 's/.*: //')"
        echo "$size redirect $mode $("$bin" "$fast" "$iters" "$size" "$mode" | sed 's/.*: //')"
      done
    done
  done | awk '{ key=$1" "$2" "$3; split($0, f, "p50 "); split(f[2], g, " us"); p50[key]=p50[key]" "g[1]; keys[key]=1 }
    END { for (k in keys) print k ":" p50[k] }' | sort -k1,1n -k2,2 -k3,3
  ./scripts/sockmap4j --pin-dir="$pins" stats | head -n 8
}

# What waking a sleeping peer costs, by the descriptor that rings it: a C trial (bench/src/main/c/
# bells.c) with an eventfd (what the co-located rings use), a pipe and a Unix socketpair, in turns,
# in three shapes: two processes ringing each other (as the scheduler places them, and both on CPU
# 0), and the demo's: a gateway calling three stages in turn with some work in each and a pause
# between requests, so that every process sleeps between rings. Prints the medians of the rounds:
# CPU of all processes a request (a round trip in the first two) and perf's CPU migrations a request.
# Usage: scripts/bench.sh bells [ROUNDS] [CALLS]
bench_bells() {
  need base
  command -v perf > /dev/null || { echo "perf is missing: apt-get install linux-perf" >&2; exit 1; }
  rounds=${1:-5}; calls=${2:-20000}
  bin=$(mktemp -d)/bells
  cc -O2 -Wall -Werror -o "$bin" bench/src/main/c/bells.c
  enter_child_cgroup sockmap4j-bells
  cleanup() { local rc=$?; rm -rf "$(dirname "$bin")"; leave_child_cgroup "$rc"; }
  trap cleanup EXIT
  echo "bells: $rounds rounds in turns, kernel $(uname -r), $(nproc) CPUs; medians of the rounds"
  printf '%-18s %-11s %14s %20s\n' shape bell "CPU us a req." "migrations a req."
  for r in $(seq "$rounds"); do
    for kind in eventfd pipe socketpair; do
      for shape in pingpong pingpong-one-cpu chain; do
        case $shape in
          pingpong) n=$calls; cmd=("$bin" "$kind" "$n" 2) ;;
          pingpong-one-cpu) n=$calls; cmd=(taskset -c 0 "$bin" "$kind" "$n" 2) ;;
          chain) n=$((calls / 10)); cmd=("$bin" "$kind" "$n" 4 20000 500) ;;
        esac
        line=$(perf stat -x, -e cpu-migrations -o "$bin.perf" -- "${cmd[@]}")
        migrations=$(awk -F, '/cpu-migrations/ { print $1 }' "$bin.perf")
        echo "$shape $kind $(sed 's/.*wall, \([0-9.]*\) us CPU.*/\1/' <<<"$line") $migrations $n"
      done
    done
  done | awk '{ k = $1 " " $2; cpu[k] = cpu[k] " " $3; mig[k] = mig[k] " " ($4 / $5); keys[k] = 1 }
    function median(s,   a, n, i, j, t) { n = split(s, a, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
        if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
    END { for (k in keys) { split(k, f, " "); printf "%-18s %-11s %14.1f %20.2f\n", f[1], f[2], median(cpu[k]), median(mig[k]) } }' \
    | sort -k1,1 -k3,3n
}

name=${1:-}
[ $# -eq 0 ] || shift
case $name in
  against|all|spring-idle|grpc-wakeups|uring|bells) "bench_${name//-/_}" "$@" ;;
  ''|-h|--help) list ;;
  *) run_jvm "$name" "$@" ;;
esac
