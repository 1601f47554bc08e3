#!/usr/bin/env bash
# Compiles one BPF C file into an object with BTF (-g), as the Maven build of core does.
# The programs read only UAPI context structs (bpf_sock_ops, sk_msg_md), which the verifier
# rewrites for the running kernel, so the object loads unchanged on any kernel with the
# features (no vmlinux.h needed).
set -euo pipefail
src=$1
out=$2
command -v clang >/dev/null || { echo "clang not found: install it (Debian: apt-get install clang libbpf-dev)" >&2; exit 1; }
[ -f /usr/include/bpf/bpf_helpers.h ] || { echo "bpf/bpf_helpers.h not found: apt-get install libbpf-dev" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
arch=$(uname -m)
clang -g -O2 -Wall -Werror -target bpf -I/usr/include/"$arch"-linux-gnu -I"$(dirname "$src")" \
  -c "$src" -o "$out"
