/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Connect-time translation of Services (struct sm4j_svc in sockmap4j.h): the pick, and what a
 * translated socket remembers so that getpeername reports the address it dialed.
 */
#ifndef SM4J_LIB_SERVICES_H
#define SM4J_LIB_SERVICES_H

/*
 * The endpoint a connect to the Service {k} goes to, or NULL to leave it to kube-proxy: not a
 * Service in the map, not one whose owner or namespace this connect is of, or one with no local endpoint now (nothing to gain; kube-proxy's NAT carries
 * it as without sockmap4j). A remote pick is translated too, straight to that endpoint: left to
 * kube-proxy, which picks again among all, it would make local endpoints likelier than the
 * Service's odds.
 */
/* The uid owning socket {sk} (its creator's effective uid), or -1 where it cannot be read. */
static __always_inline __u32 uid_of(struct bpf_sock *sk)
{
	struct tcp_sock *tp = sk ? bpf_skc_to_tcp_sock(sk) : 0;

	if (!tp)
		return (__u32)-1;
	return ((struct sock___sm4j *)tp)->sk_uid.val;
}

/* The uid owning the connecting socket, or -1 where it cannot be read. */
static __always_inline __u32 sock_uid(struct bpf_sock_addr *ctx)
{
	return uid_of(ctx->sk);
}

/* The namespace part of the key of {k}'s address: this connect's namespace for a loopback VIP (is_loopback, lib/keys.h). */
static __always_inline void svc_key_scope(struct bpf_sock_addr *ctx, struct sm4j_svc_key *k)
{
	k->netns = is_loopback(k->addr) ? bpf_get_netns_cookie(ctx) : 0;
}

static __always_inline const struct sm4j_endpoint *svc_pick(struct bpf_sock_addr *ctx, const struct sm4j_svc_key *k)
{
	struct sm4j_svc *s = bpf_map_lookup_elem(&sm4j_services, k);
	__u32 n, i;

	if (!s)
		return 0;
	/*
	 * A user's Service moves that user's connects only; a loopback one, its namespace's only.
	 * "That user's": the real uid of the caller and the owner of its socket (the creator's
	 * effective uid) both, so that a setuid program the user runs is not moved.
	 */
	if (s->owner && ((__u32)bpf_get_current_uid_gid() != s->owner - 1 || sock_uid(ctx) != s->owner - 1))
		return 0;
	if (s->netns && bpf_get_netns_cookie(ctx) != s->netns)
		return 0;
	n = (s->flags & SM4J_SVC_LOCAL_ONLY) ? s->local_count : s->count;
	if (s->local_count == 0 || n == 0 || n > SM4J_SVC_ENDPOINTS) {
		count(SM4J_CTR_SVC_NO_LOCAL, 1);
		return 0;
	}
	i = bpf_get_prandom_u32() % n;
	/* The verifier does not follow a remainder's range: the check it needs, kept from clang. */
	asm volatile("" : "+r"(i));
	if (i >= SM4J_SVC_ENDPOINTS)
		return 0;
	return &s->ep[i];
}

/*
 * Remembers what a socket dialed and where its connect went (struct sm4j_svc_sock), for getpeername
 * and for the SO_ORIGINAL_DST of the socket that accepts it; 0 when it cannot (then the connect is
 * left as it was).
 */
static __always_inline int sock_remember(struct bpf_sock_addr *ctx, const struct sm4j_svc_key *dialed,
					 const __u32 ep_addr[4], __u32 ep_port, const __u32 orig_addr[4],
					 __u32 orig_port, __u32 kind)
{
	struct sm4j_svc_sock v = {};
	__u64 cookie = bpf_get_socket_cookie(ctx);

	__builtin_memcpy(v.addr, dialed->addr, 16);
	v.port = dialed->port;
	__builtin_memcpy(v.ep_addr, ep_addr, 16);
	v.ep_port = ep_port;
	__builtin_memcpy(v.orig_addr, orig_addr, 16);
	v.orig_port = orig_port;
	v.kind = kind;
	return bpf_map_update_elem(&sm4j_svcsock, &cookie, &v, BPF_ANY) == 0;
}

/* Remembers the Service a translated socket dialed, for getpeername and a mesh's proxy. */
static __always_inline int svc_remember(struct bpf_sock_addr *ctx, const struct sm4j_svc_key *k,
					const struct sm4j_endpoint *ep)
{
	return sock_remember(ctx, k, ep->addr, ep->port, k->addr, k->port, SM4J_ORIG_SERVICE);
}

static __always_inline int is_v4_mapped(const __u32 ip[4])
{
	return ip[0] == 0 && ip[1] == 0 && ip[2] == bpf_htonl(0x0000ffff);
}

/* The key of sm4j_svcorig for the end {addr}:{port} of a socket in namespace {netns}. */
static __always_inline void svc_orig_key(struct sm4j_svc_orig_key *k, __u64 netns, const __u32 addr[4], __u32 port)
{
	k->netns = netns;
	__builtin_memcpy(k->addr, addr, 16);
	k->port = port;
}

/* The key of sm4j_meshorig of a connection (struct sm4j_mesh_orig_key). */
static __always_inline void mesh_orig_key(struct sm4j_mesh_orig_key *k, const __u32 client[4], const __u32 server[4],
					  __u32 server_port, __u32 client_isn, __u32 server_isn)
{
	__builtin_memcpy(k->client, client, 16);
	__builtin_memcpy(k->server, server, 16);
	k->server_port = server_port;
	k->client_isn = client_isn;
	k->server_isn = server_isn;
}

/*
 * A translated socket is established: what it dialed, by its own end, for a proxy that accepted
 * it through a NAT rule of its namespace ({local} is the socket's key's local address and port,
 * {remote} its peer's). Only when the socket is connected to the endpoint its translation
 * picked: the entry by its end is then this live connection's, whose 4-tuple no other socket of
 * the namespace can have while it lives (and its close removes the entry). A socket connected
 * anywhere else (translated at a connect that failed before its SYN, then connected again
 * without one) keeps no translation at all: no entry by its end, none by its cookie.
 */
static __always_inline void svc_remember_end(struct bpf_sock_ops *skops, const __u32 local_ip[4], __u32 local_port,
					     const __u32 remote_ip[4], __u32 remote_port)
{
	__u64 cookie = bpf_get_socket_cookie(skops);
	struct sm4j_svc_sock *v = bpf_map_lookup_elem(&sm4j_svcsock, &cookie);
	struct sm4j_svc_orig_key k = {};
	struct sm4j_svc_orig o = {};

	if (!v)
		return;
	if (v->ep_port != remote_port || v->ep_addr[0] != remote_ip[0] || v->ep_addr[1] != remote_ip[1]
	    || v->ep_addr[2] != remote_ip[2] || v->ep_addr[3] != remote_ip[3]) {
		bpf_map_delete_elem(&sm4j_svcsock, &cookie);
		return;
	}
	o.cookie = cookie;
	o.client_port = local_port;
	if (v->kind == SM4J_ORIG_MESH_IN) {
		/*
		 * A proxy's connect to another meshed pod: that pod's proxy asks in its own namespace,
		 * by the connection (struct sm4j_mesh_orig_key), whatever port its NAT gave the client.
		 * Not a socket in repair mode: no handshake made its numbers, and no server asks.
		 */
		struct sm4j_mesh_orig_key mk = {};
		struct tcp_sock *tp = skops->sk ? bpf_skc_to_tcp_sock(skops->sk) : 0;

		if (!tp || BPF_CORE_READ_BITFIELD(tp, repair))
			return;
		mesh_orig_key(&mk, local_ip, remote_ip, remote_port, skops->snd_nxt, skops->rcv_nxt);
		v->client_isn = mk.client_isn;
		v->server_isn = mk.server_isn;
		__builtin_memcpy(&o.svc, v, sizeof(o.svc));
		bpf_map_update_elem(&sm4j_meshorig, &mk, &o, BPF_ANY);
		return;
	}
	__builtin_memcpy(&o.svc, v, sizeof(o.svc));
	svc_orig_key(&k, bpf_get_netns_cookie(skops), local_ip, local_port);
	bpf_map_update_elem(&sm4j_svcorig, &k, &o, BPF_ANY);
}

/*
 * A socket that asked for its state changes closed: its Service entries go, the one by its end
 * only if it is this socket's (another socket of the namespace may have bound the same end since,
 * and the entry by cookie may have left the LRU map first).
 */
static __always_inline void svc_forget(struct bpf_sock_ops *skops, const __u32 local_ip[4], __u32 local_port,
				       const __u32 remote_ip[4], __u32 remote_port)
{
	__u64 cookie = bpf_get_socket_cookie(skops);
	struct sm4j_svc_orig_key k = {};
	struct sm4j_svc_orig *o;
	struct sm4j_svc_sock *v = bpf_map_lookup_elem(&sm4j_svcsock, &cookie);

	if (v && v->kind == SM4J_ORIG_MESH_IN) {
		struct sm4j_mesh_orig_key mk = {};

		mesh_orig_key(&mk, local_ip, remote_ip, remote_port, v->client_isn, v->server_isn);
		o = bpf_map_lookup_elem(&sm4j_meshorig, &mk);
		if (o && o->cookie == cookie)
			bpf_map_delete_elem(&sm4j_meshorig, &mk);
	}
	svc_orig_key(&k, bpf_get_netns_cookie(skops), local_ip, local_port);
	o = bpf_map_lookup_elem(&sm4j_svcorig, &k);
	if (o && o->cookie == cookie)
		bpf_map_delete_elem(&sm4j_svcorig, &k);
	bpf_map_delete_elem(&sm4j_svcsock, &cookie);
}

#endif /* SM4J_LIB_SERVICES_H */
