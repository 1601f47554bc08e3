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

char LICENSE[] SEC("license") = "GPL";

/* The fields of the kernel's tcp_sock we read, relocated by libbpf (CO-RE) at load. */
struct tcp_sock {
	__u32 write_seq;  /* the next byte the application queues to TCP */
	__u32 copied_seq; /* the next byte the application reads */
} __attribute__((preserve_access_index));

/* One load of a value another CPU (or a user-space store through mmap) may change. */
#define READ_ONCE(x) (*(const volatile typeof(x) *)&(x))

/* Sized by the loader (bpf_map__set_max_entries) before load. */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, 65535);
	__type(key, struct sm4j_sock_key);
	__type(value, __u64);
} sm4j_socks SEC(".maps");

/* Entries use memory only when added (BPF_F_NO_PREALLOC): room for a node's every service. */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sm4j_policy_key);
	__type(value, struct sm4j_policy);
} sm4j_policy SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SM4J_CTR_MAX);
	__type(key, __u32);
	__type(value, __u64);
} sm4j_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sm4j_sock_state);
} sm4j_sockstate SEC(".maps");

/* Receiving socket key -> its slot in sm4j_slots. Sized by the loader like sm4j_socks. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65535);
	__type(key, struct sm4j_sock_key);
	__type(value, struct sm4j_rx);
} sm4j_rx SEC(".maps");

/* Read counters published by receivers with plain stores (mmap). Sized by the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65535);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct sm4j_slot);
} sm4j_slots SEC(".maps");

/* Receivers that publish nothing, by socket key: see struct sm4j_watch. Sized by the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65535);
	__type(key, struct sm4j_sock_key);
	__type(value, struct sm4j_watch);
} sm4j_watch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sm4j_config);
} sm4j_config SEC(".maps");

#ifndef SM4J_NO_DRAIN
/*
 * Every registered socket's own tcp_sock, by its key, so that its sender can read how far its
 * application has read (copied_seq). A sk_msg program cannot take a reference on another socket
 * (a SOCKHASH lookup would need bpf_sk_release, which it may not call), so the pointer is kept
 * untrusted: reads through it are checked loads, and the entry goes when the socket closes. A
 * kernel without untrusted kptrs (before 6.3) refuses this object; the loader then loads the
 * one built with SM4J_NO_DRAIN, where only a watcher's estimate resumes a sender.
 */
struct sm4j_rxsock {
	struct tcp_sock __attribute__((btf_type_tag("kptr_untrusted"))) *tp;
};

/* Not pinned: the programs hold it. Sized by the loader like sm4j_socks. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65535);
	__type(key, struct sm4j_sock_key);
	__type(value, struct sm4j_rxsock);
} sm4j_rxsock SEC(".maps");

/* The kernel's psock of a socket in a sockmap (sk_user_data, tagged in its low bits). */
struct sock___sm4j {
	void *sk_user_data;
} __attribute__((preserve_access_index));

struct sk_psock___sm4j {
	__u32 msg_tot_len; /* bytes in the psock's ingress queue: redirected, not yet read */
} __attribute__((preserve_access_index));

extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;

/*
 * What the receiving socket {peer} has not read of what this sender sent, exactly: the TCP bytes
 * queued up to write_seq beyond its copied_seq, and the redirected bytes still in its psock's
 * ingress queue (msg_tot_len). 0 when the kernel lacks what it takes (msg_tot_len, or
 * bpf_rdonly_cast): the watcher's estimate then stands alone.
 */
static __always_inline int peer_unread(const struct sm4j_sock_key *peer, __u32 write_seq, __u64 *unread)
{
	struct sm4j_rxsock *rs = bpf_map_lookup_elem(&sm4j_rxsock, peer);
	struct sk_psock___sm4j *psock;
	struct tcp_sock *ptp;
	unsigned long ud;

	if (!rs || !&bpf_rdonly_cast || !bpf_core_field_exists(((struct sk_psock___sm4j *)0)->msg_tot_len))
		return 0;
	ptp = rs->tp;
	if (!ptp)
		return 0;
	ud = (unsigned long)((struct sock___sm4j *)ptp)->sk_user_data;
	if (!ud)
		return 0;
	psock = bpf_rdonly_cast((void *)(ud & ~7UL), bpf_core_type_id_kernel(struct sk_psock___sm4j));
	*unread = (__u32)(write_seq - ptp->copied_seq) + (__u64)psock->msg_tot_len;
	return 1;
}

/* Whether the application of the receiving socket {peer} has read up to write_seq. */
static __always_inline int peer_drained(const struct sm4j_sock_key *peer, __u32 write_seq)
{
	struct sm4j_rxsock *rs = bpf_map_lookup_elem(&sm4j_rxsock, peer);
	struct tcp_sock *ptp;

	if (!rs)
		return 0;
	ptp = rs->tp;
	if (!ptp)
		return 0;
	return ptp->copied_seq == write_seq;
}
#else
static __always_inline int peer_drained(const struct sm4j_sock_key *peer, __u32 write_seq)
{
	return 0;
}

static __always_inline int peer_unread(const struct sm4j_sock_key *peer, __u32 write_seq, __u64 *unread)
{
	return 0;
}
#endif

/* Written once by the loader: SM4J_ABI_VERSION of the program set pinned here. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} sm4j_meta SEC(".maps");

static __always_inline void count(__u32 idx, __u64 n)
{
	__u64 *c = bpf_map_lookup_elem(&sm4j_counters, &idx);

	if (c)
		*c += n;
}

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

SEC("sockops")
int sm4j_sockops(struct bpf_sock_ops *skops)
{
	struct sm4j_sock_key key = {};
	struct sm4j_policy *policy;
	__u32 op = skops->op;
	int ok;

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
		/* A registered socket closed: its read slot entry goes, even if its process died. */
		if (skops->args[1] != BPF_TCP_CLOSE)
			return 1;
		if (is_loopback(key.local_ip) || is_loopback(key.remote_ip))
			key.netns = bpf_get_netns_cookie(skops);
		bpf_map_delete_elem(&sm4j_rx, &key);
		bpf_map_delete_elem(&sm4j_watch, &key);
#ifndef SM4J_NO_DRAIN
		bpf_map_delete_elem(&sm4j_rxsock, &key);
#endif
		/* Its verdict may have made an entry for its peer, which may never be registered. */
		{
			struct sm4j_sock_key peer = {};

			__builtin_memcpy(peer.local_ip, key.remote_ip, 16);
			__builtin_memcpy(peer.remote_ip, key.local_ip, 16);
			peer.local_port = key.remote_port;
			peer.remote_port = key.local_port;
			peer.netns = key.netns;
			bpf_map_delete_elem(&sm4j_watch, &peer);
		}
		return 1;
	}

	/* The server is the remote end for a connect(), the local end for an accept(). */
	if (op == BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB)
		policy = policy_of(key.remote_ip, key.remote_port);
	else
		policy = policy_of(key.local_ip, key.local_port);
	if (!policy)
		return 1;

	if (is_loopback(key.local_ip) || is_loopback(key.remote_ip))
		key.netns = bpf_get_netns_cookie(skops);

	/* The sender state exists before the socket can send: a socket without it is not registered. */
	{
		struct bpf_sock *sk = skops->sk;
		struct sm4j_sock_state *st;
		struct tcp_sock *tp;

		if (!sk)
			return 1;
		tp = bpf_skc_to_tcp_sock(sk);
		st = bpf_sk_storage_get(&sm4j_sockstate, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
		if (!tp || !st) {
			count(SM4J_CTR_REGISTER_FAILED, 1);
			return 1;
		}
		st->last_seq = tp->write_seq;
		st->policy_bound = policy->bound;
	}

	if (bpf_sock_hash_update(skops, &sm4j_socks, &key, BPF_ANY) == 0) {
		count(SM4J_CTR_SOCKETS_REGISTERED, 1);
#ifndef SM4J_NO_DRAIN
		{
			struct sm4j_rxsock none = {}, *rs;
			struct bpf_sock *sk = skops->sk;
			struct tcp_sock *tp = sk ? bpf_skc_to_tcp_sock(sk) : 0;

			if (tp && bpf_map_update_elem(&sm4j_rxsock, &key, &none, BPF_ANY) == 0) {
				rs = bpf_map_lookup_elem(&sm4j_rxsock, &key);
				if (rs)
					rs->tp = tp;
			}
		}
#endif
		bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_STATE_CB_FLAG);
	} else {
		count(SM4J_CTR_REGISTER_FAILED, 1); /* full map: this connection stays on TCP */
	}
	return 1;
}

/*
 * What the receiver of a connection published: its read count and bound. The slot found through
 * sm4j_rx is remembered in the sender's state, so that later messages read it without a hash
 * lookup; the slot's cookie tells when it no longer belongs to that receiver.
 */
static __always_inline int peer_published(struct sm4j_sock_state *st, const struct sm4j_sock_key *peer,
					  __u64 *read, __u32 *bound)
{
	struct sm4j_slot *slot;
	struct sm4j_rx *rx;
	__u64 cookie;
	__u32 idx;

	cookie = st->peer_cookie;
	if (cookie) {
		idx = st->peer_slot;
		slot = bpf_map_lookup_elem(&sm4j_slots, &idx);
		if (slot && READ_ONCE(slot->cookie) == cookie) {
			*read = READ_ONCE(slot->read);
			*bound = READ_ONCE(slot->bound);
			return 1;
		}
		st->peer_cookie = 0;
	}
	rx = bpf_map_lookup_elem(&sm4j_rx, peer);
	if (!rx)
		return 0;
	idx = rx->slot;
	cookie = rx->cookie;
	slot = bpf_map_lookup_elem(&sm4j_slots, &idx);
	/* A slot released and claimed again since the entry was made belongs to another socket. */
	if (!slot || slot->cookie != cookie)
		return 0;
	st->peer_slot = idx;
	st->peer_cookie = cookie;
	*read = READ_ONCE(slot->read);
	*bound = READ_ONCE(slot->bound);
	return 1;
}

/*
 * A receiver that publishes nothing has shown that it keeps up: twice the room, up to the ceiling
 * (tcp_rmem's maximum), as TCP's autotuning would give its receive buffer. A bound the policy set
 * stays.
 */
static __always_inline __u32 grow_bound(struct sm4j_watch *w, __u32 bound)
{
	struct sm4j_config *cfg;
	__u32 zero = 0;

	if (READ_ONCE(w->flags) & SM4J_WATCH_FIXED)
		return bound;
	cfg = bpf_map_lookup_elem(&sm4j_config, &zero);
	if (cfg && bound < cfg->watch_ceiling) {
		bound = bound > cfg->watch_ceiling / 2 ? cfg->watch_ceiling : bound * 2;
		w->bound = bound;
	}
	return bound;
}

SEC("sk_msg")
int sm4j_redirect(struct sk_msg_md *msg)
{
	struct sm4j_sock_key peer = {};
	struct sm4j_watch *w = NULL;
	struct sm4j_sock_state *st;
	struct tcp_sock *tp;
	struct bpf_sock *sk;
	__u64 read = 0, sent;
	__u32 bound = 0, seq;
	__u32 size = msg->size;
	int known, ok;

	sk = msg->sk;
	if (!sk)
		goto pass;
	st = bpf_sk_storage_get(&sm4j_sockstate, sk, 0, 0);
	tp = bpf_skc_to_tcp_sock(sk);
	if (!st || !tp)
		goto pass; /* registered sockets always have both */

	/* Bring the TCP count up to date: every byte queued to TCP so far, verdict or not. */
	seq = tp->write_seq;
	st->tcp += (__u32)(seq - st->last_seq);
	st->last_seq = seq;
	sent = st->redirected + st->tcp;

	/* The peer's own key: its local side is our remote side. */
	{
		struct sm4j_sock_key mine = {};

		LOAD_ADDRS(msg, &mine, ok);
		if (!ok)
			goto pass;
		__builtin_memcpy(peer.local_ip, mine.remote_ip, 16);
		__builtin_memcpy(peer.remote_ip, mine.local_ip, 16);
	}
	peer.local_port = bpf_ntohl(msg->remote_port);
	peer.remote_port = msg->local_port;
	if (is_loopback(peer.local_ip) || is_loopback(peer.remote_ip))
		peer.netns = bpf_get_netns_cookie(msg);

	if (st->policy_bound == SM4J_UNBOUNDED) {
		/* No bound: only the order rule remains, a socket that went by TCP stays there. */
		if (st->flags & SM4J_SOCK_TCP)
			goto pass;
		goto redirect;
	}

	known = peer_published(st, &peer, &read, &bound);
	if (!known) {
		/* A receiver that publishes nothing: a watcher estimates its reads (struct sm4j_watch). */
		w = bpf_map_lookup_elem(&sm4j_watch, &peer);

		if (!w) {
			struct sm4j_watch init = {};
			struct sm4j_config *cfg;
			__u32 zero = 0;

			cfg = bpf_map_lookup_elem(&sm4j_config, &zero);
			init.bound = st->policy_bound ? st->policy_bound : cfg ? cfg->watch_bound : 0;
			init.flags = st->policy_bound ? SM4J_WATCH_FIXED : 0;
			bpf_map_update_elem(&sm4j_watch, &peer, &init, BPF_NOEXIST);
			w = bpf_map_lookup_elem(&sm4j_watch, &peer);
		}
		if (w) {
			read = READ_ONCE(w->read);
			bound = READ_ONCE(w->bound);
			known = bound != 0;
			{
				__u64 unread;

				/*
				 * Exact where the kernel allows: no estimate's lag then holds a sender back. The
				 * larger of the two counts stands: the exact one can lag behind the reads too
				 * (measured: taken alone, it sent a credit-holding Java writer's stream 62% by
				 * TCP), and the watcher's never runs ahead of them (it measures the sender's
				 * queue before the receiver's).
				 */
				if (peer_unread(&peer, seq, &unread) && unread <= sent && sent - unread > read) {
					read = sent - unread;
					w->read = read;
				}
			}
			if ((st->flags & SM4J_SOCK_TCP) || sent - read + size > bound / 2)
				w->flags |= SM4J_WATCH_WANTED;
		}
	}
	if ((st->flags & SM4J_SOCK_TCP) && w && known && (read == sent || peer_drained(&peer, seq))) {
		/*
		 * The receiver has read all of sent: its application read every byte queued to TCP
		 * (seq is write_seq before this message), and so every byte redirected before them, or
		 * the exact count above says so. It keeps up, so it gets twice the room, as TCP's
		 * autotuning would give it.
		 */
		read = sent;
		w->read = sent;
		bound = grow_bound(w, bound);
	} else if (w && known && read == sent && sent) {
		/* Redirecting, and everything redirected so far was read: it keeps up, as above. */
		bound = grow_bound(w, bound);
	}
	if (st->flags & SM4J_SOCK_TCP) {
		/* Bytes sent by TCP may be unread: a redirect now would overtake them. */
		if (!known || read != sent)
			goto pass;
		st->flags &= ~SM4J_SOCK_TCP;
		count(SM4J_CTR_RESUMED, 1);
	}
	if (known && sent - read + size > bound) {
		st->flags |= SM4J_SOCK_TCP;
		count(SM4J_CTR_BOUND_HIT, 1);
		goto pass;
	}

	/*
	 * bpf_msg_redirect_hash returns SK_DROP when the peer is not in the map;
	 * returning that would drop the application's data (docs/kernel.md, "Miss is drop").
	 */
redirect:
	if (bpf_msg_redirect_hash(msg, &sm4j_socks, &peer, BPF_F_INGRESS) == SK_PASS) {
		st->redirected += size;
		if (w)
			w->sent = sent + size;
		count(SM4J_CTR_MSGS_REDIRECTED, 1);
		count(SM4J_CTR_BYTES_REDIRECTED, size);
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
	if (w)
		w->sent = sent;
	count(SM4J_CTR_MSGS_PASSED, 1);
	count(SM4J_CTR_BYTES_PASSED, size);
	return SK_PASS;
}
