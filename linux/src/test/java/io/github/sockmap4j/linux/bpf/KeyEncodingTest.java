package io.github.sockmap4j.linux.bpf;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

/** The Java side builds keys the way bpf/src/sockmap4j.bpf.c does. */
class KeyEncodingTest {
    @Test
    void ipv4IsV4Mapped() throws Exception {
        byte[] m = SockKeyLayout.mapped(InetAddress.getByName("127.0.0.1"));
        assertArrayEquals(new byte[] {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, (byte) 0xff, (byte) 0xff, 127, 0, 0, 1}, m);
    }

    @Test
    void loopbackIsRecognisedForBothFamilies() throws Exception {
        assertTrue(SockKeyLayout.isLoopback(SockKeyLayout.mapped(InetAddress.getByName("127.0.0.1"))));
        assertTrue(SockKeyLayout.isLoopback(SockKeyLayout.mapped(InetAddress.getByName("127.9.8.7"))));
        assertTrue(SockKeyLayout.isLoopback(SockKeyLayout.mapped(InetAddress.getByName("::1"))));
        assertFalse(SockKeyLayout.isLoopback(SockKeyLayout.mapped(InetAddress.getByName("10.0.0.1"))));
        assertFalse(SockKeyLayout.isLoopback(SockKeyLayout.mapped(InetAddress.getByName("::2"))));
    }

    @Test
    void netnsCookieOnlyForLoopbackKeys() throws Exception {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment k = arena.allocate(SockKeyLayout.LAYOUT);
            SockKeyLayout.fill(k, InetAddress.getByName("127.0.0.1"), 1, InetAddress.getByName("127.0.0.1"), 2, 99);
            assertEquals(99, k.get(ValueLayout.JAVA_LONG, SockKeyLayout.NETNS));
            SockKeyLayout.fill(k, InetAddress.getByName("10.1.0.1"), 1, InetAddress.getByName("10.1.0.2"), 2, 99);
            assertEquals(0, k.get(ValueLayout.JAVA_LONG, SockKeyLayout.NETNS), "pod-to-pod keys must match across netns");
            assertEquals(1, k.get(ValueLayout.JAVA_INT, SockKeyLayout.LOCAL_PORT), "ports in host order");
        }
    }

    @Property(tries = 200)
    void policyKeysKeepOnlyThePrefix(@ForAll byte[] addr16, @ForAll @IntRange(min = 0, max = 128) int bits,
                                     @ForAll @IntRange(min = 1, max = 65535) int port) {
        byte[] a = java.util.Arrays.copyOf(addr16, 16);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment k = arena.allocate(PolicyKeyLayout.LAYOUT);
            PolicyKeyLayout.fill(k, port, a, bits);
            assertEquals(16 + bits, k.get(ValueLayout.JAVA_INT, 0));
            assertEquals(port, ((k.get(ValueLayout.JAVA_BYTE, 4) & 0xff) << 8) | (k.get(ValueLayout.JAVA_BYTE, 5) & 0xff));
            for (int bit = 0; bit < 128; bit++) {
                int byteIdx = bit / 8;
                int mask = 0x80 >>> (bit % 8);
                int got = k.get(ValueLayout.JAVA_BYTE, 6 + byteIdx) & mask;
                int want = bit < bits ? a[byteIdx] & mask : 0;
                assertEquals(want, got, "bit " + bit);
            }
        }
    }
}
