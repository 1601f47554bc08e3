#!/usr/bin/env bash
# Where each stage of the RAG demo spends its CPU, path by path: runs the demo (node shape, one
# path at a time, a longer fixed-rate phase) and, once the fixed-rate phase has run for a few
# seconds, loads async-profiler into every stage JVM (jcmd JVMTI.agent_load) for SECONDS of CPU
# samples with their threads; then prints, per path and stage, the samples by thread kind (as the
# demo's table groups them) and each kind's heaviest frames, and leaves the collapsed stacks in
# OUT (a flame graph tool reads them).
# async-profiler comes from Maven Central (tools.profiler:async-profiler, its native library inside).
# Usage: scripts/profile-demo.sh [OUT] [SECONDS]     (e.g. scripts/profile-demo.sh /tmp/prof 15)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
out=${1:-/tmp/sm4j-profile}
secs=${2:-15}
ap_version=4.1
mkdir -p "$out"
mvn_b -q dependency:get -Dartifact=tools.profiler:async-profiler:$ap_version >/dev/null
lib="$out/ap/linux-x64/libasyncProfiler.so"
if [ ! -f "$lib" ]; then
  (mkdir -p "$out/ap" && cd "$out/ap" && unzip -q -o ~/.m2/repository/tools/profiler/async-profiler/$ap_version/async-profiler-$ap_version.jar 'linux-x64/*')
fi
mvn_b -q install -DskipTests
enter_child_cgroup sockmap4j-profile
java_flags=(--enable-native-access=ALL-UNNAMED --add-modules=jdk.incubator.vector
  --add-opens=java.base/java.nio=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow
  -Dorg.slf4j.simpleLogger.defaultLogLevel=warn)

profile_path() { # MODE: the demo on one path; samples of its stages during the fixed-rate phase
  local mode=$1 log="$out/demo-$1.txt" pids pid role r
  : > "$log"
  mvn_b -q -pl examples/rag-pipeline exec:exec -Dexec.args="${java_flags[*]} -XX:+EnableDynamicAgentLoading \
    -classpath %classpath io.github.sockmap4j.examples.rag.RagDemo --mode $mode --requests $(( (secs + 10) * 100 )) \
    --throughput-seconds 0 --idle-seconds 0" > "$log" 2>&1 &
  local demo=$!
  # The fixed-rate phase begins after the warm-up line; give it 3 s more.
  until grep -q ' warm-up .* at the rate' "$log" 2>/dev/null; do
    kill -0 $demo 2>/dev/null || { cat "$log"; echo "the demo ended before its fixed-rate phase" >&2; return 1; }
    sleep 1
  done
  sleep 3
  pids=$(pgrep -f 'io.github.sockmap4j.examples.rag.RagService ' || true)
  for pid in $pids; do
    # jcmd reads NAME=VALUE as its own option: the agent's options go quoted.
    r=$(jcmd "$pid" JVMTI.agent_load "$lib" "\"start,event=cpu,interval=1ms,threads\"" 2>&1 || true)
    [[ $r == *"return code: 0"* ]] || echo "async-profiler did not start in $pid: $r" >&2
  done
  sleep "$secs"
  for pid in $pids; do
    role=$(tr '\0' ' ' < /proc/$pid/cmdline | sed -n 's/.*RagService \([a-z]*\) .*/\1/p')
    r=$(jcmd "$pid" JVMTI.agent_load "$lib" "\"stop,file=$out/$mode-$role.collapsed,collapsed\"" 2>&1 || true)
    [[ $r == *"return code: 0"* ]] || echo "async-profiler did not stop in $pid: $r" >&2
  done
  wait $demo
}
profile_path plain
profile_path fast

# A thread's kind from the root frame "[name tid=N]", as the demo's ThreadKind reads names.
summarize() { # FILE
  awk -v file="$1" '
    function kind(t) {
      if (t ~ /^(grpc-default-executor|sockmap4j-exec)/) return "handlers"
      if (t ~ /^(rag-io-|sockmap4j-grpc)/) return "event loops"
      if (t ~ /^sockmap4j/) return "sockmap4j"
      if (t ~ /^C[12] CompilerThread/) return "JIT"
      if (t ~ /^(GC |G1 |VM Thread|VM Periodic)/) return "GC and VM"
      return "rest"
    }
    {
      n = $NF; $NF = ""; split($0, f, ";")
      t = f[1]; sub(/^\[/, "", t); sub(/ tid=.*/, "", t)
      k = kind(t); total += n; byKind[k] += n
      leaf = f[length(f)]; sub(/ +$/, "", leaf); byLeaf[k SUBSEP leaf] += n
    }
    END {
      printf "%s: %d samples (1 ms each)\n", file, total
      for (k in byKind) printf "  %-12s %6d  %5.1f%%\n", k, byKind[k], 100 * byKind[k] / total
      for (kl in byLeaf) { split(kl, p, SUBSEP); if (byLeaf[kl] >= total / 100) printf "    %-12s %6d  %s\n", p[1], byLeaf[kl], p[2] }
    }' "$1"
}
for f in "$out"/plain-*.collapsed "$out"/fast-*.collapsed; do
  [ -f "$f" ] && summarize "$f"
done
echo "collapsed stacks: $out/*.collapsed; the demos' output: $out/demo-*.txt"
