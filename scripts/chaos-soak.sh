#!/usr/bin/env bash
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
#   ./scripts/chaos-soak.sh [SECONDS]      (default 600; CI runs 60)
set -uo pipefail
seconds=${1:-600}
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
source scripts/env.sh
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
declare -A job_type job_spid job_cpid job_start job_killed job_killt job_port
jobs_live=""
cleanup() {
  for j in $jobs_live; do kill -9 "${job_spid[$j]}" "${job_cpid[$j]}" 2>/dev/null; done
  [ -n "${hold_pid:-}" ] && kill -9 "$hold_pid" 2>/dev/null
  [ -n "$agent_pid" ] && kill -9 "$agent_pid" 2>/dev/null
  # Whatever of the run is still in its cgroup (a peer no job holds any more) goes too.
  [ -f "$cg/cgroup.procs" ] && xargs -r kill -9 < "$cg/cgroup.procs" 2>/dev/null
  wait 2>/dev/null
  $sm --pin-dir "$pins" down --force >/dev/null 2>&1
  for _ in $(seq 50); do [ -s "$cg/cgroup.procs" ] || break; sleep 0.1; done
  rmdir "$cg" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
cc -O2 -Wall -o "$work/peer" testbed/src/main/c/peer.c || exit 1
mkdir "$cg"
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
declare -A count
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
