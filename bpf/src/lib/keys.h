/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Socket keys as the SOCKHASH holds them (struct sm4j_sock_key): addresses v4-mapped, ports in
 * host order, the network namespace's cookie only for loopback keys (pod addresses are unique
 * on a node, loopback ones are not), and a peer's key as a socket's own reversed.
 */
#ifndef SM4J_LIB_KEYS_H
#define SM4J_LIB_KEYS_H

/* One load of a value another CPU (or a user-space store through mmap) may change. */
#define READ_ONCE(x) (*(const volatile typeof(x) *)&(x))

static __always_inline void map_v4(__u32 ip[4], __u32 ip4)
{
	ip[0] = 0;
	ip[1] = 0;
	ip[2] = bpf_htonl(0x0000ffff);
	ip[3] = ip4;
}

static __always_inline int is_loopback(const __u32 ip[4])
{
	if (ip[0] || ip[1])
		return 0;
	if (ip[2] == bpf_htonl(0x0000ffff))
		return (bpf_ntohl(ip[3]) >> 24) == 127;
	return ip[2] == 0 && ip[3] == bpf_htonl(1);
}

/*
 * Context fields are read one at a time through ctx_u32: the verifier only
 * accepts 4-byte loads at constant offsets from the context pointer, and clang
 * otherwise merges the AF_INET and AF_INET6 branches into loads through a
 * computed pointer ("dereference of modified ctx ptr").
 */
#define ctx_u32(ctx, field)                                                      \
	({                                                                           \
		__u32 __v = (ctx)->field;                                                \
		asm volatile("" : "+r"(__v));                                            \
		__v;                                                                     \
	})

#define LOAD_ADDRS(ctx, key, ok)                                                 \
	do {                                                                         \
		__u32 family = ctx_u32(ctx, family);                                     \
		ok = 1;                                                                  \
		if (family == AF_INET) {                                                 \
			map_v4((key)->local_ip, ctx_u32(ctx, local_ip4));                    \
			map_v4((key)->remote_ip, ctx_u32(ctx, remote_ip4));                  \
		} else if (family == AF_INET6) {                                         \
			(key)->local_ip[0] = ctx_u32(ctx, local_ip6[0]);                     \
			(key)->local_ip[1] = ctx_u32(ctx, local_ip6[1]);                     \
			(key)->local_ip[2] = ctx_u32(ctx, local_ip6[2]);                     \
			(key)->local_ip[3] = ctx_u32(ctx, local_ip6[3]);                     \
			(key)->remote_ip[0] = ctx_u32(ctx, remote_ip6[0]);                   \
			(key)->remote_ip[1] = ctx_u32(ctx, remote_ip6[1]);                   \
			(key)->remote_ip[2] = ctx_u32(ctx, remote_ip6[2]);                   \
			(key)->remote_ip[3] = ctx_u32(ctx, remote_ip6[3]);                   \
		} else {                                                                 \
			ok = 0;                                                              \
		}                                                                        \
	} while (0)

static __always_inline struct sm4j_policy *policy_of(const __u32 server_ip[4], __u32 server_port)
{
	struct sm4j_policy_key pk = {};

	pk.prefixlen = 16 + 128;
	pk.port[0] = server_port >> 8;
	pk.port[1] = server_port & 0xff;
	__builtin_memcpy(pk.addr, server_ip, 16);
	return bpf_map_lookup_elem(&sm4j_policy, &pk);
}

/*
 * Loopback keys carry the network namespace's cookie: 127.0.0.1 of one namespace is not that of
 * another. Other addresses are unique on a node, so pod-to-pod keys match across namespaces.
 */
#define KEY_SET_NETNS(ctx, key)                                                  \
	do {                                                                         \
		if (is_loopback((key)->local_ip) || is_loopback((key)->remote_ip))       \
			(key)->netns = bpf_get_netns_cookie(ctx);                            \
	} while (0)

/* The key under which the peer of the socket keyed {mine} is registered: {mine} reversed. */
static __always_inline void reverse_key(struct sm4j_sock_key *peer, const struct sm4j_sock_key *mine)
{
	__builtin_memcpy(peer->local_ip, mine->remote_ip, 16);
	__builtin_memcpy(peer->remote_ip, mine->local_ip, 16);
	peer->local_port = mine->remote_port;
	peer->remote_port = mine->local_port;
	peer->netns = mine->netns;
}

#endif /* SM4J_LIB_KEYS_H */
