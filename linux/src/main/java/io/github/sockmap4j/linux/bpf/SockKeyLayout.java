package io.github.sockmap4j.linux.bpf;

import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;

/**
 * <pre>
 * struct sm4j_sock_key {
 *     __u32 local_ip[4];   // network order, IPv4 as ::ffff:a.b.c.d
 *     __u32 remote_ip[4];
 *     __u32 local_port;    // host order
 *     __u32 remote_port;   // host order
 *     __u64 netns;         // netns cookie when an address is loopback, else 0
 * };
 * </pre>
 * The key of one socket as seen from its own side (bpf/src/sockmap4j.h).
 */
public final class SockKeyLayout {
    public static final StructLayout LAYOUT = MemoryLayout.structLayout(
            MemoryLayout.sequenceLayout(16, ValueLayout.JAVA_BYTE).withName("local_ip"),
            MemoryLayout.sequenceLayout(16, ValueLayout.JAVA_BYTE).withName("remote_ip"),
            ValueLayout.JAVA_INT.withName("local_port"),
            ValueLayout.JAVA_INT.withName("remote_port"),
            ValueLayout.JAVA_LONG.withName("netns")).withName("sm4j_sock_key");

    public static final long LOCAL_IP = offset("local_ip");
    public static final long REMOTE_IP = offset("remote_ip");
    public static final long LOCAL_PORT = offset("local_port");
    public static final long REMOTE_PORT = offset("remote_port");
    public static final long NETNS = offset("netns");

    private SockKeyLayout() {
    }

    private static long offset(String name) {
        return LAYOUT.byteOffset(MemoryLayout.PathElement.groupElement(name));
    }

    /** Fills {@code key} with the identity of a socket seen from its own side. */
    public static void fill(MemorySegment key, InetAddress local, int localPort,
                            InetAddress remote, int remotePort, long netnsCookie) {
        byte[] l = mapped(local);
        byte[] r = mapped(remote);
        MemorySegment.copy(l, 0, key, ValueLayout.JAVA_BYTE, LOCAL_IP, 16);
        MemorySegment.copy(r, 0, key, ValueLayout.JAVA_BYTE, REMOTE_IP, 16);
        key.set(ValueLayout.JAVA_INT, LOCAL_PORT, localPort);
        key.set(ValueLayout.JAVA_INT, REMOTE_PORT, remotePort);
        key.set(ValueLayout.JAVA_LONG, NETNS,
                isLoopback(l) || isLoopback(r) ? netnsCookie : 0L);
    }

    /** The 16-byte form the kernel side uses: IPv6 as is, IPv4 v4-mapped. */
    public static byte[] mapped(InetAddress a) {
        byte[] raw = a.getAddress();
        if (a instanceof Inet6Address) {
            return raw;
        }
        if (!(a instanceof Inet4Address)) {
            throw new IllegalArgumentException("not an IP address: " + a);
        }
        byte[] m = new byte[16];
        m[10] = (byte) 0xff;
        m[11] = (byte) 0xff;
        System.arraycopy(raw, 0, m, 12, 4);
        return m;
    }

    /** 127.0.0.0/8 (v4-mapped) or ::1, as the kernel side decides it. */
    public static boolean isLoopback(byte[] m) {
        for (int i = 0; i < 10; i++) {
            if (m[i] != 0) {
                return false;
            }
        }
        if (m[10] == (byte) 0xff && m[11] == (byte) 0xff) {
            return m[12] == 127;
        }
        for (int i = 10; i < 15; i++) {
            if (m[i] != 0) {
                return false;
            }
        }
        return m[15] == 1;
    }
}
