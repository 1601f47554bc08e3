package io.github.sockmap4j.examples;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapChannel;
import io.github.sockmap4j.SockmapServerChannel;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.bench.RttBench;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * The quick-start demo: an echo server on an opted-in port, one client, whether the
 * connection is accelerated, then plain vs fast-path RTT and the kernel counters.
 */
public final class EchoDemo {
    private EchoDemo() {
    }

    public static void main(String[] args) throws Exception {
        Sockmap sockmap = Sockmap.global();
        System.out.println("fast path: " + (sockmap.isActive()
                ? "active, cgroup " + sockmap.cgroup().orElseThrow()
                : "off (" + sockmap.unavailabilityCause() + ")"));
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
            try (SockmapChannel client = sockmap.openChannel()) {
                client.connect(server.getLocalAddress());
                try (SockmapChannel side = (SockmapChannel) server.accept()) {
                    ByteBuffer hello = StandardCharsets.UTF_8.encode("hello through the kernel");
                    int n = hello.remaining();
                    client.write(hello);
                    ByteBuffer got = ByteBuffer.allocate(n);
                    while (got.hasRemaining()) {
                        side.read(got);
                    }
                    System.out.printf("echo on %s: \"%s\", client accelerated=%b, server side accelerated=%b%n",
                            server.getLocalAddress(), StandardCharsets.UTF_8.decode(got.flip()),
                            client.isAccelerated(), side.isAccelerated());
                }
            }
        }
        SockmapStats stats = sockmap.stats();
        System.out.println("counters: " + stats);
        System.out.println();
        RttBench.main(new String[] {"3", "5000"});
    }
}
