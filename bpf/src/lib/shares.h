/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shares of the SOCKHASH (struct sm4j_share_key in sockmap4j.h): whose share a socket's entry
 * counts in, and the counting. A count may pass share_max by the registrations racing it on other
 * CPUs at that moment, no more.
 */
#ifndef SM4J_LIB_SHARES_H
#define SM4J_LIB_SHARES_H

/* Deeper than the kernel nests user namespaces (32): the walk stops there whatever it meets. */
#define SM4J_USERNS_DEPTH 33

/*
 * The share a connection this socket makes counts in; 0 (none) for root's on the host. Read
 * through the kernel's own objects (CO-RE): the socket's network namespace, its owning user
 * namespace and that one's ancestors up to the outermost below the initial one, and the socket's
 * cgroup. A process makes namespaces at will, never cgroups of its own: whatever it nests, its
 * sockets count as its user's, or as its cgroup's.
 */
static __always_inline int share_of(struct bpf_sock_ops *skops, struct tcp_sock *tp, struct sm4j_share_key *k)
{
	struct sock___sm4j *sk = (struct sock___sm4j *)tp;
	struct net___sm4j *net = sk->__sk_common.skc_net.net;
	struct user_namespace___sm4j *ns = net ? net->user_ns : 0;
	struct cgroup___sm4j *cg;
	int i;

	if (ns && ns->level > 0) {
		for (i = 0; i < SM4J_USERNS_DEPTH && ns && ns->level > 1; i++)
			ns = ns->parent;
		if (ns && ns->owner.val != 0) {
			k->kind = SM4J_SHARE_UID;
			k->id = ns->owner.val;
			return 1;
		}
	}
	if (bpf_get_netns_cookie(skops) != sm4j_cfg.host_netns) {
		cg = sk->sk_cgrp_data.cgroup;
		k->kind = SM4J_SHARE_CGROUP;
		k->id = cg && cg->kn ? cg->kn->id : 0;
		return 1;
	}
	if (sk->sk_uid.val == 0)
		return 0;
	k->kind = SM4J_SHARE_UID;
	k->id = sk->sk_uid.val;
	return 1;
}

/* Counts an entry in share {k}: 0 when the share is full (or the map of shares is). */
static __always_inline int share_take(const struct sm4j_share_key *k)
{
	__u64 one = 1, *n;

	if (!k->kind || !sm4j_cfg.share_max)
		return 1;
	n = bpf_map_lookup_elem(&sm4j_shares, k);
	if (!n) {
		if (bpf_map_update_elem(&sm4j_shares, k, &one, BPF_NOEXIST) == 0)
			return 1;
		n = bpf_map_lookup_elem(&sm4j_shares, k);
		if (!n)
			return 0;
	}
	if (READ_ONCE(*n) >= sm4j_cfg.share_max)
		return 0;
	__sync_fetch_and_add(n, 1);
	return 1;
}

/* An entry of share {k} gone; the share's own entry goes with its last. */
static __always_inline void share_give(const struct sm4j_share_key *k)
{
	__u64 *n;

	if (!k->kind || !sm4j_cfg.share_max)
		return;
	n = bpf_map_lookup_elem(&sm4j_shares, k);
	if (n && __sync_fetch_and_add(n, -1) == 1)
		bpf_map_delete_elem(&sm4j_shares, k);
}

#endif /* SM4J_LIB_SHARES_H */
