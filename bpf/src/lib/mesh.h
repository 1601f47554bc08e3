/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Meshed pods (struct sm4j_mesh in sockmap4j.h, docs/mesh.md): an application's connect goes
 * straight to its pod's proxy, a proxy's connect to a meshed pod goes to that pod's inbound port,
 * each as the pods' NAT rules would send it, but decided at the connect, so that both ends of
 * each leg register with matching keys. Each proxy is told the destination its NAT rule would
 * have kept (SO_ORIGINAL_DST, in sm4j_getsockopt).
 */
#ifndef SM4J_LIB_MESH_H
#define SM4J_LIB_MESH_H

#ifndef BPF_F_CURRENT_NETNS
#define BPF_F_CURRENT_NETNS (-1L)
#endif

/* The meshed pod whose network namespace this is, or NULL. */
static __always_inline struct sm4j_mesh *mesh_here(void *ctx)
{
	__u64 netns = bpf_get_netns_cookie(ctx);

	return bpf_map_lookup_elem(&sm4j_mesh, &netns);
}

/* The meshed pod at address {ip} (v4-mapped for IPv4), or NULL. */
static __always_inline struct sm4j_mesh_addr *mesh_pod_at(const __u32 ip[4])
{
	struct sm4j_mesh_addr_key k = {};

	__builtin_memcpy(k.addr, ip, 16);
	return bpf_map_lookup_elem(&sm4j_meshaddr, &k);
}

/*
 * Whether the pod's proxy listens on its outbound port on this namespace's loopback: a listener
 * there owned by the proxy's uid (IPv4 127.0.0.1, or ::1 for {v6}). No other user's listener
 * is ever sent an application's connect; without the proxy the pod's NAT carries it.
 */
static __always_inline int proxy_listens(struct bpf_sock_addr *ctx, const struct sm4j_mesh *m, int v6)
{
	struct bpf_sock_tuple t = {};
	struct bpf_sock *sk;
	__u32 uid, state;

	if (v6) {
		t.ipv6.daddr[3] = bpf_htonl(1);
		t.ipv6.dport = bpf_htons((__u16)m->out_port);
		sk = bpf_sk_lookup_tcp(ctx, &t, sizeof(t.ipv6), BPF_F_CURRENT_NETNS, 0);
	} else {
		t.ipv4.daddr = bpf_htonl(0x7f000001);
		t.ipv4.dport = bpf_htons((__u16)m->out_port);
		sk = bpf_sk_lookup_tcp(ctx, &t, sizeof(t.ipv4), BPF_F_CURRENT_NETNS, 0);
	}
	if (!sk)
		return 0;
	state = sk->state;
	uid = uid_of(sk);
	bpf_sk_release(sk);
	return state == BPF_TCP_LISTEN && uid == m->proxy_uid;
}

/*
 * Whether the connecting task is in meshed pod {m}'s proxy's group: the NAT of Istio's sidecar
 * leaves that group's connects alone as it leaves the proxy's uid's (its owner match reads the
 * group the socket was made with; the connecting task's is what a program here can read).
 */
static __always_inline int in_proxy_group(const struct sm4j_mesh *m)
{
	return m->proxy_gid != 0 && (__u32)(bpf_get_current_uid_gid() >> 32) == m->proxy_gid - 1;
}

/* Whether {port} is in a meshed pod's list of ports its NAT leaves out of a redirect. */
static __always_inline int mesh_skips(const __u16 ports[SM4J_MESH_SKIP_PORTS], __u32 port)
{
	__u16 p;
	int i;

#pragma unroll
	for (i = 0; i < SM4J_MESH_SKIP_PORTS; i++) {
		p = ports[i];
		if (p == 0)
			return 0;
		if (p == port)
			return 1;
	}
	return 0;
}

/*
 * An application's connect in meshed pod {m} to {dialed}: where its pod's NAT would send it to
 * the proxy, to the proxy's outbound port on loopback ({to}, v4-mapped for an IPv4 destination)
 * instead; 1 when so. Not a loopback destination, nor the pod's own address (the NAT of Istio's
 * sidecar leaves both alone), nor a port its NAT leaves out, nor where the proxy does not listen.
 */
static __always_inline int mesh_outbound(struct bpf_sock_addr *ctx, const struct sm4j_mesh *m,
					 const struct sm4j_svc_key *dialed, __u32 to[4])
{
	struct sm4j_mesh_addr *own;
	int v6 = !is_v4_mapped(dialed->addr);

	if (is_loopback(dialed->addr) || mesh_skips(m->skip_ports, dialed->port))
		return 0;
	own = mesh_pod_at(dialed->addr);
	if (own && own->netns == bpf_get_netns_cookie(ctx))
		return 0;
	if (!proxy_listens(ctx, m, v6))
		return 0;
	if (v6) {
		to[0] = 0;
		to[1] = 0;
		to[2] = 0;
		to[3] = bpf_htonl(1);
	} else {
		map_v4(to, bpf_htonl(0x7f000001));
	}
	if (!sock_remember(ctx, dialed, to, m->out_port, dialed->addr, dialed->port, SM4J_ORIG_MESH_OUT))
		return 0;
	count(SM4J_CTR_MESH_CAPTURED, 1);
	return 1;
}

/*
 * A proxy's connect in meshed pod {m} to {dest} (what it dialed, or the endpoint its Service
 * translation picked): to a meshed pod other than its own, sent to that pod's inbound port, as
 * that pod's NAT would send it (not to a port the NAT leaves alone); returns the port (0: left
 * alone). The inbound proxy is told {dest}.
 */
static __always_inline __u32 mesh_inbound(struct bpf_sock_addr *ctx, const struct sm4j_svc_key *dialed,
					  const __u32 dest[4], __u32 dest_port)
{
	struct sm4j_mesh_addr *to = mesh_pod_at(dest);
	__u32 port;

	if (!to || to->netns == bpf_get_netns_cookie(ctx))
		return 0;
	port = to->in_port;
	if (port == 0 || port == dest_port || mesh_skips(to->skip_ports, dest_port))
		return 0;
	if (!sock_remember(ctx, dialed, dest, port, dest, dest_port, SM4J_ORIG_MESH_IN))
		return 0;
	count(SM4J_CTR_MESH_INBOUND, 1);
	return port;
}

/*
 * The mesh leg of a client socket being established ({key} its own, the server remote), 0 for
 * none: in a meshed pod, to the proxy's outbound port on loopback (the application's leg); from
 * the proxy's uid to a loopback end, from one, or to its own pod's address (the proxy to its
 * application); from the proxy's uid to another meshed pod's inbound port (proxy to proxy).
 */
static __always_inline __u32 mesh_leg(struct bpf_sock_ops *skops, const struct sm4j_sock_key *key)
{
	__u64 netns = bpf_get_netns_cookie(skops);
	struct sm4j_mesh *m = bpf_map_lookup_elem(&sm4j_mesh, &netns);
	struct sm4j_mesh_addr *a;
	__u32 uid;

	if (!m)
		return 0;
	if (is_loopback(key->remote_ip) && key->remote_port == m->out_port)
		return SM4J_LEG_APP_PROXY;
	uid = uid_of(skops->sk);
	if (uid != m->proxy_uid)
		return 0;
	if (is_loopback(key->local_ip) || is_loopback(key->remote_ip))
		return SM4J_LEG_PROXY_APP;
	a = mesh_pod_at(key->remote_ip);
	if (!a)
		return 0;
	if (a->netns == netns)
		return SM4J_LEG_PROXY_APP; /* to its own pod's address (from ::6, as Istio's proxy does over IPv6) */
	return key->remote_port == a->in_port ? SM4J_LEG_PROXY_PROXY : 0;
}

/*
 * A registered socket of a mesh leg sends its FIN, or closes without one: what it sent by TCP
 * (from its write_seq, before the FIN takes a sequence number) is counted as its leg's, once.
 */
static __always_inline void mesh_leg_close(struct bpf_sock_ops *skops)
{
	struct bpf_sock *sk = skops->sk;
	struct sm4j_sock_state *st;
	struct tcp_sock *tp;
	__u32 leg;

	if (!sk)
		return;
	st = bpf_sk_storage_get(&sm4j_sockstate, sk, 0, 0);
	if (!st || !st->leg || (st->flags & SM4J_SOCK_LEG_COUNTED))
		return;
	tp = bpf_skc_to_tcp_sock(sk);
	if (!tp)
		return;
	leg = st->leg;
	st->flags |= SM4J_SOCK_LEG_COUNTED;
	count(SM4J_CTR_LEG_APP_PROXY_TCP + leg - 1, st->tcp + (__u32)(tp->write_seq - st->last_seq));
}

#endif /* SM4J_LIB_MESH_H */
