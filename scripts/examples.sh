#!/usr/bin/env bash
# The project's examples as their users build and run them, each checked, one job a run:
#
#   scripts/examples.sh new-user [CALLS]               examples/new-user, written from README.md alone
#   scripts/examples.sh tutorial                       docs/tutorial.md's steps as written, its output checked
#   scripts/examples.sh frameworks [CALLS] [EXAMPLE...]  Spring Boot, Vert.x and Micronaut examples
#   scripts/examples.sh unchanged [CALLS] [BYTES] [ROUNDS]  services with no sockmap4j dependency
#                                                      under the node agent
#   scripts/examples.sh all                            the four, with their defaults but unchanged's
#                                                      (300 calls, 64 MiB, 1 round: what the tests run)
#
# Each job's own description is above its function below. Needs root and what scripts/install.sh
# installs (unchanged: its java17 group too); each job removes the cgroups and pins it made.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
source scripts/lib.sh

# The path of a new user: examples/new-user is a Maven project written from README.md alone (the
# sockmap4j BOM and grpc-bom imported, versionless dependencies, no Netty line). Installs this
# checkout's artifacts, builds that project, and runs its gRPC echo
#  1. in a child cgroup of its own, where the fast path attaches: epoll, active, calls redirected;
#  2. with -Dsockmap4j.require=true and the fast path attached to another cgroup: start() fails
#     with SockmapUnavailableException.
# Exits non-zero when either does not hold; removes the cgroups and pins it made.
job_new_user() {
  need
  calls=${1:-1000}
  mvn_b -q install -DskipTests -Dmaven.javadoc.skip=true -Dmaven.source.skip=true -pl bom,core,netty-transport -am
  (cd examples/new-user && mvn_b -q package dependency:build-classpath -Dmdep.outputFile=target/classpath.txt)
  cp="examples/new-user/target/hello-sockmap-1.0.jar:$(cat examples/new-user/target/classpath.txt)"
  id=$$
  cg_in=$CGROUP2/sockmap4j-newuser-$id-in
  cg_other=$CGROUP2/sockmap4j-newuser-$id-other
  pins=/sys/fs/bpf/sockmap4j-newuser-$id
  cleanup() {
    for _ in $(seq 50); do [ -s "$cg_in/cgroup.procs" ] || break; sleep 0.1; done
    rmdir "$cg_in" "$cg_other" 2>/dev/null || true
    [ -e "$pins" ] && scripts/sockmap4j --pin-dir "$pins" down --force >/dev/null 2>&1 || true
  }
  trap cleanup EXIT
  mkdir "$cg_in" "$cg_other"
  run_in() { # CGROUP JAVA-ARGS...: the echo in that cgroup; its output
    local cg=$1; shift
    sh -c 'echo $$ > "$0/cgroup.procs"; shift; exec "$@"' "$cg" - "$JAVA_HOME/bin/java" \
      --enable-native-access=ALL-UNNAMED -Dsockmap4j.pinDir="$pins" "$@" -cp "$cp" com.example.Hello "$calls"
  }
  out=$(run_in "$cg_in" 2>&1)
  echo "$out" | grep -E '^start=' || { echo "$out"; exit 1; }
  line=$(echo "$out" | grep -E '^start=')
  [[ "$line" =~ start=ok\ epoll=true\ active=true\ redirected=([0-9]+) ]] && [ "${BASH_REMATCH[1]}" -gt 0 ] \
    || { echo "new user: expected epoll, active and redirected calls: $out"; exit 1; }
  out=$(run_in "$cg_in" -Dsockmap4j.require=true -Dsockmap4j.cgroup="$cg_other" 2>&1)
  echo "$out" | grep -E '^start=' || { echo "$out"; exit 1; }
  echo "$out" | grep -q '^start=failed SockmapUnavailableException' \
    || { echo "new user: require=true outside the attached cgroup must fail start(): $out"; exit 1; }
  echo "new user: ok"
}

# The tutorial as its reader follows it: docs/tutorial.md's blocks, marked in the page with
# "<!-- tutorial: checkout|file PATH|run|output -->" before each, run as written: 'checkout'
# blocks in this checkout, 'file' blocks written into an empty directory, 'run' blocks there in one
# shell (the JDK found first on the PATH), and every line of an 'output' block must be a line of
# what they printed, a figure shown non-zero matching any non-zero figure and one shown 0 any
# figure. Removes the directory, and the cgroup and pins the page makes if it did not.
job_tutorial() {
  need
  local page=$repo/docs/tutorial.md work
  work=$(mktemp -d /tmp/sockmap4j-tutorial.XXXXXX)
  # globals: the EXIT trap runs after this function has returned
  TUTORIAL_WORK=$work
  TUTORIAL_PINS=/sys/fs/bpf/sockmap4j
  TUTORIAL_PINS_BEFORE=0
  [ -e "$TUTORIAL_PINS" ] && TUTORIAL_PINS_BEFORE=1
  cleanup_tutorial() {
    local cg="$CGROUP2/hello-sockmap"
    if [ -d "$cg" ]; then
      for _ in $(seq 50); do [ -s "$cg/cgroup.procs" ] || break; sleep 0.1; done
      rmdir "$cg" 2>/dev/null || true
    fi
    if [ "$TUTORIAL_PINS_BEFORE" = 0 ] && [ -e "$TUTORIAL_PINS" ]; then
      "$repo/scripts/sockmap4j" --pin-dir "$TUTORIAL_PINS" down --force >/dev/null 2>&1 || true
    fi
    rm -rf "$TUTORIAL_WORK"
  }
  trap cleanup_tutorial EXIT
  # each marked block: 'file' blocks into the project, the others appended to checkout/run/output.txt
  awk -v dir="$work" '
    /^<!-- tutorial: / { kind = $3; path = $4; want = 1; next }
    want && /^```/ {
      want = 0; inblock = 1
      f = kind == "file" ? dir "/project/" path : dir "/" kind ".txt"
      if (kind == "file") { system("mkdir -p \"$(dirname \"" f "\")\""); printf "" > f }
      next
    }
    inblock && /^```/ { inblock = 0; if (kind == "file") close(f); next }
    inblock { print > f }' "$page"
  [ -s "$work/run.txt" ] && [ -s "$work/output.txt" ] && [ -d "$work/project" ] \
    || { echo "tutorial: $page has no run, output or file blocks" >&2; exit 1; }
  (cd "$repo" && PATH="$JAVA_HOME/bin:$PATH" bash -e "$work/checkout.txt")
  local out
  out=$(cd "$work/project" && PATH="$JAVA_HOME/bin:$PATH" bash -e "$work/run.txt" 2>&1) \
    || { echo "$out"; echo "tutorial: a step failed" >&2; exit 1; }
  echo "$out"
  while IFS= read -r want; do
    [ -n "$want" ] || continue
    local re
    re=$(printf '%s' "$want" | sed -e 's/[][\.*^$+?(){}|/]/\\&/g' -e 's/\b0\b/@ANY@/g' \
      -e 's/\b[1-9][0-9]*\b/[1-9][0-9]*/g' -e 's/@ANY@/[0-9]+/g')
    printf '%s\n' "$out" | grep -Eqx -- "$re" || { echo "tutorial: the page shows '$want'; the run did not print it" >&2; exit 1; }
  done < "$work/output.txt"
  echo "tutorial: ok"
}

# The framework examples as a new user runs them: examples/spring-boot, examples/vertx and
# examples/micronaut are Maven projects of their own, written from docs/frameworks.md's lines (the
# published coordinates, no project parent). Installs this checkout's artifacts, builds each,
# runs it in a child cgroup of its own where the fast path attaches, and checks what it printed:
# active, and at least 99% of the bytes of its calls redirected by the kernel.
# Usage: scripts/examples.sh frameworks [CALLS] [EXAMPLE...]   (default 300 calls; all three examples)
# Exits non-zero when one does not hold; removes the cgroup and pins it made.
job_frameworks() {
  need
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
}

# Services that do not change: examples/unchanged-spring-boot3 (Spring Boot 3.5 on Java 17:
# WebFlux on Reactor Netty with Netty 4.1, Spring MVC on Tomcat, WebClient, gRPC on
# grpc-netty-shaded), examples/unchanged-helidon4 (Helidon 4 SE on Java 25) and
# examples/unchanged-quarkus3 (Quarkus REST and gRPC on Java 17), no sockmap4j dependency in any, as a
# server pod and a client pod of the node-shaped
# bed, under the node agent, which opts their ports in. Prints, per kind of traffic, the bytes the
# kernel redirected and sent by TCP (the clients check every byte), and fails when request/response
# traffic had less than 99% of its bytes redirected or a stream whose reader keeps up less than 90%.
# Usage: scripts/examples.sh unchanged [CALLS] [STREAM_BYTES] [STREAM_ROUNDS]   (default 500, 64 MiB, 3)
job_unchanged() {
  need base java17
  # The services' own Java: 17, as they ship (Debian's openjdk-17).
  java17=""
  for c in /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/*17*; do
    if [ -x "$c/bin/java" ]; then java17=$c/bin/java; break; fi
  done
  [ -n "$java17" ] || { echo "no Java 17 under /usr/lib/jvm: run scripts/install.sh java17" >&2; exit 1; }
  mvn_b -q install -DskipTests -Dmaven.javadoc.skip=true -Dmaven.source.skip=true -pl bench -am
  (cd examples/unchanged-spring-boot3 && mvn_b -q package -DskipTests)
  # Helidon 4 SE needs Java 21 or newer: this run's JDK.
  (cd examples/unchanged-helidon4 && mvn_b -q package -DskipTests)
  (cd examples/unchanged-quarkus3 && mvn_b -q package -DskipTests)
  mvn_b -q -pl bench exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED -classpath %classpath \
  -Dhelidon.jar=$repo/examples/unchanged-helidon4/target/unchanged-helidon4.jar -Dhelidon.java=$JAVA_HOME/bin/java \
  -Dquarkus.jar=$repo/examples/unchanged-quarkus3/target/quarkus-app/quarkus-run.jar \
  io.github.sockmap4j.bench.UnchangedServices $repo/examples/unchanged-spring-boot3/target/unchanged-spring-boot3.jar \
  $java17 ${1:-500} ${2:-67108864} ${3:-3}"
}

job=${1:-}
[ $# -eq 0 ] || shift
case $job in
  new-user) job_new_user "$@" ;;
  tutorial) job_tutorial "$@" ;;
  frameworks) job_frameworks "$@" ;;
  unchanged) job_unchanged "$@" ;;
  all) "$0" new-user && "$0" tutorial && "$0" frameworks && "$0" unchanged 300 67108864 1 ;;
  *) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
