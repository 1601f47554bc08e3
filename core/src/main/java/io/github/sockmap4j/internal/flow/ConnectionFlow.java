package io.github.sockmap4j.internal.flow;

import io.github.sockmap4j.internal.jfr.ConnectionEvent;
import io.github.sockmap4j.linux.net.NativeSocket;
import io.github.sockmap4j.linux.net.SocketIdentity;
import java.io.IOException;
import java.util.function.Supplier;
import org.slf4j.LoggerFactory;

/**
 * One connection's part in the fast path, the one object a channel keeps for it: who it is to the
 * kernel's maps (resolved once connected, the system calls not repeated per question), its read slot
 * (the connection as a receiver, publishing its reads for the in-flight bound), claimed once
 * connected; its write credit (the connection as a sender), resolved at the first write; what is
 * asked about it (accelerated, its bound, its state); all let go with the socket.
 *
 * <p><b>Note:</b> not threadsafe by itself: {@link #connected} and {@link #close} run under the
 * channel's state lock, {@link #onRead} under its read lock, {@link #credit} under its write lock.
 */
public final class ConnectionFlow {
    private final Supplier<FastPath> fastPath;
    private final NativeSocket socket;
    /** The channel, for the log. */
    private final Object owner;
    private boolean serverSide;
    /** Who the socket is to the kernel's maps, resolved once connected; null when it could not be. */
    private volatile SocketIdentity identity;
    /** Where this end publishes its reads; null when it sets no bound. */
    private volatile ReadPublisher readSlot;
    private volatile CreditEngine credit;
    private boolean creditResolved;

    /**
     * @param fastPath the open kernel side of the channel's {@code Sockmap}, null once it has none
     * @param socket   the channel's socket
     * @param owner    the channel, named in the log
     */
    public ConnectionFlow(Supplier<FastPath> fastPath, NativeSocket socket, Object owner) {
        this.fastPath = fastPath;
        this.socket = socket;
        this.owner = owner;
    }

    /**
     * The socket is connected: joins the in-flight bound as a receiver (before any read) and
     * emits the JFR connection event.
     *
     * @param serverSide whether it was accepted (its local end is the server, whose port has the policy)
     * @param rcvbufSet  whether the application fixed SO_RCVBUF (then it is the bound)
     */
    public void connected(boolean serverSide, boolean rcvbufSet) {
        this.serverSide = serverSide;
        FastPath fp = fastPath.get();
        try {
            if (fp != null) {
                identity = fp.identity(socket, serverSide);
                readSlot = fp.claimReadSlot(socket, identity, serverSide, rcvbufSet);
            }
        } catch (IOException e) {
            LoggerFactory.getLogger(ConnectionFlow.class)
                    .warn("{} receives without an in-flight bound: {}", owner, e.getMessage());
        }
        ReadPublisher p = readSlot;
        ConnectionEvent.record(socket, fp == null ? null : fp::isAccelerated, p == null ? -1 : p.bound());
    }

    /** Whether this end publishes its reads (a spinning reader then polls first). */
    public boolean bounded() {
        return readSlot != null;
    }

    /** {@code n} bytes were read: published for the peer's credit. */
    public void onRead(long n) {
        ReadPublisher p = readSlot;
        if (p != null) {
            p.onRead((int) n);
        }
    }

    /** The bound this end sets as a receiver, -1 for none (or once the fast path is gone). */
    public int bound() {
        ReadPublisher p = readSlot;
        return p == null || fastPath.get() == null ? -1 : p.bound();
    }

    /** Whether the connected socket sends through the redirect now (looked up in the kernel's maps). */
    public boolean isAccelerated() {
        FastPath fp = fastPath.get();
        SocketIdentity id = identity;
        return fp != null && (id != null ? fp.isAccelerated(socket, id) : fp.isAccelerated(socket));
    }

    /** This socket's side of the bound, for diagnostics. */
    public String state() {
        FastPath fp = fastPath.get();
        SocketIdentity id = identity;
        return fp == null ? "off" : id == null ? "no identity" : fp.flowState(socket, id);
    }

    /**
     * The connection's write credit, resolved at the first call (the first write: by then the
     * peer is registered if it ever is); null when nothing holds its writes.
     */
    public CreditEngine credit() {
        if (!creditResolved) {
            creditResolved = true;
            try {
                FastPath fp = fastPath.get();
                SocketIdentity id = identity;
                PeerCredit c = fp == null ? null : id != null ? fp.writeCredit(socket, id, serverSide)
                        : fp.writeCredit(socket, serverSide);
                credit = c == null ? null : CreditEngine.of(c);
            } catch (IOException e) {
                LoggerFactory.getLogger(ConnectionFlow.class).warn(
                        "{} writes without credit (the in-flight bound may send it by TCP): {}", owner, e.getMessage());
            }
        }
        return credit;
    }

    /** The credit if a write resolved it, else null: for a selector, from any thread. */
    public CreditEngine resolvedCredit() {
        return credit;
    }

    /** The socket is about to close: the read slot goes back. */
    public void close() {
        ReadPublisher p = readSlot;
        if (p != null) {
            readSlot = null;
            p.close();
        }
    }
}
