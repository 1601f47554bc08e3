#!/usr/bin/env bash
# Who wakes whom during gRPC unary calls: GrpcHandoffs runs one transport at a time (loopback,
# 1 KiB, blocking stub) and, once its measured calls start, perf records every sched_wakeup on the
# machine for SECONDS; the wake-ups whose waker or wakee is that JVM's thread are counted by
# (waker, wakee) thread group and divided by the calls made meanwhile (the caller's wake-ups: one
# per blocking call). EXECUTOR=direct for the directExecutor() profile. A wake-up the kernel queues
# to the wakee's CPU is recorded there, with the idle task ("swapper") as its waker.
# Usage: [EXECUTOR=direct] scripts/bench-grpc-wakeups.sh [SECONDS] [TRANSPORTS]   (default 3, "TCP SOCKMAP INPROCESS")
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
command -v perf >/dev/null || { echo "needs perf (apt-get install linux-perf)" >&2; exit 1; }
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
  until grep -q "^measuring $t" "$out/$t.log" 2>/dev/null; do
    kill -0 "$jvm" 2>/dev/null || { cat "$out/$t.log"; exit 1; }
    sleep 0.2
  done
  pid=$(sed -n "s/^measuring $t in pid \([0-9]*\)$/\1/p" "$out/$t.log")
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
