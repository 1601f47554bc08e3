package io.github.sockmap4j.xdp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.IOException;
import java.net.InetAddress;
import java.nio.ByteBuffer;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The XDP program itself, frame by frame, under the kernel's {@code BPF_PROG_TEST_RUN}: loaded
 * and attached to nothing, it is given frames this test builds byte by byte (as Cilium tests its
 * programs in {@code bpf/tests/}) and says what it does with each: the rules' order (longest
 * source prefix, then the destination port and protocol, then the default), IPv6, and frames it
 * cannot read (truncated headers, an IPv4 header length below 5, later fragments, extension
 * headers), with the counter each decision moves. No interface, namespace or attachment: nothing
 * to leave behind but the program, which closing the filter frees.
 */
@Tag("kernel")
class XdpProgramTest {
    static final int XDP_DROP = 1;
    static final int XDP_PASS = 2;
    static final int UDP = 17;
    static final int TCP = 6;

    @Test
    void withoutRulesTheDefaultDecidesAndEveryDecisionIsCounted() throws Exception {
        try (XdpFilter f = XdpFilter.unattached(XdpFilter.Action.PASS)) {
            assertEquals(XDP_PASS, f.run(ipv4("10.9.0.1", UDP, 53, 0)));
            f.setDefaultAction(XdpFilter.Action.DROP);
            assertEquals(XDP_DROP, f.run(ipv4("10.9.0.1", UDP, 53, 0)));
            assertEquals(XDP_DROP, f.run(ipv6("fd00::1", 6, 443)));
            assertEquals(new XdpFilter.Counters(1, 2, 0, 3), f.counters());
            // Not IP (ARP): not the filter's business, whatever the default.
            assertEquals(XDP_PASS, f.run(frame(0x0806, new byte[28])));
            assertEquals(new XdpFilter.Counters(2, 2, 0, 3), f.counters());
        }
    }

    @Test
    void theLongestSourcePrefixWinsThenThePortAndItsProtocol() throws Exception {
        try (XdpFilter f = XdpFilter.unattached(XdpFilter.Action.PASS)) {
            String wide = f.addSourceRule(InetAddress.getByName("10.1.0.0"), 16, XdpFilter.Action.DROP);
            String narrow = f.addSourceRule(InetAddress.getByName("10.1.2.0"), 24, XdpFilter.Action.PASS);
            String dns = f.addPortRule(53, XdpFilter.Protocol.UDP, XdpFilter.Action.DROP);
            assertEquals(XDP_DROP, f.run(ipv4("10.1.3.3", TCP, 80, 0)), "the /16");
            assertEquals(XDP_PASS, f.run(ipv4("10.1.2.3", UDP, 53, 0)), "the /24 over the /16, before the port");
            assertEquals(XDP_DROP, f.run(ipv4("10.7.0.1", UDP, 53, 0)), "no source rule: the port's");
            assertEquals(XDP_PASS, f.run(ipv4("10.7.0.1", TCP, 53, 0)), "the port's rule is UDP's only");
            assertEquals(XDP_PASS, f.run(ipv4("10.7.0.1", UDP, 54, 0)), "another port: the default");
            assertEquals(1, f.ruleHits(wide));
            assertEquals(1, f.ruleHits(narrow));
            assertEquals(1, f.ruleHits(dns));
            f.removeSourceRule(InetAddress.getByName("10.1.2.0"), 24);
            assertEquals(XDP_DROP, f.run(ipv4("10.1.2.3", UDP, 53, 0)), "the /24 removed: the /16");
        }
    }

    @Test
    void ipv6SourcesAndPortsAsIpv4s() throws Exception {
        try (XdpFilter f = XdpFilter.unattached(XdpFilter.Action.PASS)) {
            f.addSourceRule(InetAddress.getByName("fd00:aa::"), 32, XdpFilter.Action.DROP);
            f.addPortRule(8443, XdpFilter.Protocol.TCP, XdpFilter.Action.DROP);
            assertEquals(XDP_DROP, f.run(ipv6("fd00:aa::5", TCP, 80)));
            assertEquals(XDP_PASS, f.run(ipv6("fd00:ab::5", TCP, 80)));
            assertEquals(XDP_DROP, f.run(ipv6("fd00:ab::5", TCP, 8443)));
            // An IPv4 address in the IPv6 rule's space is not in it: ::ffff:a.b.c.d keys.
            assertEquals(XDP_PASS, f.run(ipv4("10.0.0.1", TCP, 80, 0)));
        }
    }

    @Test
    void framesItCannotReadPassToTheStackAndAreCounted() throws Exception {
        try (XdpFilter f = XdpFilter.unattached(XdpFilter.Action.DROP)) {
            f.addPortRule(53, XdpFilter.Protocol.UDP, XdpFilter.Action.DROP);
            // An IPv4 header cut short, and one whose length field says less than its minimum.
            assertEquals(XDP_PASS, f.run(frame(0x0800, new byte[10])));
            byte[] shortIhl = ipv4("10.7.0.1", UDP, 53, 0);
            shortIhl[14] = 0x44;
            assertEquals(XDP_PASS, f.run(shortIhl));
            // The UDP header cut short, where a port rule would have to read it.
            byte[] cut = ipv4("10.7.0.1", UDP, 53, 0);
            assertEquals(XDP_PASS, f.run(java.util.Arrays.copyOf(cut, 14 + 20 + 4)));
            // An IPv6 header cut short.
            assertEquals(XDP_PASS, f.run(java.util.Arrays.copyOf(ipv6("fd00::1", UDP, 53), 14 + 30)));
            assertEquals(4, f.counters().malformed());
            assertEquals(0, f.counters().dropped(), "nothing unreadable is dropped");
            // A later fragment has no port: the default decides, not the port's rule.
            f.setDefaultAction(XdpFilter.Action.PASS);
            assertEquals(XDP_PASS, f.run(ipv4("10.7.0.1", UDP, 53, 185)));
            // Nor is an IPv6 extension header walked (hop-by-hop options, next header 0).
            assertEquals(XDP_PASS, f.run(ipv6("fd00::1", 0, 53)));
            assertEquals(XDP_DROP, f.run(ipv4("10.7.0.1", UDP, 53, 0)), "the rule, once the header is there");
        }
    }

    @Test
    void aClosedFilterRunsNothing() throws Exception {
        XdpFilter f = XdpFilter.unattached(XdpFilter.Action.PASS);
        f.close();
        assertThrows(IOException.class, () -> f.run(ipv4("10.7.0.1", UDP, 53, 0)));
        assertEquals(new XdpFilter.Counters(0, 0, 0, 0), f.counters());
    }

    /** An Ethernet frame of {@code type} around {@code payload}. */
    static byte[] frame(int type, byte[] payload) {
        ByteBuffer b = ByteBuffer.allocate(14 + payload.length);
        b.put(new byte[] {2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2}).putShort((short) type).put(payload);
        return b.array();
    }

    /** IPv4 from {@code source} to 10.0.0.2 with an 8-byte L4 header to {@code port}; a fragment offset in 8-byte units. */
    static byte[] ipv4(String source, int protocol, int port, int fragmentOffset) throws Exception {
        ByteBuffer ip = ByteBuffer.allocate(20 + 8);
        ip.put((byte) 0x45).put((byte) 0).putShort((short) 28).putShort((short) 1).putShort((short) fragmentOffset)
                .put((byte) 64).put((byte) protocol).putShort((short) 0)
                .put(InetAddress.getByName(source).getAddress()).put(InetAddress.getByName("10.0.0.2").getAddress())
                .putShort((short) 40000).putShort((short) port).putInt(0);
        return frame(0x0800, ip.array());
    }

    /** IPv6 from {@code source} to fd00::2, next header {@code nextHeader}, an 8-byte L4 header to {@code port}. */
    static byte[] ipv6(String source, int nextHeader, int port) throws Exception {
        ByteBuffer ip = ByteBuffer.allocate(40 + 8);
        ip.putInt(0x60000000).putShort((short) 8).put((byte) nextHeader).put((byte) 64)
                .put(InetAddress.getByName(source).getAddress()).put(InetAddress.getByName("fd00::2").getAddress())
                .putShort((short) 40000).putShort((short) port).putInt(0);
        return frame(0x86DD, ip.array());
    }
}
