package io.github.sockmap4j.kernel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.OptIn;
import io.github.sockmap4j.PeerMains;
import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.testbed.ChildJvm;
import io.github.sockmap4j.testbed.VethPods;
import io.github.sockmap4j.testsupport.TestKernel;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * docs/kernel.md "Network namespaces" with real network namespaces: two "pods" joined by a veth pair. The
 * SOCKHASH is global to the kernel, so loopback tuples of two namespaces must not collide,
 * while pod-to-pod connections across namespaces must still be redirected.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("kernel")
class NetnsTest {
    static final String A_ADDR = "10.254.77.1";
    static final String B_ADDR = "10.254.77.2";

    TestKernel kernel;
    VethPods pods;
    String nsA;
    String nsB;

    @BeforeAll
    void start() throws Exception {
        kernel = TestKernel.start("netns");
        pods = VethPods.create("n", A_ADDR, B_ADDR);
        nsA = pods.nsA;
        nsB = pods.nsB;
    }

    @AfterAll
    void stop() throws Exception {
        try {
            if (pods != null) {
                pods.close();
            }
        } finally {
            if (kernel != null) {
                kernel.close();
            }
        }
    }

    List<String> inNs(String ns, List<String> cmd) {
        return VethPods.in(ns, cmd);
    }

    @Test
    void podToPodAcrossNamespacesIsRedirected() throws Exception {
        Sockmap sockmap = kernel.sockmap;
        try (ChildJvm server = ChildJvm.start(inNs(nsA, ChildJvm.javaCommand(PeerMains.EchoServer.class, A_ADDR)))) {
            int port = Integer.parseInt(server.expect("port=", 60));
            SockmapStats before = sockmap.stats();
            // Under the first bound of a receiver that publishes nothing (a JDK socket here): the
            // watcher cannot see another namespace's sockets, so past it the connection would
            // stay on TCP (docs/in-flight-bound.md).
            int n = 60_000;
            try (OptIn optIn = sockmap.optIn(port);
                 ChildJvm client = ChildJvm.start(inNs(nsB, ChildJvm.javaCommand(PeerMains.EchoClient.class,
                         Integer.toString(port), Integer.toString(n), A_ADDR)))) {
                assertTrue(optIn.active());
                assertEquals("true", client.expect("ok=", 60));
                assertEquals(0, client.waitFor(30));
            }
            server.expect("done=", 30);
            SockmapStats after = sockmap.stats();
            assertTrue(after.socketsRegistered() >= before.socketsRegistered() + 2, () -> before + " -> " + after);
            assertTrue(after.bytesRedirected() >= before.bytesRedirected() + 2L * n,
                    () -> "pod-to-pod keys carry no netns cookie, so they match: " + before + " -> " + after);
        }
    }

    @Test
    void identicalLoopbackTuplesInTwoNamespacesDoNotCollide() throws Exception {
        Sockmap sockmap = kernel.sockmap;
        int port = 47001;
        int clientPort = 47002;
        long base = sockmap.stats().socketsInMap();
        SockmapStats before = sockmap.stats();
        try (OptIn optIn = sockmap.optIn(port);
             ChildJvm a = ChildJvm.start(inNs(nsA, ChildJvm.javaCommand(PeerMains.LoopbackPair.class,
                     Integer.toString(port), Integer.toString(clientPort), "1")));
             ChildJvm b = ChildJvm.start(inNs(nsB, ChildJvm.javaCommand(PeerMains.LoopbackPair.class,
                     Integer.toString(port), Integer.toString(clientPort), "2")))) {
            assertTrue(optIn.active());
            a.expect("connected=", 60);
            b.expect("connected=", 60);
            assertEquals(base + 4, sockmap.stats().socketsInMap(),
                    "four sockets with two identical loopback tuples: none overwrote another");
            a.send("go");
            b.send("go");
            assertEquals("0", a.expect("foreign=", 60), "namespace a received b's bytes");
            assertEquals("0", b.expect("foreign=", 60), "namespace b received a's bytes");
            a.send("quit");
            b.send("quit");
            assertEquals(0, a.waitFor(30));
            assertEquals(0, b.waitFor(30));
        }
        SockmapStats after = sockmap.stats();
        assertTrue(after.bytesRedirected() >= before.bytesRedirected() + 2 * 2000 * 8,
                () -> "both namespaces' loopback bytes were redirected: " + before + " -> " + after);
    }
}
