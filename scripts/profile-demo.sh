#!/usr/bin/env bash
# Where each stage of the RAG demo spends its CPU, path by path: runs the demo (node shape, one
# path at a time, a longer fixed-rate phase) and, once the fixed-rate phase has run for a few
# seconds, loads async-profiler into every stage JVM (jcmd JVMTI.agent_load) for SECONDS of CPU
# samples with their threads; then prints, per path and stage, the samples by thread kind (as the
# demo's table groups them) and by what their stacks pass through (the kernel's TCP/IP or sockmap
# code, sends, receives, epoll, HTTP/2, gRPC, Arrow, sockmap4j), and leaves the collapsed stacks in
# OUT (a flame graph tool reads them).
# async-profiler comes from Maven Central (tools.profiler:async-profiler, its native library inside).
# Usage: scripts/profile-demo.sh [OUT] [SECONDS]     (e.g. scripts/profile-demo.sh /tmp/prof 15)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
out=${1:-/tmp/sm4j-profile}
secs=${2:-15}
mkdir -p "$out"
lib=$(async_profiler_lib "$out")
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

# Samples by stage, path and thread kind (as the demo's ThreadKind reads names), then by what the
# stacks pass through (a sample counts once in each group its stack touches).
python3 - "$out" <<'PY'
import collections, os, re, sys
out = sys.argv[1]
def kind(t):
    if re.match(r'(grpc-default-executor|sockmap4j-exec)', t): return 'handlers'
    if re.match(r'(rag-io-|sockmap4j-grpc)', t): return 'loops'
    if t.startswith('sockmap4j'): return 'sockmap4j'
    if re.match(r'C[12] CompilerThre', t): return 'JIT'
    if re.match(r'(GC |G1 |VM Thread|VM Periodic)', t): return 'GC/VM'
    return 'rest'
sys.path.insert(0, os.path.join(os.getcwd(), 'scripts'))
from profile_stacks import GROUPS as groups, count
kinds = ['handlers', 'loops', 'sockmap4j', 'JIT', 'GC/VM', 'rest']
rows = []
for stage in ['embedding', 'search', 'context', 'gateway']:
    for path in ['plain', 'fast']:
        f = os.path.join(out, path + '-' + stage + '.collapsed')
        if not os.path.exists(f):
            continue
        k, g, total = collections.Counter(), collections.Counter(), 0
        for line in open(f):
            stack, n = line.rstrip().rsplit(' ', 1)
            n = int(n)
            frames = stack.split(';')
            k[kind(re.sub(r' tid=.*', '', frames[0].lstrip('[')))] += n
            total += n
            count(frames[1:], n, g, 'examples')
        rows.append((stage, path, total, k, g))
print('samples (1 ms of CPU each) by thread kind')
print('%-10s %-5s %6s ' % ('stage', 'path', 'all') + ' '.join('%9s' % x for x in kinds))
for stage, path, total, k, g in rows:
    print('%-10s %-5s %6d ' % (stage, path, total) + ' '.join('%9d' % k[x] for x in kinds))
print('\nsamples whose stack passes through')
print('%-10s %-5s ' % ('stage', 'path') + ' '.join('%10s' % x for x, _ in groups))
for stage, path, total, k, g in rows:
    print('%-10s %-5s ' % (stage, path) + ' '.join('%10d' % g[x] for x, _ in groups))
PY
echo "collapsed stacks: $out/*.collapsed; the demos' output: $out/demo-*.txt"
