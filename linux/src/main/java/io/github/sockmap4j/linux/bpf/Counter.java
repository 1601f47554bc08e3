package io.github.sockmap4j.linux.bpf;

/**
 * The per-CPU counters, {@code enum sm4j_counter} in bpf/src/sockmap4j.h; each carries its
 * index in the array, compared with the header by the layout test.
 */
public enum Counter {
    SOCKETS_REGISTERED(0),
    REGISTER_FAILED(1),
    MSGS_REDIRECTED(2),
    BYTES_REDIRECTED(3),
    MSGS_PASSED(4),
    BYTES_PASSED(5),
    SOCKETS_TAINTED(6),
    BOUND_HIT(7),
    RESUMED(8),
    SVC_TRANSLATED(9),
    SVC_NO_LOCAL(10),
    CLIENT_UNREGISTERED(11),
    PEER_NOT_LOCAL(12),
    KEY_TAKEN(13),
    SOCKET_BUSY(14),
    SVC_ORIGDST(15),
    MESH_CAPTURED(16),
    MESH_INBOUND(17),
    MESH_ORIGDST(18),
    LEG_APP_PROXY_SOCKETS(19),
    LEG_PROXY_PROXY_SOCKETS(20),
    LEG_PROXY_APP_SOCKETS(21),
    LEG_APP_PROXY_REDIRECTED(22),
    LEG_PROXY_PROXY_REDIRECTED(23),
    LEG_PROXY_APP_REDIRECTED(24),
    LEG_APP_PROXY_TCP(25),
    LEG_PROXY_PROXY_TCP(26),
    LEG_PROXY_APP_TCP(27),
    MESH_RENUMBERED(28);

    private final int index;

    Counter(int index) {
        this.index = index;
    }

    /** The counter's index in {@code sm4j_counters} (SM4J_CTR_*). */
    public int index() {
        return index;
    }
}
