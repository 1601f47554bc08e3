package io.github.sockmap4j.linux.bpf;

import java.io.IOException;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;

/**
 * The XDP filter's structs and constants (bpf/src/xdp_filter.h), checked against the BTF of
 * {@code xdp_filter.bpf.o} and the header by the layout test.
 * <pre>
 * struct xdpf_src_key {      // LPM key: source address, IPv4 as ::ffff:a.b.c.d (prefix 96 + n)
 *     __u32 prefixlen;
 *     __u8  addr[16];
 * };
 * struct xdpf_port_key {     // exact key: destination port
 *     __u16 port;            // host order
 *     __u8  proto;           // IPPROTO_TCP or IPPROTO_UDP
 *     __u8  pad;
 * };
 * struct xdpf_rule { __u32 action; __u32 id; };                  // id: its counter's index
 * struct xdpf_config { __u32 default_action; __u32 reserved; };
 * </pre>
 */
public final class XdpLayout {
    /** The compiled filter in this jar, next to this class. */
    static final String OBJECT_RESOURCE = "xdp_filter.bpf.o";

    public static final StructLayout SRC_KEY = MemoryLayout.structLayout(
            ValueLayout.JAVA_INT.withName("prefixlen"),
            MemoryLayout.sequenceLayout(16, ValueLayout.JAVA_BYTE).withName("addr")).withName("xdpf_src_key");
    public static final StructLayout PORT_KEY = MemoryLayout.structLayout(
            ValueLayout.JAVA_SHORT.withName("port"),
            ValueLayout.JAVA_BYTE.withName("proto"),
            ValueLayout.JAVA_BYTE.withName("pad")).withName("xdpf_port_key");
    public static final StructLayout RULE = MemoryLayout.structLayout(
            ValueLayout.JAVA_INT.withName("action"),
            ValueLayout.JAVA_INT.withName("id")).withName("xdpf_rule");
    public static final StructLayout CONFIG = MemoryLayout.structLayout(
            ValueLayout.JAVA_INT.withName("default_action"),
            ValueLayout.JAVA_INT.withName("reserved")).withName("xdpf_config");

    /** XDPF_MAX_RULES: rules, and so per-rule counters, at most. */
    public static final int MAX_RULES = 1024;
    /** enum xdpf_action. */
    public static final int XDPF_PASS = 0;
    public static final int XDPF_DROP = 1;
    /** enum xdpf_counter: the outcome counters follow the per-rule ones. */
    public static final int CTR_PASSED = MAX_RULES;
    public static final int CTR_DROPPED = MAX_RULES + 1;
    public static final int CTR_MALFORMED = MAX_RULES + 2;
    public static final int CTR_DEFAULT = MAX_RULES + 3;

    private static final long SRC_PREFIXLEN = SRC_KEY.byteOffset(MemoryLayout.PathElement.groupElement("prefixlen"));
    private static final long SRC_ADDR = SRC_KEY.byteOffset(MemoryLayout.PathElement.groupElement("addr"));
    private static final long PORT_PORT = PORT_KEY.byteOffset(MemoryLayout.PathElement.groupElement("port"));
    private static final long PORT_PROTO = PORT_KEY.byteOffset(MemoryLayout.PathElement.groupElement("proto"));
    private static final long RULE_ACTION = RULE.byteOffset(MemoryLayout.PathElement.groupElement("action"));
    private static final long RULE_ID = RULE.byteOffset(MemoryLayout.PathElement.groupElement("id"));
    private static final long CONFIG_DEFAULT = CONFIG.byteOffset(MemoryLayout.PathElement.groupElement("default_action"));

    private XdpLayout() {
    }

    /**
     * @param mapped16 the 16-byte source address, IPv4 v4-mapped
     * @param bits     prefix length over those 16 bytes; bits past it are zeroed, so one rule has one key
     */
    public static void fillSourceKey(MemorySegment key, byte[] mapped16, int bits) {
        key.fill((byte) 0);
        key.set(ValueLayout.JAVA_INT, SRC_PREFIXLEN, bits);
        for (int i = 0; i < 16; i++) {
            int keep = Math.max(0, Math.min(8, bits - i * 8));
            key.set(ValueLayout.JAVA_BYTE, SRC_ADDR + i, (byte) (mapped16[i] & (keep == 0 ? 0 : 0xff << (8 - keep))));
        }
    }

    public static void fillPortKey(MemorySegment key, int port, int proto) {
        key.fill((byte) 0);
        key.set(ValueLayout.JAVA_SHORT, PORT_PORT, (short) port);
        key.set(ValueLayout.JAVA_BYTE, PORT_PROTO, (byte) proto);
    }

    public static void fillRule(MemorySegment rule, int action, int id) {
        rule.set(ValueLayout.JAVA_INT, RULE_ACTION, action);
        rule.set(ValueLayout.JAVA_INT, RULE_ID, id);
    }

    public static void fillConfig(MemorySegment config, int defaultAction) {
        config.fill((byte) 0);
        config.set(ValueLayout.JAVA_INT, CONFIG_DEFAULT, defaultAction);
    }

    /** The compiled XDP filter embedded in this jar. */
    public static byte[] embeddedObject() throws IOException {
        return ObjectLoader.embeddedObject(OBJECT_RESOURCE);
    }
}
