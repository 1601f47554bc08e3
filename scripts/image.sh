#!/usr/bin/env bash
# Builds the node agent's image, sockmap4j/agent:<version>, from Maven Central and Debian's archive
# only (no container registry): a Debian 13 (trixie) minbase root file system made by mmdebstrap
# with Debian's OpenJDK 25 JRE (headless), libbpf1 and curl (the kubelet's exec probes ask the
# agent's Unix socket with it), and the agent's distribution (mvn package
# -pl cli) in /opt/sockmap4j, committed by buildah and written as a docker-archive:
#   target/image/sockmap4j-agent-<version>.tar     (podman load -i ..., docker load -i ...)
# Entry point /opt/sockmap4j/bin/sockmap4j, user root (the agent loads BPF programs, attaches them
# to cgroups and enters other network namespaces: see deploy/image/README.md for the capabilities).
# Usage: image.sh [--fresh]   (--fresh makes the root file system again instead of reusing it)
# Leaves the archive and the cached root file system under target/image, nothing in the container
# storage (the image is removed from it after the archive is written).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
source scripts/lib.sh
need base image
fresh=false
[ "${1:-}" = "--fresh" ] && fresh=true
version=$(sed -n 's:.*<version>\(.*\)</version>.*:\1:p' pom.xml | head -1)
out=target/image
# The root file system is cached per package list: a changed list makes a new one.
packages=openjdk-25-jre-headless,libbpf1,curl
rootfs=$out/rootfs-trixie-$(echo "$packages" | md5sum | cut -c1-8).tar
archive=$out/sockmap4j-agent-$version.tar
name=localhost/sockmap4j/agent:$version
export STORAGE_DRIVER=${STORAGE_DRIVER:-vfs} # no overlay inside the sandboxes this is built in
mkdir -p "$out"

mvn_b -q package -DskipTests -Dmaven.javadoc.skip=true -Dmaven.source.skip=true -pl cli -am
dist=cli/target/sockmap4j-cli-$version-dist/sockmap4j
[ -x "$dist/bin/sockmap4j" ] || { echo "no agent distribution in $dist"; exit 1; }

if $fresh || [ ! -s "$rootfs" ]; then
  # Man pages, docs and locales left out; update-alternatives still wants man1 to exist.
  mmdebstrap --quiet --variant=minbase --include="$packages" \
    --setup-hook='mkdir -p "$1/usr/share/man/man1"' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-include=/usr/share/man/man1' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    trixie "$out/rootfs-trixie.part.tar" "deb http://deb.debian.org/debian trixie main"
  mv "$out/rootfs-trixie.part.tar" "$rootfs"
fi

ctr=$(buildah from scratch)
trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
buildah add "$ctr" "$rootfs" / >/dev/null
buildah copy "$ctr" "$dist" /opt/sockmap4j >/dev/null
jres=$(tar -tf "$rootfs" | sed -n 's:^\./usr/lib/jvm/\(java-25-openjdk-[a-z0-9]*\)/bin/java$:\1:p')
jre=${jres%%$'\n'*}
[ -n "$jre" ] || { echo "no OpenJDK 25 in $rootfs"; exit 1; }
buildah config --entrypoint '["/opt/sockmap4j/bin/sockmap4j"]' --cmd '--help' --user 0:0 \
  --env JAVA_HOME=/usr/lib/jvm/$jre \
  --label org.opencontainers.image.title=sockmap4j-agent \
  --label org.opencontainers.image.version="$version" \
  --label org.opencontainers.image.description="sockmap4j node agent: Debian 13 minbase, OpenJDK 25 JRE, libbpf1" \
  --label org.opencontainers.image.licenses="Apache-2.0 AND GPL-2.0-only" "$ctr"
buildah commit --quiet --rm "$ctr" "$name" >/dev/null
trap - EXIT
rm -f "$archive"
buildah push --quiet "$name" "docker-archive:$archive:sockmap4j/agent:$version"
buildah rmi "$name" >/dev/null
echo "image sockmap4j/agent:$version: $archive, $(du -m "$archive" | cut -f1) MiB" \
  "(root file system $(du -m "$rootfs" | cut -f1) MiB, agent $(du -sm "$dist" | cut -f1) MiB)"
