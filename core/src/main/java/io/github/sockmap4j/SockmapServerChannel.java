package io.github.sockmap4j;

import io.github.sockmap4j.linux.ffi.Linux;
import io.github.sockmap4j.linux.ffi.NativeIOException;
import io.github.sockmap4j.linux.net.NativeSocket;
import io.github.sockmap4j.linux.net.SocketOptions;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.SocketAddress;
import java.net.SocketOption;
import java.nio.channels.AlreadyBoundException;
import java.nio.channels.NotYetBoundException;
import java.nio.channels.SelectionKey;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.channels.spi.SelectorProvider;
import java.util.Set;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A listening TCP channel whose port is opted in to the fast path from {@link #bind} until
 * {@link #close()}: every same-host connection to it, from Java or not, from this process or
 * another in the attached cgroup, is registered by the kernel at the handshake.
 *
 * <p>{@link #socket()} is not supported: there is no {@code java.net.ServerSocket} adaptor.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class SockmapServerChannel extends ServerSocketChannel {
    private final Sockmap sockmap;
    private final ReentrantLock acceptLock = new ReentrantLock();
    /** The socket, and the state lock (the object itself) that guards the fields below. */
    private final ChannelSocket io;
    private final NativeSocket socket;
    private InetSocketAddress local;
    private OptIn optIn;

    SockmapServerChannel(SelectorProvider provider, Sockmap sockmap) throws IOException {
        super(provider);
        this.sockmap = sockmap;
        NativeSocket s = NativeSocket.newStream();
        try {
            s.setInt(Linux.SOL_SOCKET, Linux.SO_REUSEADDR, 1);
        } catch (NativeIOException e) {
            s.closeNow();
            throw e;
        }
        this.socket = s.blockingOrClose(); // new channels are in blocking mode
        this.io = new ChannelSocket(this, socket, SocketOptions.SERVER_OPTIONS, false, () -> { });
    }

    /** A new server channel over the process-wide {@link Sockmap#global()}. */
    public static SockmapServerChannel open() throws IOException {
        return Sockmap.global().openServerChannel();
    }

    public Sockmap sockmap() {
        return sockmap;
    }

    /** What a selector uses of this channel. */
    Selectable selectable() {
        return new Selectable(socket, this::translateReadyOps, io::kill, () -> false, () -> true);
    }

    /** Whether this server's port is opted in to the fast path in the kernel. */
    public boolean isOptedIn() {
        synchronized (io) {
            return optIn != null && optIn.active();
        }
    }

    @Override
    public ServerSocketChannel bind(SocketAddress addr, int backlog) throws IOException {
        synchronized (io) {
            io.ensureOpen();
            if (local != null) {
                throw new AlreadyBoundException();
            }
            InetSocketAddress isa = addr == null ? new InetSocketAddress(0) : SocketOptions.checkAddress(addr);
            socket.bind(isa);
            socket.listen(backlog < 1 ? 128 : backlog);
            local = socket.localAddress();
            optIn = isa.getAddress().isAnyLocalAddress()
                    ? sockmap.optIn(local.getPort())
                    : sockmap.optIn(local.getPort(), local.getAddress(),
                            local.getAddress() instanceof java.net.Inet4Address ? 32 : 128);
        }
        return this;
    }

    @Override
    public SocketChannel accept() throws IOException {
        acceptLock.lock();
        try {
            synchronized (io) {
                io.ensureOpen();
                if (local == null) {
                    throw new NotYetBoundException();
                }
                socket.enter();
            }
            boolean blocking = isBlocking();
            boolean completed = false;
            if (blocking) {
                begin(); // accept4(2) waits on a blocking fd; close() wakes it with shutdown(2)
            }
            try {
                while (!blocking || isOpen()) {
                    NativeSocket accepted = socket.acceptNow();
                    if (accepted != null) {
                        completed = true;
                        return new SockmapChannel(provider(), sockmap, accepted, true, io.rcvbufSet());
                    }
                    if (!blocking) {
                        completed = true;
                        return null;
                    }
                    socket.await(Linux.POLLIN, -1);
                }
                return null;
            } catch (NativeIOException e) {
                if (!isOpen()) {
                    throw new java.nio.channels.AsynchronousCloseException();
                }
                throw e;
            } finally {
                io.exit();
                if (blocking) {
                    end(completed && isOpen());
                }
            }
        } finally {
            acceptLock.unlock();
        }
    }

    @Override
    public SocketAddress getLocalAddress() throws IOException {
        synchronized (io) {
            io.ensureOpen();
            return local;
        }
    }

    @Override
    public ServerSocket socket() {
        throw new UnsupportedOperationException(
                "SockmapServerChannel has no java.net.ServerSocket adaptor: use the channel's own methods");
    }

    @Override
    public <T> ServerSocketChannel setOption(SocketOption<T> name, T value) throws IOException {
        io.setOption(name, value);
        return this;
    }

    @Override
    public <T> T getOption(SocketOption<T> name) throws IOException {
        return io.getOption(name);
    }

    @Override
    public Set<SocketOption<?>> supportedOptions() {
        return io.supportedOptions();
    }

    private int translateReadyOps(int events, int interest) {
        if ((events & (Linux.EPOLLIN | Linux.EPOLLERR | Linux.EPOLLHUP)) != 0) {
            return interest & SelectionKey.OP_ACCEPT;
        }
        return 0;
    }

    @Override
    protected void implConfigureBlocking(boolean block) throws IOException {
        io.configureBlocking(block);
    }

    @Override
    protected void implCloseSelectableChannel() throws IOException {
        boolean listening;
        synchronized (io) {
            if (optIn != null) {
                optIn.close();
            }
            listening = local != null;
        }
        io.closed(listening); // a thread waiting to accept, on a listening socket
    }

    @Override
    public String toString() {
        synchronized (io) {
            return "SockmapServerChannel[" + (isOpen() ? (local == null ? "unbound" : local.toString()) : "closed")
                    + (isOptedIn() ? ", opted in" : "") + "]";
        }
    }
}
