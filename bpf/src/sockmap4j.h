/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Structs shared by the kernel programs (sockmap4j.bpf.c) and the Java side
 * (io.github.sockmap4j.internal.bpf.*Layout). Every layout change bumps
 * SM4J_ABI_VERSION: a JVM refuses pins whose sm4j_meta holds another version.
 * Padding is explicit; SockmapLayoutTest checks each struct against the BTF of
 * the compiled object.
 */
#ifndef SOCKMAP4J_H
#define SOCKMAP4J_H

#define SM4J_ABI_VERSION 1

/*
 * Identity of one TCP socket as seen from its own side. Addresses are IPv6,
 * IPv4 ones in v4-mapped form (::ffff:a.b.c.d), so AF_INET, AF_INET6 and
 * dual-stack sockets of one connection build the same key. Addresses are in
 * network order, ports in host order. netns is the network-namespace cookie
 * when either address is loopback (127.0.0.0/8, ::1), else 0: the SOCKHASH is
 * global to the kernel, so 127.0.0.1:a -> 127.0.0.1:b in two namespaces must
 * not collide, while pod-to-pod keys must match across namespaces.
 */
struct sm4j_sock_key {
	__u32 local_ip[4];
	__u32 remote_ip[4];
	__u32 local_port;
	__u32 remote_port;
	__u64 netns;
};

/*
 * Policy: which server endpoints are opted in. LPM trie key; the matched data
 * is the server port (big-endian) followed by the server address (IPv6 or
 * v4-mapped). prefixlen = 16 for "this port, any address", 16 + n for a CIDR
 * of n bits.
 */
struct sm4j_policy_key {
	__u32 prefixlen;
	__u8 port[2];
	__u8 addr[16];
	__u8 pad[2];
};

struct sm4j_policy {
	__u32 flags;    /* reserved, 0 */
	__u32 reserved; /* reserved, 0 */
};

/* Per-socket state, in SK_STORAGE. */
#define SM4J_SOCK_TCP_TAINTED 1 /* a send went by plain TCP: never redirect again */

struct sm4j_sock_state {
	__u32 flags;
	__u32 reserved;
};

/* Indexes into the per-CPU counter array. */
enum sm4j_counter {
	SM4J_CTR_SOCKETS_REGISTERED = 0,
	SM4J_CTR_REGISTER_FAILED,
	SM4J_CTR_MSGS_REDIRECTED,
	SM4J_CTR_BYTES_REDIRECTED,
	SM4J_CTR_MSGS_PASSED,
	SM4J_CTR_BYTES_PASSED,
	SM4J_CTR_SOCKETS_TAINTED,
	SM4J_CTR_MAX,
};

#endif /* SOCKMAP4J_H */
