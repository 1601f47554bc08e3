#!/usr/bin/env bash
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
# With SM4J_AGAINST=demo: the RAG demo (each tree's own, node shape, one round of both paths per
# turn; SM4J_DEMO_ARGS adds flags), its fast/plain ratios and the fast path's own figures, for
# changes anywhere a service feels.
# Usage: scripts/bench-against.sh REV [ROUNDS]     (e.g. scripts/bench-against.sh 6a39524 5)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
rev=${1:?usage: scripts/bench-against.sh REV [ROUNDS]}
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
