#!/usr/bin/env bash
# Where a gRPC unary call's CPU goes, transport by transport: GrpcHandoffs runs one transport at a
# time (loopback, 1 KiB, blocking stub, gRPC's default executor unless EXECUTOR says otherwise) and,
# once its measured calls start, async-profiler samples that JVM's CPU (1 sample = 1 ms) with
# thread names for SECONDS. Printed per transport, as microseconds a call: the samples by thread
# group and by what the stacks pass through (the kernel's TCP/IP, sockmap or Unix socket code,
# sends, receives, epoll, wake-ups, futexes, HTTP/2, gRPC, sockmap4j's handlers). TURNS > 1 runs
# the transports again in turns and prints each turn. The collapsed stacks stay in OUT.
# async-profiler comes from Maven Central (tools.profiler:async-profiler, its native library inside).
# Usage: [EXECUTOR=direct|polling] [TURNS=n] scripts/profile-grpc.sh [OUT] [SECONDS] [TRANSPORTS]
#        (default /tmp/sm4j-grpc-profile, 5, "SOCKMAP UDS TCP")
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
out=${1:-/tmp/sm4j-grpc-profile}
secs=${2:-5}
transports=${3:-SOCKMAP UDS TCP}
turns=${TURNS:-1}
mkdir -p "$out"
lib=$(async_profiler_lib "$out")
mvn_b -q install -DskipTests
enter_child_cgroup sockmap4j-profile

for turn in $(seq 1 "$turns"); do
  for t in $transports; do
    log="$out/$t-$turn.log"
    # Loaded at launch, started later: loading it into a warm JVM sets the JIT compiling again.
    mvn_b -q -pl bench exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED -agentpath:$lib \
      -classpath %classpath -Dexecutor=${EXECUTOR:-default} -Dtransports=$t -Dseconds=$((secs + 2)) \
      io.github.sockmap4j.bench.GrpcHandoffs 20000" > "$log" 2>&1 &
    jvm=$!
    until grep -q "^measuring $t" "$log" 2>/dev/null; do
      kill -0 "$jvm" 2>/dev/null || { cat "$log"; exit 1; }
      sleep 0.2
    done
    pid=$(sed -n "s/^measuring $t in pid \([0-9]*\)$/\1/p" "$log")
    # jcmd reads NAME=VALUE as its own option: the agent's options go quoted.
    r=$(jcmd "$pid" JVMTI.agent_load "$lib" "\"start,event=cpu,interval=1ms,threads\"" 2>&1 || true)
    [[ $r == *"return code: 0"* ]] || echo "async-profiler did not start in $pid: $r" >&2
    sleep "$secs"
    r=$(jcmd "$pid" JVMTI.agent_load "$lib" "\"stop,file=$out/$t-$turn.collapsed,collapsed\"" 2>&1 || true)
    [[ $r == *"return code: 0"* ]] || echo "async-profiler did not stop in $pid: $r" >&2
    # The calls go on past the window; the JVM then closes its channels and fast path and exits.
    wait "$jvm"
  done
done

python3 - "$out" "$secs" "$turns" $transports <<'PY'
import collections, os, re, sys
out, secs, turns, transports = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
def group(name):
    return re.sub(r'[-_]?\d+', '', name).rstrip('-_')
sys.path.insert(0, os.path.join(os.getcwd(), 'scripts'))
from profile_stacks import GROUPS as groups, count
# Calls a second from GrpcHandoffs' own wall-clock row (µs a call over its whole measured phase).
def calls_in_window(log):
    for line in open(log):
        if '(call, wall clock)' in line:
            us = float(re.findall(r'[\d.]+', line.split('(call, wall clock)')[1])[0])
            return secs * 1e6 / us, us
    return None, None
for turn in range(1, turns + 1):
    rows = []
    for t in transports:
        f = os.path.join(out, '%s-%d.collapsed' % (t, turn))
        calls, wall = calls_in_window(os.path.join(out, '%s-%d.log' % (t, turn)))
        if not os.path.exists(f) or not calls:
            print('no profile or no call count for %s, turn %d' % (t, turn))
            continue
        k, g, total = collections.Counter(), collections.Counter(), 0
        for line in open(f):
            stack, n = line.rstrip().rsplit(' ', 1)
            n = int(n)
            frames = stack.split(';')
            k[group(re.sub(r' tid=.*', '', frames[0].lstrip('[')))] += n
            total += n
            count(frames[1:], n, g, 'bench')
        rows.append((t, calls, wall, total, k, g))
    per = lambda n, calls: n * 1000.0 / calls  # samples of 1 ms -> µs a call
    print('== turn %d: CPU µs a call (async-profiler, %d s a transport), by thread group' % (turn, secs))
    names = sorted({x for r in rows for x, n in r[4].items() if per(n, r[1]) >= 1.0})
    print('%-10s %8s %8s ' % ('transport', 'wall', 'all') + ' '.join('%14s' % x[:14] for x in names))
    for t, calls, wall, total, k, g in rows:
        print('%-10s %8.1f %8.1f ' % (t, wall, per(total, calls)) + ' '.join('%14.1f' % per(k[x], calls) for x in names))
    print('-- by what the stacks pass through (a sample counts once in each group its stack touches)')
    print('%-10s ' % 'transport' + ' '.join('%10s' % x for x, _ in groups))
    for t, calls, wall, total, k, g in rows:
        print('%-10s ' % t + ' '.join('%10.1f' % per(g[x], calls) for x, _ in groups))
PY
echo "collapsed stacks: $out/*.collapsed; the runs' output: $out/*.log"
