package io.github.sockmap4j.xdp;

import static io.github.sockmap4j.testbed.Sh.run;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * The XDP filter on a veth pair this test makes: one end in this namespace (the filter sits on
 * its ingress), the other in a network namespace of its own, from which a C probe sends.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("kernel")
class XdpFilterTest {
    final String id = Long.toString(ProcessHandle.current().pid() % 100000);
    final String ns = "sm4j-xdp-" + id;
    final String here = "xd" + id + "a";
    final String there = "xd" + id + "b";
    final int net = (int) (ProcessHandle.current().pid() % 200) + 20;
    final String hereV4 = "10.252." + net + ".1";
    final String allowedV4 = "10.252." + net + ".2";
    final String deniedV4 = "10.252." + net + ".3";
    final String hereV6 = "fd00:5a:" + Integer.toHexString(net) + "::1";
    final String thereV6 = "fd00:5a:" + Integer.toHexString(net) + "::2";
    Path probe;

    @BeforeAll
    void setUp() throws Exception {
        probe = Path.of("target", "net_probe").toAbsolutePath();
        run("cc", "-O2", "-Wall", "-o", probe.toString(), "src/test/c/net_probe.c");
        run("ip", "netns", "add", ns);
        run("ip", "link", "add", here, "type", "veth", "peer", "name", there);
        run("ip", "link", "set", there, "netns", ns);
        run("ip", "addr", "add", hereV4 + "/24", "dev", here);
        run("ip", "-6", "addr", "add", hereV6 + "/64", "dev", here, "nodad");
        run("ip", "-n", ns, "addr", "add", allowedV4 + "/24", "dev", there);
        run("ip", "-n", ns, "addr", "add", deniedV4 + "/24", "dev", there);
        run("ip", "-n", ns, "-6", "addr", "add", thereV6 + "/64", "dev", there, "nodad");
        run("ip", "link", "set", here, "up");
        run("ip", "-n", ns, "link", "set", there, "up");
        run("ip", "-n", ns, "link", "set", "lo", "up");
    }

    @AfterAll
    void tearDown() throws Exception {
        // Deleting this end deletes its peer too; the namespace goes after it.
        try {
            run("ip", "link", "del", here);
        } finally {
            run("ip", "netns", "delete", ns);
        }
        assertFalse(run("ip", "-o", "link", "show").contains(here + "@"), "the veth pair is gone");
    }

    String tcp(String src, String dst, int port) throws Exception {
        return run("ip", "netns", "exec", ns, probe.toString(), "tcp", src, dst, Integer.toString(port)).trim();
    }

    ServerSocketChannel server(String addr) throws IOException {
        ServerSocketChannel s = ServerSocketChannel.open();
        s.bind(new InetSocketAddress(InetAddress.getByName(addr), 0));
        return s;
    }

    static int port(ServerSocketChannel s) throws IOException {
        return ((InetSocketAddress) s.getLocalAddress()).getPort();
    }

    @Test
    void aDeniedCidrCannotConnectWhileAnAllowedOneCan() throws Exception {
        try (ServerSocketChannel s = server(hereV4); XdpFilter f = XdpFilter.attach(here, XdpFilter.Action.PASS)) {
            String rule = f.addSourceRule(InetAddress.getByName(deniedV4), 32, XdpFilter.Action.DROP);
            assertEquals("connected", tcp(allowedV4, hereV4, port(s)));
            assertEquals("failed", tcp(deniedV4, hereV4, port(s)));
            assertTrue(f.ruleHits(rule) > 0, "the rule counted the dropped SYNs");
            assertTrue(f.counters().dropped() > 0);
        }
    }

    @Test
    void portRulesChangeWithoutReattaching() throws Exception {
        try (ServerSocketChannel s = server(hereV4); XdpFilter f = XdpFilter.attach(here, XdpFilter.Action.PASS)) {
            f.addPortRule(port(s), XdpFilter.Protocol.TCP, XdpFilter.Action.DROP);
            assertEquals("failed", tcp(allowedV4, hereV4, port(s)));
            f.removePortRule(port(s), XdpFilter.Protocol.TCP);
            assertEquals("connected", tcp(allowedV4, hereV4, port(s)));
            // A source rule is decided before a port rule.
            f.addPortRule(port(s), XdpFilter.Protocol.TCP, XdpFilter.Action.DROP);
            f.addSourceRule(InetAddress.getByName(allowedV4), 32, XdpFilter.Action.PASS);
            assertEquals("connected", tcp(allowedV4, hereV4, port(s)));
        }
    }

    @Test
    void ipv6SourcesAreFilteredToo() throws Exception {
        try (ServerSocketChannel s = server(hereV6); XdpFilter f = XdpFilter.attach(here, XdpFilter.Action.PASS)) {
            assertEquals("connected", tcp(thereV6, hereV6, port(s)));
            String rule = f.addSourceRule(InetAddress.getByName(thereV6), 64, XdpFilter.Action.DROP);
            assertEquals("failed", tcp(thereV6, hereV6, port(s)));
            assertTrue(f.ruleHits(rule) > 0);
            f.removeSourceRule(InetAddress.getByName(thereV6), 64);
            assertEquals("connected", tcp(thereV6, hereV6, port(s)));
        }
    }

    @Test
    void countersEqualThePacketsOfAScriptedExchange() throws Exception {
        int udpPort = 40000 + net;
        try (XdpFilter f = XdpFilter.attach(here, XdpFilter.Action.PASS)) {
            String rule = f.addPortRule(udpPort, XdpFilter.Protocol.UDP, XdpFilter.Action.DROP);
            XdpFilter.Counters before = f.counters();
            run("ip", "netns", "exec", ns, probe.toString(), "udp", allowedV4, hereV4, Integer.toString(udpPort), "250");
            assertEquals(250, f.ruleHits(rule), "one count per datagram");
            assertTrue(f.counters().dropped() - before.dropped() >= 250);
        }
    }

    @Test
    void truncatedFramesAreCountedAsMalformedAndPassed() throws Exception {
        try (XdpFilter f = XdpFilter.attach(here, XdpFilter.Action.DROP)) {
            long before = f.counters().malformed();
            run("ip", "netns", "exec", ns, probe.toString(), "raw", there, "40");
            assertEquals(40, f.counters().malformed() - before, "one count per truncated frame");
        }
    }

    @Test
    void defaultDropAndDetachRestoresTraffic() throws Exception {
        try (ServerSocketChannel s = server(hereV4)) {
            XdpFilter f = XdpFilter.attach(here, XdpFilter.Action.DROP);
            try {
                assertEquals("failed", tcp(allowedV4, hereV4, port(s)));
                assertTrue(f.counters().defaulted() > 0);
            } finally {
                f.close();
            }
            // The link's release may finish on a kernel worker just after close(2).
            io.github.sockmap4j.testbed.Await.holdsWithin(java.time.Duration.ofSeconds(5),
                    () -> !run("ip", "link", "show", "dev", here).contains("prog/xdp"));
            String link = run("ip", "link", "show", "dev", here);
            assertFalse(link.contains("prog/xdp"), "nothing attached after close: " + link);
            assertEquals("connected", tcp(allowedV4, hereV4, port(s)));
            assertThrows(IOException.class, () -> f.addPortRule(80, XdpFilter.Protocol.TCP, XdpFilter.Action.DROP));
        }
    }

    @Test
    void anotherXdpProgramIsNeverReplaced() throws Exception {
        try (XdpFilter first = XdpFilter.attach(here, XdpFilter.Action.PASS)) {
            IOException e = assertThrows(IOException.class, () -> XdpFilter.attach(here, XdpFilter.Action.DROP));
            assertTrue(e.getMessage().contains("already has an XDP program"), e.getMessage());
            assertTrue(first.mode() == XdpFilter.Mode.NATIVE || first.mode() == XdpFilter.Mode.GENERIC);
            System.out.println("xdp: attached to a veth in " + first.mode() + " mode");
        }
    }

    @Test
    void anUnknownInterfaceIsNamed() {
        IOException e = assertThrows(IOException.class, () -> XdpFilter.attach("sm4j-nope0", XdpFilter.Action.PASS));
        assertTrue(e.getMessage().contains("no interface 'sm4j-nope0'"), e.getMessage());
    }

    @Test
    void badRulesAreRefusedWithTheValue() throws Exception {
        try (XdpFilter f = XdpFilter.attach(here, XdpFilter.Action.PASS)) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> f.addSourceRule(InetAddress.getByName("10.0.0.0"), 33, XdpFilter.Action.DROP));
            assertTrue(e.getMessage().contains("prefixBits=33"), e.getMessage());
            e = assertThrows(IllegalArgumentException.class,
                    () -> f.addPortRule(70000, XdpFilter.Protocol.TCP, XdpFilter.Action.DROP));
            assertTrue(e.getMessage().contains("port=70000"), e.getMessage());
        }
    }

}
