#!/usr/bin/env bash
# Would an io_uring I/O path make round trips faster? A C ping-pong (bench/src/main/c/
# uring_pingpong.c) with blocking send/recv and with io_uring, over TCP and over the redirect,
# interleaved in rounds, before anyone builds the Java path. Needs liburing-dev (installed here).
# Usage: scripts/bench-uring.sh [rounds] [iterations] [sizes]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
[ -f /usr/include/liburing.h ] || { apt-get update -qq >&2; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq liburing-dev >&2; }

rounds=${1:-5}; iters=${2:-20000}; sizes=${3:-64 65536}
mvn_b -q install -DskipTests
bin=$(mktemp -d)/uring_pingpong
cc -O2 -Wall -Werror -o "$bin" bench/src/main/c/uring_pingpong.c -luring -lpthread

pins=/sys/fs/bpf/sockmap4j-uring-$$
enter_child_cgroup sockmap4j-uring
cleanup() { local rc=$?; ./scripts/sockmap4j --pin-dir="$pins" down --force >/dev/null 2>&1 || true; rm -f "$bin"; leave_child_cgroup "$rc"; }
trap cleanup EXIT
./scripts/sockmap4j --pin-dir="$pins" up --cgroup "$SM4J_CGROUP" >/dev/null
fast=$((20000 + $$ % 10000)); plain=$((fast + 1))
# C peers publish no reads and no sockmap4j JVM runs a watcher here: lift the in-flight bound.
./scripts/sockmap4j --pin-dir="$pins" allow --bound=-1 "$fast" >/dev/null
echo "io_uring trial: $rounds rounds x $iters round trips, kernel $(uname -r), $(nproc) CPUs; p50 us of each round"
for size in $sizes; do
  for r in $(seq "$rounds"); do
    for mode in blocking uring; do
      echo "$size tcp $mode $("$bin" "$plain" "$iters" "$size" "$mode" | sed 's/.*: //')"
      echo "$size redirect $mode $("$bin" "$fast" "$iters" "$size" "$mode" | sed 's/.*: //')"
    done
  done
done | awk '{ key=$1" "$2" "$3; split($0, f, "p50 "); split(f[2], g, " us"); p50[key]=p50[key]" "g[1]; keys[key]=1 }
  END { for (k in keys) print k ":" p50[k] }' | sort -k1,1n -k2,2 -k3,3
./scripts/sockmap4j --pin-dir="$pins" stats | head -n 8
