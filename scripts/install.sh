#!/usr/bin/env bash
# The one step that changes this host: installs, from Debian's archive, what a job needs, and
# mounts bpffs. No other script runs apt-get; each checks what it needs and names the group to
# install when something is missing. ./scripts/demo.sh and ./scripts/test.sh run the groups
# they need themselves (so that the README's two commands work on a fresh machine).
#
#   scripts/install.sh [GROUP...]      (default: base)
#     base    the build and the tests: clang 16, libbpf, bpftool, iproute2, gcc, Maven, iptables,
#             nftables, util-linux (setpriv), haproxy; and bpffs mounted on /sys/fs/bpf
#     vm      the kernel matrix's guests: QEMU, static busybox, kmod, xz, zstd, cpio
#     image   the agent's image and its container run: mmdebstrap, buildah, podman, runc,
#             catatonit, python3-yaml
#     java17  Debian's OpenJDK 17, the Java of the unchanged services (scripts/examples.sh unchanged)
#     perf    linux-perf (scripts/bench.sh grpc-wakeups)
#     uring   liburing-dev (scripts/bench.sh uring)
#     all     every group
#   scripts/install.sh kernel PACKAGE DIR APT
#             downloads a Debian kernel image package (and, since 7.x, its linux-binary-* and
#             linux-modules-* packages) into DIR with an apt state of its own in APT: nothing is
#             installed on the host (scripts/kernel-vm.sh)
#   scripts/install.sh --check [GROUP...]
#             changes nothing: says what the groups lack (and an unmounted bpffs for base), exits 1
#             when something is missing (what the other scripts run before they start)
# Needs root but for --check. Installs only what is missing; run again, it changes nothing.
set -euo pipefail

# missing GROUP: the packages of GROUP not installed yet, one a line.
missing() {
  case $1 in
    base)
      command -v clang-16 >/dev/null || echo clang-16 llvm-16
      [ -f /usr/include/bpf/bpf_helpers.h ] || echo libbpf-dev
      ldconfig -p | grep 'libbpf.so.1 ' >/dev/null || echo libbpf1
      command -v bpftool >/dev/null || echo bpftool
      command -v ip >/dev/null || echo iproute2
      command -v setpriv >/dev/null || echo util-linux
      command -v cc >/dev/null || echo gcc libc6-dev
      command -v mvn >/dev/null || echo maven
      # The node-shaped test bed's kube-proxy-style NAT (iptables and nftables modes), inside the
      # bed's own namespaces.
      command -v iptables >/dev/null || echo iptables
      command -v nft >/dev/null || echo nftables
      # The meshed test bed's sidecar proxy (MeshBedTest), run inside the bed's pods only.
      [ -x /usr/sbin/haproxy ] || echo haproxy
      command -v unzip >/dev/null || echo unzip ;;
    vm)
      command -v qemu-system-x86_64 >/dev/null || echo qemu-system-x86
      { [ -x /bin/busybox ] && /bin/busybox --list 2>/dev/null | grep -x insmod >/dev/null; } || echo busybox-static
      command -v depmod >/dev/null || echo kmod
      command -v xz >/dev/null || echo xz-utils
      command -v zstd >/dev/null || echo zstd
      command -v cpio >/dev/null || echo cpio ;;
    image)
      local tool
      for tool in mmdebstrap buildah podman runc catatonit; do
        command -v "$tool" >/dev/null || [ -x "/usr/libexec/podman/$tool" ] || echo "$tool"
      done
      python3 -c 'import yaml' 2>/dev/null || echo python3-yaml ;;
    java17)
      ls -d /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/*17* >/dev/null 2>&1 || echo openjdk-17-jre-headless ;;
    perf)
      command -v perf >/dev/null || echo linux-perf ;;
    uring)
      [ -f /usr/include/liburing.h ] || echo liburing-dev ;;
    *) echo "scripts/install.sh: unknown group '$1' (base, vm, image, java17, perf, uring, all, kernel)" >&2
       return 2 ;;
  esac
}

# kernel PACKAGE DIR APT: the kernel's packages downloaded into DIR from Debian's mirror, apt's
# state in APT.
kernel() {
  local pkg=$1 dir=$2 cache=$3
  mkdir -p "$cache"
  local apt=(-o "Dir::Etc::SourceList=$cache/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State=$cache/state" -o "Dir::Cache=$cache/cache" -o Dir::State::status=/dev/null
    -o APT::Architecture=amd64 -o APT::Sandbox::User=root -qq)
  if ! { [ -f "$cache/updated" ] && [ -n "$(find "$cache/updated" -mmin -720)" ]; }; then
    mkdir -p "$cache/state/lists/partial" "$cache/cache/archives/partial"
    cat > "$cache/sources.list" <<'LIST'
deb http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian-security bookworm-security main
deb http://deb.debian.org/debian bookworm-backports main
deb http://deb.debian.org/debian trixie main
deb http://deb.debian.org/debian-security trixie-security main
deb http://deb.debian.org/debian trixie-backports main
deb http://deb.debian.org/debian sid main
LIST
    apt-get "${apt[@]}" update >&2
    touch "$cache/updated"
  fi
  if ! apt-cache "${apt[@]}" show "$pkg" >/dev/null 2>&1; then
    echo "kernel-vm: Debian's mirror has no package $pkg; these are served:" >&2
    apt-cache "${apt[@]}" search '^linux-image-[0-9].*-amd64$' | awk '{print "  " $1}' \
      | grep -v -e cloud -e '-rt-' -e dbg | sort -V >&2
    exit 2
  fi
  # Since 7.x the image package only depends on linux-binary-* and linux-modules-*: take those too.
  local pkgs=("$pkg") dep
  for dep in $(apt-cache "${apt[@]}" show "$pkg" | sed -n 's/^Depends: //p' | head -1 | tr ',' '\n' | awk '{print $1}'); do
    case "$dep" in linux-binary-*|linux-modules-*) pkgs+=("$dep") ;; esac
  done
  (cd "$dir" && apt-get "${apt[@]}" download "${pkgs[@]}" >&2)
}

if [ "${1:-}" = --check ]; then
  shift
  [ $# -gt 0 ] || set -- base
  lacking=""
  for g in "$@"; do
    list=$(missing "$g") || exit 2
    [ -z "$list" ] || lacking="$lacking $g ($(echo $list))"
    if [ "$g" = base ] && ! mountpoint -q /sys/fs/bpf; then lacking="$lacking base (bpffs on /sys/fs/bpf)"; fi
  done
  if [ -n "$lacking" ]; then
    echo "missing:$lacking; run: scripts/install.sh $* (as root)" >&2
    exit 1
  fi
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "scripts/install.sh installs Debian packages and mounts bpffs: run it as root" >&2
  exit 1
fi
if [ "${1:-}" = kernel ]; then
  [ $# = 4 ] || { echo "usage: scripts/install.sh kernel PACKAGE DIR APT" >&2; exit 2; }
  kernel "$2" "$3" "$4"
  exit 0
fi

groups=("$@")
[ ${#groups[@]} -gt 0 ] || groups=(base)
[ "${groups[*]}" != all ] || groups=(base vm image java17 perf uring)
updated=false
for g in "${groups[@]}"; do
  list=$(missing "$g") || exit 2
  [ -n "$list" ] || continue
  echo "Installing Debian packages ($g): $list" >&2
  $updated || apt-get update -qq >&2
  updated=true
  flags=(-y -qq)
  [ "$g" != vm ] || flags+=(--no-install-recommends) # the guest's tools, without a desktop's worth
  # shellcheck disable=SC2086 # a list of package names
  DEBIAN_FRONTEND=noninteractive apt-get install "${flags[@]}" $list >&2
done
if [[ " ${groups[*]} " == *" base "* ]] && ! mountpoint -q /sys/fs/bpf; then
  mkdir -p /sys/fs/bpf
  mount -t bpf bpf /sys/fs/bpf
fi
