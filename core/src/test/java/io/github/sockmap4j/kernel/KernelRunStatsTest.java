package io.github.sockmap4j.kernel;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapChannel;
import io.github.sockmap4j.SockmapConfig;
import io.github.sockmap4j.SockmapServerChannel;
import io.github.sockmap4j.testsupport.TestKernel;
import java.io.Closeable;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** The kernel's own run counter of the verdict program, as the demos print it. */
@Tag("kernel")
class KernelRunStatsTest {
    static final int WRITES = 500;

    @Test
    void verdictRunCountRisesWithEverySend() throws Exception {
        Closeable stats = TestKernel.runStats();
        try (stats; TestKernel kernel = TestKernel.start("runstats");
                SockmapServerChannel server = kernel.sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            try (SockmapChannel client = kernel.sockmap.openChannel()) {
                client.connect(server.getLocalAddress());
                try (SockmapChannel side = (SockmapChannel) server.accept()) {
                    assertTrue(client.isAccelerated(), "the pair is on the fast path");
                    long before = kernel.sockmap.verdictRunCount();
                    ByteBuffer out = ByteBuffer.allocateDirect(64);
                    ByteBuffer in = ByteBuffer.allocateDirect(64);
                    for (int i = 0; i < WRITES; i++) {
                        out.clear();
                        while (out.hasRemaining()) {
                            client.write(out);
                        }
                        in.clear();
                        while (in.hasRemaining()) {
                            side.read(in);
                        }
                    }
                    long after = kernel.sockmap.verdictRunCount();
                    // -1 is "unreadable": a count that ran from -1 would fail here too.
                    assertTrue(before != -1 && after != -1, "run counts readable: " + before + " -> " + after);
                    assertTrue(after - before >= WRITES, "the verdict ran once per write at least: " + before + " -> "
                            + after);
                }
            }
        }
    }

    @Test
    void inactiveSockmapHasNoRunCount() throws Exception {
        try (Sockmap off = Sockmap.open(SockmapConfig.fromSystemProperties().withDisabled(true).withRequired(false))) {
            assertTrue(off.verdictRunCount() == -1);
        }
    }
}
