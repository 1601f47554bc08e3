package io.github.sockmap4j.linux.bpf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import org.junit.jupiter.api.Test;

/** The checks shared by every way of opting in (no kernel). */
class RulesTest {
    @Test
    void prefixesBecomeKeyBits() throws Exception {
        assertEquals(0, Rules.keyBits(null, 7), "no network: any address");
        assertEquals(96 + 8, Rules.keyBits(InetAddress.getByName("10.0.0.0"), 8), "IPv4 after the v4-mapped 96");
        assertEquals(96 + 32, Rules.keyBits(InetAddress.getByName("10.1.2.3"), 32));
        assertEquals(64, Rules.keyBits(InetAddress.getByName("fd00::"), 64));
    }

    @Test
    void aPrefixLongerThanItsAddressIsRefusedWithBoth() throws Exception {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Rules.keyBits(InetAddress.getByName("10.0.0.0"), 33));
        assertTrue(e.getMessage().contains("0..32 for 10.0.0.0") && e.getMessage().contains("33"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> Rules.keyBits(InetAddress.getByName("::"), 129));
        assertThrows(IllegalArgumentException.class, () -> Rules.keyBits(InetAddress.getByName("::"), -1));
    }

    @Test
    void boundsAreZeroPositiveOrUnbounded() {
        Rules.checkBound(0);
        Rules.checkBound(4096);
        Rules.checkBound(PolicyKeyLayout.UNBOUNDED);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Rules.checkBound(-5));
        assertTrue(e.getMessage().contains("bytes=-5"), e.getMessage());
    }

    @Test
    void portsAreOneTo65535() {
        Rules.checkPort(1);
        Rules.checkPort(65535);
        assertThrows(IllegalArgumentException.class, () -> Rules.checkPort(0));
        assertThrows(IllegalArgumentException.class, () -> Rules.checkPort(65536));
    }
}
