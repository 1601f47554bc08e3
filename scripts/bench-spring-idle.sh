#!/usr/bin/env bash
# What the Spring Boot starter costs a service that does nothing: examples/spring-boot built
# with the starter and without it (profile without-sockmap4j), each started RUNS times in turn,
# idle (no calls), in a child cgroup. Prints per run the time to the first line after start,
# Spring's own start time, RSS after start and the CPU it used over WINDOW seconds of idling
# (utime + stime from /proc), then the medians and the ratios with/without.
# Usage: bench-spring-idle.sh [RUNS] [WINDOW]   (default 3 runs, 60 s)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
source scripts/env.sh
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
