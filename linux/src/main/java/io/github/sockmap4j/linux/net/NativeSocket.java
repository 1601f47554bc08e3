package io.github.sockmap4j.linux.net;

import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.ffi.LibC;
import io.github.sockmap4j.linux.ffi.Linux;
import io.github.sockmap4j.linux.ffi.NativeIOException;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.net.SocketOption;
import java.net.StandardSocketOptions;
import java.util.Set;

/**
 * One TCP socket, in the shape of Netty's {@code LinuxSocket}: the only holder of its fd outside
 * the native layer (the {@code linux.ffi}, {@code linux.sys} and {@code linux.bpf} packages, which take
 * {@link #intValue()}). It owns the fd's life and every operation the channels make on it.
 *
 * <p>Life: an owned socket's fd is closed exactly once ({@link #closeNow}); its channel does so
 * only when nothing uses it any more: the channel closed, no thread in an operation on it
 * ({@link #enter}/{@link #exit}), and no selector holding it. Closing earlier would let the kernel
 * give the number to another file while a thread or a selector still uses it. A {@link #borrowed}
 * socket (one a Netty channel owns) is never closed here.
 *
 * <p>The hot operations ({@link #recv}, {@link #send}, {@link #sendmsg}, {@link #await}) allocate
 * nothing; they return {@code -errno} as {@link LibC}'s {@code try*} calls do.
 *
 * <p><b>Note:</b> {@link #enter}, {@link #exit} and {@link #inUse} are not threadsafe by
 * themselves: the owning channel calls them under its state lock (one monitor per operation, not
 * two). {@link #isClosed} may be read from any thread; the operations are the kernel's.
 */
public final class NativeSocket {
    private final int fd;
    private final boolean owned;
    private int users;
    private volatile boolean closed;

    private NativeSocket(int fd, boolean owned) {
        this.fd = fd;
        this.owned = owned;
    }

    /**
     * A new non-blocking TCP socket: AF_INET6 dual-stack where possible, as Java's own sockets are.
     */
    public static NativeSocket newStream() throws NativeIOException {
        int family = Sockets.ipv6Available() ? Linux.AF_INET6 : Linux.AF_INET;
        int fd = LibC.socket(family, Linux.SOCK_STREAM | Linux.SOCK_NONBLOCK | Linux.SOCK_CLOEXEC, 0);
        NativeSocket s = new NativeSocket(fd, true);
        if (family == Linux.AF_INET6) {
            try {
                s.setInt(Linux.IPPROTO_IPV6, Linux.IPV6_V6ONLY, 0);
            } catch (NativeIOException e) {
                s.closeNow();
                throw e;
            }
        }
        return s;
    }

    /** A new Unix stream socket (blocking, close-on-exec), for a local control connection. */
    public static NativeSocket newUnixStream() throws NativeIOException {
        return new NativeSocket(LibC.socket(Linux.AF_UNIX, Linux.SOCK_STREAM | Linux.SOCK_CLOEXEC, 0), true);
    }

    /**
     * A blocking Unix stream socket connected to {@code path}.
     *
     * @throws IOException naming the path when nothing listens there (or the path is too long)
     */
    public static NativeSocket connectUnix(java.nio.file.Path path) throws IOException {
        NativeSocket s = newUnixStream();
        try (Arena arena = Arena.ofConfined()) {
            Errno.ok("connect", LibC.tryConnect(s.fd, Sockets.encodeUnix(arena, path)), path.toString());
            return s;
        } catch (IOException | RuntimeException e) {
            s.closeNow();
            throw e;
        }
    }

    /**
     * A socket another owner (a Netty channel) holds: every operation, never closed here.
     *
     * @param fd a socket fd that stays open while this object is used
     */
    public static NativeSocket borrowed(int fd) {
        return new NativeSocket(fd, false);
    }

    /** The fd number, for the native layer's calls: valid while this is not {@link #isClosed() closed}. */
    public int intValue() {
        return fd;
    }

    // Life

    /** One more operation uses the fd; it stays open until the matching {@link #exit}. */
    public void enter() {
        users++;
    }

    /** An operation that {@link #enter entered} is done. */
    public void exit() {
        users--;
    }

    /** Whether an operation is in progress on the fd. */
    public boolean inUse() {
        return users > 0;
    }

    /** Closes the fd (an owned one) now, once: its owner knows nothing uses it any more. */
    public void closeNow() {
        if (closed) {
            return;
        }
        closed = true;
        if (owned) {
            LibC.close(fd);
        }
    }

    /** Whether the fd has been closed. */
    public boolean isClosed() {
        return closed;
    }

    // Mode and options

    /** Switches O_NONBLOCK: a blocking socket waits in recv, send and accept. */
    public void setBlocking(boolean blocking) throws NativeIOException {
        LibC.setNonBlocking(fd, !blocking);
    }

    /** {@link #setBlocking}, closing the socket when that fails (for a socket being set up). */
    public NativeSocket blockingOrClose() throws NativeIOException {
        try {
            setBlocking(true);
            return this;
        } catch (NativeIOException e) {
            closeNow();
            throw e;
        }
    }

    public void setInt(int level, int name, int value) throws NativeIOException {
        LibC.setsockoptInt(fd, level, name, value);
    }

    /** getsockopt into {@code out}: the length the kernel wrote. */
    public int getsockopt(int level, int name, MemorySegment out) throws NativeIOException {
        return LibC.getsockopt(fd, level, name, out);
    }

    public long getLong(int level, int name) throws NativeIOException {
        return LibC.getsockoptLong(fd, level, name);
    }

    private static int[] levelAndName(SocketOption<?> name) {
        if (name == StandardSocketOptions.SO_RCVBUF) {
            return new int[] {Linux.SOL_SOCKET, Linux.SO_RCVBUF};
        } else if (name == StandardSocketOptions.SO_SNDBUF) {
            return new int[] {Linux.SOL_SOCKET, Linux.SO_SNDBUF};
        } else if (name == StandardSocketOptions.SO_KEEPALIVE) {
            return new int[] {Linux.SOL_SOCKET, Linux.SO_KEEPALIVE};
        } else if (name == StandardSocketOptions.SO_REUSEADDR) {
            return new int[] {Linux.SOL_SOCKET, Linux.SO_REUSEADDR};
        } else if (name == StandardSocketOptions.SO_REUSEPORT) {
            return new int[] {Linux.SOL_SOCKET, Linux.SO_REUSEPORT};
        } else if (name == StandardSocketOptions.TCP_NODELAY) {
            return new int[] {Linux.IPPROTO_TCP, Linux.TCP_NODELAY};
        }
        return null;
    }

    /** Sets one of {@code supported} (the channel kind's options) as java.net names them. */
    public <T> void setOption(Set<SocketOption<?>> supported, SocketOption<T> name, T value) throws IOException {
        if (!supported.contains(name)) {
            throw new UnsupportedOperationException("'" + name + "' not supported");
        }
        if (value == null) {
            throw new IllegalArgumentException("option value is null: " + name);
        }
        if (name == StandardSocketOptions.SO_LINGER) {
            int secs = (Integer) value;
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment l = arena.allocate(8, 4);
                l.set(ValueLayout.JAVA_INT, 0, secs < 0 ? 0 : 1);
                l.set(ValueLayout.JAVA_INT, 4, Math.max(secs, 0));
                LibC.setsockopt(fd, Linux.SOL_SOCKET, Linux.SO_LINGER, l);
            }
            return;
        }
        int[] ln = levelAndName(name);
        int v = value instanceof Boolean b ? (b ? 1 : 0) : (Integer) value;
        if ((name == StandardSocketOptions.SO_RCVBUF || name == StandardSocketOptions.SO_SNDBUF) && v <= 0) {
            throw new IllegalArgumentException("buffer size must be positive: " + name + "=" + v);
        }
        LibC.setsockoptInt(fd, ln[0], ln[1], v);
    }

    @SuppressWarnings("unchecked")
    public <T> T getOption(Set<SocketOption<?>> supported, SocketOption<T> name) throws IOException {
        if (!supported.contains(name)) {
            throw new UnsupportedOperationException("'" + name + "' not supported");
        }
        if (name == StandardSocketOptions.SO_LINGER) {
            long v = LibC.getsockoptLong(fd, Linux.SOL_SOCKET, Linux.SO_LINGER);
            int on = (int) v;
            int secs = (int) (v >>> 32);
            return (T) Integer.valueOf(on == 0 ? -1 : secs);
        }
        int[] ln = levelAndName(name);
        int v = LibC.getsockoptInt(fd, ln[0], ln[1]);
        if (name.type() == Boolean.class) {
            return (T) Boolean.valueOf(v != 0);
        }
        return (T) Integer.valueOf(v);
    }


    // Addresses and identity

    public void bind(InetSocketAddress local) throws NativeIOException {
        try (Arena arena = Arena.ofConfined()) {
            LibC.bind(fd, Sockets.encode(arena, local));
        }
    }

    /** Binds to an address already in its C form (a {@code sockaddr_un}). */
    public void bind(MemorySegment sockaddr) throws NativeIOException {
        LibC.bind(fd, sockaddr);
    }

    public void listen(int backlog) throws NativeIOException {
        LibC.listen(fd, backlog);
    }

    public InetSocketAddress localAddress() throws NativeIOException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment sa = arena.allocate(SockAddr.SIZE, 4);
            LibC.getsockname(fd, sa);
            return SockAddr.decode(sa);
        }
    }

    public InetSocketAddress remoteAddress() throws NativeIOException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment sa = arena.allocate(SockAddr.SIZE, 4);
            LibC.getpeername(fd, sa);
            return SockAddr.decode(sa);
        }
    }

    /** The kernel's socket cookie (what a SOCKHASH lookup from user space returns). */
    public long cookie() throws NativeIOException {
        return getLong(Linux.SOL_SOCKET, Linux.SO_COOKIE);
    }

    /** The cookie of the socket's network namespace (kernel 5.14+). */
    public long netnsCookie() throws NativeIOException {
        return getLong(Linux.SOL_SOCKET, Linux.SO_NETNS_COOKIE);
    }

    /**
     * Who this connected socket is to the kernel's maps: four system calls.
     *
     * @throws NativeIOException when it is not a connected socket
     */
    public SocketIdentity identity() throws NativeIOException {
        return new SocketIdentity(localAddress(), remoteAddress(), netnsCookie(), cookie());
    }

    // Connecting and accepting

    /**
     * Starts a connect to {@code remote} without waiting in connect(2), whatever the mode: a
     * blocking socket is made non-blocking for the call and, unless the connect is in progress,
     * blocking again.
     *
     * @return 0 when connected, -EINPROGRESS while the handshake runs, another -errno on failure
     */
    public int connectNow(InetSocketAddress remote, boolean blocking) throws NativeIOException {
        if (blocking) {
            setBlocking(false);
        }
        int r;
        try (Arena arena = Arena.ofConfined()) {
            r = LibC.tryConnect(fd, Sockets.encode(arena, remote));
        }
        if (blocking && r != -Errno.EINPROGRESS) {
            setBlocking(true);
        }
        return r;
    }

    /** After a connect in progress completed: its error (0 for none); a blocking socket is blocking again. */
    public int connectResult(boolean blocking) throws NativeIOException {
        int err = LibC.getsockoptInt(fd, Linux.SOL_SOCKET, Linux.SO_ERROR);
        if (blocking) {
            setBlocking(true);
        }
        return err;
    }

    /**
     * accept4(2) of a waiting connection (non-blocking, close-on-exec), past EINTR and connections
     * aborted before they were taken.
     *
     * @return the accepted socket, null when none is waiting (EAGAIN)
     */
    public NativeSocket acceptNow() throws NativeIOException {
        while (true) {
            int afd = LibC.tryAccept(fd);
            if (afd >= 0) {
                return new NativeSocket(afd, true);
            }
            if (-afd == Errno.EAGAIN) {
                return null;
            }
            if (-afd != Errno.EINTR && -afd != Errno.ECONNABORTED) {
                throw Errno.error("accept4", afd);
            }
        }
    }

    // Waiting and waking

    /** Waits until the socket has one of {@code events}; false on timeout. */
    public boolean await(short events, int timeoutMillis) throws NativeIOException {
        while (true) {
            int r = LibC.tryPoll(fd, events, timeoutMillis);
            if (r >= 0) {
                return r != 0;
            }
            if (-r != Errno.EINTR) {
                throw Errno.error("poll", r);
            }
        }
    }

    /** poll(2) of this socket: the returned events, 0 on timeout, or {@code -errno}. */
    public int poll(short events, int timeoutMillis) {
        return LibC.tryPoll(fd, events, timeoutMillis);
    }

    /** shutdown(2); ENOTCONN is not an error (the peer may be gone already). */
    public void shutdown(int how) throws NativeIOException {
        LibC.shutdown(fd, how);
    }

    /** Wakes a thread waiting on this socket in recv, accept or poll; nothing when none can be. */
    public void wakeWaiters() {
        try {
            shutdown(Linux.SHUT_RDWR);
        } catch (NativeIOException ignored) {
            // Not connected: nobody can be waiting.
        }
    }

    // I/O: -errno on failure, no allocation

    /** recv(2) into native or heap memory: bytes, 0 at end of stream, or {@code -errno}. */
    public long recv(MemorySegment dst, int flags) {
        return LibC.tryRecv(fd, dst, flags);
    }

    /** send(2) from native or heap memory, without SIGPIPE: bytes, or {@code -errno}. */
    public long send(MemorySegment src, int flags) {
        return LibC.trySend(fd, src, flags);
    }

    /** sendmsg(2) of {@code count} iovecs: see {@link LibC#trySendmsg}. */
    public long sendmsg(MemorySegment msghdr, MemorySegment iovecs, int count, int flags) {
        return LibC.trySendmsg(fd, msghdr, iovecs, count, flags);
    }

    /** FIONREAD: bytes the next read would return. */
    public int fionread() throws NativeIOException {
        return LibC.fionread(fd);
    }

    @Override
    public String toString() {
        return "socket " + fd + (closed ? " (closed)" : "");
    }
}
