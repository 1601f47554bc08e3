package io.github.sockmap4j.spi;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.internal.flow.FastPath;
import io.github.sockmap4j.internal.flow.FastPathAccess;
import io.github.sockmap4j.internal.flow.PeerCredit;
import io.github.sockmap4j.internal.flow.ReadPublisher;
import io.github.sockmap4j.internal.jfr.ConnectionEvent;
import io.github.sockmap4j.linux.net.NativeSocket;
import java.io.IOException;
import java.util.Objects;

/**
 * The fast path of one {@link Sockmap} for integrations that hold a raw connected socket fd
 * (Netty's epoll channels) instead of a {@code SockmapChannel}: the receiver's side of the
 * in-flight bound ({@link ReadCounter}), the writer's ({@link WriteCredit}), whether a socket is
 * accelerated, and the connection event.
 *
 * <pre>{@code
 * RawSockets sockets = RawSockets.of(sockmap);
 * ReadCounter reads = sockets.readCounter(fd, serverSide);   // before the first read
 * WriteCredit credit = sockets.writeCredit(fd, serverSide);  // before the first write
 * }</pre>
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class RawSockets {
    private final Sockmap sockmap;

    private RawSockets(Sockmap sockmap) {
        this.sockmap = sockmap;
    }

    /**
     * The raw-socket view of {@code sockmap}.
     *
     * @param sockmap the fast path the sockets belong to
     * @return a view that follows it (it answers "not accelerated" once it is closed)
     */
    public static RawSockets of(Sockmap sockmap) {
        return new RawSockets(Objects.requireNonNull(sockmap, "sockmap"));
    }

    /** The fast path these sockets belong to. */
    public Sockmap sockmap() {
        return sockmap;
    }

    /**
     * Joins a connected socket that the integration reads itself to the in-flight bound as a
     * receiver. Claim it before the first read.
     *
     * @param fd         the connected socket
     * @param serverSide whether it was accepted (its local end is the server)
     * @return its counter, or null when the bound does not apply (fast path off, the socket not
     *         registered by the kernel, or the port's bound off)
     * @throws IOException when {@code fd} is not a connected socket
     */
    public ReadCounter readCounter(int fd, boolean serverSide) throws IOException {
        FastPath fp = FastPathAccess.of(sockmap);
        ReadPublisher p = fp == null ? null : fp.claimReadSlot(NativeSocket.borrowed(fd), serverSide, false);
        return p == null ? null : new ReadCounter(p);
    }

    /**
     * The write credit of a connected socket that the integration writes itself. A writer that
     * keeps within it is never sent by TCP for the in-flight bound. Resolve it once connected,
     * before the first write.
     *
     * @param fd         the connected socket
     * @param serverSide whether it was accepted
     * @return its credit, or null when nothing holds its writes (fast path or credit off, this
     *         socket or its peer not registered, or the port's bound off)
     * @throws IOException when {@code fd} is not a connected socket
     */
    public WriteCredit writeCredit(int fd, boolean serverSide) throws IOException {
        FastPath fp = FastPathAccess.of(sockmap);
        PeerCredit c = fp == null ? null : fp.writeCredit(NativeSocket.borrowed(fd), serverSide);
        return c == null ? null : new WriteCredit(c);
    }

    /**
     * Whether the connected socket {@code fd} sends through the redirect: it and its peer are
     * both in the SOCKHASH (checked against the map), and it is not held on TCP (as it is while
     * its peer was not registered yet, or has left too much unread).
     *
     * @param fd a connected socket
     * @return false too when the fast path is off or {@code fd} is not a connected socket
     */
    public boolean isAccelerated(int fd) {
        FastPath fp = FastPathAccess.of(sockmap);
        return fp != null && fp.isAccelerated(NativeSocket.borrowed(fd));
    }

    /**
     * Emits the JFR event {@code io.github.sockmap4j.Connection} for the connected socket
     * {@code fd}. Costs nothing unless a recording enables the event, and a few system calls
     * when one does.
     *
     * @param fd    a connected socket
     * @param bound the in-flight bound it sets as a receiver, -1 for none
     */
    public void recordConnection(int fd, int bound) {
        FastPath fp = FastPathAccess.of(sockmap);
        ConnectionEvent.record(NativeSocket.borrowed(fd), fp == null ? null : fp::isAccelerated, bound);
    }
}
