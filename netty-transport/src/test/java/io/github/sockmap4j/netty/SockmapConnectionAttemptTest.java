package io.github.sockmap4j.netty;

import io.github.sockmap4j.testbed.NodeBed;
import io.github.sockmap4j.testbed.Sh;
import io.netty.bootstrap.Bootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapFactory;
import io.netty.testsuite.transport.socket.SocketConnectionAttemptTest;
import java.io.IOException;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

/**
 * Netty's connection attempts over the transport. testConnectTimeout and testConnectCancellation
 * dial {@code io.netty.testsuite.badHost}, a host that never answers, which this module's tests
 * set to {@value #BAD_HOST}: they run on a thread in a network namespace of this test's own
 * where that address is on a veth whose other end, in the same namespace, drops every frame
 * sent to it (the bad host's MAC is nobody's). The SYN goes nowhere and the connect times out
 * as against a silent host, without a packet leaving the namespace.
 */
@Tag("kernel")
class SockmapConnectionAttemptTest extends SocketConnectionAttemptTest {
    /** As the module's surefire configuration sets {@code io.netty.testsuite.badHost}. */
    static final String BAD_HOST = "10.99.0.1";
    static final String NS = "sm4j-" + ProcessHandle.current().pid() % 100000 + "-badhost";

    @Override
    protected List<BootstrapFactory<Bootstrap>> newFactories() {
        return SockmapSocketTestPermutation.INSTANCE.clientSocket();
    }

    @BeforeAll
    static void silentHost() throws IOException, InterruptedException {
        if (!BAD_HOST.equals(System.getProperty("io.netty.testsuite.badHost"))) {
            throw new IllegalStateException("io.netty.testsuite.badHost must be " + BAD_HOST + " (netty-transport/pom.xml)");
        }
        Sh.run("ip", "netns", "add", NS);
        try {
            Sh.run("ip", "-n", NS, "link", "set", "lo", "up");
            // A veth pair inside the namespace, the bad host's neighbour entry a MAC nobody has:
            // the other end drops each frame as not its own, and no ICMP error comes back.
            Sh.run("ip", "-n", NS, "link", "add", "silent0", "type", "veth", "peer", "name", "silent1");
            Sh.run("ip", "-n", NS, "addr", "add", "10.99.0.2/24", "dev", "silent0");
            Sh.run("ip", "-n", NS, "link", "set", "silent0", "up");
            Sh.run("ip", "-n", NS, "link", "set", "silent1", "up");
            Sh.run("ip", "-n", NS, "neigh", "add", BAD_HOST, "lladdr", "02:00:00:00:99:01", "dev", "silent0", "nud",
                    "permanent");
        } catch (IOException | InterruptedException | RuntimeException e) {
            removeSilentHost();
            throw e;
        }
    }

    @AfterAll
    static void removeSilentHost() throws IOException, InterruptedException {
        if (new ProcessBuilder("ip", "netns", "list").start().inputReader().lines()
                .anyMatch(l -> l.split(" ")[0].equals(NS))) {
            Sh.run("ip", "netns", "delete", NS);
        }
    }

    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    @Override
    public void testConnectTimeout(TestInfo testInfo) throws Throwable {
        inSilentNamespace(() -> super.testConnectTimeout(testInfo));
    }

    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    @Override
    public void testConnectCancellation(TestInfo testInfo) throws Throwable {
        inSilentNamespace(() -> super.testConnectCancellation(testInfo));
    }

    interface Body {
        void run() throws Throwable;
    }

    /** Runs {@code body} on a thread in {@link #NS}: the sockets it makes are that namespace's. */
    static void inSilentNamespace(Body body) throws Throwable {
        try {
            NodeBed.callIn(NS, () -> {
                try {
                    body.run();
                } catch (Exception | Error e) {
                    throw e;
                } catch (Throwable t) {
                    throw new IOException(t);
                }
                return null;
            });
        } catch (IOException e) {
            if (e.getCause() instanceof Error err) {
                throw err; // an assertion of Netty's test, as it threw it
            }
            throw e;
        }
    }
}
