package io.github.sockmap4j.linux.bpf;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.Inet6Address;
import java.net.InetAddress;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

/** The one shape of a rule, checked once, keyed as the policy map keys it (no kernel). */
class PolicyRuleTest {
    @Test
    void prefixesBecomeKeyBits() throws Exception {
        assertEquals(0, PolicyRule.of(80, null, 7).keyBits(), "no network: any address");
        assertEquals(96 + 8, PolicyRule.of(80, InetAddress.getByName("10.0.0.0"), 8).keyBits(),
                "IPv4 after the v4-mapped 96");
        assertEquals(96 + 32, PolicyRule.of(80, InetAddress.getByName("10.1.2.3"), 32).keyBits());
        assertEquals(64, PolicyRule.of(80, InetAddress.getByName("fd00::"), 64).keyBits());
        assertEquals(8, PolicyRule.of(80, InetAddress.getByName("10.0.0.0"), 8).prefixBits());
        assertEquals("80/10.0.0.0/8", PolicyRule.of(80, InetAddress.getByName("10.0.0.0"), 8).target());
        assertEquals("80", PolicyRule.anyAddress(80).target());
    }

    @Test
    void aPrefixLongerThanItsAddressIsRefusedWithBoth() throws Exception {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> PolicyRule.of(80, InetAddress.getByName("10.0.0.0"), 33));
        assertTrue(e.getMessage().contains("0..32 for 10.0.0.0") && e.getMessage().contains("33"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> PolicyRule.of(80, InetAddress.getByName("::"), 129));
        assertThrows(IllegalArgumentException.class, () -> PolicyRule.of(80, InetAddress.getByName("::"), -1));
    }

    @Test
    void keyBitsOutsideTheirFamilysRangeAreRefused() throws Exception {
        InetAddress v4 = InetAddress.getByName("10.0.0.0");
        assertThrows(IllegalArgumentException.class, () -> new PolicyRule(80, v4, 95), "an IPv4 rule keys >= 96 bits");
        assertThrows(IllegalArgumentException.class, () -> new PolicyRule(80, v4, 129));
        assertThrows(IllegalArgumentException.class, () -> new PolicyRule(80, null, 8), "any address has no bits");
    }

    @Test
    void boundsAreZeroPositiveOrUnbounded() {
        PolicyRule.checkBound(0);
        PolicyRule.checkBound(4096);
        PolicyRule.checkBound(PolicyKeyLayout.UNBOUNDED);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> PolicyRule.checkBound(-5));
        assertTrue(e.getMessage().contains("bytes=-5"), e.getMessage());
    }

    @Test
    void portsAreOneTo65535() {
        PolicyRule.anyAddress(1);
        PolicyRule.anyAddress(65535);
        assertThrows(IllegalArgumentException.class, () -> PolicyRule.anyAddress(0));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> PolicyRule.anyAddress(65536));
        assertTrue(e.getMessage().contains("port must be 1..65535"), e.getMessage());
    }

    /** Host bits past the prefix name the same entry: the rules are equal and their keys the same bytes. */
    @Test
    void hostBitsPastThePrefixAreTheSameRule() throws Exception {
        PolicyRule a = PolicyRule.of(80, InetAddress.getByName("10.1.2.3"), 8);
        PolicyRule b = PolicyRule.of(80, InetAddress.getByName("10.0.0.0"), 8);
        assertEquals(b, a);
        assertEquals(InetAddress.getByName("10.0.0.0"), a.network());
        assertArrayEquals(b.key(), a.key());
        assertNotEquals(a, PolicyRule.of(80, InetAddress.getByName("10.0.0.0"), 9));
        assertNotEquals(a, PolicyRule.of(81, InetAddress.getByName("10.0.0.0"), 8));
    }

    /** ::/0 is any address, as the map keys it; a v4-mapped IPv6 network is the IPv4 rule it keys the same as. */
    @Test
    void anyAddressAndAnIpv4NetworkHaveOneFormEach() throws Exception {
        PolicyRule v6any = PolicyRule.of(80, InetAddress.getByName("::"), 0);
        assertEquals(PolicyRule.anyAddress(80), v6any);
        assertNull(v6any.network());
        byte[] mapped = new byte[16];
        mapped[10] = (byte) 0xff;
        mapped[11] = (byte) 0xff;
        mapped[12] = 10;
        PolicyRule m = new PolicyRule(80, Inet6Address.getByAddress(null, mapped, (java.net.NetworkInterface) null), 104);
        assertEquals(PolicyRule.of(80, InetAddress.getByName("10.0.0.0"), 8), m);
        assertEquals(8, m.prefixBits());
    }

    /** Any rule made is one the map can key, and its key's prefix length is 16 (the port) + its bits. */
    @Property(tries = 300)
    void everyRuleMadeHasAKey(@ForAll @IntRange(min = 1, max = 65535) int port, @ForAll byte[] raw,
            @ForAll @IntRange(min = 0, max = 128) int prefix) throws Exception {
        byte[] bytes = raw.length >= 16 ? java.util.Arrays.copyOf(raw, 16) : java.util.Arrays.copyOf(raw, 4);
        InetAddress a = InetAddress.getByAddress(bytes);
        int max = a instanceof java.net.Inet4Address ? 32 : 128; // 16 v4-mapped bytes are an IPv4 address
        if (prefix > max) {
            assertThrows(IllegalArgumentException.class, () -> PolicyRule.of(port, a, prefix));
            return;
        }
        PolicyRule r = PolicyRule.of(port, a, prefix);
        byte[] key = r.key();
        assertEquals(PolicyKeyLayout.LAYOUT.byteSize(), key.length);
        assertEquals(r, PolicyRule.of(port, r.network(), r.prefixBits()), "made again from its own parts");
        try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
            assertEquals(r, PolicyKeyLayout.read(arena.allocateFrom(java.lang.foreign.ValueLayout.JAVA_BYTE, key)),
                    "read back from its key");
        }
    }
}
