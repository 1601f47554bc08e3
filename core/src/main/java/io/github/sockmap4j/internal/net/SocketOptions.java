package io.github.sockmap4j.internal.net;

import io.github.sockmap4j.internal.ffi.Errno;
import io.github.sockmap4j.internal.ffi.LibC;
import io.github.sockmap4j.internal.ffi.NativeIOException;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.net.SocketOption;
import java.net.StandardSocketOptions;
import java.nio.channels.UnresolvedAddressException;
import java.nio.channels.UnsupportedAddressTypeException;
import java.util.Set;

/** What both channel kinds do with their socket fd: options, addresses, error translation. */
public final class SocketOptions {
    public static final Set<SocketOption<?>> STREAM_OPTIONS = Set.of(StandardSocketOptions.SO_RCVBUF,
            StandardSocketOptions.SO_SNDBUF, StandardSocketOptions.SO_KEEPALIVE, StandardSocketOptions.SO_REUSEADDR,
            StandardSocketOptions.SO_REUSEPORT, StandardSocketOptions.SO_LINGER, StandardSocketOptions.TCP_NODELAY);
    public static final Set<SocketOption<?>> SERVER_OPTIONS = Set.of(StandardSocketOptions.SO_RCVBUF,
            StandardSocketOptions.SO_REUSEADDR, StandardSocketOptions.SO_REUSEPORT);

    private SocketOptions() {
    }

    public static InetSocketAddress checkAddress(SocketAddress sa) {
        if (sa == null) {
            throw new IllegalArgumentException("address is null");
        }
        if (!(sa instanceof InetSocketAddress isa)) {
            throw new UnsupportedAddressTypeException();
        }
        if (isa.isUnresolved()) {
            throw new UnresolvedAddressException();
        }
        return isa;
    }

    /** Where a connect to {@code sa} goes: as {@link #checkAddress}, the wildcard meaning this host (loopback). */
    public static InetSocketAddress connectTarget(SocketAddress sa) {
        InetSocketAddress isa = checkAddress(sa);
        return isa.getAddress().isAnyLocalAddress()
                ? new InetSocketAddress(java.net.InetAddress.getLoopbackAddress(), isa.getPort()) : isa;
    }

    private static int[] levelAndName(SocketOption<?> name) {
        if (name == StandardSocketOptions.SO_RCVBUF) {
            return new int[] {LibC.SOL_SOCKET, LibC.SO_RCVBUF};
        } else if (name == StandardSocketOptions.SO_SNDBUF) {
            return new int[] {LibC.SOL_SOCKET, LibC.SO_SNDBUF};
        } else if (name == StandardSocketOptions.SO_KEEPALIVE) {
            return new int[] {LibC.SOL_SOCKET, LibC.SO_KEEPALIVE};
        } else if (name == StandardSocketOptions.SO_REUSEADDR) {
            return new int[] {LibC.SOL_SOCKET, LibC.SO_REUSEADDR};
        } else if (name == StandardSocketOptions.SO_REUSEPORT) {
            return new int[] {LibC.SOL_SOCKET, LibC.SO_REUSEPORT};
        } else if (name == StandardSocketOptions.TCP_NODELAY) {
            return new int[] {LibC.IPPROTO_TCP, LibC.TCP_NODELAY};
        }
        return null;
    }

    public static <T> void setOption(int fd, Set<SocketOption<?>> supported, SocketOption<T> name, T value)
            throws IOException {
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
                LibC.setsockopt(fd, LibC.SOL_SOCKET, LibC.SO_LINGER, l);
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
    public static <T> T getOption(int fd, Set<SocketOption<?>> supported, SocketOption<T> name) throws IOException {
        if (!supported.contains(name)) {
            throw new UnsupportedOperationException("'" + name + "' not supported");
        }
        if (name == StandardSocketOptions.SO_LINGER) {
            long v = LibC.getsockoptLong(fd, LibC.SOL_SOCKET, LibC.SO_LINGER);
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

    /** A connect failure as java.net reports it. */
    public static IOException connectFailure(int errno, InetSocketAddress remote) {
        if (errno == Errno.ECONNREFUSED) {
            ConnectException e = new ConnectException("Connection refused: " + remote);
            e.initCause(new NativeIOException("connect", errno));
            return e;
        }
        return new NativeIOException("connect", errno, remote.toString());
    }
}
