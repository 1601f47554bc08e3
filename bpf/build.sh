#!/usr/bin/env bash
# Compiles one BPF C file into an object with BTF (-g), as the Maven build of core does:
#   bpf/build.sh SRC OUT [CLANG-FLAGS...]   (e.g. -DSM4J_NO_DRAIN)
# The programs read UAPI context structs (bpf_sock_ops, sk_msg_md), which the verifier rewrites
# for the running kernel, and a few fields of the kernel's own tcp_sock, declared in
# sockmap4j.bpf.c with preserve_access_index: libbpf relocates those reads at load time against
# the running kernel's BTF (CO-RE). So no vmlinux.h is needed to build, but the kernel that loads
# the object must have BTF (CONFIG_DEBUG_INFO_BTF, /sys/kernel/btf/vmlinux).
# Needs clang >= 15, which puts BTF type tags (the untrusted kptr of sm4j_rxsock) into the object;
# clang-16 is taken when installed.
set -euo pipefail
src=$1
out=$2
shift 2
cc=clang
command -v clang-16 >/dev/null && cc=clang-16
command -v "$cc" >/dev/null || { echo "clang not found: install clang >= 15 (Debian 12: apt-get install clang-16 libbpf-dev)" >&2; exit 1; }
major=$("$cc" -dumpversion | cut -d. -f1)
[ "$major" -ge 15 ] || { echo "$cc is version $major; the BPF objects need clang >= 15 (Debian 12: apt-get install clang-16)" >&2; exit 1; }
[ -f /usr/include/bpf/bpf_helpers.h ] || { echo "bpf/bpf_helpers.h not found: apt-get install libbpf-dev" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
arch=$(uname -m)
"$cc" -g -O2 -Wall -Werror -target bpf -I/usr/include/"$arch"-linux-gnu -I"$(dirname "$src")" "$@" \
  -c "$src" -o "$out"
