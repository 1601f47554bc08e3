#!/usr/bin/env bash
# Services that do not change: examples/unchanged-spring-boot3 (Spring Boot 3.5 on Java 17:
# WebFlux on Reactor Netty with Netty 4.1, Spring MVC on Tomcat, WebClient, gRPC on
# grpc-netty-shaded), examples/unchanged-helidon4 (Helidon 4 SE on Java 25) and
# examples/unchanged-quarkus3 (Quarkus REST and gRPC on Java 17), no sockmap4j dependency in any, as a
# server pod and a client pod of the node-shaped
# bed, under the node agent, which opts their ports in. Prints, per kind of traffic, the bytes the
# kernel redirected and sent by TCP (the clients check every byte), and fails when request/response
# traffic had less than 99% of its bytes redirected or a stream whose reader keeps up less than 90%.
# Usage: unchanged-services.sh [CALLS] [STREAM_BYTES] [STREAM_ROUNDS]   (default 500, 64 MiB, 3)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
source scripts/env.sh
# The services' own Java: 17, as they ship (Debian's openjdk-17).
java17=""
for c in /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/*17*; do
  if [ -x "$c/bin/java" ]; then java17=$c/bin/java; break; fi
done
if [ -z "$java17" ]; then
  echo "Installing Debian's openjdk-17-jre-headless for the unchanged services" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >&2
  java17=/usr/lib/jvm/java-17-openjdk-amd64/bin/java
fi
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
