package io.github.sockmap4j;

import io.github.sockmap4j.linux.bpf.Counter;

/**
 * The kernel counters of one pin directory (all processes sharing it), summed over CPUs.
 * tcpdump cannot see redirected bytes: these counters are the witness of the fast path.
 *
 * @param socketsRegistered  sockets the sockops program put into the SOCKHASH
 * @param registerFailures   sockets that could not be registered (the map was full)
 * @param messagesRedirected sendmsg calls moved straight into the peer's receive queue
 * @param bytesRedirected    their bytes
 * @param messagesPassed     sendmsg calls of registered sockets that went by plain TCP
 * @param bytesPassed        their bytes
 * @param socketsTainted     sends that found the peer unregistered and went by TCP (the socket
 *                           then stays on TCP until its peer has read everything)
 * @param boundHits          sends that found the in-flight bound reached and went by TCP
 * @param resumes            sockets that came back to the redirect once their peer had read all
 * @param socketsInMap       sockets in the SOCKHASH now
 * @param servicesTranslated connects to a Service VIP sent straight to the endpoint picked
 * @param servicesNoLocal    connects to a Service in the map left to kube-proxy: no local endpoint
 * @param clientsUnregistered accepted sockets of an opted-in port left out of the SOCKHASH because
 *                           their client did not register (off the fast path, on another node, or
 *                           dialing a Service VIP without translation): they would only miss
 * @param peersNotLocal      clients of an opted-in port left out of the SOCKHASH because their
 *                           server's address is not of this node (as an agent that knows the
 *                           node's pods says): they would only miss
 * @param keysTaken          sockets of an opted-in port left out of the SOCKHASH because a socket
 *                           of another connection holds their key, or their peer's (the same
 *                           4-tuple in another network namespace), or because no handshake made
 *                           them (a socket connected in TCP_REPAIR mode, its sequence numbers its
 *                           user's): they stay on TCP, and the other connection keeps its entries
 * @param socketsBusy        sockets of an opted-in port left out of the SOCKHASH because another
 *                           program's sockmap held them (the kernel gives a socket one sk_msg
 *                           program): they stay on TCP under that program
 *                           ({@code SockmapAdmin.collisions} says which, and which programs)
 * @param originalDestinations {@code SO_ORIGINAL_DST} calls (a proxy's, on a socket it accepted
 *                           through a NAT rule) answered with the Service its translated client
 *                           dialed rather than the endpoint the connect was sent to
 * @param mesh               meshed pods' connects and legs (docs/mesh.md)
 */
public record SockmapStats(long socketsRegistered, long registerFailures, long messagesRedirected,
                           long bytesRedirected, long messagesPassed, long bytesPassed,
                           long socketsTainted, long boundHits, long resumes, long socketsInMap,
                           long servicesTranslated, long servicesNoLocal, long clientsUnregistered,
                           long peersNotLocal, long keysTaken, long socketsBusy, long originalDestinations,
                           MeshStats mesh) {
    static final SockmapStats EMPTY = new SockmapStats(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            MeshStats.EMPTY);

    /**
     * From the kernel's counters as the pinned counter map holds them (its slots in order, summed
     * over CPUs): for tools that read a pin directory, such as the CLI and the node agent.
     *
     * @param c            the counters, at least as many as the map has slots
     * @param socketsInMap sockets in the SOCKHASH now
     * @return the statistics they make
     */
    public static SockmapStats of(long[] c, long socketsInMap) {
        return new SockmapStats(c[Counter.SOCKETS_REGISTERED.ordinal()], c[Counter.REGISTER_FAILED.ordinal()],
                c[Counter.MSGS_REDIRECTED.ordinal()], c[Counter.BYTES_REDIRECTED.ordinal()],
                c[Counter.MSGS_PASSED.ordinal()], c[Counter.BYTES_PASSED.ordinal()],
                c[Counter.SOCKETS_TAINTED.ordinal()], c[Counter.BOUND_HIT.ordinal()], c[Counter.RESUMED.ordinal()],
                socketsInMap, c[Counter.SVC_TRANSLATED.ordinal()], c[Counter.SVC_NO_LOCAL.ordinal()],
                c[Counter.CLIENT_UNREGISTERED.ordinal()], c[Counter.PEER_NOT_LOCAL.ordinal()],
                c[Counter.KEY_TAKEN.ordinal()], c[Counter.SOCKET_BUSY.ordinal()], c[Counter.SVC_ORIGDST.ordinal()],
                MeshStats.of(c));
    }
}
