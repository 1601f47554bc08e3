package io.github.sockmap4j;

import io.github.sockmap4j.testbed.Bpftool;
import io.github.sockmap4j.testbed.ChildJvm;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.testsupport.TestKernel;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * Peers in other processes: outside the attached cgroup, not Java, without privileges, and a
 * second JVM sharing the pins.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("kernel")
class ProcessBoundaryTest {
    TestKernel kernel;
    Sockmap sockmap;

    @BeforeAll
    void start() throws IOException {
        kernel = TestKernel.start("procs");
        sockmap = kernel.sockmap;
        assertTrue(sockmap.isActive(), sockmap::toString);
    }

    @AfterAll
    void stop() throws IOException {
        if (kernel != null) {
            kernel.close();
        }
    }

    static byte[] random(int n) {
        byte[] b = new byte[n];
        new Random(n).nextBytes(b);
        return b;
    }

    @Test
    void serverOutsideTheCgroupGetsPlainTcp() throws Exception {
        Path outside = TestKernel.newCgroup("outside");
        try (ChildJvm child = ChildJvm.startInCgroup(outside, ChildJvm.javaCommand(PeerMains.EchoServer.class))) {
            int port = Integer.parseInt(child.expect("port=", 30));
            SockmapStats before = sockmap.stats();
            try (OptIn optIn = sockmap.optIn(port); SockmapChannel client = sockmap.openChannel()) {
                assertTrue(optIn.active());
                client.connect(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), port));
                byte[] data = random(300_000);
                ChannelContractTest.write(client, data);
                ByteBuffer back = ByteBuffer.allocate(data.length);
                ChannelContractTest.read(client, back);
                assertEquals(ByteBuffer.wrap(data), back.flip());
                assertFalse(client.isAccelerated(), "the server is outside the cgroup: its socket is not in the map");
                client.shutdownOutput();
                child.expect("done=", 30);
            }
            SockmapStats after = sockmap.stats();
            assertEquals(before.bytesRedirected(), after.bytesRedirected(), () -> before + " -> " + after);
            assertTrue(after.bytesPassed() >= before.bytesPassed() + 300_000, () -> before + " -> " + after);
            assertEquals(0, child.waitFor(30));
            // The client's verdict kept an entry for a peer that was never registered; it goes
            // with the client.
            assertEquals(0, Bpftool.awaitMapEntries(kernel.pinDir.resolve("watch"), 0), "watch entries left");
        } finally {
            Files.deleteIfExists(outside);
        }
    }

    @Test
    void clientOutsideTheCgroupGetsPlainTcp() throws Exception {
        Path outside = TestKernel.newCgroup("outside");
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
            int port = ((InetSocketAddress) server.getLocalAddress()).getPort();
            try (ChildJvm child = ChildJvm.startInCgroup(outside,
                    ChildJvm.javaCommand(PeerMains.EchoClient.class, Integer.toString(port), "200000"))) {
                try (SockmapChannel side = (SockmapChannel) server.accept()) {
                    assertFalse(side.isAccelerated());
                    PeerMains.echo(side);
                }
                assertEquals("true", child.expect("ok=", 30));
                assertEquals(0, child.waitFor(30));
            }
        } finally {
            Files.deleteIfExists(outside);
        }
    }

    @Test
    void nonJvmClientInTheCgroupIsRedirected() throws Exception {
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
            int port = ((InetSocketAddress) server.getLocalAddress()).getPort();
            int n = 100_000;
            SockmapStats before = sockmap.stats();
            // bash's /dev/tcp client echoes what it reads with head(1): no JVM in that process.
            try (ChildJvm child = ChildJvm.start(List.of("bash", "-c",
                    "exec 3<>/dev/tcp/127.0.0.1/" + port + " && head -c " + n + " <&3 >&3 && echo done=1"))) {
                try (SockmapChannel side = (SockmapChannel) server.accept()) {
                    assertTrue(side.isAccelerated(), "both ends registered");
                    byte[] data = random(n);
                    ChannelContractTest.write(side, data);
                    ByteBuffer back = ByteBuffer.allocate(n);
                    ChannelContractTest.read(side, back);
                    assertEquals(ByteBuffer.wrap(data), back.flip());
                }
                child.expect("done=", 30);
                assertEquals(0, child.waitFor(30));
            }
            SockmapStats after = sockmap.stats();
            assertTrue(after.bytesRedirected() >= before.bytesRedirected() + 2L * n,
                    () -> "both directions redirected: " + before + " -> " + after);
        }
    }

    @Test
    void withoutCapabilitiesTheLibraryFallsBackAndSaysWhy() throws Exception {
        List<String> cmd = new ArrayList<>(List.of("setpriv", "--inh-caps=-all", "--ambient-caps=-all",
                "--bounding-set=-all", "--"));
        cmd.addAll(ChildJvm.javaCommand(PeerMains.Fallback.class));
        // The child keeps the default pin directory but can create nothing: it has no capability.
        try (ChildJvm child = ChildJvm.start(cmd)) {
            assertEquals("false", child.expect("active=", 60));
            String cause = child.expect("cause=", 10);
            assertTrue(cause.contains("CAP_BPF"), cause);
            assertEquals("false", child.expect("accelerated=", 30));
            assertEquals("true", child.expect("echo=", 30));
            assertEquals(0, child.waitFor(30));
            assertTrue(child.output().contains("sockmap4j fast path off, plain TCP: missing privileges"),
                    "one log line states the mode and the reason: " + child.output());
        }
    }

    @Test
    void twoJvmsShareOnePinDirectory() throws Exception {
        List<String> cmd = ChildJvm.javaCommand(PeerMains.SharedPins.class, kernel.pinDir.toString(),
                kernel.cgroup.toString());
        try (ChildJvm child = ChildJvm.startInCgroup(kernel.cgroup, cmd)) {
            int port = Integer.parseInt(child.expect("port=", 60));
            try (SockmapChannel client = sockmap.openChannel()) {
                client.connect(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), port));
                assertEquals("true", child.expect("accelerated=", 30));
                assertTrue(client.isAccelerated());
                byte[] data = random(50_000);
                ChannelContractTest.write(client, data);
                ByteBuffer back = ByteBuffer.allocate(data.length);
                ChannelContractTest.read(client, back);
                assertEquals(ByteBuffer.wrap(data), back.flip());
            }
            child.send("quit");
            child.expect("closed=", 30);
            assertEquals(0, child.waitFor(30));
        }
        // The child was not the last user: pins and the attachment stay for this JVM.
        assertTrue(Files.exists(kernel.pinDir.resolve("socks")));
        try (var entries = Files.list(kernel.pinDir)) {
            assertEquals(6, entries.filter(p -> p.getFileName().toString().startsWith("link_cgroup_")).count(),
                    "a pinned link per cgroup program");
        }
        assertEquals(6, Bpftool.cgroupAttachments(kernel.cgroup).size(),
                "one attachment of each cgroup program (sockops, connect4/6, getpeername4/6), reused");
        // And this JVM's fast path still works.
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
            try (SockmapChannel c = sockmap.openChannel()) {
                c.connect(server.getLocalAddress());
                try (SockmapChannel s = (SockmapChannel) server.accept()) {
                    assertTrue(c.isAccelerated() && s.isAccelerated());
                }
            }
        }
    }
}
