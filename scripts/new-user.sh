#!/usr/bin/env bash
# The path of a new user: examples/new-user is a Maven project written from README.md alone (the
# sockmap4j BOM and grpc-bom imported, versionless dependencies, no Netty line). Installs this
# checkout's artifacts, builds that project, and runs its gRPC echo
#  1. in a child cgroup of its own, where the fast path attaches: epoll, active, calls redirected;
#  2. with -Dsockmap4j.require=true and the fast path attached to another cgroup: start() fails
#     with SockmapUnavailableException.
# Exits non-zero when either does not hold; removes the cgroups and pins it made.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
source scripts/env.sh
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
