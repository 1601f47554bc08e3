package io.github.sockmap4j;

import io.github.sockmap4j.internal.bpf.InFlightMaps;
import io.github.sockmap4j.internal.bpf.KernelSockmap;
import io.github.sockmap4j.internal.bpf.PolicyKeyLayout;
import io.github.sockmap4j.internal.ffi.LibC;
import io.github.sockmap4j.internal.net.Sockets;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.OptionalInt;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The receivers of one {@link Sockmap} that publish their reads for the in-flight bound: it
 * claims each one's slot, decides its first bound (the port's, SO_RCVBUF, or autotuned up to
 * net.ipv4.tcp_rmem's maximum), and re-fixes them when a port's bound changes.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
final class ReadSlotRegistry {
    private final KernelSockmap kernel;
    private final InFlightMaps maps;
    private final Set<ReadPublisher> publishers = ConcurrentHashMap.newKeySet();
    private volatile int tcpRmemMax;

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
    ReadPublisher claim(Sockmap owner, int fd, boolean serverSide, boolean rcvbufSet) throws IOException {
        InetSocketAddress local = Sockets.localAddress(fd);
        InetSocketAddress remote = Sockets.remoteAddress(fd);
        long netns = Sockets.netnsCookie(fd);
        long cookie = Sockets.cookie(fd);
        if (kernel.lookupSocket(local.getAddress(), local.getPort(), remote.getAddress(), remote.getPort(), netns)
                != cookie) {
            return null;
        }
        InetSocketAddress server = serverSide ? local : remote;
        OptionalInt policy = kernel.policyBound(server.getAddress(), server.getPort());
        int fixed = policy.orElse(0);
        if (fixed == PolicyKeyLayout.UNBOUNDED) {
            return null; // nobody reads the slot of a connection without a bound
        }
        int rcvbuf = LibC.getsockoptInt(fd, LibC.SOL_SOCKET, LibC.SO_RCVBUF);
        int ceiling = rcvbufSet ? rcvbuf : Math.max(rcvbuf, tcpRmemMax());
        int initial = fixed > 0 ? fixed : rcvbuf;
        InFlightMaps.ReadSlot slot = maps.claimReadSlot(cookie, local.getAddress(), local.getPort(),
                remote.getAddress(), remote.getPort(), netns, initial);
        if (slot == null) {
            return null;
        }
        ReadPublisher p = new ReadPublisher(owner, slot, server, rcvbuf, ceiling, initial);
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
    String flowState(int fd) {
        try {
            InetSocketAddress local = Sockets.localAddress(fd);
            InetSocketAddress remote = Sockets.remoteAddress(fd);
            return "flags=" + maps.socketFlags(fd) + " sent=" + maps.socketSent(fd) + " peerRead="
                    + maps.publishedRead(remote.getAddress(), remote.getPort(), local.getAddress(), local.getPort(),
                    Sockets.netnsCookie(fd));
        } catch (IOException e) {
            return e.getMessage();
        }
    }

    void publishRead(InFlightMaps.ReadSlot slot, long read) {
        maps.publishRead(slot, read);
    }

    void setBound(InFlightMaps.ReadSlot slot, int bound) {
        maps.setSlotBound(slot, bound);
    }

    int bound(InFlightMaps.ReadSlot slot) {
        return maps.slotBound(slot);
    }

    void release(ReadPublisher p) {
        if (publishers.remove(p)) {
            maps.releaseReadSlot(p.slot());
        }
    }

    /** net.ipv4.tcp_rmem's third value: the largest receive buffer TCP's autotuning gives. */
    private int tcpRmemMax() {
        int v = tcpRmemMax;
        if (v == 0) {
            try (var in = Files.newInputStream(Path.of("/proc/sys/net/ipv4/tcp_rmem"))) {
                String[] f = new String(in.readAllBytes(), StandardCharsets.US_ASCII).trim().split("\\s+");
                v = Integer.parseInt(f[2]);
            } catch (IOException | RuntimeException e) {
                v = 6 << 20; // the kernel's default maximum
            }
            tcpRmemMax = v;
        }
        return v;
    }
}
