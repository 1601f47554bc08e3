package io.github.sockmap4j;

import io.github.sockmap4j.testbed.Bpftool;
import io.github.sockmap4j.testbed.ChildJvm;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.testbed.KernelQueues;
import io.github.sockmap4j.testsupport.TestKernel;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The programs built without the drain check (SM4J_NO_DRAIN), which the loader takes where the
 * kernel refuses untrusted kptrs (before 6.3); -Dsockmap4j.drain=false chooses them here. A
 * receiver that publishes nothing (the C reader) then depends on the watcher alone: the stream
 * still arrives whole and in order, and a writer holding for credit (which follows the watcher's
 * estimate) goes on being redirected past the first bound. A writer that does not hold (credit
 * off, or not sockmap4j) stays on TCP after its first bound there: a watcher's estimate only
 * equals what was sent while the writer pauses (docs/in-flight-bound.md).
 */
@Tag("kernel")
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class NoDrainObjectTest {
    @Test
    void withoutTheDrainCheckTheWatcherAloneKeepsACReaderOnTheRedirect() throws Exception {
        String was = System.setProperty("sockmap4j.drain", "false");
        try (TestKernel kernel = TestKernel.start("nodrain")) {
            String prog = Bpftool.run("prog", "show", "pinned", kernel.pinDir.resolve("prog_redirect").toString());
            assertTrue(prog.contains("map_ids"), prog);
            StringBuilder names = new StringBuilder();
            for (String id : prog.substring(prog.indexOf("map_ids") + 8).trim().split("\\s+")[0].split(",")) {
                names.append(Bpftool.run("map", "show", "id", id));
            }
            assertTrue(names.toString().contains("name sm4j_socks"), names.toString());
            assertFalse(names.toString().contains("sm4j_rxsock"), "the no-drain object has no sm4j_rxsock: " + names);
            long total = 64L << 20;
            Sockmap sockmap = kernel.sockmap;
            try (SockmapServerChannel server = sockmap.openServerChannel()) {
                server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
                int port = ((InetSocketAddress) server.getLocalAddress()).getPort();
                try (OptIn optIn = sockmap.optIn(port);
                     ChildJvm reader = InFlightBoundTest.startSlowReader(port, total);
                     SockmapChannel writer = (SockmapChannel) server.accept()) {
                    assertTrue(optIn.active());
                    reader.expect("connected=", 30);
                    SockmapStats before = sockmap.stats();
                    ByteBuffer b = ByteBuffer.allocateDirect(64 << 10);
                    for (long sent = 0; sent < total; sent += b.capacity()) {
                        InFlightBoundTest.fill(b, sent / 8);
                        ChannelContractTest.writeFully(writer, b);
                    }
                    assertEquals("1", reader.expect("ok=", 60), "every byte, in order");
                    SockmapStats after = sockmap.stats();
                    long redirected = after.bytesRedirected() - before.bytesRedirected();
                    System.out.printf("no-drain object: %d of %d B redirected%n", redirected, total);
                    assertTrue(redirected > 2 * KernelQueues.tcpRmemDefault(),
                            "the watcher's estimates took the writer past its first bound: " + redirected);
                }
            }
        } finally {
            if (was == null) {
                System.clearProperty("sockmap4j.drain");
            } else {
                System.setProperty("sockmap4j.drain", was);
            }
        }
    }
}
