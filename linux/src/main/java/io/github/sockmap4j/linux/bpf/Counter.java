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
    SVC_ORIGDST(15);

    private final int index;

    Counter(int index) {
        this.index = index;
    }

    /** The counter's index in {@code sm4j_counters} (SM4J_CTR_*). */
    public int index() {
        return index;
    }
}
