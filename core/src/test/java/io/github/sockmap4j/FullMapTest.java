package io.github.sockmap4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.testsupport.TestKernel;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** A full SOCKHASH: new connections go over plain TCP, the old ones keep the fast path. */
@Tag("kernel")
class FullMapTest {
    @Test
    void connectionsBeyondCapacityUsePlainTcp() throws Exception {
        try (TestKernel kernel = TestKernel.start("fullmap", c -> c.withMaxSockets(4))) {
            Sockmap sockmap = kernel.sockmap;
            List<SockmapChannel> open = new ArrayList<>();
            try (SockmapServerChannel server = sockmap.openServerChannel()) {
                server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
                for (int i = 0; i < 3; i++) {
                    SockmapChannel c = sockmap.openChannel();
                    open.add(c);
                    c.connect(server.getLocalAddress());
                    open.add((SockmapChannel) server.accept());
                }
                assertTrue(open.get(0).isAccelerated() && open.get(1).isAccelerated());
                assertTrue(open.get(2).isAccelerated() && open.get(3).isAccelerated());
                assertFalse(open.get(4).isAccelerated(), "no room left for the third connection");
                assertFalse(open.get(5).isAccelerated());
                assertEquals(4, sockmap.stats().socketsInMap());
                // The third client found no room; its accepted socket was then left out, its client
                // not being registered.
                assertTrue(sockmap.stats().registerFailures() >= 1, sockmap.stats()::toString);
                assertTrue(sockmap.stats().clientsUnregistered() >= 1, sockmap.stats()::toString);
                byte[] data = ChannelContractTest.random(500_000, 4);
                ChannelContractTest.write(open.get(4), data);
                ByteBuffer got = ByteBuffer.allocate(data.length);
                ChannelContractTest.read(open.get(5), got);
                assertEquals(ByteBuffer.wrap(data), got.flip());
            } finally {
                for (SockmapChannel c : open) {
                    c.close();
                }
            }
        }
    }
}
