package io.github.sockmap4j.control;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.linux.bpf.PolicyRule;
import java.net.InetAddress;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

/** The control socket's line format: what it accepts, what it refuses, and that lines round-trip. */
class AgentRequestTest {
    @Property
    void aRequestReadsBackAsItWasWritten(@ForAll @IntRange(min = 1, max = 65535) int port,
                                         @ForAll @IntRange(min = 0, max = 32) int v4Bits,
                                         @ForAll @IntRange(min = -1, max = 1 << 30) int bound) throws Exception {
        InetAddress net = InetAddress.getByName("10.1.2.0");
        for (AgentRequest.Verb v : new AgentRequest.Verb[] {AgentRequest.Verb.ALLOW, AgentRequest.Verb.OPTIN,
            AgentRequest.Verb.BOUND}) {
            AgentRequest r = new AgentRequest(v, new PolicyRule(port, net, 96 + v4Bits), bound);
            assertEquals(r, AgentRequest.parse(r.format()));
        }
        AgentRequest deny = new AgentRequest(AgentRequest.Verb.DENY, PolicyRule.anyAddress(port), 0);
        assertEquals(deny, AgentRequest.parse(deny.format()));
    }

    @Test
    void badLinesAreRefusedWithTheReason() {
        assertTrue(assertThrows(IllegalArgumentException.class, () -> AgentRequest.parse("GRANT 80 * 0 0"))
                .getMessage().contains("unknown request 'GRANT'"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> AgentRequest.parse("ALLOW 70000 * 0 0"))
                .getMessage().contains("port must be 1..65535"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> AgentRequest.parse("ALLOW 80 * 0 -5"))
                .getMessage().contains("bound must be >= 0 bytes, or -1"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> AgentRequest.parse("ALLOW 80 * 12 0"))
                .getMessage().contains("0 for any address"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> AgentRequest.parse("ALLOW 80 10.0.0.0 8 0"))
                .getMessage().contains("96..128 for an IPv4 network"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> AgentRequest.parse("ALLOW 80 example.com 128 0"))
                .getMessage().contains("not an address literal"), "the agent never resolves names");
        // A scope names an interface that may go: a rule written with one could not be read back.
        assertTrue(assertThrows(IllegalArgumentException.class, () -> AgentRequest.parse("ALLOW 7050 fd00::1%lo 128 0"))
                .getMessage().contains("scoped address"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> AgentRequest.parse("DENY 80 *"))
                .getMessage().contains("DENY takes 3 fields"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> AgentRequest.parse("ALLOW x * 0 0"))
                .getMessage().contains("not a number"));
    }

    /** A socket bound to ::1%lo has a scoped address: its request goes without the scope, and reads back. */
    @Test
    void aScopedAddressIsWrittenWithoutItsScope() throws Exception {
        InetAddress scoped = java.net.Inet6Address.getByAddress(null, InetAddress.getByName("::1").getAddress(),
                java.net.NetworkInterface.getByName("lo"));
        AgentRequest r = new AgentRequest(AgentRequest.Verb.OPTIN, new PolicyRule(7050, scoped, 128), 0);
        assertEquals("OPTIN 7050 0:0:0:0:0:0:0:1 128 0", r.format());
        assertEquals(InetAddress.getByName("::1"), AgentRequest.parse(r.format()).rule().network());
    }

    /** A line is made into its rule once, as the map keys it: host bits past the prefix name the same rule. */
    @Test
    void aRuleIsReadAsTheMapKeysIt() throws Exception {
        AgentRequest a = AgentRequest.parse("ALLOW 80 10.1.2.3 104 0");
        assertEquals(AgentRequest.parse("ALLOW 80 10.0.0.0 104 0"), a);
        assertEquals("ALLOW 80 10.0.0.0 104 0", a.format());
        assertEquals(PolicyRule.of(80, InetAddress.getByName("10.0.0.0"), 8), a.rule());
    }

    @Test
    void pingNeedsNothingElse() {
        AgentRequest p = AgentRequest.parse("ping");
        assertEquals(AgentRequest.Verb.PING, p.verb());
        assertNull(p.rule());
        assertEquals("PING", p.format());
    }

    @Test
    void aServiceReadsBackAsItWasWritten() {
        var v4 = new io.github.sockmap4j.linux.bpf.ServiceMap.Service(at("10.96.0.10", 6334),
                java.util.List.of(at("10.244.1.2", 16334), at("10.244.1.3", 16334)), java.util.List.of(at("10.244.2.2", 16334)),
                false);
        var v6 = new io.github.sockmap4j.linux.bpf.ServiceMap.Service(at("fd00:96::10", 6334),
                java.util.List.of(at("fd00:244:1::2", 16334)), java.util.List.of(), true);
        for (var s : java.util.List.of(v4, v6)) {
            assertEquals(AgentRequest.putService(s), AgentRequest.parse(AgentRequest.putService(s).format()));
            assertEquals(AgentRequest.removeService(s.vip()), AgentRequest.parse(AgentRequest.removeService(s.vip()).format()));
        }
        assertEquals("SERVICE fd00:96:0:0:0:0:0:10 6334 only [fd00:244:1:0:0:0:0:2]:16334 -",
                AgentRequest.putService(v6).format());
        // Sixteen IPv6 endpoints, the most an entry holds, fit in one line.
        java.util.List<java.net.InetSocketAddress> many = new java.util.ArrayList<>();
        for (int i = 0; i < 16; i++) {
            many.add(at("fd00:244:ffff:ffff:ffff:ffff:ffff:" + Integer.toHexString(0xff00 + i), 65535));
        }
        String line = AgentRequest.putService(new io.github.sockmap4j.linux.bpf.ServiceMap.Service(
                at("fd00:96:ffff:ffff:ffff:ffff:ffff:ffff", 65535), many, java.util.List.of(), false)).format();
        assertTrue(line.length() <= AgentRequest.MAX_LINE, line.length() + " bytes");
        assertTrue(assertThrows(IllegalArgumentException.class, () -> AgentRequest.parse("SERVICE 10.96.0.10 6334 some - -"))
                .getMessage().contains("'all' or 'only'"));
        assertTrue(assertThrows(IllegalArgumentException.class,
                () -> AgentRequest.parse("SERVICE 10.96.0.10 6334 all db.local:80 -")).getMessage()
                .contains("not an address literal"), "the agent never resolves names");
        assertTrue(assertThrows(IllegalArgumentException.class,
                () -> AgentRequest.parse("SERVICE 10.96.0.10 6334 all fd00::1:80 -")).getMessage()
                .contains("[IPV6]:PORT"));
        assertTrue(assertThrows(IllegalArgumentException.class,
                () -> AgentRequest.parse("SERVICE 10.96.0.10 6334 all [fd00::1]:80 -")).getMessage()
                .contains("not of the family"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> AgentRequest.parse("UNSERVICE 10.96.0.10"))
                .getMessage().contains("UNSERVICE takes 2 fields"));
    }

    static java.net.InetSocketAddress at(String ip, int port) {
        return new java.net.InetSocketAddress(InetAddress.ofLiteral(ip), port);
    }
}
