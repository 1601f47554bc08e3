package io.github.sockmap4j.examples;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapChannel;
import io.github.sockmap4j.SockmapServerChannel;
import io.github.sockmap4j.SockmapStats;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Locale;

/**
 * The echo demo: an echo server on an opted-in port, one client, whether the connection is
 * accelerated, then 64-byte round trips over plain {@code java.nio} TCP and over the fast path in
 * the same run, and the kernel counters. {@code scripts/bench.sh rtt} is the full measurement.
 */
public final class EchoDemo {
    private static final int ROUND_TRIPS = 20_000;
    private static final int SIZE = 64;

    private EchoDemo() {
    }

    public static void main(String[] args) throws Exception {
        Sockmap sockmap = Sockmap.global();
        System.out.println("fast path: " + (sockmap.isActive()
                ? "active, cgroup " + sockmap.cgroup().orElseThrow()
                : "off (" + sockmap.unavailabilityCause() + ")"));
        InetAddress lo = InetAddress.getByName("127.0.0.1");
        long[] fast;
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(lo, 0));
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
                    fast = pingPong(client, side);
                }
            }
        }
        long[] plain;
        try (ServerSocketChannel server = ServerSocketChannel.open()) {
            server.bind(new InetSocketAddress(lo, 0));
            try (SocketChannel client = SocketChannel.open(server.getLocalAddress());
                 SocketChannel side = server.accept()) {
                plain = pingPong(client, side);
            }
        }
        System.out.printf(Locale.ROOT, "%,d round trips of %d B, p50 / p99 (us): java.nio TCP %.1f / %.1f, "
                        + "fast path %.1f / %.1f, ratio %.2f / %.2f%n", ROUND_TRIPS, SIZE,
                micros(plain, 0.50), micros(plain, 0.99), micros(fast, 0.50), micros(fast, 0.99),
                micros(fast, 0.50) / micros(plain, 0.50), micros(fast, 0.99) / micros(plain, 0.99));
        SockmapStats stats = sockmap.stats();
        System.out.println("counters: " + stats);
    }

    /** Round trip times in ns: the client writes SIZE bytes, an echo thread sends them back. */
    private static long[] pingPong(SocketChannel client, SocketChannel side) throws Exception {
        Thread echo = new Thread(() -> {
            ByteBuffer b = ByteBuffer.allocateDirect(SIZE);
            try {
                for (int i = 0; i < ROUND_TRIPS; i++) {
                    b.clear();
                    fill(side, b);
                    b.flip();
                    while (b.hasRemaining()) {
                        side.write(b);
                    }
                }
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
        }, "echo");
        echo.start();
        ByteBuffer out = ByteBuffer.allocateDirect(SIZE);
        ByteBuffer in = ByteBuffer.allocateDirect(SIZE);
        long[] rtt = new long[ROUND_TRIPS];
        for (int i = 0; i < ROUND_TRIPS; i++) {
            out.clear();
            in.clear();
            long t0 = System.nanoTime();
            while (out.hasRemaining()) {
                client.write(out);
            }
            fill(client, in);
            rtt[i] = System.nanoTime() - t0;
        }
        echo.join();
        Arrays.sort(rtt);
        return rtt;
    }

    private static void fill(SocketChannel ch, ByteBuffer b) throws IOException {
        while (b.hasRemaining()) {
            if (ch.read(b) < 0) {
                throw new IOException("closed by the peer");
            }
        }
    }

    private static double micros(long[] sorted, double p) {
        return sorted[(int) Math.min(sorted.length - 1, Math.round(p * (sorted.length - 1)))] / 1000.0;
    }
}
