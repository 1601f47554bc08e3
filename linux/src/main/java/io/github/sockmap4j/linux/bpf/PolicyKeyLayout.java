package io.github.sockmap4j.linux.bpf;

import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;

/**
 * <pre>
 * struct sm4j_policy_key {       // LPM trie key
 *     __u32 prefixlen;           // 16 + address prefix bits
 *     __u8  port[2];             // server port, big-endian
 *     __u8  addr[16];            // server address, IPv4 v4-mapped
 *     __u8  pad[2];
 * };
 * struct sm4j_policy { __u32 flags; __u32 bound; };   // bound 0: the receiver's SO_RCVBUF
 * </pre>
 */
public final class PolicyKeyLayout {
    public static final StructLayout LAYOUT = MemoryLayout.structLayout(
            ValueLayout.JAVA_INT.withName("prefixlen"),
            MemoryLayout.sequenceLayout(2, ValueLayout.JAVA_BYTE).withName("port"),
            MemoryLayout.sequenceLayout(16, ValueLayout.JAVA_BYTE).withName("addr"),
            MemoryLayout.sequenceLayout(2, ValueLayout.JAVA_BYTE).withName("pad")).withName("sm4j_policy_key");

    private static final long PREFIXLEN = LAYOUT.byteOffset(MemoryLayout.PathElement.groupElement("prefixlen"));
    private static final long PORT = LAYOUT.byteOffset(MemoryLayout.PathElement.groupElement("port"));
    private static final long ADDR = LAYOUT.byteOffset(MemoryLayout.PathElement.groupElement("addr"));

    public static final StructLayout VALUE = MemoryLayout.structLayout(
            ValueLayout.JAVA_INT.withName("flags"),
            ValueLayout.JAVA_INT.withName("bound")).withName("sm4j_policy");
    /**
     * SM4J_UNBOUNDED (0xffffffff as the kernel's unsigned bound): turns the in-flight bound off
     * for a rule. The one value of it on the Java side.
     */
    public static final int UNBOUNDED = -1;
    public static final long BOUND = VALUE.byteOffset(MemoryLayout.PathElement.groupElement("bound"));

    private PolicyKeyLayout() {
    }

    /**
     * @param mappedAddr the 16-byte server address (see {@link SockKeyLayout#mapped})
     * @param addrBits   how many leading bits of it must match, 0 for any address
     */
    static void fill(MemorySegment key, int port, byte[] mappedAddr, int addrBits) {
        // The values were checked once, by the PolicyRule this key is made from.
        key.fill((byte) 0);
        key.set(ValueLayout.JAVA_INT, PREFIXLEN, 16 + addrBits);
        key.set(ValueLayout.JAVA_BYTE, PORT, (byte) (port >>> 8));
        key.set(ValueLayout.JAVA_BYTE, PORT + 1, (byte) port);
        // Bits past the prefix are zeroed, so one rule has one key whatever address was given.
        for (int i = 0; i < 16; i++) {
            int keep = Math.max(0, Math.min(8, addrBits - i * 8));
            int mask = keep == 0 ? 0 : (0xff << (8 - keep)) & 0xff;
            key.set(ValueLayout.JAVA_BYTE, ADDR + i, (byte) (mappedAddr[i] & mask));
        }
    }

    /** The rule a key holds: {@link #fill}'s inverse (a v4-mapped address comes back IPv4). */
    static PolicyRule read(MemorySegment key) {
        int bits = key.get(ValueLayout.JAVA_INT, PREFIXLEN) - 16;
        int port = ((key.get(ValueLayout.JAVA_BYTE, PORT) & 0xff) << 8) | (key.get(ValueLayout.JAVA_BYTE, PORT + 1) & 0xff);
        if (bits == 0) {
            return PolicyRule.anyAddress(port);
        }
        try {
            return new PolicyRule(port, java.net.InetAddress.getByAddress(key.asSlice(ADDR, 16).toArray(ValueLayout.JAVA_BYTE)),
                    bits);
        } catch (java.net.UnknownHostException e) {
            throw new IllegalStateException("16 bytes are an address", e);
        }
    }
}
