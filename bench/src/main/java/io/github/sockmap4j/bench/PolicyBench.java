package io.github.sockmap4j.bench;

import io.github.sockmap4j.admin.PolicyClient;
import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapChannel;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.Locale;

/**
 * Whether a large policy slows the fast path: connect + accept + one 64 B round trip, with 10
 * policy rules and with 50,000, alternating in one run. The policy is looked up once per socket,
 * at the handshake; sends never consult it.
 *
 * <p>Usage: {@code PolicyBench [rounds] [connections-per-round]} (defaults 5 and 2000).
 */
public final class PolicyBench {
    private PolicyBench() {
    }

    public static void main(String[] args) throws Exception {
        BenchRun run = BenchRun.of("PolicyBench [rounds] [connections-per-round]", args);
        int rounds = run.intArg(0, 5);
        int conns = run.intArg(1, 2000);
        Sockmap sockmap = Sockmap.global();
        if (!sockmap.isActive()) {
            System.err.println("The fast path is off: " + sockmap.unavailabilityCause());
            return;
        }
        double[][] us = new double[2][rounds];
        try (PolicyClient policy = PolicyClient.open(sockmap.config().pinDirectory());
             ServerSocketChannel server = ServerSocketChannel.open()) {
            server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
            int port = ((InetSocketAddress) server.getLocalAddress()).getPort();
            policy.allow(port, null, 0, 0);
            for (int i = 0; i < 9; i++) {
                policy.allow(20_000 + i, InetAddress.getByAddress(new byte[] {10, 1, (byte) i, 0}), 24, 0);
            }
            measure(sockmap, server, 200); // warm-up
            for (int r = 0; r < rounds; r++) {
                for (int large = 0; large < 2; large++) {
                    if (large == 1) {
                        for (int i = 0; i < 49_990; i++) {
                            policy.allow(10_000 + i % 50_000, InetAddress.getByAddress(
                                    new byte[] {10, (byte) (i >> 8), (byte) i, 0}), 24, 0);
                        }
                    }
                    us[large][r] = measure(sockmap, server, conns);
                    if (large == 1) {
                        for (int i = 0; i < 49_990; i++) {
                            policy.deny(10_000 + i % 50_000, InetAddress.getByAddress(
                                    new byte[] {10, (byte) (i >> 8), (byte) i, 0}), 24);
                        }
                    }
                }
            }
            policy.deny(port, null, 0);
        }
        System.out.printf(Locale.ROOT, "sockmap4j policy benchmark: %d rounds x %d connections (connect, accept, one "
                + "64 B round trip, close), %s%n", rounds, conns,
                BenchRun.machine());
        System.out.printf(Locale.ROOT, "10 rules:     %.1f us per connection (median over rounds)%n", Medians.of(us[0]));
        System.out.printf(Locale.ROOT, "50,000 rules: %.1f us per connection, ratio %.2f%n", Medians.of(us[1]),
                Medians.of(us[1]) / Medians.of(us[0]));
    }

    static double measure(Sockmap sockmap, ServerSocketChannel server, int conns) throws Exception {
        ByteBuffer b = ByteBuffer.allocateDirect(64);
        long t0 = System.nanoTime();
        for (int i = 0; i < conns; i++) {
            try (SockmapChannel c = sockmap.openChannel()) {
                c.connect(server.getLocalAddress());
                try (SocketChannel s = server.accept()) {
                    b.clear();
                    c.write(b);
                    b.clear();
                    while (b.hasRemaining()) {
                        s.read(b);
                    }
                }
            }
        }
        return (System.nanoTime() - t0) / 1000.0 / conns;
    }

}
