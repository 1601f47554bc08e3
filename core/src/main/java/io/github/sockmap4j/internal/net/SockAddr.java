package io.github.sockmap4j.internal.net;

import io.github.sockmap4j.internal.ffi.LibC;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.ByteOrder;

/**
 * sockaddr_in / sockaddr_in6 encoding. Sockets are AF_INET6 and dual-stack, as Java's own
 * are: an IPv4 peer is written and read as ::ffff:a.b.c.d and shown to callers as IPv4.
 *
 * <pre>
 * struct sockaddr_in6 {            struct sockaddr_in {
 *     sa_family_t sin6_family;  0      sa_family_t sin_family;  0
 *     in_port_t   sin6_port;    2      in_port_t   sin_port;    2  (big-endian)
 *     uint32_t    sin6_flowinfo;4      struct in_addr sin_addr; 4
 *     struct in6_addr sin6_addr;8      char sin_zero[8];        8
 *     uint32_t    sin6_scope_id;24 };                           16 bytes
 * };                           28 bytes
 * </pre>
 */
public final class SockAddr {
    public static final int SIZE = 28;
    private static final ValueLayout.OfShort BE_SHORT =
            ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    private SockAddr() {
    }

    /** Encodes an address for an AF_INET6 socket (IPv4 becomes v4-mapped). */
    public static MemorySegment encode6(Arena arena, InetSocketAddress addr) {
        if (addr.isUnresolved()) {
            throw new IllegalArgumentException("unresolved address: " + addr);
        }
        MemorySegment sa = arena.allocate(SIZE, 4);
        InetAddress ia = addr.getAddress();
        sa.set(ValueLayout.JAVA_SHORT, 0, (short) LibC.AF_INET6);
        sa.set(BE_SHORT, 2, (short) addr.getPort());
        byte[] a;
        if (ia instanceof Inet6Address i6) {
            a = i6.getAddress();
            sa.set(ValueLayout.JAVA_INT_UNALIGNED, 24, i6.getScopeId());
        } else {
            a = new byte[16];
            a[10] = (byte) 0xff;
            a[11] = (byte) 0xff;
            System.arraycopy(ia.getAddress(), 0, a, 12, 4);
        }
        MemorySegment.copy(a, 0, sa, ValueLayout.JAVA_BYTE, 8, 16);
        return sa;
    }

    /** Encodes an IPv4 address for an AF_INET socket. */
    public static MemorySegment encode4(Arena arena, InetSocketAddress addr) {
        if (!(addr.getAddress() instanceof Inet4Address)) {
            throw new IllegalArgumentException("not an IPv4 address: " + addr);
        }
        MemorySegment sa = arena.allocate(16, 4);
        sa.set(ValueLayout.JAVA_SHORT, 0, (short) LibC.AF_INET);
        sa.set(BE_SHORT, 2, (short) addr.getPort());
        MemorySegment.copy(addr.getAddress().getAddress(), 0, sa, ValueLayout.JAVA_BYTE, 4, 4);
        return sa;
    }

    /** Decodes what getsockname/getpeername wrote; v4-mapped addresses come back as IPv4. */
    public static InetSocketAddress decode(MemorySegment sa) {
        int family = sa.get(ValueLayout.JAVA_SHORT, 0);
        int port = sa.get(BE_SHORT, 2) & 0xffff;
        try {
            if (family == LibC.AF_INET) {
                byte[] a = new byte[4];
                MemorySegment.copy(sa, ValueLayout.JAVA_BYTE, 4, a, 0, 4);
                return new InetSocketAddress(InetAddress.getByAddress(a), port);
            }
            if (family == LibC.AF_INET6) {
                byte[] a = new byte[16];
                MemorySegment.copy(sa, ValueLayout.JAVA_BYTE, 8, a, 0, 16);
                // InetAddress.getByAddress turns a v4-mapped address into an Inet4Address.
                InetAddress ia = InetAddress.getByAddress(a);
                if (ia instanceof Inet6Address) {
                    int scope = sa.get(ValueLayout.JAVA_INT_UNALIGNED, 24);
                    ia = scope == 0 ? ia : Inet6Address.getByAddress(null, a, scope);
                }
                return new InetSocketAddress(ia, port);
            }
        } catch (UnknownHostException e) {
            throw new IllegalStateException(e);
        }
        throw new IllegalStateException("unexpected address family " + family);
    }
}
