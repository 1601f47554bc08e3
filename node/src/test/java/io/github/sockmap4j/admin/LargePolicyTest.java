package io.github.sockmap4j.admin;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.SockmapChannel;
import io.github.sockmap4j.testsupport.TestKernel;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** A node-sized policy: 50,000 rules still match at the handshake, and a full map is refused cleanly. */
@Tag("kernel")
class LargePolicyTest {
    @Test
    void fiftyThousandRulesAndAFullMap() throws Exception {
        try (TestKernel kernel = TestKernel.start("policy");
             PolicyClient client = PolicyClient.open(kernel.pinDir)) {
            // 50,000 rules: ports 10000..59999 on 10.x.y.0/24 server networks.
            for (int i = 0; i < 50_000; i++) {
                InetAddress net = InetAddress.getByAddress(new byte[] {10, (byte) (i >> 8), (byte) i, 0});
                client.allow(10_000 + i, net, 24, 0);
            }
            int port;
            try (ServerSocketChannel probe = ServerSocketChannel.open()) {
                probe.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
                port = ((InetSocketAddress) probe.getLocalAddress()).getPort();
            }
            client.allow(port, InetAddress.getByName("127.0.0.0"), 8, 0);
            try (ServerSocketChannel server = ServerSocketChannel.open()) {
                server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), port));
                long t0 = System.nanoTime();
                try (SockmapChannel c = kernel.sockmap.openChannel()) {
                    c.connect(server.getLocalAddress());
                    try (var side = server.accept()) {
                        assertTrue(c.isAccelerated(), "matched among 50,001 rules");
                        assertTrue(side.isOpen());
                    }
                }
                System.out.printf("large policy: connect + accept with 50,001 rules took %d us%n",
                        (System.nanoTime() - t0) / 1000);
            }
            // Fill it: the next rule is refused with the reason, and nothing else changes.
            int n = 0;
            IOException full = null;
            while (full == null && n < 20_000) {
                try {
                    client.allow(1 + (n % 9_000), InetAddress.getByAddress(new byte[] {11, (byte) (n >> 8), (byte) n, 0}),
                            24, 0);
                    n++;
                } catch (IOException e) {
                    full = e;
                }
            }
            assertTrue(full != null && full.getMessage().contains("policy map is full"), String.valueOf(full));
            IOException again = assertThrows(IOException.class,
                    () -> client.allow(2, InetAddress.getByName("12.0.0.0"), 8, 0));
            assertTrue(again.getMessage().contains("policy map is full"), again.getMessage());
        }
    }
}
