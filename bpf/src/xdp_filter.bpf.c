// SPDX-License-Identifier: GPL-2.0
/*
 * sockmap4j XDP ingress filter: a packet's source address is matched against CIDR rules
 * (longest prefix wins), then its TCP/UDP destination port against port rules; the first
 * match's action applies, else the default. Every decision is counted per CPU.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "xdp_filter.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, XDPF_MAX_RULES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct xdpf_src_key);
	__type(value, struct xdpf_rule);
} xdpf_src SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XDPF_MAX_RULES);
	__type(key, struct xdpf_port_key);
	__type(value, struct xdpf_rule);
} xdpf_port SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct xdpf_config);
} xdpf_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XDPF_CTR_MAX);
	__type(key, __u32);
	__type(value, __u64);
} xdpf_counters SEC(".maps");

static __always_inline void count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&xdpf_counters, &idx);

	if (c)
		*c += 1;
}

static __always_inline int verdict(__u32 action)
{
	if (action == XDPF_DROP) {
		count(XDPF_CTR_DROPPED);
		return XDP_DROP;
	}
	count(XDPF_CTR_PASSED);
	return XDP_PASS;
}

static __always_inline int apply(struct xdpf_rule *rule)
{
	/* The verifier needs the id bounded before it indexes the counters. */
	if (rule->id < XDPF_MAX_RULES)
		count(rule->id);
	return verdict(rule->action);
}

SEC("xdp")
int xdpf_filter(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct xdpf_src_key src = {};
	struct xdpf_port_key pk = {};
	struct xdpf_config *cfg;
	struct xdpf_rule *rule;
	__u32 zero = 0;
	__u8 proto = 0;
	void *l4 = NULL;

	/* Every header is checked against data_end before it is read (the verifier insists). */
	if ((void *)(eth + 1) > data_end)
		goto malformed;

	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);

		if ((void *)(ip + 1) > data_end || ip->ihl < 5)
			goto malformed;
		src.prefixlen = 128;
		src.addr[10] = 0xff;
		src.addr[11] = 0xff;
		__builtin_memcpy(&src.addr[12], &ip->saddr, 4);
		proto = ip->protocol;
		/* Fragments after the first carry no L4 header. */
		if (!(ip->frag_off & bpf_htons(0x1fff)))
			l4 = (void *)ip + ip->ihl * 4;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);

		if ((void *)(ip6 + 1) > data_end)
			goto malformed;
		src.prefixlen = 128;
		__builtin_memcpy(src.addr, &ip6->saddr, 16);
		/* Extension headers are not walked: only a TCP/UDP next header has a port here. */
		proto = ip6->nexthdr;
		l4 = ip6 + 1;
	} else {
		return verdict(XDPF_PASS); /* ARP and the rest: not this filter's business */
	}

	rule = bpf_map_lookup_elem(&xdpf_src, &src);
	if (rule)
		return apply(rule);

	if (l4 && (proto == IPPROTO_TCP || proto == IPPROTO_UDP)) {
		/* Both headers start with source then destination port. */
		struct udphdr *uh = l4;

		if ((void *)(uh + 1) > data_end)
			goto malformed;
		pk.port = bpf_ntohs(uh->dest);
		pk.proto = proto;
		rule = bpf_map_lookup_elem(&xdpf_port, &pk);
		if (rule)
			return apply(rule);
	}

	count(XDPF_CTR_DEFAULT);
	cfg = bpf_map_lookup_elem(&xdpf_config, &zero);
	return verdict(cfg ? cfg->default_action : XDPF_PASS);

malformed:
	count(XDPF_CTR_MALFORMED);
	return XDP_PASS;
}
