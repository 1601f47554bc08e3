package io.github.sockmap4j.internal.net;

import io.github.sockmap4j.internal.ffi.Errno;
import io.github.sockmap4j.internal.ffi.LibC;
import io.github.sockmap4j.internal.ffi.NativeIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;

/** Socket-fd helpers shared by the channels and the kernel probe. All fds are non-blocking. */
public final class Sockets {
    private static volatile Boolean ipv6;

    private Sockets() {
    }

    /** Whether AF_INET6 sockets can be made here (IPv6 may be disabled in the kernel). */
    public static boolean ipv6Available() {
        Boolean v = ipv6;
        if (v == null) {
            try {
                LibC.close(LibC.socket(LibC.AF_INET6, LibC.SOCK_STREAM | LibC.SOCK_CLOEXEC, 0));
                v = Boolean.TRUE;
            } catch (NativeIOException e) {
                v = Boolean.FALSE;
            }
            ipv6 = v;
        }
        return v;
    }

    /** A non-blocking TCP socket: AF_INET6 dual-stack where possible, as Java's own sockets are. */
    public static int newStreamSocket() throws NativeIOException {
        int family = ipv6Available() ? LibC.AF_INET6 : LibC.AF_INET;
        int fd = LibC.socket(family, LibC.SOCK_STREAM | LibC.SOCK_NONBLOCK | LibC.SOCK_CLOEXEC, 0);
        if (family == LibC.AF_INET6) {
            try {
                LibC.setsockoptInt(fd, LibC.IPPROTO_IPV6, LibC.IPV6_V6ONLY, 0);
            } catch (NativeIOException e) {
                LibC.close(fd);
                throw e;
            }
        }
        return fd;
    }

    /** The sockaddr for {@code fd}'s family. */
    private static final InetAddress IN6ADDR_ANY;

    static {
        try {
            IN6ADDR_ANY = InetAddress.getByAddress(new byte[16]);
        } catch (java.net.UnknownHostException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    public static MemorySegment encode(Arena arena, InetSocketAddress addr) throws NativeIOException {
        if (ipv6Available()) {
            // As the JDK's dual-stack sockets do: the IPv4 wildcard is the IPv6 one, which takes both
            // families (IPV6_V6ONLY is off), where ::ffff:0.0.0.0 would take IPv4 only.
            if (addr.getAddress() instanceof java.net.Inet4Address && addr.getAddress().isAnyLocalAddress()) {
                addr = new InetSocketAddress(IN6ADDR_ANY, addr.getPort());
            }
            return SockAddr.encode6(arena, addr);
        }
        if (addr.getAddress() instanceof Inet6Address) {
            throw new NativeIOException("connect", Errno.EINVAL, "IPv6 is not available on this host: " + addr);
        }
        return SockAddr.encode4(arena, addr);
    }

    public static InetSocketAddress localAddress(int fd) throws NativeIOException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment sa = arena.allocate(SockAddr.SIZE, 4);
            LibC.getsockname(fd, sa);
            return SockAddr.decode(sa);
        }
    }

    public static InetSocketAddress remoteAddress(int fd) throws NativeIOException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment sa = arena.allocate(SockAddr.SIZE, 4);
            LibC.getpeername(fd, sa);
            return SockAddr.decode(sa);
        }
    }

    /** The kernel's socket cookie (what a SOCKHASH lookup from user space returns). */
    public static long cookie(int fd) throws NativeIOException {
        return LibC.getsockoptLong(fd, LibC.SOL_SOCKET, LibC.SO_COOKIE);
    }

    /** The cookie of the socket's network namespace (kernel 5.14+). */
    public static long netnsCookie(int fd) throws NativeIOException {
        return LibC.getsockoptLong(fd, LibC.SOL_SOCKET, LibC.SO_NETNS_COOKIE);
    }

    /** Waits until the fd has one of {@code events}; false on timeout. */
    public static boolean await(int fd, short events, int timeoutMillis) throws NativeIOException {
        while (true) {
            int r = LibC.tryPoll(fd, events, timeoutMillis);
            if (r >= 0) {
                return r != 0;
            }
            if (-r != Errno.EINTR) {
                throw new NativeIOException("poll", -r);
            }
        }
    }

    /** Puts {@code fd} in blocking mode, as new channels are; closes it when that fails. */
    public static void blockingOrClose(int fd) throws NativeIOException {
        try {
            LibC.setNonBlocking(fd, false);
        } catch (NativeIOException e) {
            LibC.close(fd);
            throw e;
        }
    }

    /**
     * Starts a connect of {@code fd} to {@code remote} without waiting in connect(2), whatever
     * the fd's mode: a blocking fd is made non-blocking for the call and, unless the connect is
     * in progress, blocking again.
     *
     * @return 0 when connected, -EINPROGRESS while the handshake runs, another -errno on failure
     */
    public static int connectNow(int fd, InetSocketAddress remote, boolean blocking) throws NativeIOException {
        if (blocking) {
            LibC.setNonBlocking(fd, true);
        }
        int r;
        try (Arena arena = Arena.ofConfined()) {
            r = LibC.tryConnect(fd, encode(arena, remote));
        }
        if (blocking && r != -Errno.EINPROGRESS) {
            LibC.setNonBlocking(fd, false);
        }
        return r;
    }

    /**
     * After a connect in progress completed: its error (0 for none); a blocking fd is blocking again.
     */
    public static int connectResult(int fd, boolean blocking) throws NativeIOException {
        int err = LibC.getsockoptInt(fd, LibC.SOL_SOCKET, LibC.SO_ERROR);
        if (blocking) {
            LibC.setNonBlocking(fd, false);
        }
        return err;
    }

    /** Binds {@code fd} to {@code local}. */
    public static void bind(int fd, InetSocketAddress local) throws NativeIOException {
        try (Arena arena = Arena.ofConfined()) {
            LibC.bind(fd, encode(arena, local));
        }
    }

    /** Wakes a thread waiting on {@code fd} in recv, accept or poll (shutdown(2)); nothing when none can be. */
    public static void wakeWaiters(int fd) {
        try {
            LibC.shutdown(fd, LibC.SHUT_RDWR);
        } catch (NativeIOException ignored) {
            // Not connected: nobody can be waiting.
        }
    }
}
