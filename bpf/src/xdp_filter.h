/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Structs shared by xdp_filter.bpf.c and io.github.sockmap4j.xdp (Java). Padding is explicit;
 * LayoutTest (core/src/test/.../internal/bpf) checks each against the object's BTF,
 * and the constants here against their Java side (XdpLayout).
 */
#ifndef SM4J_XDP_FILTER_H
#define SM4J_XDP_FILTER_H

#define XDPF_MAX_RULES 1024

enum xdpf_action {
	XDPF_PASS = 0,
	XDPF_DROP = 1,
};

/* Source rule: LPM key over a 16-byte address, IPv4 as ::ffff:a.b.c.d (prefix 96 + n). */
struct xdpf_src_key {
	__u32 prefixlen;
	__u8 addr[16];
};

/* Destination port rule. */
struct xdpf_port_key {
	__u16 port;     /* host order */
	__u8 proto;     /* IPPROTO_TCP or IPPROTO_UDP */
	__u8 pad;
};

struct xdpf_rule {
	__u32 action;   /* enum xdpf_action */
	__u32 id;       /* index of its counter, < XDPF_MAX_RULES */
};

struct xdpf_config {
	__u32 default_action;
	__u32 reserved;
};

/*
 * Per-CPU packet counters: [0, XDPF_MAX_RULES) per rule, then one per outcome.
 */
enum xdpf_counter {
	XDPF_CTR_PASSED = XDPF_MAX_RULES,
	XDPF_CTR_DROPPED,
	XDPF_CTR_MALFORMED,     /* truncated or unparsable: passed to the stack, which decides */
	XDPF_CTR_DEFAULT,       /* no rule matched */
	XDPF_CTR_MAX,
};

#endif /* SM4J_XDP_FILTER_H */
