#!/usr/bin/env bash
# The kernel matrix: boots each kernel under QEMU (scripts/kernel-vm.sh) and runs the project's
# tests there against the host's build, then prints one line per kernel.
#
#   scripts/kernel-matrix.sh --smoke            # CI: the library's state, what FIONREAD counts, a C and a
#                                               # JVM ping-pong, blocking C readers and one gRPC call,
#                                               # on each kernel
#   scripts/kernel-matrix.sh                    # the full matrix: the kernel tests of docs/kernel.md's subset
#   scripts/kernel-matrix.sh [--smoke] PACKAGE...   # other Debian kernel packages
#
# Two guests run at a time (one host core each). Results go to target/kernel-matrix/<package>/
# (console.log, JUnit reports) and the summary to target/kernel-matrix/summary.md.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
need base vm

MODE=full
if [ "${1:-}" = "--smoke" ]; then MODE=smoke; shift; fi
# 6.1: Debian 12. 6.12.74: the last 6.12 before the sockmap FIONREAD change (6.12.75); 6.12.85:
# the first Debian 6.12 after it; 6.12.118: the newest 6.12. 6.18.15: Debian's 6.18 (the host's
# own 6.18 runs the whole suite). 7.3.4: the newest release Debian serves.
SMOKE_KERNELS=(linux-image-6.1.0-57-amd64 linux-image-6.12.74+deb12-amd64 linux-image-6.12.85+deb12-amd64
               linux-image-6.12.118+deb13-amd64 linux-image-7.3.4+deb13-amd64)
FULL_KERNELS=(linux-image-6.1.0-57-amd64 linux-image-6.12.74+deb12-amd64 linux-image-6.12.85+deb12-amd64
              linux-image-6.12.118+deb13-amd64 linux-image-6.18.15+deb13-amd64 linux-image-7.3.4+deb13-amd64)
if [ $# -gt 0 ]; then kernels=("$@"); elif [ "$MODE" = smoke ]; then kernels=("${SMOKE_KERNELS[@]}"); else kernels=("${FULL_KERNELS[@]}"); fi

OUT=target/kernel-matrix
rm -rf "$OUT"; mkdir -p "$OUT"

# The host's build and the test class paths the guests run.
mvn_b -q install -DskipTests
JUNIT=1.14.1 # junit-bom's platform version for the project's JUnit 5.14.1
for a in junit-platform-console junit-platform-reporting junit-platform-launcher; do
  mvn_b -q dependency:copy -Dartifact=org.junit.platform:$a:$JUNIT -DoutputDirectory="$PWD/$OUT/launcher"
done
for m in core netty-transport; do
  mvn_b -q dependency:build-classpath -pl $m -Dmdep.includeScope=test -Dmdep.outputFile="$PWD/$OUT/$m.cp"
  echo "$PWD/$m/target/test-classes:$PWD/$m/target/classes:$(cat "$OUT/$m.cp"):$(ls "$PWD/$OUT"/launcher/*.jar | tr '\n' ':')" \
    > "$OUT/$m.cp"
done
for k in "${kernels[@]}"; do ./scripts/kernel-vm.sh --fetch "$k"; done

run_kernel() {
  local k=$1 dir=$OUT/$1 start rc
  mkdir -p "$dir"
  start=$(date +%s)
  rc=0
  ./scripts/kernel-vm.sh --timeout "$([ "$MODE" = smoke ] && echo 900 || echo 2700)" --out "$dir" "$k" -- \
    ./scripts/kernel-matrix-guest.sh "$MODE" "$PWD/$OUT" > "$dir/console.log" 2>&1 || rc=$?
  echo "$rc $(( $(date +%s) - start ))" > "$dir/result"
}

echo "== kernel matrix ($MODE): ${kernels[*]}"
pids=()
for k in "${kernels[@]}"; do
  run_kernel "$k" &
  pids+=($!)
  # Two at a time.
  while [ "$(jobs -rp | wc -l)" -ge 2 ]; do wait -n || true; done
done
wait || true

status=0
{
  set +e +o pipefail # a kernel whose run stopped early has no lines to find
  echo "| kernel | library | FIONREAD counts | C ping-pong | JVM ping-pong | blocking reads failing with EAGAIN | tests passed / failed | minutes |"
  echo "|---|---|---|---|---|---|---|---|"
  for k in "${kernels[@]}"; do
    dir=$OUT/$k
    read -r rc secs < "$dir/result" || { rc=125; secs=0; }
    [ "$rc" = 0 ] || status=1
    log=$dir/console.log
    kver=$(sed -n 's/^kernel-vm: \([^ ]*\) up in.*/\1/p' "$log" | head -1)
    fion=$(sed -n 's/.*kernel-smoke: kernel .* active, FIONREAD counts \(.*\)/\1/p' "$log" | head -1)
    c=$(sed -n 's/.*kernel-smoke: C ping-pong \(.*\) messages redirected/\1/p' "$log" | head -1)
    jvm=$(sed -n 's/.*kernel-smoke: JVM ping-pong \(.*\) messages redirected/\1/p' "$log" | head -1)
    eagain=$(sed -n 's/.*kernel-smoke: blocking reads failing with EAGAIN: \(.*\)/\1/p' "$log" | head -1)
    ok=$(grep -E '^\[ +[0-9]+ tests successful' "$log" | awk '{s+=$2} END {print s+0}')
    failed=$(grep -E '^\[ +[0-9]+ tests failed' "$log" | awk '{s+=$2} END {print s+0}')
    why=$(grep -m1 -o 'fast path is off: .*' "$log" | cut -c1-160 || true)
    echo "| ${kver:-$k} | $([ -n "$fion" ] && echo active || echo "off: ${why:-not reached (exit $rc)}") | ${fion:--} | ${c:--} | ${jvm:--} | ${eagain:--} | $ok / $failed | $(( (secs + 30) / 60 )) |"
  done
} | tee "$OUT/summary.md"
for k in "${kernels[@]}"; do
  read -r rc _ < "$OUT/$k/result" || rc=125
  if [ "$rc" != 0 ]; then echo "-- $k failed (exit $rc); its console:"; tail -60 "$OUT/$k/console.log"; fi
done
exit "$status"
