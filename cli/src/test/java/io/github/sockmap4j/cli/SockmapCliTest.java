package io.github.sockmap4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapChannel;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.testbed.Sh;
import io.github.sockmap4j.testsupport.TestKernel;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.file.Files;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** The CLI against the real kernel: up, status, stats, allow, deny, down, and bad input. */
@Tag("kernel")
class SockmapCliTest {
    static CommandLineTest.Result run(String... args) {
        return CommandLineTest.run(args);
    }

    @Test
    void agentLifecycle() throws Exception {
        try (TestKernel kernel = TestKernel.start("cli")) {
            String pins = kernel.pinDir.toString();
            try {
                // An embedded service's pins (the test's Sockmap) before any 'up': readable, and said whose.
                CommandLineTest.Result service = run("--pin-dir", pins, "status");
                assertEquals(0, service.code(), service.out() + service.err());
                assertTrue(service.out().startsWith("up (pinned by a service's Sockmap)"), service.out());
                assertEquals(0, run("--pin-dir", pins, "stats").code(), "a service's counters");
                // A service's own opt-in, seen without an agent: the policy map is the record then.
                io.github.sockmap4j.OptIn optIn = kernel.sockmap.optIn(47411);
                try {
                    CommandLineTest.Result own = run("--pin-dir", pins, "rules");
                    assertEquals(0, own.code(), own.out() + own.err());
                    assertTrue(own.out().contains("47411 bound ") && own.out().contains("in the policy map"), own.out());
                } finally {
                    optIn.close();
                }
                CommandLineTest.Result up = run("--pin-dir", pins, "up", "--cgroup", kernel.cgroup.toString());
                assertEquals(0, up.code(), up.err());
                assertTrue(SockmapAdmin.of(kernel.pinDir).isUp());
                CommandLineTest.Result status = run("--pin-dir", pins, "--json", "status");
                assertEquals(0, status.code(), status.err());
                assertTrue(status.out().contains("\"up\":true"), status.out());
                CommandLineTest.Result named = run("--pin-dir", pins, "status");
                assertTrue(named.out().contains("attached to " + kernel.cgroup + " (id "), "status names the cgroup by "
                        + "its path: " + named.out());

                int port;
                try (ServerSocketChannel probe = ServerSocketChannel.open()) {
                    probe.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
                    port = ((InetSocketAddress) probe.getLocalAddress()).getPort();
                }
                CommandLineTest.Result allow = run("--pin-dir", pins, "allow", Integer.toString(port));
                assertEquals(0, allow.code(), allow.err());
                try (ServerSocketChannel server = ServerSocketChannel.open()) {
                    server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), port));
                    try (SockmapChannel c = kernel.sockmap.openChannel()) {
                        c.connect(server.getLocalAddress());
                        try (var side = server.accept()) {
                            assertTrue(c.isAccelerated(), "allowed by the CLI");
                            assertTrue(side.isOpen());
                        }
                    }
                }
                CommandLineTest.Result stats = run("--pin-dir", pins, "--json", "stats");
                assertEquals(0, stats.code(), stats.err());
                for (String counter : List.of("socketsRegistered", "registerFailures", "messagesRedirected",
                        "bytesRedirected", "messagesPassed", "bytesPassed", "socketsTainted", "boundHits", "resumes",
                        "socketsInMap")) {
                    assertTrue(stats.out().contains("\"" + counter + "\":"), () -> counter + ": " + stats.out());
                }
                assertEquals(0, run("--pin-dir", pins, "deny", Integer.toString(port)).code());
                CommandLineTest.Result again = run("--pin-dir", pins, "deny", Integer.toString(port));
                assertEquals(1, again.code(), "no such rule any more");
                assertTrue(again.err().contains("no rule for " + port) && again.out().contains("denied 0 rule(s)"),
                        again.out() + again.err());
                CommandLineTest.Result noGroup = run("--pin-dir", pins, "up", "--cgroup", kernel.cgroup.toString(),
                        "--group", "no-such-group-sm4j");
                assertEquals(1, noGroup.code());
                assertTrue(noGroup.err().contains("no group named 'no-such-group-sm4j'"), noGroup.err());

                // Bad input: named, with exit code 2.
                CommandLineTest.Result bad = run("--pin-dir", pins, "allow", "70000");
                assertEquals(2, bad.code());
                assertTrue(bad.err().contains("port must be 1..65535"), bad.err());
                CommandLineTest.Result notPort = run("--pin-dir", pins, "allow", "http");
                assertEquals(2, notPort.code());
                assertTrue(notPort.err().contains("not a port: 'http'"), notPort.err());
                assertEquals(2, run("--pin-dir", pins, "up").code(), "--cgroup is required");
            } finally {
                CommandLineTest.Result down = run("--pin-dir", pins, "down");
                assertEquals(0, down.code(), down.err());
            }
            assertFalse(Files.exists(kernel.pinDir), "down removed the pins");
            assertEquals(3, run("--pin-dir", pins, "status").code(), "not up");
            assertEquals(3, run("--pin-dir", pins, "stats").code(), "not up");
        }
    }

    @Test
    void anAgentRestartWhileConnectionsAreLiveLosesNothing() throws Exception {
        try (TestKernel kernel = TestKernel.start("cli-restart")) {
            String pins = kernel.pinDir.toString();
            try {
                assertEquals(0, run("--pin-dir", pins, "up", "--cgroup", kernel.cgroup.toString()).code());
                try (io.github.sockmap4j.SockmapServerChannel server = kernel.sockmap.openServerChannel()) {
                    server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
                    try (SockmapChannel c = kernel.sockmap.openChannel()) {
                        c.connect(server.getLocalAddress());
                        try (SockmapChannel s = (SockmapChannel) server.accept()) {
                            byte[] data = new byte[1 << 20];
                            new java.util.Random(3).nextBytes(data);
                            java.nio.ByteBuffer out = java.nio.ByteBuffer.wrap(data);
                            java.nio.ByteBuffer in = java.nio.ByteBuffer.allocate(data.length);
                            // Half the data, an agent "restart" (up again over its own pins), the rest.
                            out.limit(data.length / 2);
                            while (out.hasRemaining()) {
                                c.write(out);
                            }
                            assertEquals(0, run("--pin-dir", pins, "up", "--cgroup", kernel.cgroup.toString()).code());
                            out.limit(data.length);
                            while (out.hasRemaining()) {
                                c.write(out);
                            }
                            while (in.hasRemaining()) {
                                s.read(in);
                            }
                            assertTrue(java.util.Arrays.equals(data, in.array()), "every byte, in order");
                            // Past the in-flight bound the writer went by TCP; with everything read,
                            // one more exchange each way is back on the redirect.
                            c.write(java.nio.ByteBuffer.wrap(new byte[] {1}));
                            s.read(java.nio.ByteBuffer.allocate(1));
                            s.write(java.nio.ByteBuffer.wrap(new byte[] {2}));
                            c.read(java.nio.ByteBuffer.allocate(1));
                            assertTrue(c.isAccelerated(), "client still on the fast path");
                            assertTrue(s.isAccelerated(), "server still on the fast path");
                        }
                    }
                }
            } finally {
                assertEquals(0, run("--pin-dir", pins, "down").code());
            }
        }
    }

    @Test
    void xdpAttachesWithRulesFromAFileAndDetaches() throws Exception {
        String id = Long.toString(ProcessHandle.current().pid() % 100000);
        String a = "xc" + id + "a";
        Sh.run("ip", "link", "add", a, "type", "veth", "peer", "name", "xc" + id + "b");
        java.nio.file.Path rules = Files.createTempFile("rules", ".txt");
        try {
            Sh.run("ip", "link", "set", a, "up");
            Files.writeString(rules, "default pass\ndeny 10.99.0.0/16  # a comment\ndeny tcp 22\nallow udp 53\n");
            CommandLineTest.Result ok = run("xdp", a, rules.toString(), "--seconds", "1");
            assertEquals(0, ok.code(), ok.err());
            assertTrue(ok.out().contains("3 rules"), ok.out());
            assertTrue(ok.out().contains("1s passed"), ok.out());
            assertFalse(Sh.run("ip", "link", "show", "dev", a).contains("prog/xdp"), "detached at the end");

            Files.writeString(rules, "deny tcp twentytwo\n");
            CommandLineTest.Result bad = run("xdp", a, rules.toString(), "--seconds", "1");
            assertEquals(1, bad.code());
            assertTrue(bad.err().contains(":1: deny tcp twentytwo"), bad.err());
            CommandLineTest.Result unknown = run("xdp", "nosuch0", rules.toString());
            assertEquals(1, unknown.code());
        } finally {
            Files.deleteIfExists(rules);
            Sh.run("ip", "link", "del", a);
        }
    }

}
