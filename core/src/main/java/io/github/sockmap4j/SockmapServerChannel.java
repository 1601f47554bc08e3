package io.github.sockmap4j;

import io.github.sockmap4j.internal.ffi.Errno;
import io.github.sockmap4j.internal.ffi.LibC;
import io.github.sockmap4j.internal.ffi.NativeIOException;
import io.github.sockmap4j.internal.net.NativeFd;
import io.github.sockmap4j.internal.net.SocketOptions;
import io.github.sockmap4j.internal.net.Sockets;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.SocketAddress;
import java.net.SocketOption;
import java.nio.channels.AlreadyBoundException;
import java.nio.channels.ClosedChannelException;
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
    private final Object stateLock = new Object();
    private final int fd;
    /** The fd, closed by the last of: close(), an accept in progress, the last selector. */
    private final NativeFd nativeFd;
    private InetSocketAddress local;
    private OptIn optIn;
    /** Whether the application fixed SO_RCVBUF; accepted sockets inherit it. */
    private volatile boolean rcvbufSet;

    SockmapServerChannel(SelectorProvider provider, Sockmap sockmap) throws IOException {
        super(provider);
        this.sockmap = sockmap;
        this.fd = Sockets.newStreamSocket();
        this.nativeFd = new NativeFd(fd, () -> { });
        try {
            LibC.setsockoptInt(fd, LibC.SOL_SOCKET, LibC.SO_REUSEADDR, 1);
            LibC.setNonBlocking(fd, false); // new channels are in blocking mode
        } catch (NativeIOException e) {
            LibC.close(fd);
            throw e;
        }
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
        return new Selectable(fd, this::translateReadyOps, this::kill, () -> false, () -> true);
    }

    /** Whether this server's port is opted in to the fast path in the kernel. */
    public boolean isOptedIn() {
        synchronized (stateLock) {
            return optIn != null && optIn.active();
        }
    }

    @Override
    public ServerSocketChannel bind(SocketAddress addr, int backlog) throws IOException {
        synchronized (stateLock) {
            if (!isOpen()) {
                throw new ClosedChannelException();
            }
            if (local != null) {
                throw new AlreadyBoundException();
            }
            InetSocketAddress isa = addr == null ? new InetSocketAddress(0) : SocketOptions.checkAddress(addr);
            Sockets.bind(fd, isa);
            LibC.listen(fd, backlog < 1 ? 128 : backlog);
            local = Sockets.localAddress(fd);
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
            synchronized (stateLock) {
                if (!isOpen()) {
                    throw new ClosedChannelException();
                }
                if (local == null) {
                    throw new NotYetBoundException();
                }
                nativeFd.enter();
            }
            boolean blocking = isBlocking();
            boolean completed = false;
            if (blocking) {
                begin(); // accept4(2) waits on a blocking fd; close() wakes it with shutdown(2)
            }
            try {
                while (true) {
                    if (blocking && !isOpen()) {
                        return null;
                    }
                    int afd = LibC.tryAccept(fd);
                    if (afd >= 0) {
                        completed = true;
                        return new SockmapChannel(provider(), sockmap, afd, true, rcvbufSet);
                    }
                    int err = -afd;
                    if (err == Errno.EINTR || err == Errno.ECONNABORTED) {
                        continue;
                    }
                    if (err == Errno.EAGAIN && !blocking) {
                        completed = true;
                        return null;
                    }
                    if (err != Errno.EAGAIN) {
                        if (!isOpen()) {
                            throw new java.nio.channels.AsynchronousCloseException();
                        }
                        throw new NativeIOException("accept4", err);
                    }
                    Sockets.await(fd, LibC.POLLIN, -1);
                }
            } finally {
                synchronized (stateLock) {
                    nativeFd.exit();
                }
                kill();
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
        synchronized (stateLock) {
            if (!isOpen()) {
                throw new ClosedChannelException();
            }
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
        synchronized (stateLock) {
            if (!isOpen()) {
                throw new ClosedChannelException();
            }
            SocketOptions.setOption(fd, SocketOptions.SERVER_OPTIONS, name, value);
            if (name == java.net.StandardSocketOptions.SO_RCVBUF) {
                rcvbufSet = true;
            }
        }
        return this;
    }

    @Override
    public <T> T getOption(SocketOption<T> name) throws IOException {
        synchronized (stateLock) {
            if (!isOpen()) {
                throw new ClosedChannelException();
            }
            return SocketOptions.getOption(fd, SocketOptions.SERVER_OPTIONS, name);
        }
    }

    @Override
    public Set<SocketOption<?>> supportedOptions() {
        return SocketOptions.SERVER_OPTIONS;
    }

    private int translateReadyOps(int events, int interest) {
        if ((events & (LibC.EPOLLIN | LibC.EPOLLERR | LibC.EPOLLHUP)) != 0) {
            return interest & SelectionKey.OP_ACCEPT;
        }
        return 0;
    }

    @Override
    protected void implConfigureBlocking(boolean block) throws IOException {
        synchronized (stateLock) {
            if (!isOpen()) {
                throw new ClosedChannelException();
            }
            LibC.setNonBlocking(fd, !block);
        }
    }

    @Override
    protected void implCloseSelectableChannel() throws IOException {
        synchronized (stateLock) {
            if (optIn != null) {
                optIn.close();
            }
            if (!nativeFd.isClosed() && local != null) {
                Sockets.wakeWaiters(fd); // on a listening socket: a thread waiting to accept
            }
        }
        kill();
    }

    /** Closes the fd once closed, out of every selector and out of accept. */
    void kill() {
        synchronized (stateLock) {
            nativeFd.closeIfUnused(!isOpen() && !isRegistered());
        }
    }

    @Override
    public String toString() {
        synchronized (stateLock) {
            return "SockmapServerChannel[" + (isOpen() ? (local == null ? "unbound" : local.toString()) : "closed")
                    + (isOptedIn() ? ", opted in" : "") + "]";
        }
    }
}
