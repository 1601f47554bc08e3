/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Structs shared by the kernel programs (sockmap4j.bpf.c) and the Java side
 * (io.github.sockmap4j.internal.bpf.*Layout). Every layout change bumps
 * SM4J_ABI_VERSION: a JVM refuses pins whose sm4j_meta holds another version.
 * Padding is explicit; LayoutTest (core/src/test/.../internal/bpf) checks each struct
 * and constant against the Java side, the structs through the BTF of
 * the compiled object.
 */
#ifndef SOCKMAP4J_H
#define SOCKMAP4J_H

#define SM4J_ABI_VERSION 18

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
/*
 * Where a registered socket's peer may be (sm4j_local, an LPM trie): address prefixes of this
 * node, IPv4 v4-mapped. Created holding ::/0 (every address); an agent that knows the node's
 * pods narrows it, and a client whose server is elsewhere then stays off the map.
 */
struct sm4j_local_key {
	__u32 prefixlen;
	__u8 addr[16];
};

struct sm4j_policy_key {
	__u32 prefixlen;
	__u8 port[2];
	__u8 addr[16];
	__u8 pad[2];
};

struct sm4j_policy {
	__u32 flags;    /* reserved, 0 */
	__u32 bound;    /* in-flight bound of the port's connections in bytes, 0 for SO_RCVBUF */
};

/* A policy bound that turns the in-flight bound off (for measuring its cost only). */
#define SM4J_UNBOUNDED 0xffffffffU

/*
 * Per-socket sender state, in SK_STORAGE, made when the socket is registered. What it has
 * sent is redirected + tcp: redirected bytes are counted by the verdict; TCP bytes are read
 * from the socket's own write_seq, because the kernel skips the verdict for a send that
 * follows a partly pushed one (psock->eval stays __SK_PASS), so counting passes would miss
 * bytes.
 */
#define SM4J_SOCK_TCP 1 /* sending by TCP: back to the redirect only once the peer read all */
#define SM4J_SOCK_LEG_COUNTED 2 /* its mesh leg's TCP bytes are counted (at its FIN, or its close) */

struct sm4j_sock_state {
	__u64 redirected;
	__u64 tcp;
	__u32 last_seq;     /* write_seq when tcp was last brought up to date */
	__u32 flags;
	__u32 policy_bound; /* the bound of the connection's policy entry, 0 for the default */
	__u32 peer_slot;    /* the peer's read slot as last found through sm4j_rx ... */
	__u64 peer_cookie;  /* ... while the slot holds this cookie (0: look it up) */
	__u64 share_id;     /* the share of sm4j_shares its entry counts in (struct sm4j_share_key) ... */
	__u32 share_kind;   /* ... 0: none */
	__u32 leg;          /* SM4J_LEG_*: the mesh leg its bytes are counted as, 0 for none */
};

/*
 * Shares of the SOCKHASH (sm4j_shares in lib/maps.h): no one fills the map for others. An entry
 * counts in the share of whoever is accountable for the connection (both ends in the client's),
 * never one per namespace a process can make: a user, where a user other than root made the
 * outermost user namespace of the socket's network namespace (every uid it maps and every
 * namespace below it), or the socket is on the host and owned by that uid (SM4J_SHARE_UID: one
 * share for both, root's not counted on the host); else, in a network namespace that is not the
 * host's, the socket's cgroup (SM4J_SHARE_CGROUP: a pod's container, with every namespace nested
 * in it, also under a root-made user namespace). A share holds at most sm4j_cfg.share_max
 * entries; past it the socket stays on TCP. SM4J_SHARE_USERNS and SM4J_SHARE_NETNS are no longer
 * made: a socket registered by an older object returns its entry to them at its close.
 */
#define SM4J_SHARE_UID 1
#define SM4J_SHARE_USERNS 2
#define SM4J_SHARE_NETNS 3
#define SM4J_SHARE_CGROUP 4

struct sm4j_share_key {
	__u64 id;   /* a uid, or a cgroup's id */
	__u32 kind; /* SM4J_SHARE_* */
	__u32 pad;
};

/*
 * In-flight bound (docs/kernel.md, "No back-pressure per socket"). A receiver that runs sockmap4j claims a slot of sm4j_slots, an
 * mmap-able array, and publishes there with plain stores how many bytes it has read and its
 * bound; sm4j_rx maps its socket key to the slot. The sender's verdict redirects only while
 * sent - read + size <= bound; past it the sender goes by TCP, whose window blocks it, and
 * comes back once read == sent, when no TCP byte is left unread to be overtaken.
 */
struct sm4j_rx {
	__u32 slot;
	__u32 reserved;
	__u64 cookie;   /* the receiving socket's cookie, also in its slot while it holds it */
};

struct sm4j_slot {
	__u64 cookie;   /* owner socket cookie, 0 when free */
	__u64 read;     /* bytes the owner has read from its socket */
	__u32 bound;    /* bytes the owner lets be redirected to it unread */
	__u32 reserved;
	__u64 wake;     /* slot 0's only: bumped when a watch entry is made or set WANTED */
};

/*
 * The bound for receivers that publish nothing (not sockmap4j: a JDK socket, a C server):
 * the sender's verdict keeps sm4j_watch[receiver key] with what it has sent; a watcher in a
 * sockmap4j process estimates from sock_diag how much of it was read (never more than was:
 * sent, minus the receiver's whole receive memory, minus the sender's whole send queue) and
 * publishes that and a bound grown from the read rate (unless the port fixed it).
 *
 * A sender held on TCP also asks the kernel directly whether the receiver has read everything
 * (where it can: see sm4j_rxsock in lib/maps.h): when the receiving socket's copied_seq
 * (the next byte its application reads) equals the sender's write_seq (the next byte it queues
 * to TCP), every byte sent by TCP was read, and so every byte redirected before them (a reader
 * takes redirected bytes first). The verdict then sets read to sent, resumes the redirect, and
 * doubles the bound (up to watch_ceiling, unless fixed), as TCP's autotuning gives room to a
 * receiver that keeps up.
 */
#define SM4J_WATCH_WANTED 1 /* the sender is held on TCP or near the bound: poll it often */
#define SM4J_WATCH_FIXED 2  /* the bound is the port's policy bound: the watcher does not grow it */
#define SM4J_WATCH_EXACT 4  /* the verdict counts the receiver's reads exactly at each send: nothing to estimate */

struct sm4j_watch {
	__u64 sent;     /* written by the sender's verdict */
	__u64 read;     /* written by a watcher: bytes surely read (and by the verdict on a drain) */
	__u32 bound;    /* written by a watcher (the sender's verdict sets the first, and doubles it) */
	__u32 flags;    /* written by the sender's verdict */
};

/* The programs' configuration: their .rodata (sm4j_cfg in lib/maps.h), set by the loader. */
struct sm4j_config {
	__u32 watch_bound;   /* the first bound of a receiver that publishes nothing */
	__u32 watch_ceiling; /* the largest a drain doubles it to (net.ipv4.tcp_rmem's maximum) */
	__u32 share_max;     /* entries of sm4j_socks one share may hold (0: no limit) */
	__u32 pad;
	__u64 host_netns;    /* the cookie of the network namespace the loader ran in: the host's */
};

/*
 * Services (connect-time translation): a connect to (VIP, port) of a Service in sm4j_services
 * goes to one of its ready endpoints, picked at the connect with bpf_get_prandom_u32() (equal
 * odds, as kube-proxy's), before the SYN: both ends then register with matching keys. Local
 * endpoints come first (ep[0..local_count)); a Service that asks for local endpoints
 * (SM4J_SVC_LOCAL_ONLY: internalTrafficPolicy Local, trafficDistribution PreferSameNode) picks
 * among those only. Addresses as in sm4j_sock_key (16 bytes, IPv4 v4-mapped, network order),
 * ports in host order. At most SM4J_SVC_ENDPOINTS endpoints: the writer leaves a larger Service
 * out (kube-proxy carries it).
 */
#define SM4J_SVC_ENDPOINTS 16
#define SM4J_SVC_LOCAL_ONLY 1

/*
 * A Service's key: its VIP and port, and for a loopback VIP (127.0.0.0/8, ::1), which is another
 * host in each network namespace, the cookie of the namespace it was put for (0 for any other
 * VIP). One namespace's loopback Service holds that address in no other namespace.
 */
struct sm4j_svc_key {
	__u64 netns;
	__u32 addr[4];
	__u32 port;
	__u32 pad;
};

struct sm4j_endpoint {
	__u32 addr[4];
	__u32 port;
};

/*
 * Whose connects a Service moves (docs/security.md): owner 0 moves every
 * connect in the cgroup (root's Services and the Kubernetes feed), owner uid + 1 only the connects
 * of that uid (a user's Service put through the agent); netns 0 moves connects of every network
 * namespace, a namespace's cookie only connects made in it (a Service with a loopback address:
 * 127.0.0.1 of one namespace is not that of another).
 */
struct sm4j_svc {
	__u32 count;       /* ready endpoints in ep */
	__u32 local_count; /* of them on this node, first in ep */
	__u32 flags;       /* SM4J_SVC_LOCAL_ONLY */
	__u32 owner;       /* 0: every connect; uid + 1: that uid's only */
	__u64 netns;       /* 0: every namespace; a cookie: that namespace's only */
	struct sm4j_endpoint ep[SM4J_SVC_ENDPOINTS];
};

/*
 * A translated socket's Service, by socket cookie: getpeername reports it, not the endpoint;
 * and the endpoint it was sent to, the peer its key names, for user space, which only sees the
 * Service through getpeername.
 */
#define SM4J_ORIG_SERVICE 0  /* a Service translated: SO_ORIGINAL_DST is the Service where conntrack says the endpoint */
#define SM4J_ORIG_MESH_OUT 1 /* an application's connect sent to its pod's proxy: the proxy is told what it dialed */
#define SM4J_ORIG_MESH_IN 2  /* a proxy's connect sent to a meshed pod's inbound port: that pod's proxy is told orig */

struct sm4j_svc_sock {
	__u32 addr[4];      /* what the socket dialed: its getpeername */
	__u32 port;
	__u32 ep_port;      /* where the connect went */
	__u32 ep_addr[4];
	__u32 orig_addr[4]; /* the SO_ORIGINAL_DST answered to the socket that accepts it */
	__u32 orig_port;
	__u32 kind;         /* SM4J_ORIG_* */
	__u32 client_isn;   /* SM4J_ORIG_MESH_IN: its connection's numbers in sm4j_meshorig ... */
	__u32 server_isn;   /* ... (struct sm4j_mesh_orig_key), for its close to remove the entry */
};

/*
 * A translated socket by its own end (sm4j_svcorig in lib/maps.h): its network namespace's cookie,
 * its local address (v4-mapped for IPv4) and port. A proxy in that namespace which took the
 * connection over by a NAT rule (a service mesh's sidecar) asks for the original destination
 * (SO_ORIGINAL_DST) of the socket it accepted, whose peer is this end: the answer is the Service
 * dialed (the entry's struct sm4j_svc_sock), not the endpoint the connect was sent to.
 */
struct sm4j_svc_orig_key {
	__u64 netns;
	__u32 addr[4];
	__u32 port;
	__u32 pad;
};

/*
 * Its value: the Service and endpoint, the cookie of the socket it is of (whose close removes it)
 * and, in sm4j_meshorig, that socket's own port.
 */
struct sm4j_svc_orig {
	struct sm4j_svc_sock svc;
	__u64 cookie;
	__u32 client_port;
	__u32 pad;
};

/*
 * A proxy's connect sent to another meshed pod's inbound port (sm4j_meshorig in lib/maps.h), by
 * its connection as both ends see it: the client's address, the server's address and port, and
 * the first sequence number after each end's SYN (the client's snd_nxt and rcv_nxt at its
 * establishment; on the accepted socket, rcv_nxt less the bytes it received and snd_una less
 * those acked). Not the client's port: a NAT rule of the server's pod renumbers it where the
 * connection's reply direction would be that of an earlier connection its rules redirected
 * (conntrack keeps those for minutes), and the inbound proxy is still to be told. Not a network
 * namespace: the two ends are in two. The two numbers, one chosen by each end's kernel, keep
 * two live connections between the same addresses apart.
 */
struct sm4j_mesh_orig_key {
	__u32 client[4];
	__u32 server[4];
	__u32 server_port;
	__u32 client_isn;
	__u32 server_isn;
	__u32 pad;
};

/*
 * What a registered socket proves of its connection (sm4j_pair in lib/maps.h, by its key): its
 * cookie, and the next sequence numbers of both directions when it was established. The two
 * ends of one connection hold each other's numbers (my snd_nxt is my peer's rcv_nxt); a socket
 * of another connection with the same 4-tuple, rebuilt in another network namespace, holds
 * numbers of its own handshake, which it cannot choose.
 */
struct sm4j_pair {
	__u64 cookie;
	__u32 snd_nxt;
	__u32 rcv_nxt;
	struct sm4j_share_key share; /* a client's: its server's entry counts there too */
	__u32 leg;                   /* a client's mesh leg (SM4J_LEG_*): its server counts its bytes as that too */
	__u32 pad;
};

/*
 * A socket another program's sockmap held when it was to be registered (sm4j_busy, by its key):
 * the kernel gives a socket one sk_msg program, so it stays out of sm4j_socks, on TCP under the
 * other program's verdict. Kept for user space to say which sockets (the least recent go first).
 */
struct sm4j_busy {
	__u64 cookie;
	__u64 when_ns; /* bpf_ktime_get_ns() at the refusal */
};

/* How many ports a meshed pod's NAT may leave out of each redirect (sm4j_mesh, sm4j_mesh_addr). */
#define SM4J_MESH_SKIP_PORTS 8

/*
 * Meshed pods (docs/mesh.md): pods with a service mesh's sidecar proxy that the node agent was
 * asked to accelerate. sm4j_mesh holds each by its network namespace's cookie: a connect there
 * by any uid but the proxy's goes straight to the proxy's outbound port on the pod's loopback
 * (where a listener of the proxy's uid is), instead of through the pod's NAT; the proxy is told
 * the original destination. sm4j_meshaddr holds each by its addresses: a proxy's connect to a
 * meshed pod goes to that pod's inbound port, as the pod's NAT would send it, and that pod's proxy
 * is told the original destination. Neither for a port the pod's NAT leaves out (skip_ports).
 * Both are written by the node agent only (root).
 */
struct sm4j_mesh {
	__u32 proxy_uid; /* the proxy's uid (Istio: 1337); its connects are never sent to itself */
	__u32 out_port;  /* the proxy's outbound port (15001) */
	__u32 in_port;   /* the proxy's inbound port (15006) */
	/*
	 * The proxy's gid + 1 (Istio: 1338), 0 for none: a connect of a task in that group (its
	 * gid, as the NAT's owner match reads it) is left alone, as the NAT leaves it.
	 */
	__u32 proxy_gid;
	/*
	 * Destination ports its NAT does not send to the outbound port (Istio's excludeOutboundPorts):
	 * an application's connect to one is left alone. The first 0 ends the list.
	 */
	__u16 skip_ports[SM4J_MESH_SKIP_PORTS];
};

struct sm4j_mesh_addr_key {
	__u32 addr[4];   /* a meshed pod's address, IPv4 v4-mapped */
};

struct sm4j_mesh_addr {
	__u64 netns;     /* the pod's network namespace's cookie */
	__u32 in_port;   /* its proxy's inbound port */
	__u32 flags;     /* reserved, 0 */
	/*
	 * Ports its NAT does not send to the inbound port (Istio's: the proxy's own 15008, 15020,
	 * 15021, 15090, and excludeInboundPorts): a proxy's connect to one of them is left alone.
	 * The first 0 ends the list.
	 */
	__u16 skip_ports[SM4J_MESH_SKIP_PORTS];
};

/* The legs of a meshed request, as their sockets are counted. */
#define SM4J_LEG_APP_PROXY 1   /* an application to its pod's proxy (loopback, the proxy's outbound port) */
#define SM4J_LEG_PROXY_PROXY 2 /* a proxy to another meshed pod's proxy (its address, its inbound port) */
#define SM4J_LEG_PROXY_APP 3   /* a proxy to an application of its pod (a loopback end, the proxy's uid dialing) */
#define SM4J_LEGS 3

/* Indexes into the per-CPU counter array. */
enum sm4j_counter {
	SM4J_CTR_SOCKETS_REGISTERED = 0,
	SM4J_CTR_REGISTER_FAILED,
	SM4J_CTR_MSGS_REDIRECTED,
	SM4J_CTR_BYTES_REDIRECTED,
	SM4J_CTR_MSGS_PASSED,
	SM4J_CTR_BYTES_PASSED,
	SM4J_CTR_SOCKETS_TAINTED,
	SM4J_CTR_BOUND_HIT,     /* a sender switched to TCP at the in-flight bound */
	SM4J_CTR_RESUMED,       /* a sender came back to the redirect: its peer had read all */
	SM4J_CTR_SVC_TRANSLATED, /* a connect to a Service went straight to the endpoint picked */
	SM4J_CTR_SVC_NO_LOCAL,  /* a connect to a Service in the map that has no local endpoint now */
	SM4J_CTR_CLIENT_UNREGISTERED, /* an accepted socket left out of the map: its client did not register */
	SM4J_CTR_PEER_NOT_LOCAL, /* a client left out of the map: its server's address is not of this node */
	SM4J_CTR_KEY_TAKEN,     /* a socket left out of the map: its key, or its peer's, is another connection's,
				 * or no handshake made it (TCP_REPAIR) */
	SM4J_CTR_SOCKET_BUSY,   /* a socket left out of the map: another program's sockmap (its sk_msg) holds it */
	SM4J_CTR_SVC_ORIGDST,   /* an SO_ORIGINAL_DST answered with the Service a translated socket dialed */
	SM4J_CTR_MESH_CAPTURED, /* an application's connect sent straight to its pod's proxy */
	SM4J_CTR_MESH_INBOUND,  /* a proxy's connect sent to a meshed pod's inbound port */
	SM4J_CTR_MESH_ORIGDST,  /* an SO_ORIGINAL_DST of a meshed pod's proxy answered from the connect */
	/*
	 * Per leg, in SM4J_LEG_* order (the first's index + leg - 1): sockets registered, bytes
	 * redirected (at each send), bytes sent by TCP (at the socket's FIN, or its close without one).
	 */
	SM4J_CTR_LEG_APP_PROXY_SOCKETS,
	SM4J_CTR_LEG_PROXY_PROXY_SOCKETS,
	SM4J_CTR_LEG_PROXY_APP_SOCKETS,
	SM4J_CTR_LEG_APP_PROXY_REDIRECTED,
	SM4J_CTR_LEG_PROXY_PROXY_REDIRECTED,
	SM4J_CTR_LEG_PROXY_APP_REDIRECTED,
	SM4J_CTR_LEG_APP_PROXY_TCP,
	SM4J_CTR_LEG_PROXY_PROXY_TCP,
	SM4J_CTR_LEG_PROXY_APP_TCP,
	SM4J_CTR_MESH_RENUMBERED, /* an SO_ORIGINAL_DST of a meshed pod's proxy answered for a connection a NAT
				   * rule of its pod gave another client port (its leg goes by TCP) */
	SM4J_CTR_MAX,
};

#endif /* SOCKMAP4J_H */
