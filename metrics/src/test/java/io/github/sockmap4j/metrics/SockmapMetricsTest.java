package io.github.sockmap4j.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.SockmapChannel;
import io.github.sockmap4j.SockmapServerChannel;
import io.github.sockmap4j.testbed.Await;
import io.github.sockmap4j.testsupport.TestKernel;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import org.junit.jupiter.api.Tag;
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
                        // The binder caches the kernel's counters for 500 ms: the gauge catches up.
                        Await.until("the gauge counts both sockets",
                                () -> registry.get("sockmap4j.sockets.in.map").gauge().value() == 2.0);
                    }
                }
            }
            Await.until("the redirected bytes count the 10,000 sent", () -> registry.get("sockmap4j.bytes")
                    .tag("path", "redirected").functionCounter().count() >= before + 10_000);
            assertTrue(registry.get("sockmap4j.sockets.registered").functionCounter().count() >= 2);
            assertEquals(io.github.sockmap4j.Sockmap.flowStats().creditWaits(),
                    registry.get("sockmap4j.credit.waits").functionCounter().count(), "the process's credit waits");
        }
    }
}
