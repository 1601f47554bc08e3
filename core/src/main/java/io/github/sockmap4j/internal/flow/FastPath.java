package io.github.sockmap4j.internal.flow;

import io.github.sockmap4j.internal.bpf.InFlightWatcher;
import io.github.sockmap4j.internal.bpf.KernelSockmap;
import io.github.sockmap4j.internal.bpf.SockStateLayout;
import io.github.sockmap4j.internal.net.SocketIdentity;
import java.io.IOException;
import java.util.Objects;
import java.util.function.Function;

/**
 * The kernel side of one open {@code Sockmap}, as channels and integrations use it per
 * connection: a receiver's read slot, a writer's credit, whether a socket is accelerated. The
 * public {@code Sockmap} holds one while its kernel side is open; {@link #of} finds it for the
 * integration and operator packages, which cannot reach into {@code Sockmap} themselves.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class FastPath implements AutoCloseable {
    private static volatile Function<Object, FastPath> access;

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

    /** Set once by {@code Sockmap}: how an instance's fast path is found. */
    public static void access(Function<Object, FastPath> a) {
        access = Objects.requireNonNull(a);
    }

    /**
     * The open kernel side of {@code sockmap} (a {@code Sockmap}), or null when it has none (off,
     * closed, or its opt-ins go through an agent).
     */
    public static FastPath of(Object sockmap) {
        Objects.requireNonNull(sockmap, "sockmap");
        // Set by Sockmap's static initializer, which has run before any Sockmap exists.
        Function<Object, FastPath> a = access;
        if (a == null) {
            throw new IllegalArgumentException("not a Sockmap: " + sockmap.getClass().getName());
        }
        return a.apply(sockmap);
    }

    public KernelSockmap kernel() {
        return kernel;
    }

    /**
     * Joins a connected socket that the kernel registered to the in-flight bound as a receiver;
     * null when the bound does not apply (the socket not registered, or its port unbounded).
     *
     * @param serverSide whether the socket was accepted (its local end is the server)
     * @param rcvbufSet  whether the application fixed SO_RCVBUF (then it is the bound)
     */
    public ReadPublisher claimReadSlot(int fd, boolean serverSide, boolean rcvbufSet) throws IOException {
        return readers.claim(fd, serverSide, rcvbufSet);
    }

    /**
     * The write credit of a connected socket: null when nothing holds its writes (credit off,
     * this socket or its peer not registered, or the port's bound off).
     */
    public PeerCredit writeCredit(int fd, boolean serverSide) throws IOException {
        return credit ? PeerCredit.resolve(kernel, fd, serverSide) : null;
    }

    /**
     * Whether the connected socket {@code fd} sends through the redirect: it and its peer are
     * both in the SOCKHASH, and the kernel does not hold it on TCP.
     */
    public boolean isAccelerated(int fd) {
        try {
            SocketIdentity id = kernel.identity(fd);
            return kernel.holds(id) && kernel.holdsPeerOf(id)
                    && (kernel.inFlight().socketFlags(fd) & SockStateLayout.TCP) == 0;
        } catch (IOException e) {
            return false;
        }
    }

    /** A socket's side of the bound, for diagnostics: flags, bytes sent, the peer's published read. */
    public String flowState(int fd) {
        return readers.flowState(fd);
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
