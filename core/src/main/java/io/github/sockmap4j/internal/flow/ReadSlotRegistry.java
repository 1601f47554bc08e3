package io.github.sockmap4j.internal.flow;

import io.github.sockmap4j.linux.bpf.InFlightMaps;
import io.github.sockmap4j.linux.bpf.KernelSockmap;
import io.github.sockmap4j.linux.bpf.ObjectLoader;
import io.github.sockmap4j.linux.bpf.Pins;
import io.github.sockmap4j.linux.bpf.PolicyKeyLayout;
import io.github.sockmap4j.linux.net.NativeSocket;
import io.github.sockmap4j.linux.net.SocketIdentity;
import io.github.sockmap4j.linux.net.SocketOptions;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.util.OptionalInt;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The receivers of one pin directory in this process that publish their reads for the
 * in-flight bound: it claims each one's slot, decides its first bound (the port's, SO_RCVBUF,
 * or autotuned up to net.ipv4.tcp_rmem's maximum), and re-fixes them when a port's bound changes.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
final class ReadSlotRegistry {
    private final KernelSockmap kernel;
    private final InFlightMaps maps;
    private final Set<ReadPublisher> publishers = ConcurrentHashMap.newKeySet();
    private final int tcpRmemMax = ObjectLoader.watchCeiling();

    ReadSlotRegistry(KernelSockmap kernel) {
        this.kernel = kernel;
        this.maps = kernel.inFlight();
    }

    /**
     * Joins a connected socket that the kernel registered to the in-flight bound as a receiver;
     * null when the bound does not apply (the socket not registered, or its port unbounded).
     *
     * @param rcvbufSet whether the application fixed SO_RCVBUF (then it is the bound)
     */
    ReadPublisher claim(NativeSocket socket, SocketIdentity id, boolean serverSide, boolean rcvbufSet)
            throws IOException {
        if (!kernel.holds(id)) {
            return null;
        }
        InetSocketAddress server = id.server(serverSide);
        OptionalInt policy = kernel.policyBound(server.getAddress(), server.getPort());
        int fixed = policy.orElse(0);
        if (fixed == PolicyKeyLayout.UNBOUNDED) {
            return null; // nobody reads the slot of a connection without a bound
        }
        int rcvbuf = socket.getOption(SocketOptions.STREAM_OPTIONS, StandardSocketOptions.SO_RCVBUF);
        int ceiling = rcvbufSet ? rcvbuf : Math.max(rcvbuf, tcpRmemMax);
        int initial = fixed > 0 ? fixed : rcvbuf;
        InFlightMaps.ReadSlot slot = maps.claimReadSlot(id.cookie(), id.local().getAddress(), id.local().getPort(),
                id.remote().getAddress(), id.remote().getPort(), id.netns(), initial);
        if (slot == null) {
            return null;
        }
        ReadPublisher p = new ReadPublisher(this, maps.slots(), slot, server, rcvbuf, ceiling, initial);
        if (fixed > 0) {
            p.fix(fixed);
        }
        publishers.add(p);
        return p;
    }

    /** After a port's bound changed in the policy: its receivers here take the new one. */
    void refix(int port) {
        for (ReadPublisher p : publishers) {
            if (p.server().getPort() == port) {
                int pb = kernel.policyBound(p.server().getAddress(), port).orElse(0);
                if (pb > 0) {
                    p.fix(pb);
                } else {
                    p.unfix();
                }
            }
        }
    }

    /** A socket's side of the bound, for diagnostics: flags, bytes sent, the peer's published read. */
    String flowState(NativeSocket socket, SocketIdentity id) {
        return "flags=" + maps.socketFlags(socket.intValue()) + " sent=" + maps.socketSent(socket.intValue())
                + " peerRead=" + maps.publishedRead(id.remote().getAddress(), id.remote().getPort(),
                id.local().getAddress(), id.local().getPort(), id.netns());
    }

    void release(ReadPublisher p) {
        if (publishers.remove(p)) {
            maps.releaseReadSlot(p.slot());
        }
    }
}
