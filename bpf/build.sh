#!/usr/bin/env bash
# Compiles one BPF C file into an object with BTF (-g), as the Maven build of core does.
# The programs read UAPI context structs (bpf_sock_ops, sk_msg_md), which the verifier rewrites
# for the running kernel, and one field of the kernel's own tcp_sock (write_seq), declared in
# sockmap4j.bpf.c with preserve_access_index: libbpf relocates that read at load time against
# the running kernel's BTF (CO-RE). So no vmlinux.h is needed to build, but the kernel that loads
# the object must have BTF (CONFIG_DEBUG_INFO_BTF, /sys/kernel/btf/vmlinux).
set -euo pipefail
src=$1
out=$2
command -v clang >/dev/null || { echo "clang not found: install it (Debian: apt-get install clang libbpf-dev)" >&2; exit 1; }
[ -f /usr/include/bpf/bpf_helpers.h ] || { echo "bpf/bpf_helpers.h not found: apt-get install libbpf-dev" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
arch=$(uname -m)
clang -g -O2 -Wall -Werror -target bpf -I/usr/include/"$arch"-linux-gnu -I"$(dirname "$src")" \
  -c "$src" -o "$out"
