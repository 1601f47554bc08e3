/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The maps of the sockmap4j programs. The loader sizes the per-socket ones
 * (bpf_map__set_max_entries) and pins all but sm4j_rxsock.
 */
#ifndef SM4J_LIB_MAPS_H
#define SM4J_LIB_MAPS_H

/* The fields of the kernel's tcp_sock we read, relocated by libbpf (CO-RE) at load. */
struct tcp_sock {
	__u32 write_seq;  /* the next byte the application queues to TCP */
	__u32 copied_seq; /* the next byte the application reads */
	__u8 repair : 1;  /* TCP_REPAIR: its sequence numbers are the user's, no handshake made them */
} __attribute__((preserve_access_index));

/*
 * The fields of the kernel's sock we read (at offset 0 of every tcp_sock), relocated by libbpf
 * (CO-RE): the uid owning the socket (the creator's filesystem uid, its effective uid unless set
 * apart), its cgroup, and the psock of a socket in a sockmap.
 */
struct user_namespace___sm4j {
	struct user_namespace___sm4j *parent;
	int level; /* 0: the initial user namespace */
	struct {
		__u32 val;
	} owner;
} __attribute__((preserve_access_index));

struct net___sm4j {
	struct user_namespace___sm4j *user_ns; /* the user namespace that owns the network namespace */
} __attribute__((preserve_access_index));

struct sock_common___sm4j {
	struct {
		struct net___sm4j *net;
	} skc_net;
} __attribute__((preserve_access_index));

struct kernfs_node___sm4j {
	__u64 id; /* the cgroup's id, as bpf_get_current_cgroup_id() and user space's name_to_handle_at give it */
} __attribute__((preserve_access_index));

struct cgroup___sm4j {
	struct kernfs_node___sm4j *kn;
} __attribute__((preserve_access_index));

struct sock_cgroup_data___sm4j {
	struct cgroup___sm4j *cgroup; /* the cgroup v2 of the socket's creator, where BPF programs attach */
} __attribute__((preserve_access_index));

struct sock___sm4j {
	struct sock_common___sm4j __sk_common;
	struct {
		__u32 val;
	} sk_uid;
	struct sock_cgroup_data___sm4j sk_cgrp_data;
	void *sk_user_data; /* the kernel's psock of a socket in a sockmap, tagged in its low bits */
} __attribute__((preserve_access_index));

/* Sized by the loader (bpf_map__set_max_entries) before load. */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, 65535);
	__type(key, struct sm4j_sock_key);
	__type(value, __u64);
} sm4j_socks SEC(".maps");

/* This node's address prefixes (struct sm4j_local_key): a node's pods and its own addresses. */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sm4j_local_key);
	__type(value, __u8);
} sm4j_local SEC(".maps");

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

/* Entries of sm4j_socks by share (struct sm4j_share_key in sockmap4j.h); an entry goes at 0. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct sm4j_share_key);
	__type(value, __u64);
} sm4j_shares SEC(".maps");

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

#endif

/*
 * Every registered socket's struct sm4j_pair, by its key: made with its SOCKHASH entry, gone at its
 * close (if still its own). Not pinned: the programs hold it. Sized by the loader, twice
 * sm4j_socks: an entry outlives its SOCKHASH entry from close(2) to the end of TCP's close.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 131070);
	__type(key, struct sm4j_sock_key);
	__type(value, struct sm4j_pair);
} sm4j_pair SEC(".maps");

/* Sockets another program's sockmap held (struct sm4j_busy), the most recent 1,024. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, struct sm4j_sock_key);
	__type(value, struct sm4j_busy);
} sm4j_busy SEC(".maps");

/* Written once by the loader: SM4J_ABI_VERSION of the program set pinned here. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} sm4j_meta SEC(".maps");

/* Services with their endpoints (struct sm4j_svc): written from user space only (SockmapAdmin, the CLI). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sm4j_svc_key);
	__type(value, struct sm4j_svc);
} sm4j_services SEC(".maps");

/* Translated sockets by cookie; least recently used entries go first when it is full. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct sm4j_svc_sock);
} sm4j_svcsock SEC(".maps");

/* The same entries by the translated socket's own end, for SO_ORIGINAL_DST (struct sm4j_svc_orig_key). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct sm4j_svc_orig_key);
	__type(value, struct sm4j_svc_orig);
} sm4j_svcorig SEC(".maps");

/*
 * Proxies' connects sent to another meshed pod's inbound port, by connection (struct
 * sm4j_mesh_orig_key), for that pod's proxy's SO_ORIGINAL_DST; least recently used entries go
 * first when it is full.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct sm4j_mesh_orig_key);
	__type(value, struct sm4j_svc_orig);
} sm4j_meshorig SEC(".maps");

/* Meshed pods by network namespace cookie (struct sm4j_mesh): written by the node agent only. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct sm4j_mesh);
} sm4j_mesh SEC(".maps");

/* Meshed pods by address (struct sm4j_mesh_addr): written by the node agent only. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sm4j_mesh_addr_key);
	__type(value, struct sm4j_mesh_addr);
} sm4j_meshaddr SEC(".maps");

/*
 * Set by the loader before load from net.ipv4.tcp_rmem (the default and the maximum), then
 * read-only: no lookup per message. The loader pins this .rodata map as the directory's config,
 * which user space reads for the same first bound.
 */
const volatile struct sm4j_config sm4j_cfg = {
	.watch_bound = 131072,
	.watch_ceiling = 6 << 20,
	.share_max = 0,
	.host_netns = 0,
};

#endif /* SM4J_LIB_MAPS_H */
