package io.github.sockmap4j.internal.flow;

import io.github.sockmap4j.linux.bpf.InFlightWatcher;
import io.github.sockmap4j.linux.bpf.KernelSockmap;
import io.github.sockmap4j.linux.bpf.SockStateLayout;
import io.github.sockmap4j.linux.net.NativeSocket;
import io.github.sockmap4j.linux.net.SocketIdentity;
import java.io.IOException;

/**
 * The kernel side of one open {@code Sockmap}, as channels and integrations use it per
 * connection: a receiver's read slot, a writer's credit, whether a socket is accelerated. The
 * public {@code Sockmap} holds one while its kernel side is open and hands it to what it makes
 * (channels, {@code RawSockets}); this package is not exported from the module.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class FastPath implements AutoCloseable {
    private final KernelSockmap kernel;
    private final ReadSlotRegistry readers;
    private final InFlightWatcher watcher;
    private final boolean credit;

    /**
     * The kernel side of {@code kernel}, its watcher started.
     *
     * @param credit whether cooperating writers hold for credit (the configuration's choice)
     */
    public FastPath(KernelSockmap kernel, boolean credit) {
        this.kernel = kernel;
        this.readers = new ReadSlotRegistry(kernel);
        this.watcher = new InFlightWatcher(kernel.inFlight());
        this.credit = credit;
        watcher.start();
    }

    public KernelSockmap kernel() {
        return kernel;
    }

    /** The watcher of this process's receivers that publish nothing. */
    public InFlightWatcher watcher() {
        return watcher;
    }

    /**
     * Who a connected socket is to the kernel's maps (its ends, the endpoint a translated connect
     * went to, its namespace and cookie): a few system calls, made once per connection by
     * {@link ConnectionFlow}.
     *
     * @param serverSide whether the socket was accepted (its local end is the server)
     */
    public SocketIdentity identity(NativeSocket socket, boolean serverSide) throws IOException {
        return kernel.identity(socket, serverSide);
    }

    /**
     * Joins a connected socket that the kernel registered to the in-flight bound as a receiver;
     * null when the bound does not apply (the socket not registered, or its port unbounded).
     *
     * @param id         the socket's {@link #identity}
     * @param serverSide whether the socket was accepted (its local end is the server)
     * @param rcvbufSet  whether the application fixed SO_RCVBUF (then it is the bound)
     */
    public ReadPublisher claimReadSlot(NativeSocket socket, SocketIdentity id, boolean serverSide, boolean rcvbufSet)
            throws IOException {
        return readers.claim(socket, id, serverSide, rcvbufSet);
    }

    /** As {@link #claimReadSlot(NativeSocket, SocketIdentity, boolean, boolean)}, its identity looked up here. */
    public ReadPublisher claimReadSlot(NativeSocket socket, boolean serverSide, boolean rcvbufSet)
            throws IOException {
        return claimReadSlot(socket, identity(socket, serverSide), serverSide, rcvbufSet);
    }

    /**
     * The write credit of a connected socket: null when nothing holds its writes (credit off,
     * this socket or its peer not registered, or the port's bound off).
     */
    public PeerCredit writeCredit(NativeSocket socket, SocketIdentity id, boolean serverSide) throws IOException {
        return credit ? PeerCredit.resolve(kernel, socket, id, serverSide) : null;
    }

    /** As {@link #writeCredit(NativeSocket, SocketIdentity, boolean)}, its identity looked up here. */
    public PeerCredit writeCredit(NativeSocket socket, boolean serverSide) throws IOException {
        return credit ? writeCredit(socket, identity(socket, serverSide), serverSide) : null;
    }

    /**
     * Whether the connected {@code socket}, whose identity is {@code id}, sends through the
     * redirect: it and its peer are both in the SOCKHASH (looked up now), and the kernel does not
     * hold it on TCP.
     */
    public boolean isAccelerated(NativeSocket socket, SocketIdentity id) {
        return kernel.holds(id) && kernel.holdsPeerOf(id)
                && (kernel.inFlight().socketFlags(socket.intValue()) & SockStateLayout.TCP) == 0;
    }

    /** As {@link #isAccelerated(NativeSocket, SocketIdentity)}, its identity looked up here; false if it has none. */
    public boolean isAccelerated(NativeSocket socket) {
        try {
            return isAccelerated(socket, identity(socket, false));
        } catch (IOException e) {
            return false;
        }
    }

    /** A socket's side of the bound, for diagnostics: flags, bytes sent, the peer's published read. */
    public String flowState(NativeSocket socket, SocketIdentity id) {
        return readers.flowState(socket, id);
    }

    /** After a rule's bound changed: this process's receivers on {@code port} take it. */
    public void boundChanged(int port) {
        readers.refix(port);
    }

    /** Stops the watcher and closes the kernel objects' handles of this process. */
    @Override
    public void close() throws IOException {
        watcher.close();
        kernel.close();
    }
}
