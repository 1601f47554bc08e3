package io.github.sockmap4j.linux.net;

import io.github.sockmap4j.linux.ffi.Linux;
import io.github.sockmap4j.linux.ffi.NativeLayouts;
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
 * sockaddr_in / sockaddr_in6 encoding ({@link NativeLayouts#SOCKADDR_IN},
 * {@link NativeLayouts#SOCKADDR_IN6}). Sockets are AF_INET6 and dual-stack, as Java's own are:
 * an IPv4 peer is written and read as ::ffff:a.b.c.d and shown to callers as IPv4.
 */
public final class SockAddr {
    /** Room for either address: sizeof(struct sockaddr_in6). */
    public static final int SIZE = (int) NativeLayouts.SOCKADDR_IN6.byteSize();
    private static final ValueLayout.OfShort BE_SHORT =
            ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    private SockAddr() {
    }

    /** Encodes an address for an AF_INET6 socket (IPv4 becomes v4-mapped). */
    public static MemorySegment encode6(Arena arena, InetSocketAddress addr) {
        if (addr.isUnresolved()) {
            throw new IllegalArgumentException("unresolved address: " + addr);
        }
        MemorySegment sa = arena.allocate(NativeLayouts.SOCKADDR_IN6);
        InetAddress ia = addr.getAddress();
        sa.set(ValueLayout.JAVA_SHORT, NativeLayouts.SIN6_FAMILY, (short) Linux.AF_INET6);
        sa.set(BE_SHORT, NativeLayouts.SIN6_PORT, (short) addr.getPort());
        byte[] a;
        if (ia instanceof Inet6Address i6) {
            a = i6.getAddress();
            sa.set(ValueLayout.JAVA_INT_UNALIGNED, NativeLayouts.SIN6_SCOPE_ID, i6.getScopeId());
        } else {
            a = new byte[16];
            a[10] = (byte) 0xff;
            a[11] = (byte) 0xff;
            System.arraycopy(ia.getAddress(), 0, a, 12, 4);
        }
        MemorySegment.copy(a, 0, sa, ValueLayout.JAVA_BYTE, NativeLayouts.SIN6_ADDR, 16);
        return sa;
    }

    /** Encodes an IPv4 address for an AF_INET socket. */
    public static MemorySegment encode4(Arena arena, InetSocketAddress addr) {
        if (!(addr.getAddress() instanceof Inet4Address)) {
            throw new IllegalArgumentException("not an IPv4 address: " + addr);
        }
        MemorySegment sa = arena.allocate(NativeLayouts.SOCKADDR_IN);
        sa.set(ValueLayout.JAVA_SHORT, NativeLayouts.SIN_FAMILY, (short) Linux.AF_INET);
        sa.set(BE_SHORT, NativeLayouts.SIN_PORT, (short) addr.getPort());
        MemorySegment.copy(addr.getAddress().getAddress(), 0, sa, ValueLayout.JAVA_BYTE, NativeLayouts.SIN_ADDR, 4);
        return sa;
    }

    /** Decodes what getsockname/getpeername wrote; v4-mapped addresses come back as IPv4. */
    public static InetSocketAddress decode(MemorySegment sa) {
        // sin_family and sin_port sit where sin6_family and sin6_port do.
        int family = sa.get(ValueLayout.JAVA_SHORT, NativeLayouts.SIN6_FAMILY);
        int port = sa.get(BE_SHORT, NativeLayouts.SIN6_PORT) & 0xffff;
        try {
            if (family == Linux.AF_INET) {
                byte[] a = new byte[4];
                MemorySegment.copy(sa, ValueLayout.JAVA_BYTE, NativeLayouts.SIN_ADDR, a, 0, 4);
                return new InetSocketAddress(InetAddress.getByAddress(a), port);
            }
            if (family == Linux.AF_INET6) {
                byte[] a = new byte[16];
                MemorySegment.copy(sa, ValueLayout.JAVA_BYTE, NativeLayouts.SIN6_ADDR, a, 0, 16);
                // InetAddress.getByAddress turns a v4-mapped address into an Inet4Address.
                InetAddress ia = InetAddress.getByAddress(a);
                if (ia instanceof Inet6Address) {
                    int scope = sa.get(ValueLayout.JAVA_INT_UNALIGNED, NativeLayouts.SIN6_SCOPE_ID);
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
