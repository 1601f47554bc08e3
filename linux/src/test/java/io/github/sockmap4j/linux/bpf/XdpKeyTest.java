package io.github.sockmap4j.linux.bpf;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.math.BigInteger;
import java.util.Arrays;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import org.junit.jupiter.api.Test;

/** The XDP filter's keys as xdp_filter.bpf.c reads them. */
class XdpKeyTest {
    @Property(tries = 300)
    void sourceKeyKeepsExactlyThePrefix(@ForAll @Size(16) byte[] addr, @ForAll @IntRange(min = 0, max = 128) int bits) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocate(XdpLayout.SRC_KEY);
            XdpLayout.fillSourceKey(key, addr, bits);
            assertEquals(bits, key.get(ValueLayout.JAVA_INT, 0));
            BigInteger mask = bits == 0 ? BigInteger.ZERO
                    : BigInteger.ONE.shiftLeft(bits).subtract(BigInteger.ONE).shiftLeft(128 - bits);
            BigInteger want = new BigInteger(1, addr).and(mask);
            byte[] got = key.asSlice(4, 16).toArray(ValueLayout.JAVA_BYTE);
            assertEquals(want, new BigInteger(1, got), "bits=" + bits + " addr=" + Arrays.toString(addr));
        }
    }

    @Test
    void portKeyIsHostOrderPortThenProtocol() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocate(XdpLayout.PORT_KEY);
            XdpLayout.fillPortKey(key, 0x1234, 17);
            assertEquals((short) 0x1234, key.get(ValueLayout.JAVA_SHORT, 0));
            assertEquals(17, key.get(ValueLayout.JAVA_BYTE, 2));
            assertEquals(0, key.get(ValueLayout.JAVA_BYTE, 3));
        }
    }

    @Test
    void ruleAndConfigCarryTheWireValues() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment rule = arena.allocate(XdpLayout.RULE);
            XdpLayout.fillRule(rule, XdpLayout.XDPF_DROP, 42);
            assertEquals(XdpLayout.XDPF_DROP, rule.get(ValueLayout.JAVA_INT, 0));
            assertEquals(42, rule.get(ValueLayout.JAVA_INT, 4));
            MemorySegment cfg = arena.allocate(XdpLayout.CONFIG);
            XdpLayout.fillConfig(cfg, XdpLayout.XDPF_PASS);
            assertEquals(XdpLayout.XDPF_PASS, cfg.get(ValueLayout.JAVA_INT, 0));
        }
    }
}
