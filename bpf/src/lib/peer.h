/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What a sender knows of its receiver (docs/in-flight-bound.md): what the receiver published
 * (struct sm4j_slot), or, for one that publishes nothing, a watcher's estimate (struct
 * sm4j_watch) made exact where the kernel lets a sk_msg program read the receiver's own socket.
 */
#ifndef SM4J_LIB_PEER_H
#define SM4J_LIB_PEER_H

static __always_inline void count(__u32 idx, __u64 n)
{
	__u64 *c = bpf_map_lookup_elem(&sm4j_counters, &idx);

	if (c)
		*c += n;
}

#ifndef SM4J_NO_DRAIN
/* The kernel's psock of a socket in a sockmap: sock___sm4j's sk_user_data (lib/maps.h). */
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
	__u32 ceiling = sm4j_cfg.watch_ceiling;

	if (READ_ONCE(w->flags) & SM4J_WATCH_FIXED)
		return bound;
	if (bound < ceiling) {
		bound = bound > ceiling / 2 ? ceiling : bound * 2;
		w->bound = bound;
	}
	return bound;
}

/*
 * Tells the watchers there is something new to look at (a watch entry made, or one set WANTED):
 * slot 0's wake counter, which they read from the shared mapping and walk sm4j_watch only when
 * it moved (or an entry of theirs is due). A walk of the hash map costs its whole bucket array.
 */
static __always_inline void wake_watchers(void)
{
	__u32 zero = 0;
	struct sm4j_slot *s = bpf_map_lookup_elem(&sm4j_slots, &zero);

	if (s)
		__sync_fetch_and_add(&s->wake, 1);
}

/*
 * What a sender sees of its receiver {peer}: its read count and bound, and whether they are
 * known. A receiver that publishes nothing gets a watch entry on the first send (with the first
 * bound: the policy's, or tcp_rmem's default); the exact count, where there is one, moves the
 * watcher's read on. Asks the watcher to poll often when the sender is held on TCP or near
 * the bound.
 */
struct sm4j_receiver {
	struct sm4j_watch *w; /* the watch entry, for a receiver that publishes nothing */
	__u64 read;
	__u32 bound;
	int known;
};

static __always_inline void receiver_of(struct sm4j_sock_state *st, const struct sm4j_sock_key *peer,
					__u32 seq, __u64 sent, __u32 size, struct sm4j_receiver *r)
{
	struct sm4j_watch *w;
	__u64 unread;

	r->known = peer_published(st, peer, &r->read, &r->bound);
	if (r->known)
		return;
	w = bpf_map_lookup_elem(&sm4j_watch, peer);
	if (!w) {
		struct sm4j_watch init = {};

		init.bound = st->policy_bound ? st->policy_bound : sm4j_cfg.watch_bound;
		init.flags = st->policy_bound ? SM4J_WATCH_FIXED : 0;
		if (bpf_map_update_elem(&sm4j_watch, peer, &init, BPF_NOEXIST) == 0)
			wake_watchers();
		w = bpf_map_lookup_elem(&sm4j_watch, peer);
	}
	r->w = w;
	if (!w)
		return;
	r->read = READ_ONCE(w->read);
	r->bound = READ_ONCE(w->bound);
	r->known = r->bound != 0;
	/*
	 * Exact where the kernel allows: no estimate's lag then holds a sender back. The larger of
	 * the two counts stands: the exact one can lag behind the reads too (measured: taken alone,
	 * it sent a credit-holding Java writer's stream 62% by TCP), and the watcher's never runs
	 * ahead of them (it measures the sender's queue before the receiver's).
	 */
	if (peer_unread(peer, seq, &unread) && unread <= sent) {
		/* Counted here at every send: a watcher need only look while the sender waits (WANTED). */
		if (!(w->flags & SM4J_WATCH_EXACT))
			w->flags |= SM4J_WATCH_EXACT;
		if (sent - unread > r->read) {
			r->read = sent - unread;
			w->read = r->read;
		}
	}
	if (((st->flags & SM4J_SOCK_TCP) || sent - r->read + size > r->bound / 2) && !(w->flags & SM4J_WATCH_WANTED)) {
		w->flags |= SM4J_WATCH_WANTED;
		wake_watchers();
	}
}

#endif /* SM4J_LIB_PEER_H */
