#!/usr/bin/env bash
# Sourced by the other scripts; installs nothing and needs no root by itself:
#   - JAVA_HOME (and PATH) set to a JDK >= 22: $JAVA_HOME if it is one, else the newest under
#     /usr/lib/jvm, else javac on PATH; or an exit saying how to get one;
#   - need GROUP...: root, and what scripts/install.sh's groups install (base: also bpffs), or an
#     exit naming the install command;
#   - enter_child_cgroup NAME: this shell (and all it starts) in a child cgroup of its own, moved
#     back and removed at exit;
#   - mvn_b: Maven, quiet about downloads; async_profiler_lib DIR: async-profiler's library.
set -euo pipefail
SM4J_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

java_major() { "$1/bin/java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p'; }
find_jdk() {
  local c best="" bestv=0 v
  for c in "${JAVA_HOME:-}" /usr/lib/jvm/* "$(dirname "$(dirname "$(readlink -f "$(command -v javac || echo /nonexistent)")")")"; do
    [ -n "$c" ] && [ -x "$c/bin/javac" ] || continue
    v=$(java_major "$c"); v=${v%%.*}
    if [ -n "$v" ] && [ "$v" -ge 22 ] && [ "$v" -gt "$bestv" ]; then best=$c; bestv=$v; fi
  done
  [ -n "$best" ] && echo "$best"
}
JAVA_HOME=$(find_jdk) || true
if [ -z "${JAVA_HOME:-}" ]; then
  echo "No JDK >= 22 found (looked at \$JAVA_HOME, /usr/lib/jvm/*, javac on PATH): install one, e.g. Temurin 25" >&2
  exit 1
fi
export JAVA_HOME
export PATH="$JAVA_HOME/bin:$PATH"

CGROUP2=$(awk '$0 ~ / - cgroup2 / { print $5; exit }' /proc/self/mountinfo)

# need [GROUP...]: root (BPF programs and cgroups need CAP_BPF, CAP_NET_ADMIN, CAP_SYS_ADMIN), a
# cgroup v2 hierarchy, and what scripts/install.sh installs for the groups (default base).
need() {
  if [ "$(id -u)" != 0 ]; then
    echo "sockmap4j scripts need root: loading BPF programs and making cgroups needs CAP_BPF, CAP_NET_ADMIN, CAP_SYS_ADMIN" >&2
    exit 1
  fi
  if [ -z "$CGROUP2" ]; then
    echo "No cgroup v2 hierarchy is mounted: sockmap4j attaches its sockops program to a cgroup v2" >&2
    exit 1
  fi
  "$SM4J_ROOT/scripts/install.sh" --check "$@"
}

# Moves this shell (and so everything it starts) into a new child cgroup, and arranges for
# the shell to move back and remove it on exit.
enter_child_cgroup() {
  local name=$1
  SM4J_ORIG_CGROUP="$CGROUP2$(sed -n 's/^0:://p' /proc/self/cgroup)"
  SM4J_CGROUP="$CGROUP2/$name-$$"
  mkdir "$SM4J_CGROUP"
  echo $$ > "$SM4J_CGROUP/cgroup.procs"
  trap leave_child_cgroup EXIT
}

# The co-located transport for the demo's fast path (COLOCATED, default true; docs/colocated.md):
# adds the switch to java_flags, and a broker directory all the stages are given (as pods that mount
# one directory), removed on exit with the child cgroup. After enter_child_cgroup.
colocated_flags() {
  if [ "${COLOCATED:-true}" != true ]; then
    java_flags+=(-Dsockmap4j.colocated=false) # the library's default is on
    return 0
  fi
  SM4J_BROKER_DIR=$(mktemp -d /tmp/sm4j-demo-broker.XXXXXX)
  trap 'rc=$?; rm -rf "$SM4J_BROKER_DIR"; leave_child_cgroup $rc' EXIT
  java_flags+=(-Dsockmap4j.colocated=true "-Dsockmap4j.colocated.brokerDir=$SM4J_BROKER_DIR")
  # the stages' Arrow batches are lent through each connection's heap, the library's default;
  # LEND_BYTES=0 copies them through the rings, LEND_BYTES=BYTES sets each end's heap
  if [ -n "${LEND_BYTES:-}" ]; then java_flags+=("-Dsockmap4j.colocated.lendBytes=$LEND_BYTES"); fi
}

# Exits with the status it is given, else the one it was called with ($? of the trap).
leave_child_cgroup() {
  local rc=${1:-$?}
  if [ -n "${SM4J_CGROUP:-}" ] && [ -d "$SM4J_CGROUP" ]; then
    echo $$ > "$SM4J_ORIG_CGROUP/cgroup.procs" 2>/dev/null || true
    # Processes the run left behind (there should be none) leave with it.
    while read -r pid; do echo "$pid" > "$SM4J_ORIG_CGROUP/cgroup.procs" 2>/dev/null || true; done \
      < "$SM4J_CGROUP/cgroup.procs"
    # A process still exiting (a JVM stopped by a signal) stays in the cgroup until it is gone:
    # wait up to 10 s for the kernel to say the cgroup is empty.
    local i
    for i in $(seq 1 50); do
      grep -q '^populated 0' "$SM4J_CGROUP/cgroup.events" 2>/dev/null && break
      sleep 0.2
    done
    rmdir "$SM4J_CGROUP" 2>/dev/null || echo "warning: could not remove $SM4J_CGROUP" >&2
  fi
  exit $rc
}

# Maven, quiet about downloads, on the JDK found above.
mvn_b() { mvn -B -ntp "$@"; }

# async-profiler's native library (Maven Central's tools.profiler:async-profiler, the library
# inside its jar) extracted under DIR; prints its path. For scripts/profile.sh.
async_profiler_lib() {
  local dir=$1 version=4.1
  mvn_b -q dependency:get -Dartifact=tools.profiler:async-profiler:$version >/dev/null || return 1
  if [ ! -f "$dir/ap/linux-x64/libasyncProfiler.so" ]; then
    (mkdir -p "$dir/ap" && cd "$dir/ap" && unzip -q -o \
      ~/.m2/repository/tools/profiler/async-profiler/$version/async-profiler-$version.jar 'linux-x64/*')
  fi
  echo "$dir/ap/linux-x64/libasyncProfiler.so"
}

# measuring_pid LOG NAME JVM: waits until the GrpcHandoffs run logging to LOG (its launcher's pid
# JVM) prints "measuring NAME in pid N", and prints N; prints LOG and fails if the run ends first.
measuring_pid() {
  local log=$1 name=$2 jvm=$3
  until grep -q "^measuring $name" "$log" 2>/dev/null; do
    kill -0 "$jvm" 2>/dev/null || { cat "$log" >&2; return 1; }
    sleep 0.2
  done
  sed -n "s/^measuring $name in pid \([0-9]*\)$/\1/p" "$log"
}
