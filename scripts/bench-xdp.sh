#!/usr/bin/env bash
# XDP drop vs the kernel stack refusing the same UDP traffic: packets/s and CPU per packet.
# Makes its own network namespace and veth pair, and removes them.
# Usage: scripts/bench-xdp.sh [rounds] [seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

mvn_b -q install -DskipTests
cc -O2 -Wall -o bench/target/udp_flood bench/src/main/c/udp_flood.c
mvn_b -q -pl bench exec:exec -Dexec.args="--enable-native-access=ALL-UNNAMED -classpath %classpath io.github.sockmap4j.bench.XdpBench $PWD/bench/target/udp_flood ${1:-5} ${2:-3}"
