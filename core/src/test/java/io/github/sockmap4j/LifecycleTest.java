package io.github.sockmap4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.testbed.Bpftool;
import io.github.sockmap4j.testsupport.TestKernel;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** Setup and teardown against the kernel's own view (bpftool), not the library's. */
@SuppressWarnings("try")
@Tag("kernel")
class LifecycleTest {
    @Test
    void closeDetachesAndUnpinsEverything() throws Exception {
        TestKernel kernel = TestKernel.start("lifecycle");
        try {
            assertTrue(kernel.sockmap.isActive());
            java.util.List<String> attached = Bpftool.cgroupAttachments(kernel.cgroup);
            assertEquals(6, attached.size(), "sockops and the Service translation's five: " + attached);
            for (String p : new String[] {"sm4j_sockops", "sm4j_connect4", "sm4j_connect6", "sm4j_getpeername4",
                "sm4j_getpeername6", "sm4j_getsockopt"}) {
                assertTrue(attached.stream().anyMatch(a -> a.contains(p)), p + " attached: " + attached);
            }
            assertTrue(Files.exists(kernel.pinDir.resolve("prog_redirect")));
        } finally {
            kernel.sockmap.close();
        }
        assertTrue(Bpftool.cgroupAttachments(kernel.cgroup).isEmpty(), "every program detached at close");
        assertFalse(Files.exists(kernel.pinDir), "pins removed at close");
        kernel.close();
    }

    @Test
    void pinsStayWhileSocketsAreRegisteredAndGoWithRemovePins() throws Exception {
        TestKernel kernel = TestKernel.start("lingering");
        SockmapChannel client = null;
        SockmapChannel side = null;
        try (SockmapServerChannel server = kernel.sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
            client = kernel.sockmap.openChannel();
            client.connect(server.getLocalAddress());
            side = (SockmapChannel) server.accept();
            assertTrue(client.isAccelerated());
            kernel.sockmap.close(); // two sockets still registered: their unread bytes must survive
            assertTrue(Files.exists(kernel.pinDir.resolve("socks")), "pins kept while sockets are registered");
            assertTrue(Bpftool.cgroupAttachments(kernel.cgroup).isEmpty(), "no new registrations after close");
        } finally {
            if (client != null) {
                client.close();
            }
            if (side != null) {
                side.close();
            }
        }
        assertTrue(TestKernel.removePins(kernel.pinDir) > 0);
        assertFalse(Files.exists(kernel.pinDir));
        kernel.close();
    }

    @Test
    void optInsAreCountedAndRemoved() throws Exception {
        try (TestKernel kernel = TestKernel.start("optin")) {
            Sockmap s = kernel.sockmap;
            OptIn a = s.optIn(4711);
            OptIn b = s.optIn(4711);
            assertTrue(a.active() && b.active());
            a.close();
            assertTrue(kernel.policyHas(4711), "still opted in by b");
            b.close();
            assertFalse(kernel.policyHas(4711));
        }
    }

    @Test
    void anOptInOutlivingItsSockmapIsInactiveAndClosesQuietly() throws Exception {
        try (TestKernel kernel = TestKernel.start("outlive")) {
            Sockmap s = kernel.sockmap;
            OptIn o = s.optIn(4712);
            assertTrue(o.active());
            assertNotNull(s.fastPath());
            s.close();
            assertFalse(o.active(), "its Sockmap is closed");
            assertNull(s.fastPath());
            assertEquals("closed", s.unavailabilityCause());
            assertEquals(SockmapStats.EMPTY, s.stats());
            assertEquals(-1, s.verdictRunCount());
            assertTrue(s.cgroup().isEmpty());
            o.setBound(4096); // nothing to change: no exception
            assertThrows(IllegalArgumentException.class, () -> o.setBound(-2));
            o.close();
            OptIn late = s.optIn(4713);
            assertFalse(late.active(), "a closed Sockmap opts nothing in");
            late.close();
        }
    }

    @Test
    void aServerChannelOptsItsPortInUntilItCloses() throws Exception {
        try (TestKernel kernel = TestKernel.start("serverport")) {
            int port;
            try (SockmapServerChannel server = kernel.sockmap.openServerChannel()) {
                server.bind(new InetSocketAddress(0));
                port = ((InetSocketAddress) server.getLocalAddress()).getPort();
                assertTrue(server.isOptedIn());
                assertTrue(kernel.policyHas(port));
            }
            assertFalse(kernel.policyHas(port), "closing the server opts its port out");
        }
    }

    @Test
    void cidrOptInForAServerThatIsNotASockmapChannel() throws Exception {
        try (TestKernel kernel = TestKernel.start("cidr");
             java.nio.channels.ServerSocketChannel server = java.nio.channels.ServerSocketChannel.open()) {
            Sockmap s = kernel.sockmap;
            server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
            int port = ((InetSocketAddress) server.getLocalAddress()).getPort();
            try (OptIn other = s.optIn(port, InetAddress.getByName("10.0.0.0"), 8);
                 SockmapChannel c = s.openChannel()) {
                c.connect(server.getLocalAddress());
                try (var side = server.accept()) {
                    assertFalse(c.isAccelerated(), "10.0.0.0/8 does not cover 127.0.0.1");
                }
                assertTrue(other.active());
            }
            try (OptIn lo = s.optIn(port, InetAddress.getByName("127.0.0.0"), 8);
                 SockmapChannel c = s.openChannel()) {
                c.connect(server.getLocalAddress());
                try (var side = server.accept()) {
                    assertTrue(c.isAccelerated(), "127.0.0.0/8 covers 127.0.0.1");
                }
                assertTrue(lo.active());
            }
        }
    }
}
