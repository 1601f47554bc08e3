package io.github.sockmap4j.linux.net;

import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.ffi.LibC;
import io.github.sockmap4j.linux.ffi.Linux;
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

/** What both channel kinds share about their sockets: the options they support, address checks, connect errors. */
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

    /** A connect failure as java.net reports it. */
    public static IOException connectFailure(int errno, InetSocketAddress remote) {
        if (errno == Errno.ECONNREFUSED) {
            ConnectException e = new ConnectException("Connection refused: " + remote);
            e.initCause(Errno.error("connect", -errno));
            return e;
        }
        return Errno.error("connect", -errno, remote.toString());
    }
}
