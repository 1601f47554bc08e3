package io.github.sockmap4j.colocated.grpc;

/**
 * Why a channel's calls stayed on HTTP/2 instead of moving to a co-located connection: each
 * agreement that did not end in one is counted under one of these ({@link ColocatedGrpc#fallbacks()}),
 * on the end that saw it.
 */
public enum Fallback {
    /** The switch is off ({@code -Dsockmap4j.colocated=false}; on by default). */
    OFF("the switch is off"),
    /** The server has no agreement: not a sockmap4j server, or one configured without it. */
    NOT_OURS("the server does not offer co-located connections"),
    /** The server speaks another version of the agreement. */
    OTHER_VERSION("the server speaks another version of the agreement"),
    /**
     * The two ends see the TCP connection differently: a proxy (a mesh's sidecar, say) or a
     * source NAT is between them, and the calls stay where that proxy sees them.
     */
    PROXIED("a proxy or source NAT is between the two ends"),
    /** The server's hand-over cannot be reached from here: another host, network namespace or pod. */
    NO_BROKER("the server's hand-over is not reachable from this process"),
    /** The server's rule does not let this process share memory with it (another user). */
    NOT_ALLOWED("the server does not let this process share memory with it"),
    /**
     * The channel spreads its calls over several servers (connected to more than one at once; or,
     * where the channel's connections cannot be seen, a load-balancing policy other than
     * {@code pick_first} on its builder), which a co-located connection to one of them would not:
     * its calls stay where the balancer puts them.
     */
    BALANCED("the channel balances its calls over several servers"),
    /** The server has as many co-located connections or pending agreements as it takes. */
    BUSY("the server takes no more co-located connections now"),
    /** The memory could not be made or mapped. */
    NO_MEMORY("the shared memory could not be made or mapped"),
    /** The running gRPC server cannot take another transport (its version keeps it elsewhere). */
    SERVER_UNREACHABLE("this gRPC version's server cannot take a co-located transport"),
    /**
     * The channel's builder keeps its executor and inbound limits where this version does not read
     * them (another gRPC, or a builder of another kind): a co-located connection would run the
     * channel's callbacks elsewhere, or take other sizes, than its HTTP/2 connection.
     */
    CHANNEL_UNREADABLE("this channel's executor and limits cannot be read from its builder"),
    /** Anything else: the agreement call failed or timed out, or a step of the hand-over did. */
    FAILED("the agreement failed");

    private final String description;

    Fallback(String description) {
        this.description = description;
    }

    /** What it means, in a sentence's words. */
    public String description() {
        return description;
    }
}
