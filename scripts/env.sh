#!/usr/bin/env bash
# Sourced by the other scripts: installs what the build and tests need on a Debian machine,
# finds a JDK >= 22, mounts bpffs, and offers helpers for a child cgroup.
# Needs root (apt-get, bpffs, cgroups, BPF).
set -euo pipefail

if [ "$(id -u)" != 0 ]; then
  echo "sockmap4j scripts need root: loading BPF programs and making cgroups needs CAP_BPF, CAP_NET_ADMIN, CAP_SYS_ADMIN" >&2
  exit 1
fi

need_pkgs=()
command -v clang-16 >/dev/null || need_pkgs+=(clang-16 llvm-16)
[ -f /usr/include/bpf/bpf_helpers.h ] || need_pkgs+=(libbpf-dev)
ldconfig -p | grep 'libbpf.so.1 ' >/dev/null || need_pkgs+=(libbpf1)
command -v bpftool >/dev/null || need_pkgs+=(bpftool)
command -v ip >/dev/null || need_pkgs+=(iproute2)
command -v setpriv >/dev/null || need_pkgs+=(util-linux)
command -v cc >/dev/null || need_pkgs+=(gcc libc6-dev)
command -v mvn >/dev/null || need_pkgs+=(maven)
# The node-shaped test bed's kube-proxy-style NAT (iptables and nftables modes), inside the bed's own namespaces.
command -v iptables >/dev/null || need_pkgs+=(iptables)
command -v nft >/dev/null || need_pkgs+=(nftables)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "Installing Debian packages: ${need_pkgs[*]}" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >&2
fi

source "$(dirname "${BASH_SOURCE[0]}")/jdk.sh"

if ! mountpoint -q /sys/fs/bpf; then
  mkdir -p /sys/fs/bpf
  mount -t bpf bpf /sys/fs/bpf
fi

CGROUP2=$(awk '$0 ~ / - cgroup2 / { print $5; exit }' /proc/self/mountinfo)
if [ -z "$CGROUP2" ]; then
  echo "No cgroup v2 hierarchy is mounted: sockmap4j attaches its sockops program to a cgroup v2" >&2
  exit 1
fi

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
# inside its jar) extracted under DIR; prints its path. For scripts/profile-*.sh.
async_profiler_lib() {
  local dir=$1 version=4.1
  mvn_b -q dependency:get -Dartifact=tools.profiler:async-profiler:$version >/dev/null || return 1
  if [ ! -f "$dir/ap/linux-x64/libasyncProfiler.so" ]; then
    (mkdir -p "$dir/ap" && cd "$dir/ap" && unzip -q -o \
      ~/.m2/repository/tools/profiler/async-profiler/$version/async-profiler-$version.jar 'linux-x64/*')
  fi
  echo "$dir/ap/linux-x64/libasyncProfiler.so"
}
