package io.github.sockmap4j.metrics;

import org.junit.jupiter.api.Tag;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.SockmapChannel;
import io.github.sockmap4j.SockmapServerChannel;
import io.github.sockmap4j.TestKernel;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import org.junit.jupiter.api.Test;

@Tag("kernel")
class SockmapMetricsTest {
    @Test
    void metersFollowTheKernelCounters() throws Exception {
        try (TestKernel kernel = TestKernel.start("metrics")) {
            SimpleMeterRegistry registry = new SimpleMeterRegistry();
            new SockmapMetrics(kernel.sockmap).bindTo(registry);
            assertEquals(1.0, registry.get("sockmap4j.active").gauge().value());
            double before = registry.get("sockmap4j.bytes").tag("path", "redirected").functionCounter().count();
            try (SockmapServerChannel server = kernel.sockmap.openServerChannel()) {
                server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
                try (SockmapChannel c = kernel.sockmap.openChannel()) {
                    c.connect(server.getLocalAddress());
                    try (SockmapChannel s = (SockmapChannel) server.accept()) {
                        c.write(ByteBuffer.wrap(new byte[10_000]));
                        ByteBuffer in = ByteBuffer.allocate(10_000);
                        while (in.hasRemaining()) {
                            s.read(in);
                        }
                        Thread.sleep(600); // past the 500 ms the binder caches the counters for
                        assertEquals(2.0, registry.get("sockmap4j.sockets.in.map").gauge().value());
                    }
                }
            }
            Thread.sleep(600); // past the cache
            double after = registry.get("sockmap4j.bytes").tag("path", "redirected").functionCounter().count();
            assertTrue(after >= before + 10_000, before + " -> " + after);
            assertTrue(registry.get("sockmap4j.sockets.registered").functionCounter().count() >= 2);
        }
    }
}
