#!/usr/bin/env bash
# The framework examples as a new user runs them: examples/spring-boot, examples/vertx and
# examples/micronaut are Maven projects of their own, written from README.md's sections (the
# published coordinates, no project parent). Installs this checkout's artifacts, builds each,
# runs it in a child cgroup of its own where the fast path attaches, and checks what it printed:
# active, and at least 99% of the bytes of its calls redirected by the kernel.
# Usage: framework-examples.sh [CALLS] [EXAMPLE...]   (default 300 calls; all three examples)
# Exits non-zero when one does not hold; removes the cgroup and pins it made.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
source scripts/env.sh
calls=${1:-300}
shift || true
examples=("$@")
[ ${#examples[@]} -gt 0 ] || examples=(spring-boot vertx micronaut)
mvn_b -q install -DskipTests -Dmaven.javadoc.skip=true -Dmaven.source.skip=true \
  -pl bom,spring-boot-starter,vertx,micronaut -am
id=$$
cg=$CGROUP2/sockmap4j-examples-$id
pins=/sys/fs/bpf/sockmap4j-examples-$id
cleanup() {
  for _ in $(seq 50); do [ -s "$cg/cgroup.procs" ] || break; sleep 0.1; done
  rmdir "$cg" 2>/dev/null || true
  [ -e "$pins" ] && scripts/sockmap4j --pin-dir "$pins" down --force >/dev/null 2>&1 || true
}
trap cleanup EXIT
mkdir "$cg"
run_in() { # JAVA-ARGS...: java in the child cgroup, with the run's pin directory
  sh -c 'echo $$ > "$0/cgroup.procs"; shift; exec "$@"' "$cg" - "$JAVA_HOME/bin/java" \
    --enable-native-access=ALL-UNNAMED -Dsockmap4j.pinDir="$pins" "$@"
}
check() { # NAME REDIRECTED TCP: at least 99% of the calls' bytes redirected
  local name=$1 r=$2 t=$3
  if [ "$r" -gt 0 ] && [ $((r * 100)) -ge $((99 * (r + t))) ]; then
    echo "$name: ok, $r bytes redirected, $t by TCP"
  else
    echo "$name: expected >= 99% redirected, got $r redirected and $t by TCP"; return 1
  fi
}
field() { grep -o "\"$1\":[0-9]*" <<<"$2" | head -1 | cut -d: -f2; }
for e in "${examples[@]}"; do
  (cd "examples/$e" && mvn_b -q package -DskipTests dependency:build-classpath -Dmdep.outputFile=target/classpath.txt)
  case $e in
    spring-boot)
      out=$(run_in -jar examples/spring-boot/target/sockmap-spring-service-1.0.jar "$calls" 2>&1) \
        || { echo "$out" | tail -30; echo "spring-boot: the service failed"; exit 1; }
      before=$(grep '^before: ' <<<"$out" || true)
      after=$(grep '^after: ' <<<"$out" || true)
      grep -q '"active":true' <<<"$after" || { echo "$out" | tail -30; echo "spring-boot: not active"; exit 1; }
      check spring-boot $(( $(field bytesRedirected "$after") - $(field bytesRedirected "$before") )) \
        $(( $(field bytesPassed "$after") - $(field bytesPassed "$before") ))
      ;;
    vertx|micronaut)
      out=$(run_in -cp "examples/$e/target/classes:$(cat "examples/$e/target/classpath.txt")" \
        com.example.sockmap.Service "$calls" 2>&1) || { echo "$out" | tail -30; echo "$e: the service failed"; exit 1; }
      line=$(grep -E "^example=$e " <<<"$out" || true)
      [[ "$line" =~ active=true\ redirected=([0-9]+)\ tcp=([0-9]+) ]] \
        || { echo "$out" | tail -30; echo "$e: expected an active run: $line"; exit 1; }
      check "$e" "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
      ;;
    *) echo "unknown example $e (spring-boot, vertx, micronaut)"; exit 2 ;;
  esac
done
