#!/usr/bin/env bash
# Where the CPU goes, from async-profiler's samples (Maven Central's tools.profiler:async-profiler,
# its native library inside), one job a run:
#
#   [COLOCATED=false] [RATE=n] [DEMO_ARGS=...] scripts/profile.sh demo [OUT] [SECONDS]
#                                              each stage of the RAG demo, path by path, at RATE
#                                              requests/s (default 100; DEMO_ARGS: the demo's own
#                                              flags, e.g. --topology loopback)
#   scripts/profile.sh mesh [OUT] [RATE] [REQUESTS]   each stage of the meshed demo, both paths
#   [COLOCATED=false] [RATE=n] [DEMO_ARGS=...] scripts/profile.sh wakes [OUT] [SECONDS]
#                                              what the demo's stages ask of the kernel a request,
#                                              path by path: system calls, context switches, CPU
#   [EXECUTOR=direct|polling] [TURNS=n] scripts/profile.sh grpc [OUT] [SECONDS] [TRANSPORTS]
#                                              a gRPC unary call, transport by transport
#
# Each job's own description is above its function below. Needs root and what scripts/install.sh
# installs; the collapsed stacks stay in OUT (a flame graph tool reads them).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

# stacks_module OUT: OUT/profile_stacks.py, what both jobs count a collapsed stack by.
stacks_module() {
  cat > "$1/profile_stacks.py" <<'PY'
"""What an async-profiler collapsed stack passes through: both jobs of scripts/profile.sh.

GROUPS: (name, pattern) pairs; a sample counts once in each group one of its frames matches.
'sockmap4j' has no pattern: it counts samples whose innermost Java frame is sockmap4j's own
(what its code costs itself, not what runs below its handlers), outside the package given.
"""
import re

GROUPS = [('sockmap4j', None),
          ('k:sockmap', r'^(tcp_bpf|sk_msg|sk_psock|bpf_prog|__sk_msg|bpf_msg|sock_map|bpf_tcp|sock_hash)'),
          ('k:tcp/ip', r'^(ip_|__ip_|ipt_|nf_|nft_|veth_|__netif|net_rx|napi|__dev_queue|dev_hard|loopback_xmit|ip6_'
                       r'|__ip6|netif_receive|tcp_v4_rcv|tcp_v6_rcv|tcp_rcv|tcp_ack|tcp_transmit|__tcp_transmit'
                       r'|tcp_write_xmit|__tcp_push|do_softirq|__do_softirq|__local_bh_enable)'),
          ('k:unix', r'^(unix_stream|unix_|__unix)'),
          ('sendmsg', r'^(tcp_sendmsg|sock_sendmsg|__sys_sendmsg|sock_write_iter|__x64_sys_write|__x64_sys_writev'
                      r'|do_writev|unix_stream_sendmsg)'),
          ('recvmsg', r'^(tcp_recvmsg|sock_recvmsg|__sys_recvmsg|sock_read_iter|__x64_sys_read|tcp_bpf_recvmsg'
                      r'|unix_stream_recvmsg)'),
          ('epoll_wait', r'^(do_epoll_wait|ep_poll)'), ('wake-ups', r'^try_to_wake_up'),
          ('futex', r'^(futex_|__x64_sys_futex)'), ('http2', r'io/netty/handler/codec/http2'), ('grpc', r'^io/grpc'),
          ('arrow', r'org/apache/arrow'), ('colocated', r'io/github/sockmap4j/colocated'),
          ('copies', r'(copyMemory|MemorySegment.copy|arraycopy|AbstractMemorySegmentImpl.copy)')]


def count(frames, n, into, not_ours):
    """Adds a sample of weight n whose frames (innermost last) are given to the groups it passes through."""
    java = [fr for fr in frames if '/' in fr]
    if java and re.search(r'io/github/sockmap4j/(?!' + not_ours + ')', java[-1]):
        into['sockmap4j'] += n
    seen = set()
    for fr in frames:
        for name, pat in GROUPS:
            if pat and name not in seen and re.search(pat, fr):
                seen.add(name)
                into[name] += n


def tally(path, kind, not_ours):
    """A collapsed-stacks file: samples by kind(thread name), by group, and in all."""
    import collections
    k, g, total = collections.Counter(), collections.Counter(), 0
    for line in open(path):
        stack, n = line.rstrip().rsplit(' ', 1)
        n = int(n)
        frames = stack.split(';')
        k[kind(re.sub(r' tid=.*', '', frames[0].lstrip('[')))] += n
        total += n
        count(frames[1:], n, g, not_ours)
    return k, g, total
PY
}

# setup_demo_job OUT: what both demo jobs need first: OUT with the stacks module, async-profiler's
# library ($lib), this tree installed, this shell in a child cgroup, the demo JVM's flags ($java_flags).
setup_demo_job() {
  mkdir -p "$1"
  stacks_module "$1"
  lib=$(async_profiler_lib "$1")
  mvn_b -q install -DskipTests
  enter_child_cgroup sockmap4j-profile
  java_flags=(--enable-native-access=ALL-UNNAMED --add-modules=jdk.incubator.vector
    --add-opens=java.base/java.nio=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow
    -Dorg.slf4j.simpleLogger.defaultLogLevel=warn)
  # the fast path's stages agree on co-located connections where they can, as demo.sh (COLOCATED=false: off)
  colocated_flags
  return 0
}

# start_fixed_rate MODE LOG [JVM FLAG...]: the demo on one path (node shape unless DEMO_ARGS says
# otherwise) at $rate requests/s for $secs s and a margin, in the background, its output in LOG;
# back once its fixed-rate phase has run 3 s, with its process id in $demo.
start_fixed_rate() {
  local mode=$1 log=$2
  shift 2
  : > "$log"
  mvn_b -q -pl examples/rag-pipeline exec:exec -Dexec.args="${java_flags[*]} $* \
    -classpath %classpath io.github.sockmap4j.examples.rag.RagDemo --mode $mode --rate $rate --requests $(( (secs + 10) * rate )) \
    --throughput-seconds 0 --idle-seconds 0 ${DEMO_ARGS:-}" > "$log" 2>&1 &
  demo=$!
  # The fixed-rate phase begins after the warm-up line; give it 3 s more.
  until grep -q ' warm-up .* at the rate' "$log" 2>/dev/null; do
    kill -0 "$demo" 2>/dev/null || { cat "$log"; echo "the demo ended before its fixed-rate phase" >&2; return 1; }
    sleep 1
  done
  sleep 3
}

# Where each stage of the RAG demo spends its CPU, path by path: runs the demo (node shape, one
# path at a time, a longer fixed-rate phase) and, once the fixed-rate phase has run for a few
# seconds, loads async-profiler into every stage JVM (jcmd JVMTI.agent_load) for SECONDS of CPU
# samples with their threads; then prints, per path and stage, the samples by thread kind (as the
# demo's table groups them) and by what their stacks pass through (the kernel's TCP/IP or sockmap
# code, sends, receives, epoll, HTTP/2, gRPC, Arrow, sockmap4j), and leaves the collapsed stacks in
# OUT (a flame graph tool reads them).
# async-profiler comes from Maven Central (tools.profiler:async-profiler, its native library inside).
# Usage: scripts/profile.sh demo [OUT] [SECONDS]     (e.g. scripts/profile.sh demo /tmp/prof 15)
job_demo() {
  need
  out=${1:-/tmp/sm4j-profile}
  secs=${2:-15}
  rate=${RATE:-100}
  setup_demo_job "$out"

  profile_path() { # MODE: the demo on one path; samples of its stages during the fixed-rate phase
    local mode=$1 log="$out/demo-$1.txt" pids pid role r demo
    start_fixed_rate "$mode" "$log" -XX:+EnableDynamicAgentLoading || return 1
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
sys.path.insert(0, out)
from profile_stacks import GROUPS as groups, tally
kinds = ['handlers', 'loops', 'sockmap4j', 'JIT', 'GC/VM', 'rest']
rows = []
for stage in ['embedding', 'search', 'context', 'gateway']:
    for path in ['plain', 'fast']:
        f = os.path.join(out, path + '-' + stage + '.collapsed')
        if not os.path.exists(f):
            continue
        k, g, total = tally(f, kind, 'examples')
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
}

# Where a gRPC unary call's CPU goes, transport by transport: GrpcHandoffs runs one transport at a
# time (loopback, 1 KiB, blocking stub, gRPC's default executor unless EXECUTOR says otherwise) and,
# once its measured calls start, async-profiler samples that JVM's CPU (1 sample = 1 ms) with
# thread names for SECONDS. Printed per transport, as microseconds a call: the samples by thread
# group and by what the stacks pass through (the kernel's TCP/IP, sockmap or Unix socket code,
# sends, receives, epoll, wake-ups, futexes, HTTP/2, gRPC, sockmap4j's handlers). TURNS > 1 runs
# the transports again in turns and prints each turn. The collapsed stacks stay in OUT.
# async-profiler comes from Maven Central (tools.profiler:async-profiler, its native library inside).
# Usage: [EXECUTOR=direct|polling] [TURNS=n] scripts/profile.sh grpc [OUT] [SECONDS] [TRANSPORTS]
#        (default /tmp/sm4j-grpc-profile, 5, "SOCKMAP UDS TCP")
job_grpc() {
  need
  out=${1:-/tmp/sm4j-grpc-profile}
  secs=${2:-5}
  transports=${3:-SOCKMAP UDS TCP}
  turns=${TURNS:-1}
  mkdir -p "$out"
  stacks_module "$out"
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
      pid=$(measuring_pid "$log" "$t" "$jvm") || exit 1
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
sys.path.insert(0, out)
from profile_stacks import GROUPS as groups, tally
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
        k, g, total = tally(f, group, 'bench')
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
}

# Where each stage of the meshed demo (scripts/demo.sh --mesh) spends its CPU, path by path, in
# µs a request: the meshed demo runs both paths at once (paired, ABBA slices at one fixed RATE,
# REQUESTS a path), so async-profiler is loaded into every stage JVM during the warm-up, started
# once the first slice has ended, and writes its samples as the JVM exits (after the last slice,
# with no load left): the first slice's path is profiled for its other slices, the other path
# for all of them, and each path's samples are divided by
# the requests of its profiled slices (each slice: a second's lead-in at the rate, then
# REQUESTS/10). A stage's two JVMs are told apart by their ports (the fast path's are the
# higher). The start is a jcmd a JVM, in parallel, well under a slice (about 4 s at the
# defaults): the edges move a path's figures by a few percent at most.
# Prints per stage and path the samples by thread kind and by what their stacks pass through,
# and what the stages' own work took; the collapsed stacks stay in OUT.
# Usage: scripts/profile.sh mesh [OUT] [RATE] [REQUESTS]   (default /tmp/sm4j-mesh-profile 261 8000)
job_mesh() {
  need
  out=${1:-/tmp/sm4j-mesh-profile}
  rate=${2:-261}
  requests=${3:-8000}
  local slices=10
  mkdir -p "$out"
  rm -f "$out"/*.collapsed "$out"/cmd-*
  setup_demo_job "$out"
  log="$out/demo.txt"
  : > "$log"
  mvn_b -q -pl examples/rag-pipeline exec:exec -Dexec.args="${java_flags[*]} -classpath %classpath \
io.github.sockmap4j.examples.rag.RagDemo --mesh --rate $rate --requests $requests --slices $slices \
--throughput-seconds 0 --idle-seconds 0" > "$log" 2>&1 &
  local demo=$! pids pid first
  agent() { # PID COMMAND: async-profiler's COMMAND in that JVM (its options quoted: jcmd reads NAME=VALUE)
    local r
    r=$(jcmd "$1" JVMTI.agent_load "$lib" "\"$2\"" 2>&1 || true)
    [[ $r == *"return code: 0"* ]] || echo "async-profiler did not take '$2' in $1: $r" >&2
  }
  # Loaded (started and stopped) while the paths warm up, so that the start later is quick.
  until grep -q ' warm-up [0-9]' "$log" 2>/dev/null; do
    kill -0 $demo 2>/dev/null || { cat "$log"; echo "the demo ended before its warm-up" >&2; return 1; }
    sleep 1
  done
  pids=$(pgrep -f 'io.github.sockmap4j.examples.rag.RagService ' || true)
  if [ "$(wc -w <<< "$pids")" -ne 8 ]; then
    echo "expected the 8 stage JVMs of both paths, found: $(tr '\n' ' ' <<< "$pids"); letting the demo end" >&2
    wait $demo || true
    return 1
  fi
  for pid in $pids; do
    tr '\0' ' ' < /proc/$pid/cmdline > "$out/cmd-$pid"
    agent "$pid" "start,event=cpu,interval=1ms,threads"
    agent "$pid" "stop,file=/dev/null,collapsed"
  done
  until grep -q ' slice 1 of ' "$log"; do
    kill -0 $demo 2>/dev/null || { cat "$log"; echo "the demo ended before its slices" >&2; return 1; }
    sleep 0.2
  done
  local jcmds=()
  # Each names its file at the start and writes it as it exits, which the stages do once their
  # pipeline closes after its last slice: a stop sent then would race the JVM's exit (a profile
  # cut short was seen). The window thus ends with each stage's shutdown, no load left.
  for pid in $pids; do
    agent "$pid" "start,event=cpu,interval=1ms,threads,file=$out/$pid.collapsed,collapsed" & jcmds+=($!)
  done
  wait "${jcmds[@]}"
  first=$(grep -m1 ' slice 1 of ' "$log" | sed 's/^ *\(.*[a-zA-Z]\) *slice.*/\1/')
  wait $demo
  for pid in $pids; do
    [ -s "$out/$pid.collapsed" ] || { echo "no profile came from stage JVM $pid ($out/$pid.collapsed)" >&2; return 1; }
  done

  python3 - "$out" "$first" "$rate" "$requests" "$slices" <<'PY'
import collections, glob, os, re, sys
out, first, rate, requests, slices = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
sys.path.insert(0, out)
from profile_stacks import GROUPS as groups, tally
per_slice = max(1, int(rate)) + max(1, requests // slices)  # the lead-in, then the measured slice
calls = {'plain': per_slice * (slices - (first == 'plain TCP')), 'fast': per_slice * (slices - (first != 'plain TCP'))}
def kind(t):
    if re.match(r'rag-io-', t): return 'loops'
    if re.match(r'C[12] CompilerThre', t): return 'JIT'
    if re.match(r'(GC |G1 |VM Thread|VM Periodic)', t): return 'GC/VM'
    return 'rest'
kinds = ['loops', 'JIT', 'GC/VM', 'rest']
jvms = collections.defaultdict(list)  # stage -> [(port, collapsed file)]: the lower port is the plain path's
for f in glob.glob(os.path.join(out, '*.collapsed')):
    pid = os.path.basename(f).split('.')[0]
    m = re.search(r'RagService (\w+) .*--port=(\d+)', open(os.path.join(out, 'cmd-' + pid)).read())
    jvms[m.group(1)].append((int(m.group(2)), f))
# The demo's own code: its stages' work and their Arrow encoding, not the gRPC wiring (RagService).
own_code = re.compile(r'io/github/sockmap4j/examples/rag/(?!RagService)')
rows = {}
for stage, fs in jvms.items():
    for (port, f), path in zip(sorted(fs), ['plain', 'fast']):
        k, g, total = tally(f, kind, 'examples')
        kernel = own = 0
        for line in open(f):
            stack, n = line.rstrip().rsplit(' ', 1)
            frames = stack.split(';')
            kernel += int(n) if frames[-1].endswith('_[k]') else 0
            own += int(n) if any(own_code.search(x) for x in frames) else 0
        rows[(stage, path)] = (total, k, g, kernel, own)
us = lambda n, path: n * 1000.0 / calls[path]  # samples of 1 ms -> µs a request
print('profiled: the plain path %d requests, the fast path %d (the first slice was %s)' % (calls['plain'], calls['fast'], first))
print('CPU µs a request (async-profiler, 1 sample = 1 ms of CPU), by thread kind; "kernel": samples whose innermost')
print('frame is the kernel\'s; "own code": whose stack passes through the stages\' work or their Arrow encoding')
head = '%-10s %-5s %8s ' % ('stage', 'path', 'all') + ' '.join('%8s' % x for x in kinds)
print(head + ' %8s %9s %9s' % ('kernel', 'own code', 'the rest'))
sums = {p: [0, collections.Counter(), 0, 0] for p in ['plain', 'fast']}
def row(stage, path, total, k, kernel, own):
    print('%-10s %-5s %8.0f ' % (stage, path, us(total, path)) + ' '.join('%8.0f' % us(k[x], path) for x in kinds)
          + ' %8.0f %9.0f %9.0f' % (us(kernel, path), us(own, path), us(total - own - k['JIT'], path)))
for stage in ['embedding', 'search', 'context', 'gateway']:
    for path in ['plain', 'fast']:
        if (stage, path) in rows:
            total, k, g, kernel, own = rows[(stage, path)]
            row(stage, path, total, k, kernel, own)
            s = sums[path]
            s[0] += total; s[1].update(k); s[2] += kernel; s[3] += own
for path in ['plain', 'fast']:
    row('all', path, *sums[path])
print('"the rest": all but own code and the JIT compilers: gRPC, HTTP/2, Netty, the kernel, GC')
print('\nµs a request whose stack passes through (a sample counts once in each group it touches)')
print('%-10s %-5s ' % ('stage', 'path') + ' '.join('%10s' % x for x, _ in groups))
for stage in ['embedding', 'search', 'context', 'gateway']:
    for path in ['plain', 'fast']:
        if (stage, path) in rows:
            g = rows[(stage, path)][2]
            print('%-10s %-5s ' % (stage, path) + ' '.join('%10.0f' % us(g[x], path) for x, _ in groups))
PY
  echo "collapsed stacks: $out/*.collapsed (cmd-PID: each JVM's command line); the demo's output: $log"
}

# What the RAG demo's stages ask of the kernel a request, path by path: runs the demo as the demo
# job does (node shape, one path at a time, a fixed rate) and, once the fixed-rate phase has run
# for a few seconds, counts with perf over SECONDS, in the stage JVMs only (not the load
# generator): their system calls by kind, their context switches and their CPU time, each divided
# by the requests the rate sent in that time. A context switch is a thread that went to sleep and
# was woken again: the count the transport can change only by batching, where a profile shows what
# each one costs. Needs root and perf (linux-perf).
# Usage: [RATE=350] scripts/profile.sh wakes [OUT] [SECONDS]
job_wakes() {
  need
  command -v perf > /dev/null || { echo "perf is missing: apt-get install linux-perf" >&2; exit 1; }
  out=${1:-/tmp/sm4j-wakes}
  secs=${2:-10}
  rate=${RATE:-100}
  setup_demo_job "$out"
  local events=task-clock,context-switches,cpu-migrations
  local calls="write writev read readv sendmsg recvmsg sendto recvfrom epoll_pwait2 epoll_wait futex"
  for c in $calls; do events+=",syscalls:sys_enter_$c"; done

  count_path() { # MODE: the demo on one path; perf's counts in its stages during the fixed-rate phase
    local mode=$1 log="$out/demo-$1.txt" pids demo
    start_fixed_rate "$mode" "$log" || return 1
    pids=$(pgrep -d, -f 'io.github.sockmap4j.examples.rag.RagService ' || true)
    [ -n "$pids" ] || { echo "no stage JVM found" >&2; return 1; }
    perf stat -x, -e "$events" -p "$pids" -o "$out/perf-$mode.csv" -- sleep "$secs"
    wait $demo
  }
  count_path plain
  count_path fast

  python3 - "$out" "$rate" "$secs" <<'PY'
import sys
out, rate, secs = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
requests = rate * secs
def counts(path):
    c = {}
    for line in open(f'{out}/perf-{path}.csv'):
        f = line.strip().split(',')
        if len(f) > 2 and f[0] and f[0][0].isdigit():
            c[f[2].replace('syscalls:sys_enter_', '')] = float(f[0])
    return c
plain, fast = counts('plain'), counts('fast')
print(f'the stages, a request ({rate:.0f} requests/s, {secs:.0f} s a path; perf stat in the stage JVMs)')
print('%-18s %10s %10s' % ('', 'plain', 'fast'))
for k in plain:
    if k == 'task-clock':
        print('%-18s %10.0f %10.0f' % ('CPU µs', plain[k] * 1000 / requests, fast.get(k, 0) * 1000 / requests))
    elif plain[k] or fast.get(k):
        print('%-18s %10.2f %10.2f' % (k, plain[k] / requests, fast.get(k, 0) / requests))
PY
  echo "perf's counts: $out/perf-{plain,fast}.csv; the demo's output: $out/demo-{plain,fast}.txt"
}

job=${1:-}
[ $# -eq 0 ] || shift
case $job in
  demo|grpc|mesh|wakes) "job_$job" "$@" ;;
  *) sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
