package io.github.sockmap4j.linux.net;

import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.ffi.LibC;
import io.github.sockmap4j.linux.ffi.Linux;
import io.github.sockmap4j.linux.ffi.NativeIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;

/** What sockets of this host take: whether IPv6 is there, and addresses in the family a socket is made in. */
public final class Sockets {
    private static volatile Boolean ipv6;

    private Sockets() {
    }

    /** Whether AF_INET6 sockets can be made here (IPv6 may be disabled in the kernel). */
    public static boolean ipv6Available() {
        Boolean v = ipv6;
        if (v == null) {
            try {
                LibC.close(LibC.socket(Linux.AF_INET6, Linux.SOCK_STREAM | Linux.SOCK_CLOEXEC, 0));
                v = Boolean.TRUE;
            } catch (NativeIOException e) {
                v = Boolean.FALSE;
            }
            ipv6 = v;
        }
        return v;
    }

    private static final InetAddress IN6ADDR_ANY;

    static {
        try {
            IN6ADDR_ANY = InetAddress.getByAddress(new byte[16]);
        } catch (java.net.UnknownHostException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** The sockaddr of {@code addr} in the family {@link NativeSocket#newStream()} makes. */
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
            throw Errno.error("connect", -Errno.EINVAL, "IPv6 is not available on this host: " + addr);
        }
        return SockAddr.encode4(arena, addr);
    }

    /**
     * Whether {@code path} names a socket in Linux's abstract namespace: written with a leading
     * {@code @} (as {@code ss} shows them), it has no file, is seen only in the network namespace
     * that made it, and goes with the last descriptor on it, a process killed included.
     */
    public static boolean isAbstract(java.nio.file.Path path) {
        return path.toString().startsWith("@");
    }

    /**
     * {@code path} as a {@code struct sockaddr_un} in {@code arena} (a leading {@code @}: an
     * abstract name, {@link #isAbstract}).
     *
     * @throws java.io.IOException when the path is 108 bytes or longer (the kernel's limit)
     */
    public static MemorySegment encodeUnix(Arena arena, java.nio.file.Path path) throws java.io.IOException {
        byte[] p = path.toString().getBytes(java.nio.charset.StandardCharsets.UTF_8);
        if (isAbstract(path)) {
            p[0] = 0; // Linux's abstract namespace: a name, not a file (unix(7))
        }
        if (p.length >= 108) {
            throw new java.io.IOException("a Unix socket path must be under 108 bytes: " + path);
        }
        MemorySegment addr = arena.allocate(io.github.sockmap4j.linux.ffi.NativeLayouts.SOCKADDR_UN);
        addr.set(java.lang.foreign.ValueLayout.JAVA_SHORT, 0, (short) Linux.AF_UNIX);
        MemorySegment.copy(p, 0, addr, java.lang.foreign.ValueLayout.JAVA_BYTE,
                io.github.sockmap4j.linux.ffi.NativeLayouts.SUN_PATH, p.length);
        return addr;
    }
}
