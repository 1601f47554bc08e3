package io.github.sockmap4j.linux.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Networks are parsed from literals only: a name in a rule is refused, never resolved. */
class CidrTest {
    @Test
    void literalsWithAndWithoutAPrefix() throws Exception {
        assertEquals(new Cidr(InetAddress.getByAddress(new byte[] {10, 0, 0, 0}), 8), Cidr.parse("10.0.0.0/8"));
        assertEquals(32, Cidr.parse("127.0.0.1").prefixBits());
        assertEquals(128, Cidr.parse("::1").prefixBits());
        assertEquals(64, Cidr.parse("fd00::/64").prefixBits());
        assertEquals(0, Cidr.parse("0.0.0.0/0").prefixBits());
    }

    @ParameterizedTest
    @ValueSource(strings = {"localhost", "localhost/8", "ad.be", "ad.be/16", "example.com", "cafe", "fe.ed.fa.ce"})
    void namesAreRefusedNotResolved(String text) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Cidr.parse(text));
        assertTrue(e.getMessage().contains("names are never resolved"), e.getMessage());
    }

    /** A scope names an interface that may go: refused whether it reads now or not, with the form to write. */
    @ParameterizedTest
    @ValueSource(strings = {"fd00::1%lo", "fe80::1%1", "fd00::1%sm4jgone0/128", "fe80::%lo/64"})
    void scopedAddressesAreRefusedWithTheirUnscopedForm(String text) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Cidr.parse(text));
        assertTrue(e.getMessage().contains("scoped address") && e.getMessage().contains("write '"
                + text.substring(0, text.indexOf('%')) + "'"), e.getMessage());
    }

    @ParameterizedTest
    @ValueSource(strings = {"10.0.0.0/33", "::/129", "10.0.0.0/-1", "10.0.0.0/x", "10.0.0.0/"})
    void badPrefixesSayWhatIsWrong(String text) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Cidr.parse(text));
        assertTrue(e.getMessage().contains("prefix"), e.getMessage());
    }
}
