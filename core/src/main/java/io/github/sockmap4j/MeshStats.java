package io.github.sockmap4j;

import io.github.sockmap4j.linux.bpf.Counter;

/**
 * The kernel's counters of meshed pods (docs/mesh.md): what was sent where at connect, and per
 * leg of a meshed request what its registered sockets sent, redirected and by TCP.
 *
 * @param captured             applications' connects sent straight to their pod's proxy
 * @param inbound              proxies' connects sent to another meshed pod's inbound port
 * @param originalDestinations {@code SO_ORIGINAL_DST} calls of a meshed pod's proxy answered with
 *                             where the connect it accepted was going
 * @param renumbered           of those, connections whose client port a NAT rule of the server's
 *                             pod changed (conntrack, where an earlier connection its rules
 *                             redirected had the same reply direction): told all the same, their
 *                             proxy-to-proxy leg goes by TCP
 * @param appToProxy           an application and its pod's proxy (both directions)
 * @param proxyToProxy         a proxy and another meshed pod's proxy
 * @param proxyToApp           a proxy and an application of its pod
 */
public record MeshStats(long captured, long inbound, long originalDestinations, long renumbered, Leg appToProxy,
                        Leg proxyToProxy, Leg proxyToApp) {
    static final MeshStats EMPTY = new MeshStats(0, 0, 0, 0, Leg.NONE, Leg.NONE, Leg.NONE);

    /**
     * One leg's registered sockets and their bytes. Redirected bytes are counted at each send;
     * bytes sent by TCP when the socket sends its FIN (or closes without one), exactly, from its
     * sequence numbers: the share of a leg is exact for connections that have closed.
     *
     * @param sockets       sockets registered as this leg's (both ends of each connection)
     * @param bytesRedirected bytes their sends moved straight into the peer's receive queue
     * @param bytesByTcp    bytes they sent by TCP
     */
    public record Leg(long sockets, long bytesRedirected, long bytesByTcp) {
        static final Leg NONE = new Leg(0, 0, 0);

        /** The share of the bytes redirected, 0 when none were sent. */
        public double redirectedShare() {
            long all = bytesRedirected + bytesByTcp;
            return all == 0 ? 0 : (double) bytesRedirected / all;
        }
    }

    static MeshStats of(long[] c) {
        return new MeshStats(c[Counter.MESH_CAPTURED.ordinal()], c[Counter.MESH_INBOUND.ordinal()],
                c[Counter.MESH_ORIGDST.ordinal()], c[Counter.MESH_RENUMBERED.ordinal()],
                leg(c, Counter.LEG_APP_PROXY_SOCKETS, Counter.LEG_APP_PROXY_REDIRECTED, Counter.LEG_APP_PROXY_TCP),
                leg(c, Counter.LEG_PROXY_PROXY_SOCKETS, Counter.LEG_PROXY_PROXY_REDIRECTED, Counter.LEG_PROXY_PROXY_TCP),
                leg(c, Counter.LEG_PROXY_APP_SOCKETS, Counter.LEG_PROXY_APP_REDIRECTED, Counter.LEG_PROXY_APP_TCP));
    }

    private static Leg leg(long[] c, Counter sockets, Counter redirected, Counter tcp) {
        return new Leg(c[sockets.ordinal()], c[redirected.ordinal()], c[tcp.ordinal()]);
    }
}
