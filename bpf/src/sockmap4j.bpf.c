// SPDX-License-Identifier: GPL-2.0
/*
 * sockmap4j kernel side.
 *
 * sm4j_sockops registers TCP sockets of opted-in connections into sm4j_socks at
 * the ESTABLISHED callbacks. sm4j_redirect runs on every sendmsg of a
 * registered socket and moves the data straight into the peer's receive queue
 * when the peer is registered too; otherwise the data goes by plain TCP.
 * No byte is ever dropped.
 *
 * Ordering: the reader drains redirected data before data that came by TCP.
 * Once one send of a socket has gone by TCP, redirecting a later send could
 * overtake it, so the socket stays on TCP until its peer has read every byte it
 * was sent (only a receiver that publishes its reads can say so).
 *
 * Bound: a receiver that publishes its reads (struct sm4j_slot) also bounds what
 * may be redirected to it unread; past the bound the sender goes by TCP.
 */
#include <linux/bpf.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/socket.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>
#include "sockmap4j.h"

#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif
#ifndef EEXIST
#define EEXIST 17
#endif
#ifndef EBUSY
#define EBUSY 16
#endif
#ifndef ENOENT
#define ENOENT 2
#endif
#ifndef SOCK_STREAM
#define SOCK_STREAM 1
#endif
#ifndef SOL_IP
#define SOL_IP 0
#endif
#ifndef SOL_IPV6
#define SOL_IPV6 41
#endif
/* linux/netfilter_ipv4.h's SO_ORIGINAL_DST; linux/netfilter_ipv6/ip6_tables.h's IP6T_SO_ORIGINAL_DST is the same. */
#define SM4J_SO_ORIGINAL_DST 80

char LICENSE[] SEC("license") = "GPL";

#include "lib/maps.h"
#include "lib/keys.h"
#include "lib/peer.h"
#include "lib/shares.h"
#include "lib/services.h"
#include "lib/mesh.h"

/*
 * A registered socket closed: its read slot entry and watch entries go, even if its process died
 * (its verdict may have made a watch entry for its peer, which may never be registered). Only
 * while its key is still its own: a socket that never registered, or whose key another socket
 * took since its close(2), leaves that socket's entries alone.
 */
static __always_inline void forget_socket(struct bpf_sock_ops *skops, struct sm4j_sock_key *key)
{
	struct sm4j_sock_key peer = {};
	struct sm4j_pair *p;

	KEY_SET_NETNS(skops, key);
	if (skops->sk) {
		/*
		 * Its entry leaves its share (once: the state's share is cleared), whatever holds its
		 * key's pair now: the share is this socket's own record, and a socket that rebuilt the
		 * 4-tuple between this one's close(2) and its TCP_CLOSE must not keep it charged.
		 */
		struct sm4j_sock_state *st = bpf_sk_storage_get(&sm4j_sockstate, skops->sk, 0, 0);

		if (st && st->share_kind) {
			struct sm4j_share_key k = {.id = st->share_id, .kind = st->share_kind};

			share_give(&k);
			st->share_kind = 0;
		}
	}
	p = bpf_map_lookup_elem(&sm4j_pair, key);
	if (!p || p->cookie != bpf_get_socket_cookie(skops))
		return;
	bpf_map_delete_elem(&sm4j_pair, key);
	bpf_map_delete_elem(&sm4j_rx, key);
	bpf_map_delete_elem(&sm4j_watch, key);
#ifndef SM4J_NO_DRAIN
	bpf_map_delete_elem(&sm4j_rxsock, key);
#endif
	reverse_key(&peer, key);
	bpf_map_delete_elem(&sm4j_watch, &peer);
}

/*
 * Registers an opted-in socket: its sender state first (a socket without it is not registered,
 * so it exists before the socket can send), then its SOCKHASH entry, then its sm4j_pair, then
 * (where the kernel has untrusted kptrs) its tcp_sock for its peer's exact reads; and asks for its
 * close. Never over a live entry: a 4-tuple is unique in one network namespace only, and any user
 * can rebuild another's in a namespace of its own (unshare -Urn); replacing the entry would hand
 * that user the connection's redirected bytes, or knock the connection off the map.
 */
static __always_inline void register_socket(struct bpf_sock_ops *skops, struct sm4j_sock_key *key,
				     const struct sm4j_policy *policy, __u32 leg)
{
	struct bpf_sock *sk = skops->sk;
	struct sm4j_pair pair = {};
	struct sm4j_sock_state *st;
	struct tcp_sock *tp;
	long err;

	KEY_SET_NETNS(skops, key);
	if (!sk)
		return;
	tp = bpf_skc_to_tcp_sock(sk);
	st = bpf_sk_storage_get(&sm4j_sockstate, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!tp || !st) {
		count(SM4J_CTR_REGISTER_FAILED, 1);
		return;
	}
	if (BPF_CORE_READ_BITFIELD(tp, repair)) {
		/*
		 * A socket in repair mode (TCP_REPAIR, CAP_NET_ADMIN in any network namespace a user
		 * makes) is "established" by connect() without a packet, with sequence numbers its user
		 * chose: its key and the pairing proof would be the user's to forge. It stays on TCP.
		 */
		count(SM4J_CTR_KEY_TAKEN, 1);
		return;
	}
	/*
	 * Whose share the entry takes: a client's own; an accepted socket's, its client's (its pair
	 * holds it), so that a connection costs whoever made it both entries and no one can spend a
	 * server's share by connecting to it.
	 */
	if (skops->op == BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB) {
		struct sm4j_sock_key client = {};
		struct sm4j_pair *cp;

		reverse_key(&client, key);
		cp = bpf_map_lookup_elem(&sm4j_pair, &client);
		if (cp)
			pair.share = cp->share;
	} else {
		share_of(skops, tp, &pair.share);
	}
	if (!share_take(&pair.share)) {
		/* Its maker's share of the map is full: this socket stays on TCP, and so does its peer. */
		count(SM4J_CTR_REGISTER_FAILED, 1);
		return;
	}
	st->last_seq = tp->write_seq;
	st->policy_bound = policy->bound;
	err = bpf_sock_hash_update(skops, &sm4j_socks, key, BPF_NOEXIST);
	if (err)
		share_give(&pair.share);
	if (err == -EBUSY) {
		/*
		 * Another program's sockmap holds this socket with its own sk_msg program (an
		 * observability agent's, say): one socket runs one. It stays on TCP under that
		 * program, and user space is told which socket (sm4j_busy).
		 */
		struct sm4j_busy b = {.cookie = bpf_get_socket_cookie(skops), .when_ns = bpf_ktime_get_ns()};

		bpf_map_update_elem(&sm4j_busy, key, &b, BPF_ANY);
		count(SM4J_CTR_SOCKET_BUSY, 1);
		return;
	}
	if (err) {
		/* Another connection's socket holds the key, or the map is full: this one stays on TCP. */
		count(err == -EEXIST ? SM4J_CTR_KEY_TAKEN : SM4J_CTR_REGISTER_FAILED, 1);
		return;
	}
	pair.cookie = bpf_get_socket_cookie(skops);
	pair.leg = leg;
	pair.snd_nxt = skops->snd_nxt;
	pair.rcv_nxt = skops->rcv_nxt;
	if (bpf_map_update_elem(&sm4j_pair, key, &pair, BPF_ANY) != 0) {
		/* Without its proof its peer could not register: off the map again, on TCP. */
		bpf_map_delete_elem(&sm4j_socks, key);
		share_give(&pair.share);
		count(SM4J_CTR_REGISTER_FAILED, 1);
		return;
	}
	st->share_id = pair.share.id;
	st->share_kind = pair.share.kind;
	st->leg = leg;
	count(SM4J_CTR_SOCKETS_REGISTERED, 1);
	if (leg)
		count(SM4J_CTR_LEG_APP_PROXY_SOCKETS + leg - 1, 1);
#ifndef SM4J_NO_DRAIN
	{
		struct sm4j_rxsock none = {}, *rs;

		if (bpf_map_update_elem(&sm4j_rxsock, key, &none, BPF_ANY) == 0) {
			rs = bpf_map_lookup_elem(&sm4j_rxsock, key);
			if (rs)
				rs->tp = tp;
		}
	}
#endif
	bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_STATE_CB_FLAG);
}

/* Whether a server at {ip} may be on this node (loopback always is): sm4j_local has a prefix of it. */
static __always_inline int server_may_be_local(const __u32 ip[4])
{
	struct sm4j_local_key lk = {};

	if (is_loopback(ip))
		return 1;
	lk.prefixlen = 128;
	__builtin_memcpy(lk.addr, ip, 16);
	return bpf_map_lookup_elem(&sm4j_local, &lk) != NULL;
}

/*
 * Whether the client of an accepted socket keyed {key} registered, and is this socket's own
 * client: 1 when so, 0 when no socket holds the client's key, -1 when one does that is not the
 * other end of this connection (its sequence numbers are another handshake's). A client registers
 * in its ACTIVE_ESTABLISHED callback, which runs before its handshake's last ACK is sent, and the
 * server's PASSIVE_ESTABLISHED runs on that ACK: on one host the client's entry is there by then,
 * or never will be (a client off the fast path, on another node, or registered under a Service
 * VIP).
 */
static __always_inline int client_of(struct bpf_sock_ops *skops, const struct sm4j_sock_key *key, __u32 *leg)
{
	struct sm4j_sock_key peer = {};
	struct sm4j_pair *p;

	reverse_key(&peer, key);
	p = bpf_map_lookup_elem(&sm4j_pair, &peer);
	if (!p)
		return 0;
	if (p->snd_nxt != skops->rcv_nxt || p->rcv_nxt != skops->snd_nxt)
		return -1;
	*leg = p->leg;
	return 1;
}

SEC("sockops")
int sm4j_sockops(struct bpf_sock_ops *skops)
{
	struct sm4j_sock_key key = {};
	const struct sm4j_policy mesh_policy = {}; /* a mesh leg's: the default bound */
	const struct sm4j_policy *policy;
	__u32 op = skops->op;
	__u32 leg = 0;
	int ok;

	if (op == BPF_SOCK_OPS_TCP_CONNECT_CB) {
		/*
		 * A translated socket is told of its close from its SYN on: its sm4j_svcsock entry goes
		 * then, also when the connect fails (refused, timed out) and it never is established.
		 */
		__u64 cookie = bpf_get_socket_cookie(skops);

		if (bpf_map_lookup_elem(&sm4j_svcsock, &cookie))
			bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_STATE_CB_FLAG);
		return 1;
	}
	if (op != BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB &&
	    op != BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB &&
	    op != BPF_SOCK_OPS_STATE_CB)
		return 1;

	LOAD_ADDRS(skops, &key, ok);
	if (!ok)
		return 1;
	key.local_port = skops->local_port;
	/* remote_port is network order; bpf_ntohl gives the port (docs/kernel.md, "Byte order of ports"). */
	key.remote_port = bpf_ntohl(skops->remote_port);

	if (op == BPF_SOCK_OPS_STATE_CB) {
		__u32 state = skops->args[1];

		/* A mesh leg's socket sends its FIN (or closes without one): its TCP bytes are counted. */
		if (state == BPF_TCP_FIN_WAIT1 || state == BPF_TCP_LAST_ACK || state == BPF_TCP_CLOSE)
			mesh_leg_close(skops);
		/*
		 * A registered or translated socket closed: its read slot entry and the Service it
		 * dialed go, even if its process died.
		 */
		if (state == BPF_TCP_CLOSE) {
			svc_forget(skops, key.local_ip, key.local_port, key.remote_ip, key.remote_port);
			forget_socket(skops, &key);
		}
		return 1;
	}

	/* The server is the remote end for a connect(), the local end for an accept(). */
	if (op == BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB) {
		svc_remember_end(skops, key.local_ip, key.local_port, key.remote_ip, key.remote_port);
		policy = policy_of(key.remote_ip, key.remote_port);
		/*
		 * A leg of a meshed pod's request (lib/mesh.h) registers whatever the ports' policy:
		 * the agent was asked to accelerate the pod.
		 */
		leg = mesh_leg(skops, &key);
		if (!policy && leg)
			policy = &mesh_policy;
		/*
		 * A server on another node never registers here: the client's sends would only miss.
		 * Said once, at the connect, by the prefixes an agent keeps (every address unless told).
		 */
		if (policy && !server_may_be_local(key.remote_ip)) {
			count(SM4J_CTR_PEER_NOT_LOCAL, 1);
			return 1;
		}
		/*
		 * This socket's server registers after it, at its own ESTABLISHED callback: a socket
		 * that holds the server's key now is another connection's (a tuple rebuilt in another
		 * namespace), and this socket's sends would be redirected to it.
		 */
		if (policy) {
			struct sm4j_sock_key server = {};

			KEY_SET_NETNS(skops, &key);
			reverse_key(&server, &key);
			if (bpf_map_lookup_elem(&sm4j_pair, &server)) {
				count(SM4J_CTR_KEY_TAKEN, 1);
				return 1;
			}
		}
	} else {
		int client;

		/*
		 * An accepted socket whose client did not register would only ever miss: every send
		 * would run the verdict and go by TCP through tcp_bpf's send path, slower than TCP's
		 * own. It stays off the map and costs nothing. One whose client's key another
		 * connection's socket holds would be sent that socket's bytes: it stays off too. The
		 * server of a mesh leg registers as its client did (its leg is in the client's pair).
		 */
		policy = policy_of(key.local_ip, key.local_port);
		KEY_SET_NETNS(skops, &key);
		client = client_of(skops, &key, &leg);
		if (!policy && client > 0 && leg)
			policy = &mesh_policy;
		if (policy && client <= 0) {
			count(client ? SM4J_CTR_KEY_TAKEN : SM4J_CTR_CLIENT_UNREGISTERED, 1);
			return 1;
		}
	}
	if (policy)
		register_socket(skops, &key, policy, leg);
	return 1;
}

/*
 * Brings the sender's TCP count up to date (every byte queued to TCP so far, verdict or not)
 * and returns write_seq before this message; *sent is all it has sent, redirected or by TCP.
 */
static __always_inline __u32 count_sent(struct sm4j_sock_state *st, struct tcp_sock *tp, __u64 *sent)
{
	__u32 seq = tp->write_seq;

	st->tcp += (__u32)(seq - st->last_seq);
	st->last_seq = seq;
	*sent = st->redirected + st->tcp;
	return seq;
}

/* The peer's key for a message of this socket: the socket's own key, reversed. */
static __always_inline int peer_key(struct sk_msg_md *msg, struct sm4j_sock_key *peer)
{
	struct sm4j_sock_key mine = {};
	int ok;

	LOAD_ADDRS(msg, &mine, ok);
	if (!ok)
		return 0;
	mine.local_port = msg->local_port;
	mine.remote_port = bpf_ntohl(msg->remote_port);
	KEY_SET_NETNS(msg, &mine);
	reverse_key(peer, &mine);
	return 1;
}

/*
 * The order and bound rules for a sender with a bound (docs/in-flight-bound.md): whether this
 * message of {size} bytes may be redirected. A receiver that has read all that was sent keeps
 * up and gets twice the room, as TCP's autotuning would give it; a sender on TCP comes back only
 * once its receiver has read everything (a redirect would overtake bytes sent by TCP); past the
 * bound it goes by TCP.
 */
static __always_inline int may_redirect(struct sm4j_sock_state *st, const struct sm4j_sock_key *peer,
					struct sm4j_receiver *r, __u32 seq, __u64 sent, __u32 size)
{
	int on_tcp = st->flags & SM4J_SOCK_TCP;

	if (r->w && r->known && on_tcp && (r->read == sent || peer_drained(peer, seq))) {
		/* Its application read every byte queued to TCP (seq is write_seq before this
		 * message), and so every byte redirected before them. */
		r->read = sent;
		r->w->read = sent;
		r->bound = grow_bound(r->w, r->bound);
	} else if (r->w && r->known && r->read == sent && sent) {
		r->bound = grow_bound(r->w, r->bound);
	}
	if (on_tcp) {
		if (!r->known || r->read != sent)
			return 0;
		st->flags &= ~SM4J_SOCK_TCP;
		count(SM4J_CTR_RESUMED, 1);
	}
	if (r->known && sent - r->read + size > r->bound) {
		st->flags |= SM4J_SOCK_TCP;
		count(SM4J_CTR_BOUND_HIT, 1);
		return 0;
	}
	return 1;
}

SEC("sk_msg")
int sm4j_redirect(struct sk_msg_md *msg)
{
	struct sm4j_sock_key peer = {};
	struct sm4j_receiver r = {};
	struct sm4j_sock_state *st;
	struct tcp_sock *tp;
	struct bpf_sock *sk;
	__u32 size = msg->size;
	__u64 sent;
	__u32 seq;

	sk = msg->sk;
	if (!sk)
		goto pass;
	st = bpf_sk_storage_get(&sm4j_sockstate, sk, 0, 0);
	tp = bpf_skc_to_tcp_sock(sk);
	if (!st || !tp)
		goto pass; /* registered sockets always have both */
	seq = count_sent(st, tp, &sent);
	if (!peer_key(msg, &peer))
		goto pass;
	if (st->policy_bound == SM4J_UNBOUNDED) {
		/* No bound: only the order rule remains, a socket that went by TCP stays there. */
		if (st->flags & SM4J_SOCK_TCP)
			goto pass;
	} else {
		receiver_of(st, &peer, seq, sent, size, &r);
		if (!may_redirect(st, &peer, &r, seq, sent, size))
			goto pass;
	}
	/*
	 * bpf_msg_redirect_hash returns SK_DROP when the peer is not in the map;
	 * returning that would drop the application's data (docs/kernel.md, "Miss is drop").
	 */
	if (bpf_msg_redirect_hash(msg, &sm4j_socks, &peer, BPF_F_INGRESS) == SK_PASS) {
		st->redirected += size;
		if (r.w)
			r.w->sent = sent + size;
		count(SM4J_CTR_MSGS_REDIRECTED, 1);
		count(SM4J_CTR_BYTES_REDIRECTED, size);
		if (st->leg)
			count(SM4J_CTR_LEG_APP_PROXY_REDIRECTED + st->leg - 1, size);
		return SK_PASS;
	}
	/* The peer is not registered: TCP until it has read what this message leaves unread. */
	st->flags |= SM4J_SOCK_TCP;
	count(SM4J_CTR_SOCKETS_TAINTED, 1);
pass:
	/*
	 * What the sender had queued before this message: the watcher's estimate is taken against
	 * it. Not this message too: until the push below has queued it, it is in neither socket's
	 * memory that sock_diag reports, and an estimate counting it would take it for read.
	 */
	if (r.w)
		r.w->sent = sent;
	count(SM4J_CTR_MSGS_PASSED, 1);
	count(SM4J_CTR_BYTES_PASSED, size);
	return SK_PASS;
}

/*
 * Where a TCP connect to {k} goes, decided before the SYN so that both ends register with the
 * same key: in a meshed pod, an application's to its proxy (lib/mesh.h); to a Service VIP, the
 * endpoint picked (docs/services.md); from a meshed pod's proxy to another meshed pod, that pod's
 * inbound port. Returns 0 to leave the connect alone, else sets {to} and {to_port}.
 */
static __always_inline int connect_to(struct bpf_sock_addr *ctx, struct sm4j_svc_key *k, __u32 to[4], __u32 *to_port)
{
	const struct sm4j_endpoint *ep;
	struct sm4j_mesh *m;
	__u32 port;

	svc_key_scope(ctx, k);
	m = mesh_here(ctx);
	if (m && sock_uid(ctx) != m->proxy_uid) {
		if (!in_proxy_group(m) && mesh_outbound(ctx, m, k, to)) {
			*to_port = m->out_port;
			return 1;
		}
		m = 0;
	}
	ep = svc_pick(ctx, k);
	if (ep && is_v4_mapped(ep->addr) != is_v4_mapped(k->addr))
		ep = 0;
	if (m) {
		port = ep ? mesh_inbound(ctx, k, ep->addr, ep->port) : mesh_inbound(ctx, k, k->addr, k->port);
		if (port) {
			__builtin_memcpy(to, ep ? ep->addr : k->addr, 16);
			*to_port = port;
			if (ep)
				count(SM4J_CTR_SVC_TRANSLATED, 1);
			return 1;
		}
	}
	if (!ep || !svc_remember(ctx, k, ep))
		return 0;
	__builtin_memcpy(to, ep->addr, 16);
	*to_port = ep->port;
	count(SM4J_CTR_SVC_TRANSLATED, 1);
	return 1;
}

SEC("cgroup/connect4")
int sm4j_connect4(struct bpf_sock_addr *ctx)
{
	struct sm4j_svc_key k = {};
	__u32 to[4] = {}, port = 0;

	if (ctx->type != SOCK_STREAM)
		return 1;
	map_v4(k.addr, ctx->user_ip4);
	k.port = bpf_ntohs((__u16)ctx->user_port);
	if (!connect_to(ctx, &k, to, &port))
		return 1;
	ctx->user_ip4 = to[3];
	ctx->user_port = bpf_htons((__u16)port);
	return 1;
}

/* The same for an IPv6 socket: an IPv4 VIP arrives v4-mapped (Java's default, dual-stack sockets). */
SEC("cgroup/connect6")
int sm4j_connect6(struct bpf_sock_addr *ctx)
{
	struct sm4j_svc_key k = {};
	__u32 to[4] = {}, port = 0;

	if (ctx->type != SOCK_STREAM)
		return 1;
	k.addr[0] = ctx_u32(ctx, user_ip6[0]);
	k.addr[1] = ctx_u32(ctx, user_ip6[1]);
	k.addr[2] = ctx_u32(ctx, user_ip6[2]);
	k.addr[3] = ctx_u32(ctx, user_ip6[3]);
	k.port = bpf_ntohs((__u16)ctx->user_port);
	if (!connect_to(ctx, &k, to, &port))
		return 1;
	ctx->user_ip6[0] = to[0];
	ctx->user_ip6[1] = to[1];
	ctx->user_ip6[2] = to[2];
	ctx->user_ip6[3] = to[3];
	ctx->user_port = bpf_htons((__u16)port);
	return 1;
}

/* A translated socket's peer, as its application sees it: the Service it dialed. */
SEC("cgroup/getpeername4")
int sm4j_getpeername4(struct bpf_sock_addr *ctx)
{
	__u64 cookie = bpf_get_socket_cookie(ctx);
	struct sm4j_svc_sock *v = bpf_map_lookup_elem(&sm4j_svcsock, &cookie);

	if (v && is_v4_mapped(v->addr)) {
		ctx->user_ip4 = v->addr[3];
		ctx->user_port = bpf_htons((__u16)v->port);
	}
	return 1;
}

SEC("cgroup/getpeername6")
int sm4j_getpeername6(struct bpf_sock_addr *ctx)
{
	__u64 cookie = bpf_get_socket_cookie(ctx);
	struct sm4j_svc_sock *v = bpf_map_lookup_elem(&sm4j_svcsock, &cookie);

	if (v) {
		ctx->user_ip6[0] = v->addr[0];
		ctx->user_ip6[1] = v->addr[1];
		ctx->user_ip6[2] = v->addr[2];
		ctx->user_ip6[3] = v->addr[3];
		ctx->user_port = bpf_htons((__u16)v->port);
	}
	return 1;
}

/*
 * Whether an SO_ORIGINAL_DST answer the kernel gave ({ctx}'s buffer at SOL_IP or SOL_IPV6) is
 * {addr}:{port}; 0 also where the buffer is too short for one.
 */
static __always_inline int answer_is(struct bpf_sockopt *ctx, const __u32 addr[4], __u32 port)
{
	if (ctx->level == SOL_IP) {
		struct sockaddr_in *sin = ctx->optval;

		if ((void *)(sin + 1) > ctx->optval_end || !is_v4_mapped(addr))
			return 0;
		return sin->sin_addr.s_addr == addr[3] && bpf_ntohs(sin->sin_port) == port;
	} else {
		struct sockaddr_in6 *sin6 = ctx->optval;

		if ((void *)(sin6 + 1) > ctx->optval_end)
			return 0;
		return sin6->sin6_addr.in6_u.u6_addr32[0] == addr[0] && sin6->sin6_addr.in6_u.u6_addr32[1] == addr[1]
		       && sin6->sin6_addr.in6_u.u6_addr32[2] == addr[2] && sin6->sin6_addr.in6_u.u6_addr32[3] == addr[3]
		       && bpf_ntohs(sin6->sin6_port) == port;
	}
}

/* Makes {addr}:{port} the answer (the whole sockaddr of the level's family); 0 where it does not fit. */
static __always_inline int answer_with(struct bpf_sockopt *ctx, const __u32 addr[4], __u32 port)
{
	if (ctx->level == SOL_IP) {
		struct sockaddr_in *sin = ctx->optval;

		if ((void *)(sin + 1) > ctx->optval_end || !is_v4_mapped(addr))
			return 0;
		__builtin_memset(sin, 0, sizeof(*sin));
		sin->sin_family = AF_INET;
		sin->sin_addr.s_addr = addr[3];
		sin->sin_port = bpf_htons((__u16)port);
		ctx->optlen = sizeof(*sin);
	} else {
		struct sockaddr_in6 *sin6 = ctx->optval;

		if ((void *)(sin6 + 1) > ctx->optval_end)
			return 0;
		__builtin_memset(sin6, 0, sizeof(*sin6));
		sin6->sin6_family = AF_INET6;
		sin6->sin6_addr.in6_u.u6_addr32[0] = addr[0];
		sin6->sin6_addr.in6_u.u6_addr32[1] = addr[1];
		sin6->sin6_addr.in6_u.u6_addr32[2] = addr[2];
		sin6->sin6_addr.in6_u.u6_addr32[3] = addr[3];
		sin6->sin6_port = bpf_htons((__u16)port);
		ctx->optlen = sizeof(*sin6);
	}
	return 1;
}

/*
 * SO_ORIGINAL_DST of a socket a proxy accepted (a service mesh's sidecar), where the connect of
 * its client was decided by a connect program (its entry in sm4j_svcorig by the client's end, or
 * in sm4j_meshorig by the connection):
 * - a Service translated at connect, accepted through the pod's NAT rule: the Service the client
 *   dialed, only where the kernel's answer is the endpoint the connect went to (docs/services.md,
 *   "A service mesh");
 * - an application's connect sent to its pod's proxy (same namespace), or a proxy's sent to
 *   this meshed pod's inbound port (by the connection's addresses, inbound port and both ends'
 *   first sequence numbers, asked in the namespace the agent filed for this address: a client
 *   port the pod's NAT renumbered is counted): the destination the pod's NAT would have kept,
 *   only on the socket accepted where that connect went, and only where no NAT rule moved it
 *   (the kernel answers with the socket's own end, or has no answer).
 * Any other answer and every other option stand.
 */
SEC("cgroup/getsockopt")
int sm4j_getsockopt(struct bpf_sockopt *ctx)
{
	struct sm4j_svc_orig_key k = {};
	struct sm4j_svc_orig *o;
	struct sm4j_svc_sock *v;
	struct bpf_sock *sk = ctx->sk;
	__u32 peer[4], local[4];
	__u32 family, local_port;
	int renumbered = 0;
	__u64 netns;
	__u16 port;

	if (ctx->optname != SM4J_SO_ORIGINAL_DST || !sk)
		return 1;
	if (ctx->level != SOL_IP && ctx->level != SOL_IPV6)
		return 1;
	if (ctx->retval != 0 && ctx->retval != -ENOENT)
		return 1;
	/* The accepted socket's peer is the client's end (fields read one load each, as ctx_u32). */
	family = ctx_u32(sk, family);
	if (family == AF_INET) {
		map_v4(peer, ctx_u32(sk, dst_ip4));
		map_v4(local, ctx_u32(sk, src_ip4));
	} else if (family == AF_INET6) {
		peer[0] = ctx_u32(sk, dst_ip6[0]);
		peer[1] = ctx_u32(sk, dst_ip6[1]);
		peer[2] = ctx_u32(sk, dst_ip6[2]);
		peer[3] = ctx_u32(sk, dst_ip6[3]);
		local[0] = ctx_u32(sk, src_ip6[0]);
		local[1] = ctx_u32(sk, src_ip6[1]);
		local[2] = ctx_u32(sk, src_ip6[2]);
		local[3] = ctx_u32(sk, src_ip6[3]);
	} else {
		return 1;
	}
	port = sk->dst_port;
	asm volatile("" : "+r"(port));
	local_port = ctx_u32(sk, src_port);
	netns = bpf_get_netns_cookie(ctx);
	svc_orig_key(&k, netns, peer, bpf_ntohs(port));
	o = bpf_map_lookup_elem(&sm4j_svcorig, &k);
	if (!o) {
		struct sm4j_mesh_orig_key mk = {};
		struct sm4j_mesh_addr *here;
		struct bpf_tcp_sock *tp;

		/*
		 * A proxy's connect to this meshed pod, asked in the pod's namespace: filed by its
		 * connection (struct sm4j_mesh_orig_key), whatever port the pod's NAT gave the client.
		 */
		here = mesh_pod_at(local);
		if (!here || here->netns != netns)
			return 1;
		tp = bpf_tcp_sock(sk);
		if (!tp)
			return 1;
		mesh_orig_key(&mk, peer, local, local_port, tp->rcv_nxt - (__u32)tp->bytes_received,
			      tp->snd_una - (__u32)tp->bytes_acked);
		o = bpf_map_lookup_elem(&sm4j_meshorig, &mk);
		if (!o || o->svc.kind != SM4J_ORIG_MESH_IN)
			return 1;
		renumbered = o->client_port != bpf_ntohs(port);
	}
	v = &o->svc;
	if (v->kind == SM4J_ORIG_SERVICE) {
		if (ctx->retval != 0 || !answer_is(ctx, v->ep_addr, v->ep_port) || !answer_with(ctx, v->addr, v->port))
			return 1;
		count(SM4J_CTR_SVC_ORIGDST, 1);
		return 1;
	}
	if (local_port != v->ep_port || local[0] != v->ep_addr[0] || local[1] != v->ep_addr[1]
	    || local[2] != v->ep_addr[2] || local[3] != v->ep_addr[3])
		return 1;
	if (ctx->retval == 0 && !answer_is(ctx, v->ep_addr, v->ep_port))
		return 1;
	if (!answer_with(ctx, v->orig_addr, v->orig_port))
		return 1;
	ctx->retval = 0;
	count(SM4J_CTR_MESH_ORIGDST, 1);
	if (renumbered)
		count(SM4J_CTR_MESH_RENUMBERED, 1);
	return 1;
}
