// SPDX-License-Identifier: GPL-2.0
/*
 * Another sockmap user on the node, as observability agents are (they attach sockops, a SOCKHASH
 * and an sk_msg program of their own for context propagation): registers every established TCP
 * socket of port OTHER_PORT (set at build: -DOTHER_PORT=N) in its own SOCKHASH, whose sk_msg
 * program counts each send and passes it. other_counts: [0] sockets it registered, [1] inserts the
 * kernel refused (a socket already in another program's map), [2] sends it saw.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u64);
} other_socks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, __u64);
} other_counts SEC(".maps");

static __always_inline void bump(__u32 i)
{
	__u64 *v = bpf_map_lookup_elem(&other_counts, &i);

	if (v)
		__sync_fetch_and_add(v, 1);
}

SEC("sockops")
int other_sockops(struct bpf_sock_ops *skops)
{
	__u64 cookie;

	if (skops->op != BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB && skops->op != BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB)
		return 1;
	if (skops->local_port != OTHER_PORT && bpf_ntohl(skops->remote_port) != OTHER_PORT)
		return 1;
	cookie = bpf_get_socket_cookie(skops);
	bump(bpf_sock_hash_update(skops, &other_socks, &cookie, BPF_NOEXIST) == 0 ? 0 : 1);
	return 1;
}

SEC("sk_msg")
int other_msg(struct sk_msg_md *msg)
{
	bump(2);
	return SK_PASS;
}
